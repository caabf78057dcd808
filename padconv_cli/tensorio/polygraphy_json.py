"""Polygraphy's JSON tensor files (``polygraphy run --save-inputs/--save-outputs``, ``polygraphy
data to-input``): every array inside, with a name, read without pickles.

A polygraphy value is a JSON object with ``"polygraphy_class": CLASS`` (older: a key
``__polygraphy_encoded_CLASS`` valued ``polygraphy_serialized_json_type``).  An ``ndarray`` is
``{"array": BASE64}`` of a ``.npy`` file's bytes (very old: latin-1 text), wrapped in a result
as ``LazyArray``/``LazyNumpyArray`` ``{"values": ndarray}``.  An inputs file is a list of feed
dicts, one per iteration; a results file is ``RunResults`` ``{"lst": [[runner, [IterationResult
{"outputs": ...}, ...]], ...]}``.  A torch ``Tensor`` is a ``torch.save`` pickle: refused.

Names: the tensor's own name when unique in the file; else qualified, ``/`` between the parts,
by the runner when the file holds several and by the iteration when a runner (or an inputs
file) holds several: ``0/y``, ``trt-runner-N0/y``.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections import Counter
from typing import Any

import numpy as np

from padconv_cli.errors import InputError
from padconv_cli.messages import bounded_list
from padconv_cli.tensorio.files import ReadPolicy, open_regular_file

MAX_JSON_BYTES = 1 << 30
JSON_SOURCE = re.compile(r"(?P<path>.+\.json)(?::(?P<name>.+))?", re.IGNORECASE)


def split_json_source(source: str) -> tuple[str, str | None] | None:
    """``(path, name)`` of an existing ``FILE.json`` or ``FILE.json:NAME``; else None."""
    match = JSON_SOURCE.fullmatch(source)
    return (match["path"], match["name"]) if match and os.path.isfile(match["path"]) else None


def _load(path: str, label: str) -> Any:
    import json

    stream, size = open_regular_file(path, label)
    with stream:  # the size stated, then the size read: the file may grow meanwhile
        text = b"" if size > MAX_JSON_BYTES else stream.read(MAX_JSON_BYTES + 1)
    if size > MAX_JSON_BYTES or len(text) > MAX_JSON_BYTES:
        raise InputError(f"{label}: JSON file larger than {MAX_JSON_BYTES} bytes", source=label)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{label}: not a JSON file ({str(exc)[:80]})", source=label) from None


_LEGACY_PREFIX = "__polygraphy_encoded_"


def _class_of(value: Any) -> str | None:
    """The polygraphy class a JSON object encodes (current or legacy marker), else None."""
    if not isinstance(value, dict):
        return None
    marked = value.get("polygraphy_class")
    if isinstance(marked, str):
        return marked
    for key, item in value.items():
        if item == "polygraphy_serialized_json_type" and str(key).startswith(_LEGACY_PREFIX):
            return str(key)[len(_LEGACY_PREFIX):]
    return None


def _unwrapped(value: Any) -> dict | None:
    """The encoded array of a value (a ``LazyArray`` unwrapped), or None if it holds none."""
    if _class_of(value) in ("LazyArray", "LazyNumpyArray"):
        value = value.get("values")
    return value if _class_of(value) in ("ndarray", "Tensor") else None


def _decode(value: dict, label: str, policy: ReadPolicy | None = None) -> np.ndarray:
    from padconv_cli.tensorio.npy import read_npy_bytes

    if _class_of(value) == "Tensor":
        raise InputError(f"{label}: a torch tensor (a torch.save pickle, never loaded); save "
                         "numpy arrays instead (polygraphy's numpy data loader backend)",
                         source=label)
    return read_npy_bytes(_payload(str(value.get("array", "")), label), label, policy)


def _payload(text: str, label: str) -> bytes:
    """The ``.npy`` bytes of an array: base64, or latin-1 text in very old files."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        pass
    raw = text.encode("latin-1", errors="replace")
    if raw.startswith(b"\x93NUMPY") and raw.decode("latin-1") == text:
        return raw
    raise InputError(f"{label}: an array's data is not base64", source=label)


