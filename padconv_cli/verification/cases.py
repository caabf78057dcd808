"""Verification cases: one Pad or Conv node with its inputs and expected output.

Built-in cases are data, in ``data/*.json`` next to this module::

    {"cases": [{"name": "pad_reflect", "op": "Pad", "opset": 25,
                "attributes": {"mode": "reflect"},
                "inputs": [{"name": "data", "dtype": "float32", "shape": [3, 2],
                            "values": [[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]]},
                           {"name": "pads", "dtype": "int64", "shape": [4],
                            "values": [0, 2, 0, 0]}],
                "outputs": [{"name": "output", "dtype": "float32", "shape": [3, 4],
                             "values": [...]}]}]}

An input written as ``null`` is an omitted optional input. Float values may be the strings
``"nan"``, ``"inf"`` and ``"-inf"``. An input may name the ``"sample"`` file it is written to
by ``samples/make_samples.py``.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from padconv_cli.errors import InputError

BUILTIN_SOURCE = "builtin"
DATA_PACKAGE = "padconv_cli.verification"


@dataclass
class Case:
    """One verification case: ``inputs`` in node order (None: an omitted optional input);
    ``unsupported`` the reason a case is not run."""

    name: str
    source: str
    op: str
    opset: int
    attributes: dict[str, Any] = field(default_factory=dict)
    inputs: list[np.ndarray | None] = field(default_factory=list)
    expected: list[np.ndarray] = field(default_factory=list)
    unsupported: str = ""
    location: str = ""
    samples: dict[int, str] = field(default_factory=dict)


def matches(name: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """True when no pattern is given or ``name`` matches one: a glob when the pattern contains
    ``*?[``, else a substring; both ignore case."""
    lowered = name.lower()
    return not patterns or any(
        fnmatch.fnmatchcase(lowered, p.lower()) if any(ch in p for ch in "*?[")
        else p.lower() in lowered
        for p in patterns
    )


def builtin_cases() -> list[Case]:
    """Every built-in case of ``padconv_cli/verification/data/*.json``, in file name order
    then listing order."""
    folder = resources.files(DATA_PACKAGE).joinpath("data")
    files = sorted((item for item in folder.iterdir() if item.name.endswith(".json")),
                   key=lambda item: item.name)
    return [case for item in files
            for case in cases_from_json(item.read_text("utf-8"), f"data/{item.name}")]


def cases_from_json(text: str, location: str) -> list[Case]:
    """Parse a case file (format in the module docstring)."""
    try:
        document = json.loads(text)
        return [_case_from_entry(entry, location) for entry in document["cases"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{location}: not a valid case file ({exc})") from None


def _case_from_entry(entry: dict[str, Any], location: str) -> Case:
    """One case object of a case file -> Case."""
    inputs = [None if item is None else tensor_from_json(item) for item in entry["inputs"]]
    samples = {position: item["sample"] for position, item in enumerate(entry["inputs"])
               if item is not None and "sample" in item}
    return Case(name=entry["name"], source=BUILTIN_SOURCE, op=entry["op"],
                opset=int(entry["opset"]), attributes=dict(entry.get("attributes", {})),
                inputs=inputs, expected=[tensor_from_json(item) for item in entry["outputs"]],
                location=f"{location}:{entry['name']}", samples=samples)


def tensor_from_json(item: dict[str, Any]) -> np.ndarray:
    """``{"dtype", "shape", "values"}`` -> array of exactly that dtype and shape."""
    from padconv_cli.dtypes import element_kind, parse_dtype

    dtype = parse_dtype(item["dtype"])
    shape = tuple(int(n) for n in item["shape"])
    values = item["values"]
    if dtype.kind == "O":
        array = np.array(values, dtype=object)
    elif element_kind(dtype) in ("float", "complex"):
        array = np.array(values, dtype=np.float64 if dtype.kind != "c" else np.complex128)
        array = array.astype(dtype)
    else:
        array = np.array(values, dtype=dtype)
    if array.size != int(np.prod(shape, dtype=np.int64)):
        raise ValueError(f"{item.get('name', 'tensor')}: {array.size} values for shape {shape}")
    return array.reshape(shape)
