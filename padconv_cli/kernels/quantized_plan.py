"""Planning of ONNX ``ConvInteger`` and ``QLinearConv`` (opset 10): types, zero points, scales.

Both operators take every Conv attribute and Conv's shape rules (W is ``(M, C/group, k...)``):
the geometry is a :class:`~padconv_cli.kernels.conv.ConvPlan` from
:func:`~padconv_cli.kernels.conv.plan_conv`. On top of it this module checks, from shapes
and element types only (no data is read), what the integer operators add: X and W int8 or
uint8 in any combination, zero points of their tensor's type, scalar or (for W) one per output
channel, float32 scales of matching lengths, Y's type from ``y_zero_point`` and an int32 bias.
The values of the scales (positive, finite) are checked by :func:`check_scale_values`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError
from padconv_cli.kernels.conv import ConvPlan, plan_conv

INTEGER_DTYPES = ("int8", "uint8")
_INTEGER_TYPES = (np.dtype(np.int8), np.dtype(np.uint8))


@dataclass(frozen=True)
class Operand:
    """Shape and element type of one input, all planning needs of it."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @classmethod
    def of(cls, array: object) -> Operand:
        """The operand of an array (anything numpy can take)."""
        array = np.asarray(array)
        return cls(tuple(array.shape), array.dtype)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class ConvIntegerPlan:
    """A ConvInteger call resolved: the Conv geometry, the element types, whether
    ``w_zero_point`` is per output channel, and the rulings applied."""

    conv: ConvPlan
    x_dtype: np.dtype
    w_dtype: np.dtype
    w_zero_point_per_channel: bool
    rulings: tuple[str, ...]

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.conv.output_shape

    @property
    def output_dtype(self) -> np.dtype:
        return np.dtype(np.int32)


@dataclass(frozen=True)
class QLinearConvPlan:
    """A QLinearConv call resolved: the Conv geometry, X/W/Y element types, whether W's scale
    and zero point are per output channel, and the rulings applied."""

    conv: ConvPlan
    x_dtype: np.dtype
    w_dtype: np.dtype
    y_dtype: np.dtype
    w_scale_per_channel: bool
    w_zero_point_per_channel: bool
    has_bias: bool
    rulings: tuple[str, ...]

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.conv.output_shape

    @property
    def output_dtype(self) -> np.dtype:
        return self.y_dtype


