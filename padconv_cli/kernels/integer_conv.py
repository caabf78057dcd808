"""ONNX ``ConvInteger`` and ``QLinearConv`` (opset 10): the public kernels.

Both compute the exact integer sums
``acc[n, m, o] = sum_{c, k} (Xpad[n, g*C/G + c, o*s + k*d] - x_zero_point) * (W[m, c, k] -
w_zero_point[m])``, where the padding holds ``x_zero_point`` (so a padded tap adds nothing:
ruling ``integer-padding-is-zero-point``). ConvInteger returns them reduced modulo 2**32 as
int32; QLinearConv adds the int32 bias and requantizes exactly
(:mod:`padconv_cli.kernels.requantize`).

How the sums are exact. The native integer kernel (``qconv`` of the native core: AVX-512 VNNI,
AVX2 or portable, picked like Conv's by ``PADCONV_NATIVE_ISA``) sums the products in 32-bit
integers modulo 2**32 with no intermediate saturation: that is ConvInteger's int32 result
exactly, and QLinearConv's exact sum whenever ``C/G * prod(k) * 255 * 255 < 2**31`` (no sum
can then leave int32). Beyond that, QLinearConv's sums run in the native Conv core
(:mod:`padconv_cli.kernels.conv`) on the zero-point-shifted values as floats: each
product is an integer of magnitude at most 255 * 255 < 2**16 and every partial sum of channel
``m`` at most ``max|x - xz| * sum|W[m] - wz[m]|``, so float32 is exact when that bound is below
2**24 and float64 below 2**53 (any ``C/G * prod(k)`` below 2**37). Integer sums are exact in
any order: results depend neither on the thread count nor on the instruction set.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from padconv_cli.errors import AttributeValueError
from padconv_cli.kernels.conv import ConvPlan
from padconv_cli.kernels.quantized_plan import (
    ConvIntegerPlan,
    Operand,
    QLinearConvPlan,
    check_scale_values,
    plan_conv_integer,
    plan_qlinear_conv,
)
from padconv_cli.kernels.requantize import (
    channel_multipliers,
    float64_multipliers,
    requantize,
    settle_near_ties,
)

__all__ = ["conv_integer", "conv_integer_planned", "exact_sums", "plan_conv_integer",
           "plan_qlinear_conv", "qlinear_conv", "qlinear_conv_planned", "working_bytes",
           "wrapped_sums"]

FLOAT32_EXACT = 2**24
FLOAT64_EXACT = 2**53


def conv_integer(
    x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
    w_zero_point: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None, group: int = 1,
    kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX ConvInteger-10: ``Y[n, m, o] = sum_{c, k} (Xpad - x_zero_point) * (W[m, c, k] -
    w_zero_point[m])`` in int32, wrapping modulo 2**32 (the padding holds ``x_zero_point``).

    X and W are int8 or uint8 in any combination; ``x_zero_point`` is a scalar of X's type,
    ``w_zero_point`` a scalar or one value per output channel of W's type (both default 0).
    """
    arrays = [np.asarray(x), np.asarray(w), _optional(x_zero_point), _optional(w_zero_point)]
    plan = plan_conv_integer(
        *(None if a is None else Operand.of(a) for a in arrays), auto_pad=auto_pad,
        dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
        strides=strides)
    return conv_integer_planned(plan, *arrays)


def conv_integer_planned(plan: ConvIntegerPlan, x: np.ndarray, w: np.ndarray,
                         x_zero_point: np.ndarray | None = None,
                         w_zero_point: np.ndarray | None = None) -> np.ndarray:
    """:func:`conv_integer` on a plan made beforehand by :func:`plan_conv_integer`."""
    x, w = np.asarray(x), np.asarray(w)
    _check_plan(plan.conv, x, w)
    return wrapped_sums(plan.conv, x, _scalar(x_zero_point), w,
                        _per_channel(w_zero_point, w.shape[0]))


