"""Pad's element types and its constant value: classification, coercion, the fill element.

:func:`element_kind` classifies a dtype for Pad-25 (refusing types outside its constraint);
:func:`coerce_constant_value` turns a constant value into an element of the data's type,
refusing values that do not fit; :func:`fill_value` and :func:`output_dtype` give the element
new border cells get and the result's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError

if TYPE_CHECKING:
    from padconv_cli.kernels.pad_plan import PadPlan

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

# Output bytes handled per block: small enough to stay in cache (L2/L3) while the border

# --------------------------------------------------------------------------------------
# Element kinds and the constant value
# --------------------------------------------------------------------------------------


def element_kind(dtype: Any) -> str:
    """Classify a numpy dtype for Pad: ``bool``, ``int``, ``float``, ``complex`` or ``string``.

    Strings are numpy object arrays (as onnx gives them) or ``<U`` arrays; the ml_dtypes
    types (bfloat16, float8, float4, int4, ...) count as float or int.  A type outside
    Pad-25's constraint T (:data:`PAD_ELEMENT_TYPES`; e.g. float6e2m3, float128) or of no
    kind above raises :class:`UnsupportedDtypeError`.
    """
    dt = np.dtype(dtype)
    _check_pad_element_type(dt)
    if dt.kind == "b":
        return "bool"
    if dt.kind in "iu":
        return "int"
    if dt.kind in "fc":
        return "float" if dt.kind == "f" else "complex"
    if dt.kind in "OU":
        return "string"
    if dt.kind == "V" and dt.fields is None and dt.type.__module__ == "ml_dtypes":
        kind = _ml_dtypes_kind(dt)
        if kind is not None:
            return kind
    raise UnsupportedDtypeError(
        f"Pad does not support the element type {dt} (numpy dtype {dt.str}); it takes "
        f"ints, floats (incl. bfloat16/float8), bool, complex and strings",
        param="data",
    )


def _check_pad_element_type(dt: np.dtype) -> None:
    """The ONNX name of ``dt`` must be in Pad-25's type list."""
    from padconv_cli.dtypes import dtype_name

    name = dtype_name(dt)
    if name not in PAD_ELEMENT_TYPES:
        raise UnsupportedDtypeError(
            f"Pad does not support the element type {name}; Pad-25 takes "
            f"{PAD_ELEMENT_TYPES_TEXT}",
            param="data",
        )


def _ml_dtypes_kind(dt: np.dtype) -> str | None:
    import ml_dtypes

    for kind, info in (("float", ml_dtypes.finfo), ("int", ml_dtypes.iinfo)):
        try:
            info(dt)
        except (ValueError, TypeError):
            continue
        return kind
    return None


def _float_info(dt: np.dtype) -> Any:
    if dt.type.__module__ == "numpy":
        return np.finfo(dt)
    import ml_dtypes

    return ml_dtypes.finfo(dt)


def _int_info(dt: np.dtype) -> Any:
    if dt.type.__module__ == "numpy":
        return np.iinfo(dt)
    import ml_dtypes

    return ml_dtypes.iinfo(dt)


def coerce_constant_value(value: Any, dtype: Any) -> Any:
    """Turn a constant value into an element of ``dtype``, refusing values that do not fit.

    ``value`` is text as given on a command line (``"0"``, ``"-1.5"``, ``"nan"``, ``"inf"``,
    ``"true"``, ``"1+2j"``, any string for a string tensor), a Python or numpy scalar, or a
    one-element array.  Rules: ints need an integral value within the type's range; floats
    take any real number whose magnitude does not overflow the type, and NaN/±inf where the
    type has them; complex takes real or complex numbers (each part checked as a float);
    bool takes true/false/0/1; strings take only strings.  Returns a numpy scalar of
    ``dtype`` (a ``str`` for string tensors); raises :class:`AttributeValueError`.
    """
    dt = np.dtype(dtype)
    kind = element_kind(dt)
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise AttributeValueError(
                f"constant_value must be a scalar or a one-element tensor; got shape {value.shape}"
            )
        value = value.reshape(())[()]
    same_type = isinstance(value, np.generic) and value.dtype == dt.newbyteorder("=")
    if same_type and kind != "string":
        return value  # already of the type: keep its exact bits (NaN payloads)
    return _COERCERS[kind](value, dt)