def plan_conv_integer(
    x: Operand, w: Operand, x_zero_point: Operand | None = None,
    w_zero_point: Operand | None = None, *, auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None, group: int = 1,
    kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> ConvIntegerPlan:
    """Check ConvInteger's types, zero points and attributes: X and W int8/uint8,
    ``x_zero_point`` a scalar of X's type, ``w_zero_point`` a scalar or ``(M,)`` of W's type,
    Conv's geometry (:func:`plan_conv`). Raises a domain error with ``param`` on a violation."""
    op = "ConvInteger"
    _integer_type(op, "x", x)
    _integer_type(op, "w", w)
    conv = _geometry(op, x, w, None, auto_pad=auto_pad, dilations=dilations, group=group,
                     kernel_shape=kernel_shape, pads=pads, strides=strides)
    if x_zero_point is not None:
        _zero_point(op, "x_zero_point", x_zero_point, x, per_channel_length=None)
    per_channel = False
    if w_zero_point is not None:
        per_channel = _zero_point(op, "w_zero_point", w_zero_point, w,
                                  per_channel_length=conv.w_shape[0])
    rulings = ["conv-integer-int32-wraps"]
    if any(conv.pads):
        rulings.insert(0, "integer-padding-is-zero-point")
    return ConvIntegerPlan(conv, x.dtype, w.dtype, per_channel, tuple(rulings))


def plan_qlinear_conv(
    x: Operand, x_scale: Operand, x_zero_point: Operand, w: Operand, w_scale: Operand,
    w_zero_point: Operand, y_scale: Operand, y_zero_point: Operand, b: Operand | None = None,
    *, auto_pad: str = "NOTSET", dilations: Sequence[int] | None = None, group: int = 1,
    kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> QLinearConvPlan:
    """Check QLinearConv's types, scales, zero points, bias and attributes: X, W int8/uint8
    with zero points of their types; Y's type is ``y_zero_point``'s (int8/uint8); scales are
    float32; ``x_scale``, ``x_zero_point``, ``y_scale``, ``y_zero_point`` scalars;
    ``w_scale`` and ``w_zero_point`` scalars or ``(M,)``; B int32 of shape ``(M,)``."""
    op = "QLinearConv"
    _integer_type(op, "x", x)
    _integer_type(op, "w", w)
    _integer_type(op, "y_zero_point", y_zero_point)
    conv = _geometry(op, x, w, None, auto_pad=auto_pad, dilations=dilations, group=group,
                     kernel_shape=kernel_shape, pads=pads, strides=strides)
    m = conv.w_shape[0]
    _zero_point(op, "x_zero_point", x_zero_point, x, per_channel_length=None)
    _zero_point(op, "y_zero_point", y_zero_point, y_zero_point, per_channel_length=None)
    w_zp_per_channel = _zero_point(op, "w_zero_point", w_zero_point, w, per_channel_length=m)
    _scale(op, "x_scale", x_scale, per_channel_length=None)
    _scale(op, "y_scale", y_scale, per_channel_length=None)
    w_scale_per_channel = _scale(op, "w_scale", w_scale, per_channel_length=m)
    if b is not None:
        _bias(op, b, m)
    rulings = ["qlinear-exact-accumulation", "qlinear-exactly-rounded"]
    if any(conv.pads):
        rulings.insert(0, "integer-padding-is-zero-point")
    return QLinearConvPlan(conv, x.dtype, w.dtype, y_zero_point.dtype, w_scale_per_channel,
                           w_zp_per_channel, b is not None, tuple(rulings))


def check_scale_values(op: str, name: str, values: np.ndarray) -> np.ndarray:
    """The scale as float32 after checking every value is finite and > 0 and (for a type
    other than float32) converts to float32 exactly: the scales of ONNX are float32."""
    array = np.asarray(values)
    if array.dtype == np.float32 and _positive_and_finite(array):
        return array
    wide = array.astype(np.float64)
    if not np.all(np.isfinite(wide)) or not np.all(wide > 0):
        bad = wide[~(np.isfinite(wide) & (wide > 0))].reshape(-1)[0]
        raise AttributeValueError(f"{op} input {name} must be finite and > 0, got {bad!r}",
                                  param=name)
    narrow = array.astype(np.float32)
    if not np.array_equal(narrow.astype(np.float64), wide):
        raise UnsupportedDtypeError(
            f"{op} input {name} must be float32; its {array.dtype.name} values are not all "
            f"float32 values (convert them to float32 first)", param=name)
    return narrow


def _positive_and_finite(array: np.ndarray) -> bool:
    """Every value in (0, inf): not zero, negative, infinite or NaN."""
    if array.size == 1:
        return 0.0 < float(array.reshape(-1)[0]) < math.inf
    return bool(((array > 0) & (array < np.inf)).all())


# --- checks -----------------------------------------------------------------------------------


def _geometry(op: str, x: Operand, w: Operand, b: Operand | None, **attributes: object
              ) -> ConvPlan:
    """Conv's geometry; its messages name this operator."""
    try:
        return plan_conv(x.shape, w.shape, None, **attributes)  # type: ignore[arg-type]
    except AttributeValueError as error:
        message = str(error).replace("Conv ", f"{op} ", 1)
        raise AttributeValueError(message, param=error.param or _leading_name(str(error))) \
            from None


def _leading_name(message: str) -> str | tuple[str, ...] | None:
    """The parameter a Conv message is about: the attribute it names, the input X or W, W
    for a channel mismatch, group for output channels, pads for an empty output."""
    words = message.split()
    following = {marker: words[words.index(marker) + 1].rstrip(",:")
                 for marker in ("attribute", "attributes", "input", "output")
                 if marker in words and words.index(marker) + 1 < len(words)}
    if "attributes" in following:
        return ("pads", "auto_pad")
    if "attribute" in following:
        return following["attribute"]
    if following.get("input") in ("X", "W"):
        return following["input"].lower()
    if following.get("input") == "channels" or "kernel" in words[:3]:
        return "w"
    if following.get("output") == "channels":
        return "group"
    if following.get("output") == "spatial":
        return "pads"
    return None


def _integer_type(op: str, name: str, operand: Operand) -> None:
    if operand.dtype not in _INTEGER_TYPES:
        raise UnsupportedDtypeError(
            f"{op} input {name} must be int8 or uint8, got {operand.dtype.name}", param=name)


def _zero_point(op: str, name: str, zero_point: Operand, of: Operand,
                per_channel_length: int | None) -> bool:
    """A zero point has its tensor's type and one value, or (per channel) ``M``; True when it
    is per channel."""
    if zero_point.dtype != of.dtype:
        raise UnsupportedDtypeError(
            f"{op} input {name} must have the type of its tensor ({of.dtype.name}), got "
            f"{zero_point.dtype.name}", param=name)
    return _length(op, name, zero_point, per_channel_length)


def _scale(op: str, name: str, scale: Operand, per_channel_length: int | None) -> bool:
    if scale.dtype.kind != "f":
        raise UnsupportedDtypeError(f"{op} input {name} must be float32, got "
                                    f"{scale.dtype.name}", param=name)
    return _length(op, name, scale, per_channel_length)


def _length(op: str, name: str, operand: Operand, per_channel_length: int | None) -> bool:
    """A scalar (any shape of one element, rank <= 1) or, when allowed, a vector ``(M,)``."""
    if len(operand.shape) <= 1 and operand.size == 1:
        return False
    if per_channel_length is not None and operand.shape == (per_channel_length,):
        return True
    allowed = "a scalar" if per_channel_length is None else \
        f"a scalar or one value per output channel, shape ({per_channel_length},)"
    raise AttributeValueError(f"{op} input {name} must be {allowed}, got shape "
                              f"{list(operand.shape)}", param=name)


def _bias(op: str, b: Operand, m: int) -> None:
    if b.dtype != np.dtype(np.int32):
        raise UnsupportedDtypeError(f"{op} bias B must be int32, got {b.dtype.name}", param="B")
    if b.shape != (m,):
        raise AttributeValueError(f"{op} bias B must have shape (M,) = ({m},), got "
                                  f"{list(b.shape)}", param="B")
