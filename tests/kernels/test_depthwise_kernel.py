"""The native depthwise Conv (C/group == 1) on 2-D inputs whose rows it reads in place: every
geometry of rows, pads and taps against the float64 oracle, and the bits of a column the same
whether it lies at an edge of the row or inside it, on every instruction set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import assert_conv_within_bound, random_inputs
from test_native_conv import tap_oracle

from padconv_cli.kernels import native


def depthwise_call(draw) -> tuple:
    """X and W shapes and Conv attributes of a 2-D depthwise call with stride 1 along rows:
    rows around multiples of every vector width, pads wider than the row, up to 7 taps."""
    channels, multiplier = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    height, width = draw(st.integers(1, 9)), draw(st.integers(1, 70))
    pads = [draw(st.integers(0, 9)) for _ in range(4)]
    stride = draw(st.integers(1, 3))
    for axis, (size, k, d) in enumerate(((height, kh, dh), (width, kw, dw))):
        short = (k - 1) * d + 1 - (size + pads[axis] + pads[axis + 2])
        pads[axis + 2] += max(0, short)  # at least one output position
    attrs = {"group": channels, "pads": pads, "strides": [stride, 1], "dilations": [dh, dw]}
    return (draw(st.integers(1, 2)), channels, height, width), (channels * multiplier, 1, kh, kw), \
        attrs


def output_shape(x_shape, w_shape, attrs) -> tuple:
    """N, M, then per axis (size + pads - (k - 1) * d - 1) // s + 1."""
    pads, rank = attrs["pads"], 2
    spatial = [(size + pads[i] + pads[i + rank] - (k - 1) * d - 1) // s + 1
               for i, (size, k, d, s) in enumerate(zip(x_shape[2:], w_shape[2:],
                                                       attrs["dilations"], attrs["strides"],
                                                       strict=True))]
    return (x_shape[0], w_shape[0], *spatial)


def native_depthwise(X, W, B, attrs, isa: str, threads: int) -> np.ndarray:
    """The native core on one instruction set and thread count."""
    Y = np.empty(output_shape(X.shape, W.shape, attrs), X.dtype)
    native.conv_into(X, W, B, Y, strides=attrs["strides"], dilations=attrs["dilations"],
                     pads_begin=attrs["pads"][:2], group=attrs["group"], threads=threads,
                     isa=isa)
    return Y


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=st.composite(depthwise_call)(), dtype=st.sampled_from([np.float32, np.float64]),
       bias=st.booleans())
def test_any_rows_pads_and_taps_within_the_bound_on_every_isa_and_thread_count(call, dtype,
                                                                               bias):
    x_shape, w_shape, attrs = call
    X, W, B = random_inputs(x_shape, w_shape, dtype, bias=bias)
    for isa in native.available_isas():
        one = native_depthwise(X, W, B, attrs, isa, 1)
        assert_conv_within_bound(one, X, W, B, reference=tap_oracle, **attrs)
        assert native_depthwise(X, W, B, attrs, isa, 3).tobytes() == one.tobytes()


@pytest.mark.parametrize("isa", native.available_isas())
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("width", [7, 16, 56, 63, 64, 65, 130])
def test_a_column_gets_the_same_bits_at_an_edge_of_the_row_as_inside_it(isa, dtype, width):
    """Columns computed from a crop of X's rows (so that they lie at the crop's edges) equal
    the whole row's, where they lie inside: the masked and the plain loads sum alike."""
    X, W, B = random_inputs((1, 4, 9, width), (8, 1, 3, 3), dtype)
    attrs = {"group": 4, "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1]}
    whole = native_depthwise(X, W, B, attrs, isa, 2)
    cut = max(1, width // 3)
    crop = {**attrs, "pads": [1, 0, 1, 0]}
    part = native_depthwise(np.ascontiguousarray(X[..., cut - 1:width - cut + 1]), W, B, crop,
                            isa, 2)
    assert part.tobytes() == whole[..., cut:width - cut].tobytes()


@pytest.mark.parametrize("isa", native.available_isas())
def test_an_infinite_weight_over_padding_rows_and_columns_is_nan(isa):
    """0 * inf = nan on the padded rows at the top and the bottom and the padded columns."""
    X = np.ones((1, 1, 4, 40), np.float32)
    W = np.zeros((1, 1, 3, 3), np.float32)
    W[0, 0, 2, 2] = np.inf  # reads below and to the right of each output position
    attrs = {"group": 1, "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1]}
    Y = native_depthwise(X, W, None, attrs, isa, 1)
    assert np.isnan(Y[0, 0, -1, :]).all() and np.isnan(Y[0, 0, :, -1]).all()
    assert np.isinf(Y[0, 0, :-1, :-1]).all()


@pytest.mark.parametrize("isa", native.available_isas())
@pytest.mark.parametrize("width", [7, 56, 130])
def test_planes_taller_than_a_band_of_rows_are_within_the_bound_on_any_thread_count(isa, width):
    """Rows are swept in bands: a plane of 150 rows crosses band boundaries (and thread
    shares) with every tap, and still sums to the same bits on 1 and 3 threads."""
    X, W, B = random_inputs((1, 2, 150, width), (2, 1, 3, 3), np.float32)
    attrs = {"group": 2, "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1]}
    one = native_depthwise(X, W, B, attrs, isa, 1)
    assert_conv_within_bound(one, X, W, B, reference=tap_oracle, **attrs)
    assert native_depthwise(X, W, B, attrs, isa, 3).tobytes() == one.tobytes()