def qlinear_conv(
    x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray, w: np.ndarray,
    w_scale: np.ndarray, w_zero_point: np.ndarray, y_scale: np.ndarray,
    y_zero_point: np.ndarray, b: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None, group: int = 1,
    kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX QLinearConv-10: ``y = saturate(round_half_to_even(acc * x_scale * w_scale[m] /
    y_scale) + y_zero_point)`` with ``acc = B[m] + sum (Xpad - x_zero_point) * (W - w_zero_point
    [m])`` exact and the quotient rounded once from its real value.

    X, W and Y (``y_zero_point``'s type) are int8 or uint8; scales are positive finite float32,
    per tensor or (``w_scale``, ``w_zero_point``) per output channel; B is int32.
    """
    arrays = [np.asarray(a) for a in (x, x_scale, x_zero_point, w, w_scale, w_zero_point,
                                      y_scale, y_zero_point)]
    bias = _optional(b)
    operands = [Operand.of(a) for a in arrays] + [None if bias is None else Operand.of(bias)]
    plan = plan_qlinear_conv(
        *operands, auto_pad=auto_pad, dilations=dilations, group=group,
        kernel_shape=kernel_shape, pads=pads, strides=strides)
    return qlinear_conv_planned(plan, *arrays, bias)


def qlinear_conv_planned(plan: QLinearConvPlan, x: np.ndarray, x_scale: np.ndarray,
                         x_zero_point: np.ndarray, w: np.ndarray, w_scale: np.ndarray,
                         w_zero_point: np.ndarray, y_scale: np.ndarray,
                         y_zero_point: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """:func:`qlinear_conv` on a plan made beforehand by :func:`plan_qlinear_conv`; checks the
    scale values (finite, > 0, float32 numbers) before any work."""
    op = "QLinearConv"
    xs = check_scale_values(op, "x_scale", x_scale).reshape(-1)[0]
    ws = check_scale_values(op, "w_scale", w_scale).reshape(-1)
    ys = check_scale_values(op, "y_scale", y_scale).reshape(-1)[0]
    x, w = np.asarray(x), np.asarray(w)
    _check_plan(plan.conv, x, w)
    m = w.shape[0]
    xz, wz = _scalar(x_zero_point), _per_channel(w_zero_point, m)
    if fits_int32(plan.conv):  # exact int32 sums, requantized by the native tasks
        return _requantized_sums(plan, x, xz, w, wz, b, float(xs), ws, float(ys),
                                 _scalar(y_zero_point))
    multipliers = channel_multipliers(float(xs), ws, float(ys))
    acc = exact_sums(plan.conv, x, xz, w, wz)
    if b is not None:
        acc += np.asarray(b, np.int64).reshape((1, m) + (1,) * (acc.ndim - 2))
    return requantize(acc, multipliers, _scalar(y_zero_point), plan.y_dtype)


def _requantized_sums(plan: QLinearConvPlan, x: np.ndarray, xz: int, w: np.ndarray,
                      wz: np.ndarray, b: np.ndarray | None, xs: float, ws: np.ndarray,
                      ys: float, yz: int) -> np.ndarray:
    """QLinearConv's result when every sum fits in int32: each native task requantizes the
    sums it has just made from the float64 estimate (as ``requantize.requantize_int32``), and
    the elements near a tie are then decided exactly."""
    conv = plan.conv
    m = conv.w_shape[0]
    y = np.empty(conv.output_shape, plan.y_dtype)
    unsure = np.empty(conv.output_shape, np.uint8)
    bias = None if b is None else np.ascontiguousarray(np.asarray(b).reshape(-1), np.int32)
    requantization = (bias, float64_multipliers(xs, ws, ys, m), yz, y, unsure)
    acc, marked = _native_sums(conv, x, xz, w, wz, requantization)
    if not marked:
        return y
    return settle_near_ties(y, unsure, acc, bias, xs, ws, ys, yz)


# --- the exact sums ---------------------------------------------------------------------------


def wrapped_sums(plan: ConvPlan, x: np.ndarray, x_zero_point: int, w: np.ndarray,
                 w_zero_points: np.ndarray, requantization: tuple | None = None) -> np.ndarray:
    """int32 ``sum (Xpad - xz) * (W[m] - wz[m])`` modulo 2**32, by the native integer kernel;
    with ``requantization = (bias, float64 factors, y_zero_point, y, unsure)`` its tasks also
    requantize what they summed into ``y`` and mark the near-ties (qconv.h)."""
    return _native_sums(plan, x, x_zero_point, w, w_zero_points, requantization)[0]


def _native_sums(plan: ConvPlan, x: np.ndarray, x_zero_point: int, w: np.ndarray,
                 w_zero_points: np.ndarray, requantization: tuple | None = None
                 ) -> tuple[np.ndarray, int]:
    """:func:`wrapped_sums` and the number of elements its requantization marked near a tie
    (0 without one)."""
    from padconv_cli.kernels import native

    y = np.empty(plan.output_shape, np.int32)
    marked = native.extension().qconv(
        np.ascontiguousarray(x), x.dtype == np.int8, np.ascontiguousarray(w), w.dtype == np.int8,
        int(x_zero_point), np.ascontiguousarray(w_zero_points, dtype=np.int32), y,
        plan.strides, plan.dilations, plan.pads_begin, plan.group, native.thread_count(),
        native.selected_isa(), requantization)
    return y, marked or 0


def exact_sums(plan: ConvPlan, x: np.ndarray, x_zero_point: int, w: np.ndarray,
               w_zero_points: np.ndarray) -> np.ndarray:
    """int64 ``sum (Xpad - xz) * (W[m] - wz[m])`` exactly (module docstring)."""
    from padconv_cli.kernels.conv import convolve

    if fits_int32(plan):
        return wrapped_sums(plan, x, x_zero_point, w, w_zero_points).astype(np.int64)

    m = w.shape[0]
    shifted_w = w.astype(np.int32) - w_zero_points.reshape((m,) + (1,) * (w.ndim - 1))
    if shifted_w.size and plan.w_shape[1] * np.prod(plan.kernel_shape) >= 2**37:
        raise AttributeValueError(
            "integer Conv sums of 2**37 or more products are beyond the exact float64 sums",
            param="w")
    dtype = _float_type(x, x_zero_point, shifted_w)
    values = convolve(plan, x.astype(dtype) - dtype.type(x_zero_point),
                      shifted_w.astype(dtype), None)
    return values.astype(np.int64)


def fits_int32(plan: ConvPlan) -> bool:
    """No sum of ``C/G * prod(k)`` products of at most 255 * 255 can leave int32."""
    return plan.w_shape[1] * math.prod(plan.kernel_shape) * 255 * 255 < 2**31


def _float_type(x: np.ndarray, x_zero_point: int, shifted_w: np.ndarray) -> np.dtype:
    """float32 when every partial sum stays below 2**24, else float64."""
    if not x.size or not shifted_w.size:
        return np.dtype(np.float32)
    x_range = max(abs(int(x.max()) - x_zero_point), abs(int(x.min()) - x_zero_point))
    per_channel = np.abs(shifted_w).reshape(shifted_w.shape[0], -1).sum(axis=1, dtype=np.int64)
    bound = x_range * int(per_channel.max())
    return np.dtype(np.float32) if bound < FLOAT32_EXACT else np.dtype(np.float64)


def working_bytes(plan: ConvPlan, x_size: int) -> int:
    """Memory besides the inputs and Y, at most (the float path, needed beyond 33 000 products
    per sum; the native kernel needs far less: packed W, a panel of about 192 KiB per thread,
    or with every stride 1 (AVX2, AVX-512 VNNI) the padded X its block of outputs reads):
    X and W shifted as float64, the float64 sums, their int64 copy, and the Conv core's own
    (:func:`padconv_cli.kernels.conv.working_bytes` for float64)."""
    from padconv_cli.kernels import conv as conv_kernel

    out = int(np.prod(plan.output_shape))
    return (8 * (x_size + 2 * int(np.prod(plan.w_shape)) + 2 * out)
            + conv_kernel.working_bytes(plan, np.dtype(np.float64)))


# --- small helpers ----------------------------------------------------------------------------


def _optional(value: object) -> np.ndarray | None:
    return None if value is None else np.asarray(value)


def _scalar(value: object) -> int:
    return 0 if value is None else int(np.asarray(value).reshape(-1)[0])


def _per_channel(value: object, m: int) -> np.ndarray:
    if value is None:
        return np.zeros(m, np.int32)
    values = np.asarray(value).astype(np.int32).reshape(-1)
    return values if values.size == m else np.full(m, values[0], np.int32)


def _check_plan(plan: ConvPlan, x: np.ndarray, w: np.ndarray) -> None:
    if (x.shape, w.shape) != (plan.x_shape, plan.w_shape):
        raise ValueError(f"the plan is for X {plan.x_shape} and W {plan.w_shape}, not "
                         f"{x.shape} and {w.shape}")