def _iterations(document: dict) -> list[tuple[str, list]]:
    """(runner, [iteration result, ...]) of a ``RunResults``; malformed entries skipped."""
    pairs = document.get("lst")
    if not isinstance(pairs, list):
        return []
    return [(str(pair[0]), pair[1]) for pair in pairs
            if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], list)]


def _entries(document: Any) -> list[tuple[tuple[str, str], str, dict]]:
    """((runner, iteration), name, encoded array) of every array, in the file's order."""
    if _class_of(document) == "RunResults":
        runs = _iterations(document)
    else:  # feeds: one runner without a name
        runs = [("", document if isinstance(document, list) else [document])]
    return [((runner, str(index)), name, value) for runner, iterations in runs
            for index, outputs in enumerate(iterations) for name, value in _arrays_of(outputs)]


def _arrays_of(mapping: Any) -> list[tuple[str, dict]]:
    if _class_of(mapping) == "IterationResult":
        mapping = mapping.get("outputs")
    if not isinstance(mapping, dict):
        return []
    found = [(str(name), _unwrapped(value)) for name, value in mapping.items()]
    return [(name, value) for name, value in found if value is not None]


def json_tensor_names(path: str, label: str) -> list[tuple[str, dict]]:
    """(name, encoded array) of every array in the file, named by the module rule: the own
    name when unique, else qualified by the runner and/or the iteration."""
    entries = _entries(_load(path, label))
    if not entries:
        raise InputError(f"{label}: no polygraphy arrays in this JSON file", source=label)
    counts = Counter(name for _, name, _ in entries)
    runners = {runner for (runner, _), _, _ in entries}
    several_iterations = len({where for where, _, _ in entries}) > len(runners)
    named = []
    for (runner, iteration), name, value in entries:
        parts = [runner] * (len(runners) > 1) + [iteration] * several_iterations
        named.append((name if counts[name] == 1 else "/".join([*parts, name]), value))
    return named


def read_json_tensors(path: str, label: str,
                      policy: ReadPolicy | None = None) -> list[tuple[str, np.ndarray]]:
    """Every array of a polygraphy JSON file, decoded, with its name."""
    return [(name, _decode(value, f"{label}:{name}", policy))
            for name, value in json_tensor_names(path, label)]


def read_json_tensor(path: str, name: str | None, label: str,
                     policy: ReadPolicy | None = None) -> tuple[str, np.ndarray]:
    """One array: ``name`` given, or the only one in the file."""
    named = json_tensor_names(path, label)
    names = bounded_list(n for n, _ in named)
    if name is None and len(named) > 1:
        raise InputError(f"{label}: holds {len(named)} arrays; pick one as {label}:NAME "
                         f"({names})", source=label)
    for candidate, value in named:
        if name in (None, candidate):
            return candidate, _decode(value, f"{label}:{candidate}", policy)
    raise InputError(f"{label}: no array {name!r} (arrays: {names})", source=label)


def runner_outputs(path: str, runner: str | None, label: str, policy: ReadPolicy | None = None
                   ) -> tuple[str, int, dict[str, np.ndarray]]:
    """(runner, iterations, tensor name -> array) of one runner's first iteration in a results
    file; ``runner``, its name or a prefix of one, is needed when the file holds several."""
    document = _load(path, label)
    runs = _iterations(document) if _class_of(document) == "RunResults" else []
    if not runs:
        raise InputError(f"{label}: not polygraphy results (RunResults, as polygraphy run "
                         "saves outputs)", source=label)
    names = [name for name, _ in runs]
    picked = [pair for pair in runs if runner is None or pair[0] == runner] or [
        pair for pair in runs if pair[0].startswith(runner or "")]
    if len(picked) != 1:
        wanted = "one runner" if runner is None else f"one runner named {runner!r}"
        raise InputError(f"{label}: holds the results of {', '.join(names)}; name {wanted} "
                         f"as {label}:RUNNER", source=label)
    name, iterations = picked[0]
    if not iterations:
        raise InputError(f"{label}: runner {name} has no results", source=label)
    arrays = {tensor: _decode(value, f"{label}:{tensor}", policy)
              for tensor, value in _arrays_of(iterations[0])}
    return name, len(iterations), arrays
