"""Polygraphy's JSON tensor files (``polygraphy run --save-inputs/--save-outputs``,
``polygraphy data to-input``): every array inside, with a name, read without pickles.

Format: JSON whose arrays are objects ``{"array": BASE64, "polygraphy_class": "ndarray"}``,
BASE64 being the bytes of a ``.npy`` file. An inputs file is a list of feed dicts (one per
iteration); a results file is ``{"lst": [[runner, [outputs dict, ...]], ...],
"polygraphy_class": "RunResults"}``. Names: the tensor's own name when it is unique in the
file, else ``runner/iteration/name`` (``iteration/name`` for inputs).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import numpy as np

from padconv_cli.errors import InputError

MAX_JSON_BYTES = 1 << 30
_JSON_SOURCE = re.compile(r"(?P<path>.+\.json)(?::(?P<name>.+))?", re.IGNORECASE)


def split_json_source(source: str) -> tuple[str, str | None] | None:
    """``(path, name)`` of ``FILE.json`` or ``FILE.json:NAME``; None for other sources."""
    match = _JSON_SOURCE.fullmatch(source)
    return (match["path"], match["name"]) if match else None


def _load(path: str, label: str) -> Any:
    from padconv_cli.tensorio.files import open_regular_file

    stream, size = open_regular_file(path, label)
    if size > MAX_JSON_BYTES:
        stream.close()
        raise InputError(f"{label}: JSON file larger than {MAX_JSON_BYTES} bytes", source=label)
    with stream:
        text = stream.read(MAX_JSON_BYTES + 1)
    if len(text) > MAX_JSON_BYTES:
        raise InputError(f"{label}: JSON file larger than {MAX_JSON_BYTES} bytes", source=label)
    import json  # here, not at the top: every tensor source is matched against FILE.json

    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{label}: not a JSON file ({str(exc)[:80]})", source=label) from None


def _is_array(value: Any) -> bool:
    return isinstance(value, dict) and value.get("polygraphy_class") == "ndarray"


def _decode(value: dict, label: str) -> np.ndarray:
    from padconv_cli.tensorio.npy import read_npy_bytes

    try:
        payload = base64.b64decode(str(value.get("array", "")), validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{label}: an array's data is not base64", source=label) from None
    return read_npy_bytes(payload, label)


def _entries(document: Any) -> list[tuple[list[str], dict]]:
    """(name parts, encoded array) of every array, outermost structure first."""
    if isinstance(document, dict) and document.get("polygraphy_class") == "RunResults":
        found = []
        for runner, iterations in document.get("lst", []):
            for index, outputs in enumerate(iterations):
                found += [([str(runner), str(index), n], v) for n, v in _arrays_of(outputs)]
        return found
    if isinstance(document, list):
        return [([str(index), n], v) for index, feed in enumerate(document)
                for n, v in _arrays_of(feed)]
    return [([n], v) for n, v in _arrays_of(document)]


def _arrays_of(mapping: Any) -> list[tuple[str, dict]]:
    if not isinstance(mapping, dict):
        return []
    return [(str(name), value) for name, value in mapping.items() if _is_array(value)]


def json_tensor_names(path: str, label: str) -> list[tuple[str, dict]]:
    """(name, encoded array) of every array in the file, named by the module rule."""
    entries = _entries(_load(path, label))
    if not entries:
        raise InputError(f"{label}: no polygraphy arrays in this JSON file", source=label)
    counts: dict[str, int] = {}
    for parts, _ in entries:
        counts[parts[-1]] = counts.get(parts[-1], 0) + 1
    return [(parts[-1] if counts[parts[-1]] == 1 else "/".join(parts), value)
            for parts, value in entries]


def read_json_tensors(path: str, label: str) -> list[tuple[str, np.ndarray]]:
    """Every array of a polygraphy JSON file, decoded, with its name."""
    return [(name, _decode(value, f"{label}:{name}"))
            for name, value in json_tensor_names(path, label)]


def read_json_tensor(path: str, name: str | None, label: str) -> tuple[str, np.ndarray]:
    """One array: ``name`` given, or the only one in the file."""
    named = json_tensor_names(path, label)
    names = [n for n, _ in named]
    if name is None:
        if len(named) > 1:
            raise InputError(
                f"{label}: holds {len(named)} arrays; pick one as {label}:NAME "
                f"({', '.join(names[:8])}{', ...' if len(names) > 8 else ''})", source=label)
        name = names[0]
    for candidate, value in named:
        if candidate == name:
            return name, _decode(value, f"{label}:{name}")
    raise InputError(f"{label}: no array {name!r} (arrays: {', '.join(names[:8])})",
                     source=label)
