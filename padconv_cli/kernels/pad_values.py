"""Pad's element types and its constant value: classification, coercion, the fill element.

:func:`pad_element_kind` checks a dtype against Pad-25's type constraint;
:func:`coerce_constant_value` turns a constant value into an element of the data's type,
refusing values that do not fit; :func:`fill_value` and :func:`output_dtype` give the element
new border cells get and the result's dtype.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from padconv_cli.dtypes import dtype_name, element_kind, float_info, integer_range
from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError

# Pad-25's type constraint T, in padconv's ONNX-style names (padconv_cli.dtypes.dtype_name).
PAD_ELEMENT_TYPES = (
    "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "bfloat16", "float16", "float32", "float64", "string", "bool", "complex64", "complex128",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
    "float4e2m1", "float8e8m0", "uint2", "int2",
)
PAD_ELEMENT_TYPES_TEXT = (
    "(u)int2/4/8/16/32/64, float16/32/64, bfloat16, float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0, "
    "float4e2m1, complex64/128, bool, string"
)


def pad_element_kind(dtype: Any) -> str:
    """The element kind (:func:`padconv_cli.dtypes.element_kind`) of a dtype Pad accepts.

    Rule: the ONNX name of the dtype must be in Pad-25's type constraint T
    (:data:`PAD_ELEMENT_TYPES`; e.g. float6e2m3 and float128 are not), and strings must be
    numpy object or ``<U`` arrays; anything else raises :class:`UnsupportedDtypeError`.
    """
    dt = np.dtype(dtype)
    name = dtype_name(dt)
    if name not in PAD_ELEMENT_TYPES:
        raise UnsupportedDtypeError(f"Pad does not support the element type {name}; Pad-25 takes "
                                    f"{PAD_ELEMENT_TYPES_TEXT}", param="data")
    kind = element_kind(dt)
    if kind == "other" or dt.kind == "S":
        raise UnsupportedDtypeError(f"Pad does not support the element type {dt} (numpy dtype "
                                    f"{dt.str}); it takes ints, floats (incl. bfloat16/float8), "
                                    "bool, complex and strings", param="data")
    return kind


def coerce_constant_value(value: Any, dtype: Any, *, shown: str | None = None) -> Any:
    """Turn a typed constant value into an element of ``dtype``, refusing values that do not fit.

    ``value`` is a Python or numpy scalar, or a one-element array; a ``str`` only for string
    tensors (command-line text is parsed before it gets here, by
    :func:`padconv_cli.constant_text.constant_from_text`).  Rules: ints need an integral value
    within the type's range; floats take any real number whose magnitude does not overflow the
    type, and NaN/±inf where the type has them; complex takes real or complex numbers (each
    part checked as a float); bool takes True/False/0/1; strings take only strings.  ``shown``
    is how the value was written, for the messages.  Returns a numpy scalar of ``dtype`` (a
    ``str`` for string tensors); raises :class:`AttributeValueError`.
    """
    dt = np.dtype(dtype)
    kind = pad_element_kind(dt)
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise AttributeValueError("constant_value must be a scalar or a one-element tensor; "
                                      f"got shape {value.shape}")
        value = value.reshape(())[()]
    same_type = isinstance(value, np.generic) and value.dtype == dt.newbyteorder("=")
    if same_type and kind != "string":
        return value  # already of the type: keep its exact bits (NaN payloads)
    if kind == "string" and isinstance(value, str):
        return str(value)
    if kind == "string" or isinstance(value, str):
        raise _not_a(value, dt, *_WANTED[kind])
    shown = _clipped(shown or str(value))
    if kind == "bool":
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer))
                                                   and value in (0, 1)):
            return np.bool_(int(value))
        raise _not_a(value, dt, *_WANTED[kind])
    if kind == "int":
        return _coerce_int(value, dt, shown)
    if kind == "float":
        return _coerce_float(value, dt, shown)
    return _coerce_complex(value, dt, shown)


# Per element kind: what a refused constant value is not, and what the tensor needs.
_WANTED = {
    "bool": ("a boolean", "True, False, 0 or 1"),
    "int": ("an integer", "an integer"),
    "float": ("a number", "a real number"),
    "complex": ("a number", "a (complex) number"),
    "string": ("a string", "a string"),
}


def _not_a(value: Any, dt: np.dtype, what: str, needs: str) -> AttributeValueError:
    name = "string" if dt.kind in "OU" else str(dt)
    article = "an" if name.startswith("i") else "a"
    shown = _clipped(repr(value) if isinstance(value, (str, bytes)) else str(value))
    return _refused(f"constant_value {shown} is not {what}; {article} {name} tensor needs {needs}")


def _clipped(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _refused(message: str) -> AttributeValueError:
    return AttributeValueError(message, param="constant_value")


def _is_real_number(value: Any) -> bool:
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        return True
    return isinstance(value, np.generic) and element_kind(value.dtype) in ("int", "float")


def _coerce_int(value: Any, dt: np.dtype, shown: str) -> np.generic:
    """The exact integer the value stands for, within the type's range."""
    number = None
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        number = int(value)
    elif _is_real_number(value) and math.isfinite(float(value)) and float(value).is_integer():
        number = int(float(value))
    if number is None:
        raise _not_a(value, dt, *_WANTED["int"])
    low, high = integer_range(dt)
    if not low <= number <= high:
        raise _refused(f"constant_value {shown} does not fit {dt} [{low}, {high}]")
    return np.array(number, dtype=dt)[()]


