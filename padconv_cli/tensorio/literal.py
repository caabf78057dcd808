"""Inline tensor literals: ``'[[1.0, 1.2], [2.3, 3.4]]'``, ``'3'``, ``'["a", "b"]'``, ``'[1+2j]'``.

Parsed by :mod:`ast`, nothing evaluated; accepted: lists and tuples, numbers, strings,
booleans, a sign before a number, ``real +/- imaginary``, the names true/false/True/False,
nan/NaN/inf/Infinity (so JSON arrays are literals).  Element type without ``dtype``: strings ->
string, booleans -> bool, integers -> int64, any float -> float32, any complex -> complex128.
With ``dtype`` each value must be representable: integers within range, floats only into float
or complex types (integral floats into integers too), finite values staying finite after
rounding, booleans only true/false/0/1.
"""

from __future__ import annotations

import ast
import math
from typing import Any

import numpy as np

from padconv_cli.dtypes import dtype_name, element_kind, float_info, integer_range, parse_dtype
from padconv_cli.errors import InputError, UnsupportedDtypeError
from padconv_cli.tensorio.files import one_line

MAX_LITERAL_LENGTH = 1_000_000  # syntax trees cost ~100 bytes per element; use files beyond
_NAMED_VALUES = {"true": True, "false": False, "True": True, "False": False, "nan": math.nan,
                 "NaN": math.nan, "inf": math.inf, "Infinity": math.inf}


class _Rejected(Exception):
    """A literal outside the rules (parse_literal adds the literal to the message)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, complex)) and not isinstance(value, bool)


def _constant(node: ast.Constant) -> Any:
    value = node.value
    if isinstance(value, (float, complex)) and not (
            math.isfinite(value.real) and math.isfinite(value.imag)):
        raise _Rejected("a number is out of the float64 range (write inf for infinity)")
    if isinstance(value, (bool, int, float, complex, str)):
        return value
    raise _Rejected(f"{type(node.value).__name__} values are not allowed")


def _signed(node: ast.UnaryOp) -> Any:
    operand = _value(node.operand)
    if not isinstance(node.op, (ast.USub, ast.UAdd)) or not _is_number(operand):
        raise _Rejected("a sign must precede a number")
    return -operand if isinstance(node.op, ast.USub) else operand


def _complex(node: ast.BinOp) -> complex:
    left, right = _value(node.left), _value(node.right)
    if not isinstance(node.op, (ast.Add, ast.Sub)):
        raise _Rejected("only + and - between a real and an imaginary part are allowed")
    if not (_is_number(left) and not isinstance(left, complex) and isinstance(right, complex)):
        raise _Rejected("complex numbers are written real+imagj")
    return left + right if isinstance(node.op, ast.Add) else left - right


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return _constant(node)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.UnaryOp):
        return _signed(node)
    if isinstance(node, ast.BinOp):
        return _complex(node)
    if isinstance(node, ast.Name) and node.id in _NAMED_VALUES:
        return _NAMED_VALUES[node.id]
    raise _Rejected(f"{_element_text(node)} is not allowed in a tensor literal "
                    "(numbers, quoted strings, true/false, nan and inf are)")


def _element_text(node: ast.AST) -> str:
    """How the user wrote the rejected element (``a``, ``f(1)``), quoted."""
    if isinstance(node, ast.Name):
        return repr(node.id)
    try:
        return repr(one_line(ast.unparse(node), 30))
    except (ValueError, TypeError, AttributeError, RecursionError):
        return "an element"


def _syntax_text(exc: BaseException) -> str:
    """A parse error without Python's file and line: ``unbalanced brackets at column 5``."""
    if not isinstance(exc, SyntaxError):
        return one_line(exc, 80)
    column = f" at column {exc.offset}" if exc.offset else ""
    if any(words in str(exc.msg) for words in ("never closed", "does not match", "unmatched")):
        return f"unbalanced brackets{column}"
    return f"not a nested list of values{column}"


