"""The ONNX ``Pad`` operator (opset 25: Pad-18 semantics plus the ``wrap`` mode), in numpy.

Rules implemented here:

* ``pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...]`` over ``axes`` (all axes when
  ``axes`` is None); axes may be negative (``[-r, r-1]``); a repeated axis is refused.
* A negative pad removes elements.  Each axis is cropped first, then padded (onnxruntime's
  order), so ``out_dim = dim - crop_begin - crop_end + pad_begin + pad_end``.  The shape rule
  is ONNX's ``out_dim = dim + begin + end >= 0``: a crop longer than the axis keeps nothing
  of it and eats into the other side's padding (output index ``i`` reads input ``i - begin``).
* Modes: ``constant`` (default value 0, ``""`` for strings, ``False`` for bool), ``reflect``,
  ``edge`` and ``wrap``.  ``reflect`` and ``wrap`` repeat periodically when a pad is longer
  than the axis (as ``numpy.pad`` does); ``reflect`` of a one-element axis repeats it.
  In these three modes an axis with non-zero pads must not be empty after cropping.
* The output has the input's dtype; values are copied bit for bit.  A numpy ``<U`` array
  is widened when the constant string is longer than its items.

The kernel allocates the output once (or writes into the caller's ``out``; large outputs
reuse the memory of dropped earlier results, see :mod:`padconv_cli.kernels.recycled`), copies
the cropped input into its centre once and then fills only the border, axis by axis, from
parts of the output that are already final.  Large outputs are handled in cache-sized blocks
of the leading unpadded axes, so that a block's border is filled while its centre is still in
cache.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import AttributeValueError, OutputTooLargeError, UnsupportedDtypeError
from padconv_cli.kernels.recycled import new_array
from padconv_cli.kernels.workers import run_tasks, worker_count

__all__ = [
    "PAD_MODES",
    "AxisPad",
    "PadPlan",
    "coerce_constant_value",
    "element_kind",
    "pad",
    "plan_pad",
]

PAD_MODES = ("constant", "reflect", "edge", "wrap")
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
# of the block is filled right after its centre was copied, large enough that the dozen
# numpy calls per block cost little next to the copy.
_BLOCK_BYTES = 1 << 21
# Outputs from this size on are filled by all the cores.
_PARALLEL_BYTES = 1 << 23


# --------------------------------------------------------------------------------------
# Plan: validation and shapes, without the data
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AxisPad:
    """What Pad does to one input axis: crop, then pad.

    ``out_dim = dim - crop_begin - crop_end + pad_begin + pad_end`` (all four are >= 0).
    """

    dim: int
    crop_begin: int
    crop_end: int
    pad_begin: int
    pad_end: int

    @property
    def cropped_dim(self) -> int:
        """Length of the axis after cropping: ``dim - crop_begin - crop_end``."""
        return self.dim - self.crop_begin - self.crop_end

    @property
    def out_dim(self) -> int:
        """Length of the axis in the output: ``cropped_dim + pad_begin + pad_end``."""
        return self.cropped_dim + self.pad_begin + self.pad_end

    @property
    def is_padded(self) -> bool:
        """True when elements are added at either end."""
        return self.pad_begin > 0 or self.pad_end > 0

    @property
    def is_cropped(self) -> bool:
        """True when elements are removed at either end."""
        return self.crop_begin > 0 or self.crop_end > 0


@dataclass(frozen=True)
class PadPlan:
    """A validated Pad call: the mode, the normalized axes and one :class:`AxisPad` per axis."""

    input_shape: tuple[int, ...]
    mode: str
    axes: tuple[int, ...]
    per_axis: tuple[AxisPad, ...]

    @property
    def cropped_shape(self) -> tuple[int, ...]:
        """Shape of the input after the negative pads are applied."""
        return tuple(ax.cropped_dim for ax in self.per_axis)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of the result: ``out_dim`` of every axis."""
        return tuple(ax.out_dim for ax in self.per_axis)

    @property
    def output_size(self) -> int:
        """Number of elements of the result (a Python int: it cannot overflow)."""
        return math.prod(self.output_shape)

    @property
    def crop_slices(self) -> tuple[slice, ...]:
        """Index selecting the cropped input: ``data[plan.crop_slices]``."""
        return tuple(slice(ax.crop_begin, ax.dim - ax.crop_end) for ax in self.per_axis)

    @property
    def adds_elements(self) -> bool:
        """True when some axis gets padded, i.e. the result has a border to fill."""
        return any(ax.is_padded for ax in self.per_axis)


