"""Oracles for the convolution family, written from the ONNX text, independent of padconv.

* :func:`oracle_conv_transpose`: float64 ConvTranspose as the scatter-add of its definition:
  every input element ``X[n, c, i]`` adds ``X * W[c, m, k]`` at the un-cropped output position
  ``i * s + k * d`` of each output channel ``m`` of its group; the output is that buffer
  cropped by the begin pads (or extended, for a negative pad) to the output length.
* :func:`oracle_conv_integer`: int64 direct loops over ``(x - x_zero_point) * (w -
  w_zero_point)``, the padding holding ``x_zero_point``.
* :func:`oracle_qlinear_conv`: the exact rational ``acc * x_scale * w_scale[m] / y_scale``
  (:class:`fractions.Fraction` of the float32 scales), rounded half to even, plus the zero
  point, saturated.
* :func:`conv_transpose_error_bound`: each output is a sum of at most ``C/group * prod(k)``
  products plus the bias: ``(n + 1) * (eps_acc + eps_64) * S`` with ``S`` the oracle on
  absolute values, plus one rounding of the result for narrow types.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np


def transpose_pads(x_spatial, kernel, strides, dilations, output_padding, auto_pad, pads,
                   output_shape):
    """Begin pads and output lengths per axis, from the operator text's formulas (floor
    division for the split of a derived total)."""
    rank = len(x_spatial)
    output_padding = output_padding or [0] * rank
    begins, outs = [], []
    for axis, (size, k, s, d, op) in enumerate(zip(x_spatial, kernel, strides, dilations,
                                                   output_padding, strict=True)):
        full = s * (size - 1) + op + (k - 1) * d + 1
        if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = output_shape[axis] if output_shape is not None else size * s
            total = full - out
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        else:
            begin = 0 if auto_pad == "VALID" or not pads else pads[axis]
            end = 0 if auto_pad == "VALID" or not pads else pads[axis + rank]
            out = full - begin - end
        begins.append(begin)
        outs.append(out)
    return begins, outs


def oracle_conv_transpose(X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1,
                          output_padding=None, output_shape=None, pads=None, strides=None,
                          kernel_shape=None):
    """float64 ConvTranspose by scatter-add (module docstring)."""
    X = np.asarray(X, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    n, c = X.shape[:2]
    mg = W.shape[1]
    kernel = W.shape[2:]
    rank = len(kernel)
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    begins, outs = transpose_pads(X.shape[2:], kernel, strides, dilations, output_padding,
                                  auto_pad, pads, output_shape)
    Y = np.zeros((n, mg * group, *outs))
    cg = c // group
    for image, channel in itertools.product(range(n), range(c)):
        g = channel // cg
        for i in np.ndindex(*X.shape[2:]):
            value = X[(image, channel, *i)]
            for k in np.ndindex(*kernel):
                o = [ii * s + kk * d - b for ii, s, kk, d, b in
                     zip(i, strides, k, dilations, begins, strict=True)]
                if all(0 <= oo < size for oo, size in zip(o, outs, strict=True)):
                    for m in range(mg):
                        Y[(image, g * mg + m, *o)] += value * W[(channel, m, *k)]
    if B is not None:
        Y += np.asarray(B, dtype=np.float64).reshape((-1,) + (1,) * rank)
    return Y


def conv_transpose_error_bound(X, W, B=None, *, result_dtype=None, **attrs) -> np.ndarray:
    """Per-element bound on |padconv - oracle|: ``(n + 1) * (eps_acc + eps_64) * S`` with
    ``n = C/group * prod(k)`` and ``S`` the oracle on absolute values, plus ``eps_out * |y|``
    for a result narrower than its float32 accumulation."""
    result_dtype = np.dtype(result_dtype if result_dtype is not None else np.asarray(X).dtype)
    X, W = np.asarray(X), np.asarray(W)
    group = attrs.get("group", 1)
    n = X.shape[1] // group * math.prod(W.shape[2:])
    magnitude = oracle_conv_transpose(np.abs(X.astype(np.float64)), np.abs(W.astype(np.float64)),
                                      None if B is None else np.abs(np.asarray(B, np.float64)),
                                      **attrs)
    acc = np.float64 if result_dtype == np.float64 else np.float32
    bound = (n + 1) * (float(np.finfo(acc).eps) + float(np.finfo(np.float64).eps)) * magnitude
    if result_dtype.itemsize < np.dtype(acc).itemsize:
        eps_out = float(ml_dtypes.finfo(result_dtype).eps)
        exact = oracle_conv_transpose(X, W, B, **attrs)
        bound = bound * (1 + eps_out) + eps_out * np.abs(exact)
    return bound


def assert_transpose_within_bound(actual, X, W, B=None, **attrs) -> None:
    """``actual`` equals :func:`oracle_conv_transpose` within the error bound; non-finite
    values must match exactly."""
    expected = oracle_conv_transpose(X, W, B, **attrs)
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    got = actual.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(expected)],
                                  expected[~finite & ~np.isnan(expected)])
    bound = conv_transpose_error_bound(X, W, B, result_dtype=actual.dtype, **attrs)
    error = np.abs(np.where(finite, got, 0.0) - np.where(finite, expected, 0.0))
    outside = finite & ~(error <= bound)
    assert not outside.any(), (f"{int(outside.sum())} of {outside.size} outside the bound; "
                               f"worst {float(np.max(error[outside] - bound[outside])):.3g}")


# --- integer operators -----------------------------------------------------------------------


def conv_pads(x_spatial, kernel, strides, dilations, auto_pad, pads):
    """Conv's begin/end pads per axis, from the spec's auto_pad formulas."""
    rank = len(x_spatial)
    if auto_pad in ("NOTSET", None):
        pads = pads or [0] * (2 * rank)
        return list(pads[:rank]), list(pads[rank:])
    begins, ends = [], []
    for size, k, s, d in zip(x_spatial, kernel, strides, dilations, strict=True):
        if auto_pad == "VALID":
            begins.append(0)
            ends.append(0)
            continue
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small = total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else total - small)
        ends.append(total - small if auto_pad == "SAME_UPPER" else small)
    return begins, ends


def integer_sums(x, w, x_zero_point=0, w_zero_point=0, *, auto_pad="NOTSET", dilations=None,
                 group=1, pads=None, strides=None, kernel_shape=None):
    """int64 ``sum (x - xz) * (w - wz[m])`` by direct loops, the padding holding ``xz``."""
    x = np.asarray(x).astype(np.int64)
    w = np.asarray(w).astype(np.int64)
    xz = int(np.asarray(x_zero_point).reshape(-1)[0]) if x_zero_point is not None else 0
    wz = np.broadcast_to(np.asarray(0 if w_zero_point is None else w_zero_point,
                                    dtype=np.int64).reshape(-1), (w.shape[0],))
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    kernel = w.shape[2:]
    rank = len(kernel)
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    begins, ends = conv_pads(x.shape[2:], kernel, strides, dilations, auto_pad, pads)
    outs = [(size + b + e - (k - 1) * d - 1) // s + 1 for size, b, e, k, d, s in
            zip(x.shape[2:], begins, ends, kernel, dilations, strides, strict=True)]
    y = np.zeros((n, m, *outs), dtype=np.int64)
    mg = m // group
    for image, channel in itertools.product(range(n), range(m)):
        first = channel // mg * cg
        for o in np.ndindex(*outs):
            total = 0
            for k in np.ndindex(*kernel):
                index = [oo * s + kk * d - b for oo, s, kk, d, b in
                         zip(o, strides, k, dilations, begins, strict=True)]
                inside = all(0 <= i < size for i, size in zip(index, x.shape[2:], strict=True))
                for cc in range(cg):
                    xv = x[(image, first + cc, *index)] if inside else xz
                    total += int(xv - xz) * int(w[(channel, cc, *k)] - wz[channel])
            y[(image, channel, *o)] = total
    return y


def oracle_conv_integer(x, w, x_zero_point=None, w_zero_point=None, **attrs):
    """ConvInteger: the exact sums reduced modulo 2**32 into int32."""
    sums = integer_sums(x, w, x_zero_point, w_zero_point, **attrs)
    return ((sums + 2**31) % 2**32 - 2**31).astype(np.int32)


def exact_requantize(acc: int, x_scale: float, w_scale: float, y_scale: float,
                     y_zero_point: int, low: int, high: int) -> int:
    """``saturate(round_half_even(acc * xs * ws / ys) + yz)`` in exact rational arithmetic."""
    value = Fraction(int(acc)) * Fraction(float(x_scale)) * Fraction(float(w_scale)) / \
        Fraction(float(y_scale))
    floor = math.floor(value)
    rest = value - floor
    rounded = floor + (1 if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2)
                       else 0)
    return min(high, max(low, rounded + int(y_zero_point)))


def oracle_qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                        y_zero_point, b=None, **attrs):
    """QLinearConv: exact sums plus the bias, requantized exactly (:func:`exact_requantize`)."""
    sums = integer_sums(x, w, x_zero_point, w_zero_point, **attrs)
    if b is not None:
        sums = sums + np.asarray(b, dtype=np.int64).reshape((-1,) + (1,) * (sums.ndim - 2))
    m = sums.shape[1]
    ws = np.broadcast_to(np.asarray(w_scale, dtype=np.float32).reshape(-1), (m,))
    out_dtype = np.asarray(y_zero_point).dtype
    info = np.iinfo(out_dtype)
    y = np.empty(sums.shape, dtype=out_dtype)
    yz = int(np.asarray(y_zero_point).reshape(-1)[0])
    xs = float(np.asarray(x_scale, dtype=np.float32).reshape(-1)[0])
    ys = float(np.asarray(y_scale, dtype=np.float32).reshape(-1)[0])
    for index in np.ndindex(*sums.shape):
        y[index] = exact_requantize(int(sums[index]), xs, float(ws[index[1]]), ys, yz,
                                    info.min, info.max)
    return y