def _parsed(text: str) -> Any:
    """Nested python lists / scalars described by ``text`` (see the module rules)."""
    try:
        return _value(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise _Rejected(f"cannot parse ({_syntax_text(exc)})") from None


def _shape_and_leaves(values: Any) -> tuple[tuple[int, ...], list[Any]]:
    """Rule: every list at one depth has the same length and nests equally deep."""
    if not isinstance(values, list):
        return (), [values]
    if not values:
        return (0,), []
    parts = [_shape_and_leaves(item) for item in values]
    shape = parts[0][0]
    if any(part_shape != shape for part_shape, _ in parts):
        raise _Rejected("ragged nesting, not a tensor")
    return (len(values), *shape), [leaf for _, part_leaves in parts for leaf in part_leaves]


def _default_dtype(leaves: list[Any]) -> np.dtype:
    kinds = {type(leaf) for leaf in leaves}
    if str in kinds:
        if kinds != {str}:
            raise _Rejected("mixes strings and numbers")
        return np.dtype(object)
    if complex in kinds:
        return np.dtype(np.complex128)
    if float in kinds or not kinds:
        return np.dtype(np.float32)
    return np.dtype(np.bool_ if kinds == {bool} else np.int64)


def _as_strings(leaves: list[Any]) -> np.ndarray:
    if not all(isinstance(leaf, str) for leaf in leaves):
        raise _Rejected("dtype string needs quoted strings")
    array = np.empty(len(leaves), dtype=object)
    array[:] = leaves
    return array


def _as_bools(leaves: list[Any]) -> np.ndarray:
    for leaf in leaves:
        if not (isinstance(leaf, bool) or (type(leaf) is int and leaf in (0, 1))):
            raise _Rejected(f"{repr(leaf)} is not a bool (true/false/0/1)")
    return np.array([bool(leaf) for leaf in leaves], dtype=np.bool_)


def _as_integers(leaves: list[Any], dtype: np.dtype) -> np.ndarray:
    low, high = integer_range(dtype)
    for leaf in leaves:
        if isinstance(leaf, complex) or (
                isinstance(leaf, float) and not (math.isfinite(leaf) and leaf.is_integer())):
            raise _Rejected(f"{repr(leaf)} is not an integer ({dtype_name(dtype)})")
    values = [int(leaf) for leaf in leaves]
    for value in values:
        if not low <= value <= high:
            raise _Rejected(f"{value} is outside {dtype_name(dtype)} range [{low}, {high}]")
    container = np.uint64 if high > 2**63 - 1 else np.int64
    return np.array(values, dtype=container).astype(dtype)


def _first_unrepresentable(source: np.ndarray, back: np.ndarray, dtype: np.dtype) -> int | None:
    """Index of a value the cast changed beyond rounding: overflow, or a lost nan/inf.

    max + ulp(max)/2 is the rounding midpoint past max; round-half-to-even sends a value on it
    past max when max's mantissa (max / ulp) is odd, as for IEEE types (float8e4m3fn's max
    448 = 14 * 32 is even).
    """
    limits = float_info(dtype)
    largest = float(limits.max)
    ulp = 2.0 ** (math.floor(math.log2(largest)) - int(limits.nmant))
    threshold, tie_overflows = largest + ulp / 2, int(largest / ulp) % 2 == 1
    magnitude = np.abs(source)
    too_big = (magnitude > threshold) | ((magnitude == threshold) & tie_overflows)
    finite = np.isfinite(source)
    overflow = finite & (~np.isfinite(back) | too_big)
    lost_special = ~finite & ~((np.isnan(source) & np.isnan(back)) | (source == back))
    bad = overflow | lost_special
    return int(np.argmax(bad)) if bad.any() else None


def _as_inexact(leaves: list[Any], dtype: np.dtype) -> np.ndarray:
    """Floats and complex, rounded once from float64/complex128; a finite value may not pass
    max + ulp(max)/2 (it would overflow or saturate), nan/inf must survive as themselves."""
    import warnings

    wide = np.complex128 if dtype.kind == "c" else np.float64
    if wide is np.float64 and any(isinstance(leaf, complex) for leaf in leaves):
        raise _Rejected(f"complex values need a complex dtype, not {dtype_name(dtype)}")
    try:
        source = np.array(leaves, dtype=wide)
    except OverflowError:
        raise _Rejected(f"an integer is too large for {dtype_name(dtype)}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow is reported below, with the value
        result = source.astype(dtype)
        back = result.astype(wide)
    index = _first_unrepresentable(source.view(np.float64), back.view(np.float64), dtype)
    if index is not None:
        value = source.view(np.float64)[index]
        raise _Rejected(f"{value} is not representable in {dtype_name(dtype)}")
    return result


def _convert(leaves: list[Any], dtype: np.dtype) -> np.ndarray:
    if dtype == np.dtype(object) or dtype.kind in "US":
        return _as_strings(leaves)
    if any(isinstance(leaf, str) for leaf in leaves):
        raise _Rejected(f"strings cannot be {dtype_name(dtype)} values")
    if dtype == np.bool_:
        return _as_bools(leaves)
    if integer_range(dtype) is not None:
        return _as_integers(leaves, dtype)
    if element_kind(dtype) in ("float", "complex"):
        return _as_inexact(leaves, dtype)
    raise UnsupportedDtypeError(f"tensor literal: dtype {dtype_name(dtype)} is not supported")


def parse_literal(text: str, dtype: str | None = None) -> np.ndarray:
    """The tensor written by ``text`` (module rules), of ``dtype`` (ONNX or numpy name) or the
    default type; a scalar gives a 0-d array, ``[]`` a float32 array of shape (0,)."""
    if len(text) > MAX_LITERAL_LENGTH:
        raise InputError(f"tensor literal of {len(text)} characters is too long")
    try:
        shape, leaves = _shape_and_leaves(_parsed(text))
        target = _default_dtype(leaves) if dtype is None else parse_dtype(dtype)
        return _convert(leaves, target).reshape(shape)
    except _Rejected as exc:
        raise InputError(f"tensor literal {one_line(text, 40)!r}: {exc}") from None
