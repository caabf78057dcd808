"""Taps and outputs that read only padding: found exactly, and cutting them off changes no bit
of the result (NaN from ``0 * inf`` on the padding, bias, signed zeros, every dtype)."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from oracles import assert_conv_within_bound

import padconv_cli.kernels.conv as conv_module
from padconv_cli.kernels.conv import conv, plan_conv


def _read_pairs(length, kernel, s, d, p, out):
    return [(o, k) for o in range(out) for k in range(kernel) if 0 <= o * s + k * d - p < length]


AXES = [
    (length, kernel, s, d, p, e)
    for length, kernel, s, d, p, e in itertools.product(
        range(0, 5), range(1, 4), range(1, 4), (1, 2, 5), (0, 1, 3, 7), (0, 2, 6))
    if (length + p + e - (kernel - 1) * d - 1) // s + 1 > 0
]


def test_axis_cut_keeps_exactly_the_taps_and_outputs_that_read_x():
    for length, kernel, s, d, p, e in AXES:
        out = (length + p + e - (kernel - 1) * d - 1) // s + 1
        pairs = _read_pairs(length, kernel, s, d, p, out)
        cut = conv_module.axis_cut(length, kernel, s, d, p, out)
        case = f"L={length} K={kernel} s={s} d={d} pads=({p}, {e})"
        if not pairs:
            assert cut is None, case
            continue
        taps = [k for _, k in pairs]
        outputs = [o for o, _ in pairs]
        assert cut.taps == (min(taps), max(taps)), case
        assert cut.outputs == (min(outputs), max(outputs)), case
        read = [o * s + k * d - p for o, k in pairs]
        assert cut.inputs[0] <= min(read) and max(read) < cut.inputs[1] <= length, case


def _padding_products_oracle(X, W, B, strides, dilations, pads):
    """float64 loops over every tap, a tap on the padding adding ``0 * w`` (NaN for inf)."""
    X, W = X.astype(np.float64), W.astype(np.float64)
    rank = X.ndim - 2
    begins = pads[:rank]
    out = [(n + pads[a] + pads[rank + a] - (k - 1) * d - 1) // s + 1
           for a, (n, k, s, d) in enumerate(zip(X.shape[2:], W.shape[2:], strides, dilations,
                                                  strict=True))]
    Y = np.zeros((X.shape[0], W.shape[0], *out))
    with np.errstate(invalid="ignore"):
        for n, m, position in itertools.product(range(X.shape[0]), range(W.shape[0]),
                                                np.ndindex(*out)):
            total = 0.0
            for tap in np.ndindex(*W.shape[2:]):
                index = [o * s + k * d - b for o, s, k, d, b in
                         zip(position, strides, tap, dilations, begins, strict=True)]
                inside = all(0 <= i < size for i, size in zip(index, X.shape[2:], strict=True))
                column = X[(n, slice(None), *index)] if inside else np.zeros(X.shape[1])
                total += float(column @ W[(m, slice(None), *tap)])
            Y[(n, m, *position)] = total + (0.0 if B is None else float(B[m]))
    return Y


GEOMETRIES = [  # (x spatial, kernel, strides, dilations, pads): most taps or outputs on padding
    ((5, 5), (3, 3), (1, 1), (7, 7), (7, 7, 7, 7)),
    ((5, 5), (3, 3), (9, 9), (1, 1), (9, 9, 9, 9)),
    ((5,), (3,), (1,), (40,), (40, 40)),
    ((4, 6), (2, 3), (1, 11), (13, 1), (13, 0, 13, 22)),
    ((3, 3, 3), (2, 2, 2), (5, 1, 1), (1, 6, 1), (5, 6, 0, 5, 6, 9)),
    ((6,), (4,), (2,), (3,), (20, 1)),
]


@pytest.mark.parametrize("spatial, kernel, strides, dilations, pads", GEOMETRIES)
@pytest.mark.parametrize("weights", ["finite", "inf_on_padding_tap", "nan_everywhere_in_one"])
def test_results_reading_mostly_padding_follow_the_spec(spatial, kernel, strides, dilations,
                                                        pads, weights):
    rng = np.random.default_rng(len(spatial) + sum(pads))
    X = rng.standard_normal((2, 3, *spatial)).astype(np.float32)
    W = rng.standard_normal((4, 3, *kernel)).astype(np.float32)
    B = np.array([0.5, -0.0, 2.0, -1.5], np.float32)
    if weights == "inf_on_padding_tap":
        W[1, 2, (0,) * len(kernel)] = np.inf
    elif weights == "nan_everywhere_in_one":
        W[3] = np.nan
    attributes = {"strides": list(strides), "dilations": list(dilations), "pads": list(pads)}
    Y = conv(X, W, B, **attributes)
    expected = _padding_products_oracle(X, W, B, strides, dilations, pads)
    np.testing.assert_array_equal(np.isnan(Y), np.isnan(expected))
    infinite = np.isinf(expected)
    np.testing.assert_array_equal(Y[infinite], expected[infinite])
    finite_channels = np.isfinite(W.reshape(W.shape[0], -1)).all(axis=1)
    assert_conv_within_bound(Y[:, finite_channels], X, W[finite_channels], B[finite_channels],
                             **attributes)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal, NaN where NaN (any NaN), and zeros of the same sign."""
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan], b[~nan])
                and np.array_equal(np.signbit(a[~nan]), np.signbit(b[~nan])))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("spatial, kernel, strides, dilations, pads", GEOMETRIES)
def test_cutting_off_the_padding_changes_no_bit(dtype, spatial, kernel, strides, dilations,
                                                pads):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((1, 2, *spatial)).astype(dtype)
    W = rng.standard_normal((3, 2, *kernel)).astype(dtype)
    W[2, 1, (-1,) * len(kernel)] = np.inf
    B = np.array([-0.0, 1.0, 0.25], dtype)
    plan = plan_conv(X.shape, W.shape, B.shape, strides=list(strides),
                     dilations=list(dilations), pads=list(pads))
    cut = conv_module.plan_cut(plan)
    assert cut is not None
    acc = conv_module.accumulator_dtype(X.dtype)
    whole = conv_module._convolve_whole(plan, X, W, B)
    part = conv_module.convolve_cut(plan, cut, X, W.astype(acc), B.astype(acc), acc,
                                   conv_module._convolve_whole)
    assert whole.dtype == part.dtype == X.dtype
    assert _same_bits(whole.astype(np.float64), part.astype(np.float64))


def test_no_output_reading_x_is_bias_or_nan():
    X = np.ones((1, 1, 3), np.float32)
    W = np.array([[[1.0, np.inf]], [[2.0, 3.0]]], np.float32)
    Y = conv(X, W, np.array([4.0, -0.0], np.float32), pads=[10, 0])  # outputs 0..4: padding
    assert np.isnan(Y[0, 0, :5]).all()
    assert (Y[0, 1, :5] == 0).all() and not np.signbit(Y[0, 1, :5]).any()


def test_memory_of_a_tiny_conv_with_huge_geometry_is_small():
    plan = plan_conv((1, 1, 5, 5), (1, 1, 3, 3), None, auto_pad="SAME_UPPER",
                     dilations=[30_000_000, 30_000_000])
    assert conv_module.working_bytes(plan, np.dtype(np.float32)) < 2**20
