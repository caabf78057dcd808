"""The ONNX ``Pad`` operator (opset 25: Pad-18 semantics plus ``wrap``), its element types and
constant value (:func:`coerce_constant_value`; as text: :func:`constant_from_text`), the plan
(:func:`plan_pad`, from the input shape alone) and the kernel (:func:`pad`).

* ``pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...]`` over ``axes`` (all axes when
  None; negative axes count from the back; a repeated axis is refused).
* A negative pad crops.  Each axis is cropped first, then padded (onnxruntime's order); the
  shape rule is ONNX's ``out_dim = dim + begin + end >= 0``: a crop longer than the axis
  keeps nothing of it and eats into the other side's padding.
* Modes: ``constant`` (default 0, ``""`` for strings, ``False`` for bool), ``reflect``,
  ``edge``, ``wrap``; ``reflect`` and ``wrap`` repeat periodically past the axis length (as
  ``numpy.pad``), ``reflect`` of a one-element axis repeats it; these three need an axis with
  non-zero pads to keep an element.  Values are copied bit for bit; a ``<U`` array widens
  for a longer constant string.

The kernel allocates the output once (or writes the caller's ``out``) and fills it from each
axis's table of source indices (:func:`source_indices`) in one pass, natively on all the cores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from padconv_cli.dtypes import dtype_name, element_kind, float_info, integer_range
from padconv_cli.errors import AttributeValueError, OutputTooLargeError, UnsupportedDtypeError

__all__ = ["PAD_ELEMENT_TYPES", "PAD_ELEMENT_TYPES_TEXT", "PAD_MODES", "AxisPad", "PadPlan",
           "coerce_constant_value", "pad_element_kind", "fill_value", "output_dtype", "pad",
           "pad_planned", "plan_pad", "fill_from_tables", "source_indices", "constant_from_text",
           "typed_attributes"]


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
    """The element kind of a dtype in Pad-25's type constraint T (:data:`PAD_ELEMENT_TYPES`;
    strings as numpy object or ``<U``), else :class:`UnsupportedDtypeError`."""
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
    """A scalar (or one-element array) as a numpy scalar of ``dtype`` (a ``str`` for strings),
    else :class:`AttributeValueError`: ints need an integral value within range; floats a real
    number that does not overflow, NaN/±inf where the type has them; complex each part as a
    float; bool True/False/0/1; strings only strings.  ``shown``: the value as written."""
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
        raise not_a(value, dt, *_WANTED[kind])
    shown = _clipped(shown or str(value))
    if kind == "bool":
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer))
                                                   and value in (0, 1)):
            return np.bool_(int(value))
        raise not_a(value, dt, *_WANTED[kind])
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


def not_a(value: Any, dt: np.dtype, what: str, needs: str) -> AttributeValueError:
    """The refusal ``constant_value V is not <what>; a <dtype> tensor needs <needs>``."""
    name = "string" if dt.kind in "OU" else str(dt)
    article = "an" if name.startswith("i") else "a"
    shown = _clipped(repr(value) if isinstance(value, (str, bytes)) else str(value))
    return refusal(f"constant_value {shown} is not {what}; {article} {name} tensor needs {needs}")


def _clipped(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def refusal(message: str) -> AttributeValueError:
    """A refusal of the constant_value parameter."""
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
        raise not_a(value, dt, *_WANTED["int"])
    low, high = integer_range(dt)
    if not low <= number <= high:
        raise refusal(f"constant_value {shown} does not fit {dt} [{low}, {high}]")
    return np.array(number, dtype=dt)[()]


def _coerce_float(value: Any, dt: np.dtype, shown: str) -> np.generic:
    if isinstance(value, (complex, np.complexfloating)):
        raise refusal(f"constant_value {value} is complex; a {dt} tensor needs a real number")
    if not _is_real_number(value):
        raise not_a(value, dt, *_WANTED["float"])
    try:
        number = float(value)
    except OverflowError:  # an int too large for any float
        raise refusal(
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
    """NaN must stay NaN, ±inf the same infinity, finite values must not overflow ``dt``;
    ``target``: the tensor type to name when it differs (a complex part's)."""
    got = float(result)
    name = target if target is not None else dt
    if math.isnan(number):
        if not math.isnan(got):
            raise refusal(f"constant_value {shown}: {name} has no NaN")
    elif math.isinf(number):
        if got != number:
            raise refusal(f"constant_value {shown}: {name} has no infinity")
    elif not math.isfinite(got) or abs(number) >= _overflow_threshold(dt):
        parts = float_range(dt) if target is None else f"(parts in {float_range(dt)})"
        raise refusal(f"constant_value {shown} does not fit {name} {parts}")


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
        raise not_a(value, dt, "a number that fits", "a (complex) number")
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


def constant_from_text(text: str, dtype: Any) -> Any:
    """The element of ``dtype`` that ``text`` (``--constant-value``) writes, read by the data's
    element kind, then coerced as :func:`coerce_constant_value` does, or
    :class:`AttributeValueError` naming constant_value and the rule:

    * int: a decimal integer, or a decimal number with an integral value (``1e3``, ``2.0``),
      read exactly (no float rounding);
    * float: any decimal number, ``nan``, ``inf``/``infinity`` with a sign; a number too large
      for float64 (``1e999``) is an overflow, not infinity; complex text is refused;
    * complex: Python's complex syntax (``1+2j``, spaces allowed);
    * bool: ``true``/``false``/``1``/``0`` in any case;
    * numbers and booleans are ASCII text without ``_`` (Python would read ``1_5`` as 15 and
      Arabic-Indic digits as decimals: text nobody means as a number is refused);
    * string: the text itself.
    """
    dt = np.dtype(dtype)
    kind = pad_element_kind(dt)
    if kind == "string":
        return coerce_constant_value(text, dt)
    if not text.isascii() or "_" in text:
        raise not_a(text, dt, "plain ASCII number text", "ASCII digits, without '_' separators")
    value = _PARSERS[kind](text, dt)
    return coerce_constant_value(value, dt, shown=text.strip())


def typed_attributes(attributes: Mapping[str, Any], dtype: Any) -> dict[str, Any]:
    """``attributes`` with a text ``constant_value`` turned into an element of ``dtype``."""
    typed = dict(attributes)
    if isinstance(typed.get("constant_value"), str):
        typed["constant_value"] = constant_from_text(typed["constant_value"], dtype)
    return typed


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _bool_text(text: str, dt: np.dtype) -> bool:
    word = text.strip().lower()
    if word not in _BOOL_TEXT:
        raise not_a(text, dt, "a boolean", "true, false, 0 or 1")
    return _BOOL_TEXT[word]


def _integral_text(text: str, dt: np.dtype) -> int:
    from decimal import Decimal, InvalidOperation  # exact, also for "1e3" or "2.0"

    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        raise not_a(text, dt, "an integer", "an integer") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise not_a(text, dt, "an integer", "an integer")
    return int(number)


def _real_text(text: str, dt: np.dtype) -> float:
    stripped = text.strip()
    try:
        number = float(stripped)
    except ValueError:
        try:
            complex(stripped.replace(" ", ""))
        except ValueError:
            raise not_a(text, dt, "a number", "a real number") from None
        raise refusal(f"constant_value {stripped} is complex; a {dt} tensor needs a real "
                       "number") from None
    names_infinity = stripped.lstrip("+-").lower() in ("inf", "infinity")  # not "1e999"
    if math.isinf(number) and not names_infinity:
        raise refusal(f"constant_value {stripped} does not fit {dt} {float_range(dt)}")
    return number


def _complex_text(text: str, dt: np.dtype) -> complex:
    try:
        return complex(text.strip().replace(" ", ""))
    except ValueError:
        raise not_a(text, dt, "a number", "a (complex) number") from None


_PARSERS: dict[str, Callable[[str, np.dtype], Any]] = {
    "bool": _bool_text,
    "int": _integral_text,
    "float": _real_text,
    "complex": _complex_text,
}


PAD_MODES = ("constant", "reflect", "edge", "wrap")


@dataclasses.dataclass(frozen=True)
class AxisPad:
    """What Pad does to one input axis: crop, then pad (all four >= 0)."""

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


@dataclasses.dataclass(frozen=True)
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
    def crop_slices(self) -> tuple[slice, ...]:
        """Index selecting the cropped input: ``data[plan.crop_slices]``."""
        return tuple(slice(ax.crop_begin, ax.dim - ax.crop_end) for ax in self.per_axis)

    @property
    def adds_elements(self) -> bool:
        """True when some axis gets padded, i.e. the result has a border to fill."""
        return any(ax.pad_begin or ax.pad_end for ax in self.per_axis)


def plan_pad(shape: Iterable[int], pads: Any, axes: Any = None, mode: str = "constant", *,
             dtype: Any = None) -> PadPlan:
    """Validate Pad's attributes against an input shape (and ``dtype``, when given) and give
    the output shape: axis ``axes[i]`` gets ``pads[i]`` elements before and ``pads[k + i]``
    after (negative: removed), ``dim + begin + end >= 0`` (module docstring)."""
    if dtype is not None:
        pad_element_kind(dtype)
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
    raise AttributeValueError(f"mode {mode!r} is not an ONNX Pad mode; choose constant, reflect, "
                              f"edge or wrap{hint}")


def _as_int_tuple(values: Any, name: str) -> tuple[int, ...]:
    """A 1-D sequence or array of integers (bools, floats and strings refused)."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise AttributeValueError(f"{name} must be a 1-D list of integers; got an array of "
                                      f"shape {values.shape}")
        if values.dtype.kind not in "iu":
            raise AttributeValueError(f"{name} must hold integers; got an array of {values.dtype} "
                                      "values")
        return tuple(int(v) for v in values.tolist())
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise AttributeValueError(f"{name} must be a sequence of integers; got "
                                  f"{type(values).__name__} {values!r}")
    return tuple(_as_int(v, f"{name}[{i}]") for i, v in enumerate(values))


def _as_int(value: Any, label: str) -> int:
    if not isinstance(value, (bool, np.bool_)):
        with contextlib.suppress(TypeError):
            return operator.index(value)
    raise AttributeValueError(f"{label}={value!r} is not an integer")


def _normalized_axes(axes: Any, rank: int) -> tuple[int, ...]:
    """Axes in ``[0, rank)``: ``axis + rank`` for a negative axis; all axes when None."""
    if axes is None:
        return tuple(range(rank))
    given = _as_int_tuple(axes, "axes")
    first_seen: dict[int, int] = {}
    for i, axis in enumerate(given):
        if not -rank <= axis < rank:
            span = f"[{-rank}, {rank - 1}]" if rank else "(it has no axes)"
            raise AttributeValueError(f"axes[{i}]={axis} is out of range {span} for a rank-{rank} "
                                      "input")
        normalized = axis % rank
        if normalized in first_seen:
            raise AttributeValueError(f"axes repeats axis {normalized} (given as "
                                      f"{first_seen[normalized]} and {axis})")
        first_seen[normalized] = axis
    return tuple(axis % rank for axis in given)


def _check_pad_count(pads: tuple[int, ...], n_axes: int, all_axes: bool, rank: int) -> None:
    if len(pads) != 2 * n_axes:
        need = (f"2 * rank = {2 * n_axes} for a rank-{rank} input" if all_axes
                else f"2 * len(axes) = {2 * n_axes}")
        fix = "; give axes to pad only some of them" if all_axes else ""
        raise AttributeValueError(f"pads has {len(pads)} values; it needs {need}{fix}",
                                  param=("pads", "axes"))


def _axis_pad(axis: int, dim: int, begin: int, end: int, mode: str) -> AxisPad:
    """Split the signed pads of one axis into crops and pads.  Output index ``i`` holds input
    index ``i - begin`` when that lies in ``[0, dim)``: a crop larger than the axis keeps no
    input element (constant mode fills the axis, the other modes refuse it)."""
    if dim < 0:
        raise AttributeValueError(f"shape[{axis}]={dim} is negative")
    out_dim = dim + begin + end
    if out_dim < 0:
        raise AttributeValueError(f"axis {axis} (dim {dim}, pads {begin}/{end}) would have dim + "
                                  f"begin + end = {out_dim} elements; Pad needs >= 0")
    crop_begin = min(max(-begin, 0), dim)
    crop_end = min(max(-end, 0), dim - crop_begin)
    if crop_begin + crop_end < dim:
        ax = AxisPad(dim, crop_begin, crop_end, max(begin, 0), max(end, 0))
    else:  # nothing of the input is kept: the output axis is all padding
        pad_begin = min(max(begin, 0), out_dim)
        ax = AxisPad(dim, crop_begin, crop_end, pad_begin, out_dim - pad_begin)
    if mode != "constant" and ax.cropped_dim == 0 and (begin or end):
        where = "empty after cropping" if crop_begin or crop_end else "empty"
        raise AttributeValueError(f"axis {axis} is {where} (dim {dim}, pads {begin}/{end}); {mode} "
                                  "needs at least one element")
    return ax


def fill_value(constant_value: Any, dt: np.dtype, plan: PadPlan) -> Any:
    """The element written into new border cells: ``constant_value`` coerced to ``dt``
    (validated whenever given), else the ONNX default (0, "" or False); None when the plan
    adds no constant border (other modes, or nothing padded)."""
    value = None if constant_value is None else coerce_constant_value(constant_value, dt)
    if plan.mode != "constant" or not plan.adds_elements:
        return None
    return default_constant(dt) if value is None else value


def pad(data: Any, pads: Any, constant_value: Any = None, axes: Any = None, mode: str = "constant",
        *, out: np.ndarray | None = None) -> np.ndarray:
    """ONNX Pad-25: crop the negative pads, then pad with ``mode`` (module docstring):
    ``output[i_0, ...] = data'[s_0(i_0), ...]``, ``data'`` the cropped input, ``s_a`` the mode's
    index rule (:func:`source_indices`), the constant where it gives -1.  ``constant_value`` is
    validated whenever given.  Returns a new array, or ``out`` (exactly the output's shape and
    dtype, writable, sharing no memory with ``data``): reusing it saves fresh memory's faults.
    """
    array = data if isinstance(data, np.ndarray) else np.asarray(data)
    plan = plan_pad(array.shape, pads, axes, mode, dtype=array.dtype)
    return pad_planned(array, plan, fill_value(constant_value, array.dtype, plan), out=out)


def pad_planned(
    data: np.ndarray, plan: PadPlan, fill: Any, *, out: np.ndarray | None = None
) -> np.ndarray:
    """:func:`pad` with a plan made beforehand by :func:`plan_pad` for ``data``'s shape and the
    fill element of :func:`fill_value`: the same result, without planning again."""
    if tuple(data.shape) != plan.input_shape:
        raise ValueError(f"the plan is for shape {plan.input_shape}, not {data.shape}")
    dtype = output_dtype(data.dtype, fill)
    if out is not None:
        _check_out(out, plan.output_shape, dtype, data)
    src = data[plan.crop_slices]
    shape = plan.output_shape
    short_rows = len(shape) == 1 or (len(shape) > 1 and shape[-1] < _NATIVE_ROW)
    if short_rows and dtype == data.dtype and not dtype.hasobject and _numpy_pad_agrees(plan):
        if out is not None and len(shape) == 1:  # the centre copied in place, then the ends
            (ax,) = plan.per_axis
            out[ax.pad_begin:ax.pad_begin + ax.cropped_dim] = src
            ends = [(0, ax.pad_begin), (ax.pad_begin + ax.cropped_dim, ax.out_dim)]
            return _fill_ranges(src, out, plan, fill, [ends])
        padded = _allocating(lambda: _numpy_pad(src, plan, fill), shape, dtype)
        if out is None:
            return padded
        out[...] = padded
        return out
    if out is None:
        out = _allocating(lambda: np.empty(shape, dtype), shape, dtype)
    return _fill_ranges(src, out, plan, fill, [[(0, n)] for n in shape])


def _fill_ranges(src: np.ndarray, out: np.ndarray, plan: PadPlan, fill: Any,
                 ranges: list[list[tuple[int, int]]]) -> np.ndarray:
    """Fill the boxes of ``out`` the per-axis ``ranges`` span, each cut into pieces of at most
    ``_TABLE_CHUNK`` positions an axis (index tables of bounded size, whatever the shape)."""
    chunks = [[(start, min(start + _TABLE_CHUNK, b)) for a, b in spans
               for start in range(a, b, _TABLE_CHUNK)] for spans in ranges]
    for box in itertools.product(*chunks):
        tables = [source_indices(ax, plan.mode, a, b)
                  for ax, (a, b) in zip(plan.per_axis, box, strict=True)]
        fill_from_tables(src, out[(*itertools.starmap(slice, box), ...)], tables, fill)
    return out


def _numpy_pad_agrees(plan: PadPlan) -> bool:
    """Whether ``numpy.pad`` gives the spec's result on every numpy padconv supports: numpy < 2
    breaks reflect's period where a pad is longer than its axis less one, so those take the
    index tables."""
    return plan.mode != "reflect" or all(
        max(ax.pad_begin, ax.pad_end) < ax.cropped_dim for ax in plan.per_axis)


def _numpy_pad(src: np.ndarray, plan: PadPlan, fill: Any) -> np.ndarray:
    """``numpy.pad`` of the cropped input, C-ordered: the index rules of :func:`source_indices`
    by slab copies, faster than the native fill where rows are short."""
    widths = [(ax.pad_begin, ax.pad_end) for ax in plan.per_axis]
    value = {"constant_values": 0 if fill is None else fill} if plan.mode == "constant" else {}
    padded = np.pad(src, widths, mode=plan.mode, **value)
    return padded if padded.flags.c_contiguous else padded.copy(order="C")


def _allocating(make: Any, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """``make()``, an array of ``shape``; a refusal when memory runs out."""
    try:
        return make()
    except (ValueError, MemoryError):
        nbytes = math.prod(shape) * dt.itemsize
        raise OutputTooLargeError(f"the padded output of shape {shape} ({dt}) needs {nbytes} "
                                  "bytes, more than can be allocated") from None


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
    try:  # a bound on the work to prove two strided arrays apart; unproven counts as shared
        shared = np.shares_memory(out, data, max_work=100_000)
    except np.exceptions.TooHardError:
        shared = True
    if shared:
        raise AttributeValueError("out shares memory with data; the padded output needs an array "
                                  "of its own")


# numpy views of each native element size: only the bytes of an element are copied
_NATIVE_VIEWS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}
_PARALLEL_BYTES = 1 << 18  # outputs from this size on are filled by all the cores
_TABLE_CHUNK = 1 << 16  # output positions of an axis filled at a time (8 bytes each in a table)
_NATIVE_ROW = 32  # shortest last axis filled natively (numpy.pad's slab copies beat short rows)


def source_indices(ax: AxisPad, mode: str, start: int = 0, stop: int | None = None) -> np.ndarray:
    """The cropped input index each output position ``start .. stop-1`` of an axis reads, -1
    for the constant: with ``j = i - pad_begin`` and ``n`` the cropped length, ``j`` inside
    ``[0, n)`` reads ``j``; outside it constant -> -1, edge -> ``clip(j, 0, n-1)``, wrap ->
    ``j mod n``, reflect -> ``m = j mod 2(n-1)``, ``m if m < n else 2(n-1) - m`` (0 if n = 1)."""
    j = np.arange(start, ax.out_dim if stop is None else stop, dtype=np.int64) - ax.pad_begin
    n = max(ax.cropped_dim, 1)  # an empty axis is only padded in constant mode
    if mode == "edge":
        return np.clip(j, 0, n - 1)
    if mode == "wrap":
        return j % n
    if mode == "reflect":
        m = j % max(2 * n - 2, 1)
        return np.where(m < n, m, 2 * n - 2 - m)
    return np.where((j >= 0) & (j < ax.cropped_dim), j, -1)


def fill_from_tables(src: np.ndarray, out: np.ndarray, tables: Sequence[np.ndarray],
                     fill: Any) -> None:
    """``out[i_0, ..., i_r] = src[tables[0][i_0], ..., tables[r][i_r]]``, or ``fill`` where an
    index is -1: natively for elements of 1, 2, 4, 8 or 16 bytes (``src`` of ``out``'s dtype),
    on all the cores for outputs of ``_PARALLEL_BYTES`` or more; else by numpy indexing."""
    view = _NATIVE_VIEWS.get(out.itemsize)
    if view is None or src.dtype != out.dtype or out.dtype.hasobject:
        if src.size:  # -1 reads index 0, then gets the fill
            out[...] = src[np.ix_(*(np.maximum(table, 0) for table in tables))] if src.ndim else src
        for axis, table in enumerate(tables):
            out[(slice(None),) * axis + (table < 0,)] = fill
        return
    from padconv_cli.kernels import native

    element = b"" if fill is None else np.array(fill, dtype=out.dtype).tobytes()
    threads = native.thread_count() if out.nbytes >= _PARALLEL_BYTES else 1
    native.extension().pad_into(src.view(view), out.view(view), tuple(tables), element, threads)