def _coerce_float(value: Any, dt: np.dtype, shown: str) -> np.generic:
    if isinstance(value, (complex, np.complexfloating)):
        raise _refused(f"constant_value {value} is complex; a {dt} tensor needs a real number")
    if not _is_real_number(value):
        raise _not_a(value, dt, *_WANTED["float"])
    try:
        number = float(value)
    except OverflowError:  # an int too large for any float
        raise _refused(
            f"constant_value {_clipped(str(value))} does not fit {dt} {float_range(dt)}"
        ) from None
    result = _cast_real(number, dt)
    _check_float_fits(number, result, shown, dt)
    return result


def _cast_real(number: float, dt: np.dtype) -> np.generic:
    with np.errstate(all="ignore"):
        return np.array(number, dtype=np.float64).astype(dt)[()]


def _check_float_fits(number: float, result: Any, shown: str, dt: np.dtype,
                      target: np.dtype | None = None) -> None:
    """NaN must stay NaN, ±inf the same infinity, finite values must not overflow.

    ``dt`` is the real type the number was cast to; ``target`` the tensor type to name
    in the message when it differs (the complex type of a real or imaginary part).
    """
    got = float(result)
    name = target if target is not None else dt
    if math.isnan(number):
        if not math.isnan(got):
            raise _refused(f"constant_value {shown}: {name} has no NaN")
    elif math.isinf(number):
        if got != number:
            raise _refused(f"constant_value {shown}: {name} has no infinity")
    elif not math.isfinite(got) or abs(number) >= _overflow_threshold(dt):
        parts = float_range(dt) if target is None else f"(parts in {float_range(dt)})"
        raise _refused(f"constant_value {shown} does not fit {name} {parts}")


def _overflow_threshold(dt: np.dtype) -> float:
    """Smallest magnitude that rounds past the largest finite value: max + ulp(max) / 2."""
    info = float_info(dt)
    largest = float(info.max)
    half_ulp = 2.0 ** (math.floor(math.log2(largest)) - int(info.nmant) - 1)
    return largest + half_ulp


def float_range(dt: np.dtype) -> str:
    """``[min, max]`` of a float type, as messages show it."""
    info = float_info(dt)
    return f"[{float(info.min):g}, {float(info.max):g}]"


def _coerce_complex(value: Any, dt: np.dtype, shown: str) -> np.generic:
    number = None
    if isinstance(value, (complex, np.complexfloating)) or _is_real_number(value):
        with contextlib.suppress(OverflowError):
            number = complex(value)
    if number is None:
        raise _not_a(value, dt, "a number that fits", "a (complex) number")
    part_dtype = np.dtype(np.float32 if dt == np.complex64 else np.float64)
    for part in (number.real, number.imag):
        _check_float_fits(part, _cast_real(part, part_dtype), shown, part_dtype, dt)
    return np.array(number, dtype=dt)[()]


def default_constant(dt: np.dtype) -> Any:
    """ONNX default: 0, "" or False (for float8e8m0, which has no zero, the all-zero bits)."""
    if dt.kind in "OU":
        return ""
    return np.zeros((), dtype=dt)[()]


def output_dtype(dt: np.dtype, fill: Any) -> np.dtype:
    """The result's dtype: the input dtype, except that a ``<U`` dtype grows to hold a longer
    constant string (``fill``, from :func:`fill_value`)."""
    if dt.kind != "U" or not isinstance(fill, str) or len(fill) <= dt.itemsize // 4:
        return dt
    return np.dtype((np.str_, len(fill))).newbyteorder(dt.byteorder)