def _type_name(dt: np.dtype) -> str:
    return "string" if dt.kind in "OU" else str(dt)


def _not_a(value: Any, what: str, dt: np.dtype, needs: str) -> AttributeValueError:
    name = _type_name(dt)
    article = "an" if name.startswith("i") else "a"
    return AttributeValueError(
        f"constant_value {_shown(value)} is not {what}; {article} {name} tensor needs {needs}"
    )


def _shown(value: Any) -> str:
    return _clipped(repr(value) if isinstance(value, (str, bytes)) else str(value))


def _clipped(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_real_number(value: Any) -> bool:
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        return True
    if not isinstance(value, np.generic):
        return False
    try:
        return element_kind(value.dtype) in ("int", "float")
    except UnsupportedDtypeError:  # an ml_dtypes scalar Pad does not take (float6...)
        return _ml_dtypes_kind(value.dtype) is not None


def _coerce_bool(value: Any, dt: np.dtype) -> np.bool_:
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return np.bool_(int(value))
    if isinstance(value, str) and value.strip().lower() in _BOOL_TEXT:
        return np.bool_(_BOOL_TEXT[value.strip().lower()])
    raise _not_a(value, "a boolean", dt, "true, false, 0 or 1")


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _coerce_int(value: Any, dt: np.dtype) -> np.generic:
    number = _integral_value(value, dt)
    info = _int_info(dt)
    low, high = int(info.min), int(info.max)
    if not low <= number <= high:
        raise AttributeValueError(
            f"constant_value {_shown_number(value)} does not fit {dt} [{low}, {high}]"
        )
    return np.array(number, dtype=dt)[()]


def _shown_number(value: Any) -> str:
    return _clipped(value.strip() if isinstance(value, str) else str(value))


def _integral_value(value: Any, dt: np.dtype) -> int:
    """The exact integer a value stands for; text is parsed exactly (no float rounding)."""
    if isinstance(value, str):
        return _integral_text(value, dt)
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return int(value)
    if _is_real_number(value):
        number = float(value)
        if math.isfinite(number) and number.is_integer():
            return int(number)
    raise _not_a(value, "an integer", dt, "an integer")


def _integral_text(text: str, dt: np.dtype) -> int:
    stripped = text.strip()
    try:
        return int(stripped)
    except ValueError:
        pass
    from decimal import Decimal, InvalidOperation  # only for text such as "1e3" or "2.0"

    try:
        number = Decimal(stripped)
    except InvalidOperation:
        raise _not_a(text, "an integer", dt, "an integer") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise _not_a(text, "an integer", dt, "an integer")
    return int(number)


def _coerce_float(value: Any, dt: np.dtype) -> np.generic:
    number = _real_value(value, dt)
    result = _cast_real(number, dt)
    _check_float_fits(number, result, value, dt)
    return result


def _real_value(value: Any, dt: np.dtype) -> float:
    if isinstance(value, str):
        return _real_text(value, dt)
    if isinstance(value, (complex, np.complexfloating)):
        raise AttributeValueError(
            f"constant_value {value} is complex; a {dt} tensor needs a real number"
        )
    if _is_real_number(value):
        try:
            return float(value)
        except OverflowError:  # an int too large for any float
            raise AttributeValueError(
                f"constant_value {value} does not fit {dt} {_float_range(dt)}"
            ) from None
    raise _not_a(value, "a number", dt, "a real number")


def _real_text(text: str, dt: np.dtype) -> float:
    stripped = text.strip()
    try:
        number = float(stripped)
    except ValueError:
        pass
    else:
        if math.isinf(number) and not _names_infinity(stripped):
            raise AttributeValueError(
                f"constant_value {stripped} does not fit {dt} {_float_range(dt)}"
            )
        return number
    try:
        complex(stripped.replace(" ", ""))
    except ValueError:
        raise _not_a(text, "a number", dt, "a real number") from None
    raise AttributeValueError(
        f"constant_value {stripped} is complex; a {dt} tensor needs a real number"
    )


def _names_infinity(text: str) -> bool:
    """True for "inf"/"infinity" with an optional sign; False for "1e999" (an overflow)."""
    return text.lstrip("+-").lower() in ("inf", "infinity")


def _cast_real(number: float, dt: np.dtype) -> np.generic:
    with np.errstate(all="ignore"):
        return np.array(number, dtype=np.float64).astype(dt)[()]


def _check_float_fits(
    number: float, result: Any, value: Any, dt: np.dtype, target: np.dtype | None = None
) -> None:
    """NaN must stay NaN, ±inf the same infinity, finite values must not overflow.

    ``dt`` is the real type the number was cast to; ``target`` the tensor type to name
    in the message when it differs (the complex type of a real or imaginary part).
    """
    got = float(result)
    shown = _shown_number(value)
    name = target if target is not None else dt
    if math.isnan(number):
        if not math.isnan(got):
            raise AttributeValueError(f"constant_value {shown}: {name} has no NaN")
    elif math.isinf(number):
        if got != number:
            raise AttributeValueError(f"constant_value {shown}: {name} has no infinity")
    elif not math.isfinite(got) or abs(number) >= _overflow_threshold(dt):
        raise AttributeValueError(
            f"constant_value {shown} does not fit {name} (parts in {_float_range(dt)})"
            if target is not None
            else f"constant_value {shown} does not fit {dt} {_float_range(dt)}"
        )


def _overflow_threshold(dt: np.dtype) -> float:
    """Smallest magnitude that rounds past the largest finite value: max + ulp(max) / 2."""
    info = _float_info(dt)
    largest = float(info.max)
    half_ulp = 2.0 ** (math.floor(math.log2(largest)) - int(info.nmant) - 1)
    return largest + half_ulp


def _float_range(dt: np.dtype) -> str:
    info = _float_info(dt)
    return f"[{float(info.min):g}, {float(info.max):g}]"


def _coerce_complex(value: Any, dt: np.dtype) -> np.generic:
    number = _complex_value(value, dt)
    part_dtype = np.dtype(np.float32 if dt == np.complex64 else np.float64)
    for part in (number.real, number.imag):
        _check_float_fits(part, _cast_real(part, part_dtype), value, part_dtype, dt)
    return np.array(number, dtype=dt)[()]


def _complex_value(value: Any, dt: np.dtype) -> complex:
    if isinstance(value, str):
        try:
            return complex(value.strip().replace(" ", ""))
        except ValueError:
            raise _not_a(value, "a number", dt, "a (complex) number") from None
    if isinstance(value, (complex, np.complexfloating)) or _is_real_number(value):
        try:
            return complex(value)
        except OverflowError:
            pass
    raise _not_a(value, "a number that fits", dt, "a (complex) number")


def _coerce_string(value: Any, dt: np.dtype) -> str:
    if isinstance(value, str):
        return str(value)
    raise _not_a(value, "a string", dt, "a string")


_COERCERS: dict[str, Callable[[Any, np.dtype], Any]] = {
    "bool": _coerce_bool,
    "int": _coerce_int,
    "float": _coerce_float,
    "complex": _coerce_complex,
    "string": _coerce_string,
}


def _default_constant(dt: np.dtype) -> Any:
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


def fill_value(constant_value: Any, dt: np.dtype, plan: PadPlan) -> Any:
    """The element written into new border cells: ``constant_value`` coerced to ``dt``
    (validated whenever given), else the ONNX default (0, "" or False); None when the plan
    adds no constant border (other modes, or nothing padded)."""
    value = None if constant_value is None else coerce_constant_value(constant_value, dt)
    if plan.mode != "constant" or not plan.adds_elements:
        return None
    return _default_constant(dt) if value is None else value