def plan_pad(
    shape: Iterable[int],
    pads: Any,
    axes: Any = None,
    mode: str = "constant",
    *,
    dtype: Any = None,
) -> PadPlan:
    """Validate Pad's attributes against an input shape and give the output shape.

    ``pads`` has ``2 * len(axes)`` integers ``[b_1..b_k, e_1..e_k]``; axis ``axes[i]`` gets
    ``b_i`` elements before and ``e_i`` after (negative: removed).  Raises
    :class:`AttributeValueError` for a bad mode, axis or pad count, a repeated axis,
    pads making an axis negative (``dim + begin + end < 0``), or (reflect/edge/wrap) an
    axis with non-zero pads that is empty after cropping.  When ``dtype`` is given, it must
    be one of Pad-25's element types (:func:`element_kind`), as :func:`pad` requires of its
    data.
    """
    if dtype is not None:
        element_kind(dtype)
    input_shape = _as_int_tuple(shape, "shape")
    mode = _checked_mode(mode)
    rank = len(input_shape)
    axis_list = _normalized_axes(axes, rank)
    pad_list = _as_int_tuple(pads, "pads")
    _check_pad_count(pad_list, len(axis_list), axes is None, rank)
    begins = dict(zip(axis_list, pad_list[: len(axis_list)], strict=True))
    ends = dict(zip(axis_list, pad_list[len(axis_list) :], strict=True))
    per_axis = tuple(
        _axis_pad(axis, dim, begins.get(axis, 0), ends.get(axis, 0), mode)
        for axis, dim in enumerate(input_shape)
    )
    return PadPlan(input_shape, mode, axis_list, per_axis)


def _checked_mode(mode: Any) -> str:
    if isinstance(mode, bytes):  # ONNX string attributes arrive as bytes
        mode = mode.decode("utf-8", errors="replace")
    if isinstance(mode, str) and mode in PAD_MODES:
        return mode
    hint = ""
    if isinstance(mode, str) and mode.lower() in PAD_MODES:
        hint = " (mode names are lowercase)"
    raise AttributeValueError(
        f"mode {mode!r} is not an ONNX Pad mode; choose constant, reflect, edge or wrap{hint}"
    )


