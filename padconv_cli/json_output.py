"""The one JSON encoding of every ``--json`` output: strict JSON, one form per value.

Rules (:func:`jsonable`): ``None``, ``bool``, ``int``, ``str`` and finite ``float`` stay; NaN
is ``"nan"``, +inf ``"inf"``, -inf ``"-inf"``; a complex number is ``{"real": re, "imag":
im}``; a numpy scalar is the Python value of its element kind (bfloat16 -> float, int4 -> int,
``np.bool_`` -> bool), a numpy array nested lists of those; ``bytes`` are UTF-8 (else U+FFFD);
a numpy dtype is its ONNX-style name; a path its text; tuples are lists, sets sorted lists,
dict keys text; anything else ``str(value)``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from padconv_cli.dtypes import dtype_name, element_kind

_SCALARS = {"float": float, "int": int, "complex": complex, "bool": bool}


def jsonable(value: Any) -> Any:
    """``value`` in the form JSON carries strictly, by the rules of the module docstring."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, complex)):
        return _number(value)
    if isinstance(value, np.generic):
        convert = _SCALARS.get(element_kind(value.dtype))
        return jsonable(value.item() if convert is None else convert(value))
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(item) for item in value), key=str)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return dtype_name(value)
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def dumps(value: Any, *, indent: int | None = None) -> str:
    """The JSON text of ``value`` (:func:`jsonable`), non-ASCII characters kept as they are."""
    return json.dumps(jsonable(value), indent=indent, ensure_ascii=False, allow_nan=False)


def _number(value: int | float | complex) -> Any:
    if isinstance(value, complex):
        return {"real": _number(value.real), "imag": _number(value.imag)}
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    return value
