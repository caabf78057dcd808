"""Checks every operator's ``node_call`` applies to a node's attributes and inputs.

Messages start with the operator and version (``Pad-11: ...``); they are
:class:`AttributeValueError` like the kernels' own, so a model node's values and the flags
are refused in the same words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from padconv_cli.errors import AttributeValueError


def check_attribute_names(operator: str, attributes: Mapping[str, Any],
                          allowed: Sequence[str]) -> None:
    """Every attribute must be defined by this operator version."""
    for name in attributes:
        if name not in allowed:
            raise AttributeValueError(f"{operator}: attribute {name!r} is not defined for this "
                                      f"version (allowed: {', '.join(allowed)})")


def check_input_count(operator: str, inputs: Sequence, low: int, high: int) -> None:
    """low <= number of inputs (trailing omitted ones dropped) <= high."""
    count = len(inputs)
    while count and inputs[count - 1] is None:
        count -= 1
    if not low <= count <= high:
        takes = f"{low} to {high} inputs" if low != high else f"{low} input(s)"
        raise AttributeValueError(f"{operator}: takes {takes}, got {count}")


def required_attribute(operator: str, attributes: Mapping[str, Any], name: str) -> Any:
    """The attribute's value, or an error naming it when absent."""
    if name not in attributes:
        raise AttributeValueError(f"{operator}: required attribute {name!r} is missing")
    return attributes[name]


def require_inputs(operator: str, names: Sequence[str], arrays: Sequence[Any]) -> None:
    """Each input named in ``names`` (by position in ``arrays``) must be given."""
    for name, array in zip(names, arrays, strict=False):
        if array is None:
            raise AttributeValueError(f"{operator}: input {name!r} is missing")


def int_vector(operator: str, name: str, tensor: np.ndarray | None, *,
               required: bool) -> tuple[int, ...] | None:
    """A 1-D integer tensor input as a tuple of ints (None when optional and omitted)."""
    if tensor is None:
        if required:
            raise AttributeValueError(f"{operator}: input {name!r} is missing")
        return None
    tensor = np.asarray(tensor)
    if tensor.dtype.kind not in "iu" or tensor.ndim != 1:
        raise AttributeValueError(f"{operator}: input {name!r} must be a 1-D integer tensor, "
                                  f"got {tensor.dtype.name} of shape {tuple(tensor.shape)}")
    return tuple(int(v) for v in tensor)