def _as_int_tuple(values: Any, name: str) -> tuple[int, ...]:
    """Read a 1-D sequence or array of integers; bools, floats and strings are refused."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise AttributeValueError(
                f"{name} must be a 1-D list of integers; got an array of shape {values.shape}"
            )
        if values.dtype.kind not in "iu":
            raise AttributeValueError(
                f"{name} must hold integers; got an array of {values.dtype} values"
            )
        return tuple(int(v) for v in values.tolist())
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise AttributeValueError(
            f"{name} must be a sequence of integers; got {type(values).__name__} {values!r}"
        )
    return tuple(_as_int(v, f"{name}[{i}]") for i, v in enumerate(values))


def _as_int(value: Any, label: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise AttributeValueError(f"{label}={value!r} is not an integer")
    try:
        return operator.index(value)
    except TypeError:
        raise AttributeValueError(f"{label}={value!r} is not an integer") from None


def _normalized_axes(axes: Any, rank: int) -> tuple[int, ...]:
    """Axes in ``[0, rank)``: ``axis + rank`` for a negative axis; all axes when None."""
    if axes is None:
        return tuple(range(rank))
    given = _as_int_tuple(axes, "axes")
    first_seen: dict[int, int] = {}
    for i, axis in enumerate(given):
        if not -rank <= axis < rank:
            span = f"[{-rank}, {rank - 1}]" if rank else "(it has no axes)"
            raise AttributeValueError(
                f"axes[{i}]={axis} is out of range {span} for a rank-{rank} input"
            )
        normalized = axis % rank
        if normalized in first_seen:
            raise AttributeValueError(
                f"axes repeats axis {normalized} (given as {first_seen[normalized]} and {axis})"
            )
        first_seen[normalized] = axis
    return tuple(axis % rank for axis in given)


def _check_pad_count(pads: tuple[int, ...], n_axes: int, all_axes: bool, rank: int) -> None:
    if len(pads) == 2 * n_axes:
        return
    if all_axes:
        need = f"2 * rank = {2 * n_axes} for a rank-{rank} input"
    else:
        need = f"2 * len(axes) = {2 * n_axes}"
    raise AttributeValueError(f"pads has {len(pads)} values; it needs {need}")


def _axis_pad(axis: int, dim: int, begin: int, end: int, mode: str) -> AxisPad:
    """Split the signed pads of one axis into crops and pads, and check the result.

    Shape rule (ONNX shape inference and onnxruntime): ``out_dim = dim + begin + end`` must be
    >= 0.  Output index ``i`` holds input index ``i - begin`` when that lies in ``[0, dim)``,
    else padding.  So a crop larger than the axis (net length still >= 0) keeps no input
    element: in constant mode the whole output axis is the constant; the other modes need an
    element to reflect, repeat or wrap and refuse it.
    """
    if dim < 0:
        raise AttributeValueError(f"shape[{axis}]={dim} is negative")
    out_dim = dim + begin + end
    if out_dim < 0:
        raise AttributeValueError(
            f"axis {axis} (dim {dim}, pads {begin}/{end}) would have "
            f"dim + begin + end = {out_dim} elements; Pad needs >= 0"
        )
    crop_begin = min(max(-begin, 0), dim)
    crop_end = min(max(-end, 0), dim - crop_begin)
    if crop_begin + crop_end < dim:
        ax = AxisPad(dim, crop_begin, crop_end, max(begin, 0), max(end, 0))
    else:  # nothing of the input is kept: the output axis is all padding
        pad_begin = min(max(begin, 0), out_dim)
        ax = AxisPad(dim, crop_begin, crop_end, pad_begin, out_dim - pad_begin)
    # An axis the pads touch must keep an element to reflect, repeat or wrap; an axis that
    # is empty and has zero pads is left alone.
    if mode != "constant" and ax.cropped_dim == 0 and (begin or end):
        where = "empty after cropping" if ax.is_cropped else "empty"
        raise AttributeValueError(
            f"axis {axis} is {where} (dim {dim}, pads {begin}/{end}); "
            f"{mode} needs at least one element"
        )
    return ax


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
        f"ints, floats (incl. bfloat16/float8), bool, complex and strings"
    )


def _check_pad_element_type(dt: np.dtype) -> None:
    """The ONNX name of ``dt`` must be in Pad-25's type list."""
    from padconv_cli.dtypes import dtype_name

    name = dtype_name(dt)
    if name not in PAD_ELEMENT_TYPES:
        raise UnsupportedDtypeError(
            f"Pad does not support the element type {name}; Pad-25 takes "
            f"{PAD_ELEMENT_TYPES_TEXT}"
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


def _output_dtype(dt: np.dtype, fill: Any) -> np.dtype:
    """The input dtype, except that a ``<U`` dtype grows to hold a longer constant string."""
    if dt.kind != "U" or not isinstance(fill, str) or len(fill) <= dt.itemsize // 4:
        return dt
    return np.dtype((np.str_, len(fill))).newbyteorder(dt.byteorder)


# --------------------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------------------


def pad(
    data: Any,
    pads: Any,
    constant_value: Any = None,
    axes: Any = None,
    mode: str = "constant",
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """ONNX Pad-25: crop the negative pads, then pad with ``mode`` (see the module docstring).

    ``output[i] = data'[source(i)]`` where ``data'`` is the cropped input and ``source`` maps
    each output index along a padded axis with ``j = i - pad_begin`` and ``n`` the cropped
    length: constant -> the constant outside ``[0, n)``; edge -> ``clip(j, 0, n-1)``;
    wrap -> ``j mod n``; reflect -> ``m = j mod 2(n-1)``, ``m if m < n else 2(n-1) - m``
    (``0`` when ``n == 1``).  ``constant_value`` is only used in constant mode but is
    validated whenever it is given.

    Returns a new array of ``data``'s dtype, or ``out`` when it is given (numpy's convention):
    ``out`` must have exactly the output's shape and dtype, be writable and share no memory
    with ``data``, else :class:`AttributeValueError`.  Reusing one ``out`` across calls saves
    the page faults of fresh memory, which for a large output cost about as much as the copy;
    without ``out``, an output of 32 MiB or more reuses the memory of an earlier result that
    is no longer referenced (:mod:`padconv_cli.kernels.recycled`).
    """
    array = data if isinstance(data, np.ndarray) else np.asarray(data)
    element_kind(array.dtype)
    plan = plan_pad(array.shape, pads, axes, mode)
    fill = _fill_value(constant_value, array.dtype, plan)
    dtype = _output_dtype(array.dtype, fill)
    if out is None:
        out = _allocate(plan.output_shape, dtype)
    else:
        _check_out(out, plan.output_shape, dtype, array)
    sides = tuple((ax.pad_begin, ax.cropped_dim, ax.pad_end) for ax in plan.per_axis)
    _fill_in_blocks(out, array[plan.crop_slices], sides, plan.mode, fill)
    return out


def _fill_value(constant_value: Any, dt: np.dtype, plan: PadPlan) -> Any:
    value = None if constant_value is None else coerce_constant_value(constant_value, dt)
    if plan.mode != "constant" or not plan.adds_elements:
        return None
    return _default_constant(dt) if value is None else value


def _allocate(shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    try:
        return new_array(shape, dt)
    except (ValueError, MemoryError):
        nbytes = math.prod(shape) * dt.itemsize
        raise OutputTooLargeError(
            f"the padded output of shape {shape} ({dt}) needs {nbytes} bytes, "
            f"more than can be allocated"
        ) from None


def _check_out(out: Any, shape: tuple[int, ...], dt: np.dtype, data: np.ndarray) -> None:
    """``out`` must be a writable array of exactly the output's shape and dtype, apart from data."""
    if not isinstance(out, np.ndarray):
        raise AttributeValueError(f"out must be a numpy array; got {type(out).__name__}")
    if out.shape != shape:
        raise AttributeValueError(f"out has shape {out.shape}; the padded output has shape {shape}")
    if out.dtype != dt:
        raise AttributeValueError(f"out has dtype {out.dtype}; the padded output has dtype {dt}")
    if not out.flags.writeable:
        raise AttributeValueError("out is read-only; the padded output needs a writable array")
    if _may_overlap(out, data):
        raise AttributeValueError(
            "out shares memory with data; the padded output needs an array of its own"
        )


# Bound on the work np.shares_memory may do to prove two strided arrays apart.
_OVERLAP_WORK = 100_000


def _may_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """True when ``a`` and ``b`` share memory, or when that cannot be ruled out cheaply."""
    try:
        return bool(np.shares_memory(a, b, max_work=_OVERLAP_WORK))
    except np.exceptions.TooHardError:
        return True


# One border step: ``(target, source)`` indices, source None for the constant.
Step = tuple[tuple[Any, ...], tuple[Any, ...] | None]


def _fill_in_blocks(
    out: np.ndarray, src: np.ndarray, sides: tuple[tuple[int, int, int], ...], mode: str, fill: Any
) -> None:
    """Copy ``src`` into the centre of ``out`` and fill the border, one block at a time.

    Blocks split the leading axes that are not padded; a block of about ``_BLOCK_BYTES`` is
    still in cache when its border is filled right after its centre was copied.  The border
    steps are worked out once and replayed on every block (the centre and region slices of
    an unpadded axis cover a block's shorter range too).  Large outputs share the blocks out in
    contiguous runs among the cores (numpy copies release the GIL).
    """
    depth, count = _block_layout(out.shape, out.itemsize, sides)
    inner = sides[depth:]
    centre = tuple(slice(b, b + n) for b, n, _ in inner)
    slab_steps, row_steps = _border_steps(inner, mode)

    def fill_blocks(pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        for out_block, src_block in pairs:
            out_block[centre] = src_block
            _replay(out_block, slab_steps, fill)
            if row_steps:
                _replay(_rows(out_block), row_steps, fill)

    pairs = list(_blocks(out, src, depth, count))
    runs = _parallel_runs(len(pairs), out)
    run_tasks([functools.partial(fill_blocks, pairs[run]) for run in runs])


def _parallel_runs(block_count: int, out: np.ndarray) -> list[slice]:
    """Contiguous runs of blocks, one per core, for outputs of at least ``_PARALLEL_BYTES``
    whose copies release the GIL (not object arrays); else one run of all the blocks."""
    parts = 1
    if out.nbytes >= _PARALLEL_BYTES and not out.dtype.hasobject:
        parts = max(1, min(worker_count(), block_count))
    step = max(1, -(-block_count // parts))
    return [slice(first, first + step) for first in range(0, max(block_count, 1), step)]


def _replay(array: np.ndarray, steps: list[Step], fill: Any) -> None:
    """``array[target] = array[source]`` for each step, or the constant when source is None."""
    for target, source in steps:
        array[target] = fill if source is None else array[source]


def _rows(block: np.ndarray) -> np.ndarray:
    """The block as rows of its innermost axis: one 2-D view when the block is C-contiguous
    (a column is then one strided loop), else the block itself."""
    if block.ndim > 1 and block.flags.c_contiguous:
        return block.reshape(-1, block.shape[-1])
    return block


def _is_padded(side: tuple[int, int, int]) -> bool:
    return side[0] > 0 or side[2] > 0


def _block_layout(
    shape: tuple[int, ...], itemsize: int, sides: tuple[tuple[int, int, int], ...]
) -> tuple[int, int]:
    """``(depth, count)``: a block takes one index of each of the first ``depth`` axes and
    ``count`` indices of axis ``depth``; one block for a small output or a padded first axis.

    Deeper axes are split only while one index is still larger than a block; the indices of
    the split axis are shared out evenly among the fewest blocks of at most ``_BLOCK_BYTES``.
    """
    if not sides or math.prod(shape) * itemsize <= _BLOCK_BYTES or _is_padded(sides[0]):
        return 0, max(shape[:1] + (1,))
    depth = 0
    while True:
        bytes_per_index = math.prod(shape[depth + 1 :]) * itemsize
        deeper = depth + 1 < len(sides) and not _is_padded(sides[depth + 1])
        if bytes_per_index <= _BLOCK_BYTES or not deeper:
            break
        depth += 1
    per_block = max(1, _BLOCK_BYTES // max(bytes_per_index, 1))
    block_count = -(-shape[depth] // per_block)
    return depth, max(1, -(-shape[depth] // block_count))


def _blocks(
    out: np.ndarray, src: np.ndarray, depth: int, count: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The ``(out, src)`` block pairs of a :func:`_block_layout`, in memory order."""
    if out.ndim == 0:
        yield out, src
        return
    for lead in np.ndindex(*out.shape[:depth]):
        for start in range(0, out.shape[depth], count):
            index = (*lead, slice(start, start + count))
            yield out[index], src[index]


def _border_steps(
    sides: tuple[tuple[int, int, int], ...], mode: str
) -> tuple[list[Step], list[Step]]:
    """The ``(target, source)`` index pairs that fill the border once the centre is copied:
    first those of the outer axes (indexing the block), then those of the innermost axis
    (indexing :func:`_rows`).

    ``array[target] = array[source]``, or the constant where ``source`` is None.  Axes go
    from first to last.  Axis ``k`` fills its border over the full range of the axes before
    it and the centre range of the axes after it: those are final by then, so corners come
    out right, and each border element is written once.  The innermost axis comes last and
    so spans every row, whose lines the outer axes' slabs have just brought into cache.
    """
    slab_steps: list[Step] = []
    row_steps: list[Step] = []
    last = len(sides) - 1
    for axis, (before, length, after) in enumerate(sides):
        if not (before or after):
            continue
        if axis == last:
            line = _AxisSteps((Ellipsis,), (), last > 0, row_steps)
        else:
            after_axes = tuple(slice(b, b + n) for b, n, _ in sides[axis + 1 :])
            line = _AxisSteps((slice(None),) * axis, after_axes, False, slab_steps)
        _FILLERS[mode](line, before, length, after)
    return slab_steps, row_steps


class _AxisSteps:
    """Records fills and copies along one axis, positions counted along that axis.

    ``prefix`` and ``suffix`` index the axes before and after it.  On the innermost axis
    (``by_column``) a narrow stretch is handled one position (one column) at a time: a numpy
    assignment of a few elements per row pays its per-row overhead for every row, while a
    column is one long strided loop.
    """

    __slots__ = ("prefix", "suffix", "by_column", "steps")

    def __init__(
        self, prefix: tuple[Any, ...], suffix: tuple[Any, ...], by_column: bool, steps: list[Step]
    ) -> None:
        self.prefix = prefix
        self.suffix = suffix
        self.by_column = by_column
        self.steps = steps

    def fill(self, start: int, stop: int) -> None:
        """Positions ``start .. stop-1`` get the constant."""
        if self._columnwise(stop - start, _FILL_COLUMNS):
            self.steps += [(self._at(position), None) for position in range(start, stop)]
        else:
            self.steps.append((self._at(slice(start, stop)), None))

    def copy(self, start: int, stop: int, source: int, step: int) -> None:
        """Position ``start + i`` gets position ``source + i * step`` (step 1, -1 or 0)."""
        count = stop - start
        if self._columnwise(count, _COPY_COLUMNS):
            self.steps += [(self._at(start + i), self._at(source + i * step)) for i in range(count)]
            return
        if step == 0:
            chosen = slice(source, source + 1)
        elif step == 1:
            chosen = slice(source, source + count)
        else:
            last = source - count
            chosen = slice(source, last if last >= 0 else None, -1)
        self.steps.append((self._at(slice(start, stop)), self._at(chosen)))

    def _at(self, position: int | slice) -> tuple[Any, ...]:
        return (*self.prefix, position, *self.suffix)

    def _columnwise(self, count: int, limit: int) -> bool:
        return self.by_column and count <= limit


# Widest stretches of the innermost axis copied / filled column by column.  Measured on
# 3520 rows of 160 float32 in cache: an assignment of a short stretch of each row costs
# about 19 ns per row (8 ns for a fill) up to 8 elements wide, one column 1.3-1.8 ns per row.
_COPY_COLUMNS = 8
_FILL_COLUMNS = 6


def _fill_constant(line: _AxisSteps, before: int, length: int, after: int) -> None:
    """Positions outside ``[before, before + length)`` get the constant."""
    if before:
        line.fill(0, before)
    if after:
        line.fill(before + length, before + length + after)


def _fill_edge(line: _AxisSteps, before: int, length: int, after: int) -> None:
    """Position ``j`` (relative to the centre) gets ``clip(j, 0, n-1)``."""
    if before:
        line.copy(0, before, before, 0)
    last = before + length - 1
    if after:
        line.copy(last + 1, last + 1 + after, last, 0)


def _fill_wrap(line: _AxisSteps, before: int, length: int, after: int) -> None:
    """Position ``j`` gets ``j mod n``: copy already-filled whole periods outwards.

    The filled stretch ``[low, high)`` is ``n``-periodic, so a chunk next to it equals the
    part of it a multiple of ``n`` away; the chunk may be as long as the whole periods in it,
    which doubles the filled stretch at each step when the pad is much longer than ``n``.
    """
    low, high, total = before, before + length, before + length + after
    while low > 0:
        size = min(low, (high - low) // length * length)
        shift = -(-size // length) * length
        line.copy(low - size, low, low - size + shift, 1)
        low -= size
    while high < total:
        size = min(total - high, (high - low) // length * length)
        shift = -(-size // length) * length
        line.copy(high, high + size, high - shift, 1)
        high += size


def _fill_reflect(line: _AxisSteps, before: int, length: int, after: int) -> None:
    """Position ``j`` mirrors about the first and last centre elements (period ``2(n-1)``).

    The filled stretch ``[low, high)`` is mirrored about its end element; a mirrored chunk
    spans whole half-periods ``n-1`` (so its end is again a mirror point) except the last.
    A one-element axis has period 0: every position repeats it, like numpy.pad.
    """
    if length == 1:
        _fill_edge(line, before, length, after)
        return
    half = length - 1
    low, high, total = before, before + length, before + length + after
    while low > 0:
        size = min(low, (high - low - 1) // half * half)
        line.copy(low - size, low, low + size, -1)
        low -= size
    while high < total:
        size = min(total - high, (high - low - 1) // half * half)
        line.copy(high, high + size, high - 2, -1)
        high += size


_FILLERS: dict[str, Callable[[_AxisSteps, int, int, int], None]] = {
    "constant": _fill_constant,
    "edge": _fill_edge,
    "wrap": _fill_wrap,
    "reflect": _fill_reflect,
}
