"""The native Conv core: every instruction set against the float64 oracle, determinism over
threads, forcing an instruction set, and stopping early on a signal or ``request_stop()``."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time

import ml_dtypes
import numpy as np
import pytest
from native_stops import (
    STOP_SECONDS,
    outcome_when_stopped_from_another_thread,
    seconds_to_stop_on_a_signal,
)
from oracles import assert_conv_within_bound, fp16_spec_example, random_inputs, resolve_pads

from padconv_cli.errors import PadconvError
from padconv_cli.kernels import native
from padconv_cli.kernels.conv import conv, plan_conv

# The native Conv core: every instruction set against the float64 oracle, determinism over
# threads, forcing an instruction set.  (The sanitizer build is a CI step: .ci/sanitize.)


ALL_ISAS = ("avx512", "avx2", "generic")

CASES = {
    # rank 1
    "1d_plain": ((2, 3, 11), (4, 3, 3), {}),
    "1d_strided_dilated_asym": ((2, 3, 23), (5, 3, 4), {"strides": [3], "dilations": [2],
                                                         "pads": [5, 2]}),
    "1d_depthwise_multiplier": ((2, 3, 40), (6, 1, 3), {"group": 3, "pads": [1, 1]}),
    "1d_depthwise_strided": ((1, 3, 31), (3, 1, 4), {"group": 3, "strides": [3],
                                                     "pads": [2, 0]}),
    "1d_same_lower": ((1, 2, 10), (3, 2, 4), {"auto_pad": "SAME_LOWER", "strides": [3]}),
    # rank 2
    "2d_asym_pads": ((1, 4, 9, 11), (6, 4, 3, 3), {"pads": [1, 2, 0, 1]}),
    "2d_groups_strides_dilations": ((2, 6, 10, 7), (6, 2, 3, 2),
                                    {"group": 3, "strides": [2, 1], "dilations": [1, 2],
                                     "pads": [2, 0, 1, 3]}),
    "2d_depthwise": ((1, 8, 12, 12), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    "2d_depthwise_strided_dilated": ((1, 8, 13, 17), (16, 1, 5, 3),
                                     {"group": 8, "strides": [2, 3], "pads": [2, 1, 2, 1],
                                      "dilations": [1, 2]}),
    "2d_pointwise": ((1, 5, 8, 8), (7, 5, 1, 1), {}),
    "2d_pads_wider_than_kernel": ((1, 3, 4, 4), (2, 3, 3, 3), {"pads": [5, 5, 5, 5]}),
    "2d_many_channels": ((1, 70, 30, 41), (37, 70, 3, 3), {"pads": [1, 1, 1, 1]}),
    "2d_same_upper_strided": ((1, 2, 7, 6), (3, 2, 3, 3), {"auto_pad": "SAME_UPPER",
                                                           "strides": [2, 3]}),
    "2d_valid": ((1, 2, 6, 7), (2, 2, 3, 2), {"auto_pad": "VALID", "strides": [2, 2]}),
    # rank 3
    "3d_everything": ((1, 4, 5, 6, 7), (3, 4, 2, 3, 2),
                      {"pads": [1, 0, 1, 0, 2, 1], "strides": [1, 2, 1]}),
    "3d_depthwise": ((1, 2, 5, 6, 7), (4, 1, 2, 3, 2),
                     {"group": 2, "pads": [1, 0, 1, 0, 2, 1], "strides": [2, 1, 1],
                      "dilations": [2, 1, 2]}),
    "3d_depthwise_many_outer_taps": ((1, 2, 9, 9, 5), (2, 1, 7, 7, 3),  # 49 rows per output row
                                     {"group": 2, "pads": [3, 3, 1, 3, 3, 1]}),
    "2d_depthwise_tiny_rows": ((2, 3, 9, 3), (6, 1, 3, 2), {"group": 3, "pads": [1, 1, 1, 0]}),
    # output rows of 96 positions fill the register tiles of every instruction set and dtype
    "1d_rows_of_96": ((2, 4, 96), (3, 4, 5), {"pads": [2, 2]}),
    "2d_rows_of_96_strided_dilated_groups": ((2, 6, 9, 192), (6, 3, 3, 3),
                                              {"group": 2, "strides": [1, 2],
                                               "dilations": [1, 2], "pads": [1, 2, 0, 1]}),
    "3d_rows_of_96": ((1, 3, 4, 5, 96), (4, 3, 2, 3, 3), {"pads": [1, 0, 1, 1, 1, 1]}),
    # stride 1, rows of 60 that leave register tiles part idle: the tiles run across rows
    "2d_rows_of_60_dilated_groups": ((2, 6, 11, 62), (10, 3, 3, 3),
                                     {"group": 2, "dilations": [2, 2], "pads": [1, 2, 3, 0]}),
    # stride 1 in 3-D: the register tiles run across rows and planes
    "3d_stride_1_dilated_uneven_pads": ((1, 4, 5, 30, 40), (5, 4, 2, 3, 3),
                                        {"dilations": [2, 1, 1], "pads": [1, 1, 0, 0, 1, 2]}),
    # strided on few channels: the input's stride phases copied, read in place
    "2d_strided_few_channels": ((1, 3, 30, 60), (5, 3, 5, 5),
                                {"strides": [2, 2], "dilations": [1, 2], "pads": [2, 1, 2, 3]}),
}

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]


def tap_oracle(X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1, pads=None,
               strides=None):
    """float64 Conv by kernel taps: ``Y += W[:, :, t] . Xpad[window of t]`` with numpy slices
    (the loop oracle's definition, vectorised, for inputs too big for its loops)."""
    X = np.asarray(X, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    kernel = W.shape[2:]
    rank = len(kernel)
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    begins, ends = resolve_pads(X.shape[2:], kernel, strides, dilations, auto_pad, pads)
    xp = np.pad(X, [(0, 0), (0, 0), *zip(begins, ends, strict=True)])
    out = [(size - (k - 1) * d - 1) // s + 1
           for size, k, d, s in zip(xp.shape[2:], kernel, dilations, strides, strict=True)]
    m, c_group = W.shape[:2]
    m_group = m // group
    Y = np.zeros((X.shape[0], m, *out))
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                       for t, d, o, s in zip(tap, dilations, out, strides, strict=True))
        for g in range(group):
            xs = xp[(slice(None), slice(g * c_group, (g + 1) * c_group), *window)]
            ws = W[(slice(g * m_group, (g + 1) * m_group), slice(None), *tap)]
            Y[:, g * m_group:(g + 1) * m_group] += np.einsum("mc,nc...->nm...", ws, xs)
    if B is not None:
        Y += np.asarray(B, dtype=np.float64).reshape((-1,) + (1,) * rank)
    return Y


def test_the_tap_oracle_agrees_with_the_loop_oracle():
    from oracles import oracle_conv

    for x_shape, w_shape, attrs in CASES.values():
        if np.prod(x_shape) < 3000:
            X, W, B = random_inputs(x_shape, w_shape, np.float64)
            np.testing.assert_allclose(tap_oracle(X, W, B, **attrs), oracle_conv(X, W, B, **attrs),
                                       rtol=1e-9, atol=1e-9)


def isa_or_skip(isa: str) -> str:
    """The instruction set, or a skip naming what the CPU lacks."""
    if isa not in native.available_isas():
        pytest.skip(f"this CPU has no {isa} (has {', '.join(native.available_isas())})")
    return isa


@pytest.fixture(params=ALL_ISAS)
def forced_isa(request, monkeypatch):
    """Each instruction set in turn, forced through PADCONV_NATIVE_ISA."""
    isa = isa_or_skip(request.param)
    monkeypatch.setenv(native.ISA_VARIABLE, isa)
    return isa


def test_the_portable_kernels_are_always_available():
    assert native.available_isas()[-1] == "generic"
    assert set(native.available_isas()) <= set(ALL_ISAS)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_isa_within_the_dot_product_bound(forced_isa, name, dtype):
    x_shape, w_shape, attrs = CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, reference=tap_oracle, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("taps", range(1, 9))
@pytest.mark.parametrize("out_channels", [4, 5])
@pytest.mark.parametrize("stride", [1, 2])
def test_every_last_axis_width_is_right_with_stride_1_or_2(forced_isa, taps, dtype,
                                                          out_channels, stride):
    # rows of 100 or 50 outputs take the plane kernel: its tile unrolled for 1 to 7 taps
    # (stride 1 everywhere, stride 2 on AVX2's 6-row tiles), the general tile for 8; with
    # AVX2, 4 output channels fill a 4-row tile and 5 take the 6-row tiles, which pad them less
    pads = [1, (taps - 1) // 2, 1, taps - 1 - (taps - 1) // 2]
    X, W, B = random_inputs((2, 6, 5, 100), (out_channels, 6, 2, taps), dtype)
    attrs = {"pads": pads, "strides": [1, stride]}
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, reference=tap_oracle, **attrs)


PLANE_SHAPES = {  # each takes the plane kernel: unrolled over 3 taps, over 7 with stride 2
    # (AVX2's 6-row tiles; the general tile elsewhere), over 3 with dilation 2 (AVX2's 6-row
    # tiles; the general tile elsewhere)
    "3x3": ((2, 6, 5, 100), 3, {"pads": [1, 1, 1, 1]}),
    "7x7_stride_2": ((1, 3, 20, 100), 7, {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    "3x3_dilation_2": ((1, 6, 9, 100), 3, {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    # output rows of 96 or 48 positions, whole register tiles on every instruction set: the
    # tiles start at each row's start and skip the padded columns
    "3x3_rows_of_96": ((2, 6, 5, 96), 3, {"pads": [1, 1, 1, 1]}),
    "7x7_stride_2_rows_of_48": ((1, 3, 20, 96), 7, {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    "3x3_dilation_2_rows_of_96": ((1, 6, 9, 96), 3, {"pads": [2, 2, 2, 2],
                                                     "dilations": [2, 2]}),
    # rows of 56 and 64 (ResNet's, a dilated 3x3's), and the rows of 100 and 50 above: not a
    # whole number of tiles; with AVX-512 and AVX2's 6-row tiles a tile runs on from one row
    # into the next, split inside a vector or between two (on an Intel CPU, AVX-512 runs 13
    # output channels or more on the channel-lane tiles instead)
    "3x3_rows_of_56": ((1, 6, 7, 56), 3, {"pads": [1, 1, 1, 1]}),
    "3x3_dilation_2_rows_of_64": ((1, 6, 9, 64), 3, {"pads": [2, 2, 2, 2],
                                                     "dilations": [2, 2]}),
}


def assert_one_and_three_threads_agree_within_bound(X, W, B, attrs: dict) -> None:
    """The native core on 1 and on 3 threads: the same bits, within the dot-product bound."""
    plan = plan_conv(X.shape, W.shape, B.shape, **attrs)
    results = []
    for threads in (1, 3):
        y = np.full(plan.output_shape, np.nan, X.dtype)
        native.conv_into(X, W, B, y, strides=plan.strides, dilations=plan.dilations,
                         pads_begin=plan.pads_begin, group=1, threads=threads)
        results.append(y)
    assert results[1].tobytes() == results[0].tobytes()
    assert_conv_within_bound(results[0], X, W, B, reference=tap_oracle, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(PLANE_SHAPES))
@pytest.mark.parametrize("out_channels", range(1, 14))
def test_every_count_of_output_channels_is_right_on_the_plane_kernel(forced_isa, name,
                                                                    out_channels, dtype):
    # 1 to 13 rows of W leave every remainder of the 4-, 6- and 8-row tiles: a last row block
    # of few rows takes a tile of fewer rows (4 of 6, 4 of 8, 2 of 4), with the same bits
    # on any thread count
    x_shape, k, attrs = PLANE_SHAPES[name]
    X, W, B = random_inputs(x_shape, (out_channels, x_shape[1], k, k), dtype)
    assert_one_and_three_threads_agree_within_bound(X, W, B, attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("width", [1, 2, 7, 13, 14, 15, 23, 28, 29, 47, 56, 60])
@pytest.mark.parametrize("out_channels", [16, 45, 48, 96, 100, 104, 120, 128])
def test_every_row_length_and_count_of_output_channels_is_right_on_the_channel_lane_tiles(
        forced_isa, width, out_channels, dtype):
    # rows shorter than a position tile take the channel-lane tiles (AVX-512: rows under 48,
    # 24 for float64, tiles of up to 14 positions, and on Intel CPUs rows of any length; AVX2:
    # under 24 and 12, 6 positions): rows cut into pieces of every size, two short rows a
    # tile and an odd last row alone, every last vector of channels (in part or whole), the
    # blocks of channels in ranges or the rows split between threads, the same bits on any
    # thread count; elsewhere the position tiles and the portable kernels run the same cases
    X, W, B = random_inputs((1, 5, 3, width), (out_channels, 5, 3, 3), dtype)
    assert_one_and_three_threads_agree_within_bound(X, W, B, {"pads": [1, 1, 1, 1]})


def test_every_isa_gives_the_fp16_spec_example_bit_for_bit(forced_isa):
    X, W, B, expected = fp16_spec_example()
    Y = conv(X, W, B, pads=[1, 1, 1, 1])
    assert Y.tobytes() == expected.tobytes()



NARROW_CASES = {
    "gemm_batch": ((3, 6, 11, 13), (4, 6, 3, 3), {"pads": [1, 1, 1, 1]}),
    "gemm_groups_strided": ((2, 8, 15, 12), (6, 4, 3, 2),
                            {"group": 2, "strides": [2, 3], "pads": [1, 0, 2, 1]}),
    "depthwise": ((2, 4, 10, 9), (8, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    "pointwise": ((2, 5, 7, 9), (3, 5, 1, 1), {}),
    # rows of 13 and 32 output channels: AVX-512's channel-lane tiles
    "channel_lanes": ((2, 6, 5, 13), (32, 6, 3, 3), {"pads": [1, 1, 1, 1]}),
}


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(NARROW_CASES))
@pytest.mark.parametrize("chunk_bytes", [1, 2**25], ids=["one_unit_per_chunk", "whole"])
def test_narrow_inputs_read_on_the_fly_equal_their_float32_copy_rounded_once(
        forced_isa, monkeypatch, dtype, name, chunk_bytes):
    """float16/bfloat16 X is read as float32 in place (every value, subnormals, inf and nan
    included), and Y computed in chunks of output channels: the bits of the float32 conv of
    the float32 copies, rounded once."""
    import padconv_cli.kernels.conv as conv_module

    monkeypatch.setattr(conv_module, "NARROW_CHUNK_BYTES", chunk_bytes)
    x_shape, w_shape, attrs = NARROW_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype, seed=3)
    flat = X.reshape(-1)
    finfo = ml_dtypes.finfo(dtype)
    flat[:6] = [finfo.smallest_subnormal, -finfo.smallest_subnormal * 3, finfo.smallest_normal,
                -0.0, finfo.max, finfo.tiny * 0.5]
    flat[-1] = np.inf
    flat[-2] = np.nan
    with np.errstate(over="ignore"):  # sums past the narrow type's max round to inf
        want = conv(X.astype(np.float32), W.astype(np.float32), B.astype(np.float32), **attrs)
        got = conv(X, W, B, **attrs)
        want = want.astype(dtype)
    assert got.dtype == X.dtype
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_every_narrow_bit_pattern_is_read_as_its_float32_value(forced_isa, dtype):
    """All 65536 patterns through a 1x1 conv with weight 1 (exact): X widened exactly."""
    X = np.arange(2**16, dtype=np.uint16).view(dtype).reshape(1, 1, 256, 256)
    got = conv(X, np.ones((1, 1, 1, 1), dtype), pads=[0, 1, 0, 0])[:, :, :, 1:]
    # 0 + 1 * x is x for every x (-0 gives +0, a nan stays a nan)
    assert np.array_equal(got.astype(np.float32), X.astype(np.float32), equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_the_result_is_rounded_to_narrow_types_as_numpy_rounds(forced_isa, dtype):
    """float32 -> float16/bfloat16 of the result: numpy's (ml_dtypes') bits for every non-nan
    float32 (ties, overflow to inf, subnormal results), a nan for a nan."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    halves = np.arange(2**16, dtype=np.uint32) << 13  # ties and near-ties of binary16
    bits = np.concatenate([bits, halves + 0x38000000, halves + (0x38000000 | 0x1000),
                           (np.arange(2**16, dtype=np.uint32) << 16) | 0x8000])
    y = bits.view(np.float32)
    out = np.empty(y.shape, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        native.round_into(y, out)
        want = y.astype(dtype)
    nan = np.isnan(y)
    assert np.isnan(out[nan].astype(np.float32)).all()
    assert out[~nan].view(np.uint16).tobytes() == want[~nan].view(np.uint16).tobytes()

def test_every_isa_passes_the_onnx_conformance_data(forced_isa):
    from test_conformance import MODEL_DIRS, load_case

    assert MODEL_DIRS
    for folder in MODEL_DIRS:
        inputs, attrs, expected = load_case(folder)
        np.testing.assert_allclose(conv(*inputs, **attrs), expected, rtol=1e-4, atol=1e-5,
                                   err_msg=folder)


def test_nan_and_inf_reach_exactly_their_receptive_field(forced_isa):
    X, W, B = random_inputs((1, 3, 9, 10), (4, 3, 3, 3), np.float32)
    X[0, 1, 4, 5] = np.nan
    X[0, 2, 8, 9] = np.inf
    attrs = {"pads": [1, 1, 1, 1]}
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, reference=tap_oracle, **attrs)


DETERMINISM_CASES = {
    "gemm": ((2, 24, 37, 45), (20, 24, 3, 3), {"pads": [1, 2, 1, 0], "strides": [1, 1]}),
    "gemm_strided_groups": ((1, 16, 61, 33), (12, 4, 3, 5),
                            {"group": 4, "strides": [2, 1], "pads": [1, 2, 1, 2]}),
    "depthwise": ((1, 12, 70, 29), (24, 1, 3, 3), {"group": 12, "pads": [1, 1, 1, 1]}),
    # 1x1: X read in place, its column strips packed (a partial last one, a partial row block)
    "pointwise_groups": ((2, 12, 37, 29), (18, 6, 1, 1), {"group": 2}),
    # 1x1 with a W of 256 KB or more: W read in place too (a partial row block, groups)
    "pointwise_large_w": ((2, 256, 9, 21), (261, 256, 1, 1), {}),
    "pointwise_large_w_groups": ((1, 900, 5, 9), (303, 300, 1, 1), {"group": 3}),
    # 1x1 with many rows of W and few strips of positions: on 2 threads each takes its share
    # of W's rows over every strip (a partial row block, a partial strip)
    "pointwise_many_rows": ((1, 40, 20, 30), (257, 40, 1, 1), {}),
    # rows of 96 positions (whole register tiles on every instruction set), a partial row block
    "rows_of_96": ((2, 8, 21, 96), (12, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "1d": ((3, 8, 3001), (5, 8, 7), {"pads": [3, 3], "dilations": [2]}),
    # stride 1, rows of 56: register tiles run across rows, cut where the tasks fall
    "rows_of_56": ((2, 16, 56, 56), (11, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    # a plane of few register tiles and many rows of W: on several threads the tasks split
    # W's rows too (a partial row block); with AVX-512, rows of 14 take the channel-lane tiles
    # (float32 and float64), which split W's blocks of channels likewise, and the rows when
    # the threads outnumber the blocks; rows of 50 keep AVX-512 on the position tiles
    "plane_few_tiles_many_rows": ((1, 16, 14, 14), (45, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    "plane_few_tiles_many_rows_of_50": ((1, 16, 3, 50), (45, 16, 3, 3),
                                        {"pads": [1, 1, 1, 1]}),
    # the channel-lane tiles (AVX-512, float32) on 320 channels of rows of 40: tasks of as
    # many rows as fit the panel, each copying its rows' plane
    "channel_lanes_rows_per_task": ((1, 320, 12, 40), (32, 320, 3, 3), {"pads": [1, 1, 1, 1]}),
    # ... with groups, a stride and a dilation (the copy's phases)
    "channel_lanes_groups_strided": ((1, 12, 9, 20), (32, 6, 3, 3),
                                     {"group": 2, "strides": [2, 1], "dilations": [1, 2],
                                      "pads": [1, 2, 1, 2]}),
    # the GEMM kernel's panel on few strips of positions and many rows of W: likewise
    "gemm_few_strips_many_rows": ((1, 16, 7, 7), (100, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    # rows longer than a depthwise task's block of padded rows: one output row per task
    "depthwise_long_rows": ((1, 3, 7, 20000), (6, 1, 3, 3),
                            {"group": 3, "pads": [2, 1, 2, 1], "dilations": [2, 1],
                             "strides": [2, 1]}),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(DETERMINISM_CASES))
def test_results_do_not_depend_on_the_thread_count(forced_isa, name, dtype):
    x_shape, w_shape, attrs = DETERMINISM_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    plan = plan_conv(X.shape, W.shape, B.shape, **attrs)
    results = []
    for threads in (1, 2, 3, 8):
        y = np.full(plan.output_shape, np.nan, dtype)
        native.conv_into(X, W, B, y, strides=plan.strides, dilations=plan.dilations,
                         pads_begin=plan.pads_begin, group=plan.group, threads=threads)
        results.append(y)
    for y in results[1:]:
        assert y.tobytes() == results[0].tobytes()
    assert_conv_within_bound(results[0], X, W, B, reference=tap_oracle, **attrs)



def test_calls_from_several_python_threads_at_once_get_the_one_thread_bits():
    """The GIL is released: concurrent calls share the helper threads or run alone, same bits."""
    from concurrent.futures import ThreadPoolExecutor

    x_shape, w_shape, attrs = DETERMINISM_CASES["gemm"]
    X, W, B = random_inputs(x_shape, w_shape, np.float32)
    plan = plan_conv(X.shape, W.shape, B.shape, **attrs)

    def run(threads: int) -> bytes:
        y = np.empty(plan.output_shape, np.float32)
        native.conv_into(X, W, B, y, strides=plan.strides, dilations=plan.dilations,
                         pads_begin=plan.pads_begin, group=plan.group, threads=threads)
        return y.tobytes()

    alone = run(1)
    with ThreadPoolExecutor(4) as workers:
        results = list(workers.map(run, [2, 3, 2, 8] * 4))
    assert all(result == alone for result in results)


def test_a_forked_child_computes_after_the_parent_used_its_threads():
    """The helper threads do not survive fork: a child starts its own and gets the same bits."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("this platform cannot fork")
    X, W, B = random_inputs((1, 16, 40, 40), (8, 16, 3, 3), np.float32)
    parent = conv(X, W, B, pads=[1, 1, 1, 1])
    with multiprocessing.get_context("fork").Pool(1) as child:
        got = child.apply_async(conv, (X, W, B), {"pads": [1, 1, 1, 1]}).get(timeout=120)
    assert got.tobytes() == parent.tobytes()

def _allowed_cpus_of_every_thread() -> set[str]:
    """The Cpus_allowed_list of each thread of this process, as Linux reports it."""
    from pathlib import Path

    lists = set()
    for status in Path("/proc/self/task").glob("*/status"):
        for line in status.read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                lists.add(line.split(":", 1)[1].strip())
    return lists


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
def test_helpers_woken_after_idleness_leave_every_thread_its_affinity():
    """A helper woken onto the caller's CPU moves off it for the call, pinned by no one after."""
    X, W, B = random_inputs((1, 16, 40, 40), (8, 16, 3, 3), np.float32)
    before = _allowed_cpus_of_every_thread()
    want = conv(X, W, B, pads=[1, 1, 1, 1]).tobytes()
    for _ in range(10):
        time.sleep(0.02)  # the helpers stop spinning and sleep
        assert conv(X, W, B, pads=[1, 1, 1, 1]).tobytes() == want
    assert _allowed_cpus_of_every_thread() == before


def test_helpers_confined_to_the_callers_one_cpu_still_compute_the_same_bits():
    """With one CPU allowed there is nowhere to move a helper to: it shares it, same bits."""
    code = textwrap.dedent("""
        import os, sys, time
        import numpy as np
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        from padconv_cli.kernels import native
        from padconv_cli.kernels.conv import plan_conv
        rng = np.random.default_rng(3)
        x = rng.uniform(-1, 1, (1, 16, 40, 40)).astype(np.float32)
        w = rng.uniform(-1, 1, (8, 16, 3, 3)).astype(np.float32)
        plan = plan_conv(x.shape, w.shape, pads=[1, 1, 1, 1])
        out = []
        for threads in (1, 2, 2, 3):
            time.sleep(0.02)
            y = np.empty(plan.output_shape, np.float32)
            native.conv_into(x, w, None, y, strides=plan.strides, dilations=plan.dilations,
                             pads_begin=plan.pads_begin, group=1, threads=threads)
            out.append(y.tobytes())
        sys.exit(0 if len(set(out)) == 1 else 1)
    """)
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_a_part_of_the_output_repeats_the_whole_bit_for_bit(forced_isa):
    """Rows computed from a crop of X (the tiled engine's tiles) equal the whole tensor's."""
    X, W, B = random_inputs((1, 16, 50, 40), (8, 16, 3, 3), np.float32)
    whole = conv(X, W, B, pads=[1, 1, 1, 1])
    part = conv(X[:, :, 19:33, :], W, B, pads=[0, 1, 0, 1])
    assert part.tobytes() == whole[:, :, 20:32].tobytes()
    channels = conv(X, W[2:5], B[2:5], pads=[1, 1, 1, 1])
    assert channels.tobytes() == whole[:, 2:5].tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_a_crop_of_the_rows_repeats_the_whole_bit_for_bit(forced_isa, dtype):
    """Columns computed from a crop of the last axis equal the whole's, whatever the length of
    the rows (96 positions fill every register tile, 39 do not)."""
    X, W, B = random_inputs((2, 8, 12, 96), (6, 8, 3, 3), dtype)
    whole = conv(X, W, B, pads=[1, 1, 1, 1])
    part = conv(X[..., 29:70], W, B, pads=[1, 0, 1, 0])
    assert part.tobytes() == whole[..., 30:69].tobytes()


@pytest.mark.parametrize("group", [1, 2])
def test_an_infinite_weight_times_the_padding_is_nan(forced_isa, group):
    # 0 * inf = nan: the padding zeros take part in the sums, as the spec's Xpad says
    X = np.ones((1, 2, 3, 3), np.float32)
    W = np.zeros((2, 2 // group, 3, 3), np.float32)
    W[0, 0, 0, 0] = np.inf
    Y = conv(X, W, pads=[1, 1, 1, 1], group=group)
    assert np.isnan(Y[0, 0, 0, :]).all() and np.isnan(Y[0, 0, :, 0]).all()
    assert np.isinf(Y[0, 0, 1:, 1:]).all()


# 2-D cases whose first and last output rows read padding through some of the first axis's
# taps, which the plane kernel then leaves out of their sums: rows of 56 on the position tiles
# (AVX-512's tiles of 48 run on into the next row; on an Intel CPU, the channel-lane tiles;
# rows of 50 and 60 below keep the position tiles there), a 7x7 stride-2 stem, rows of 7
# (two a tile) and 14 on the channel-lane tiles (one image: each task packs its own W; two:
# W packed before the run), rows whose every tap reads padding, asymmetric pads with dilation
PADDED_EDGES = {
    "rows_of_56": ((1, 8, 6, 56), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "stem_7x7_stride_2": ((1, 3, 24, 110), (16, 3, 7, 7), {"pads": [3, 3, 3, 3],
                                                           "strides": [2, 2]}),
    "rows_of_7_on_channel_lanes": ((1, 8, 7, 7), (48, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "rows_of_14_on_channel_lanes": ((2, 8, 5, 14), (32, 8, 5, 5), {"pads": [2, 2, 2, 2]}),
    "rows_wholly_in_the_padding": ((1, 4, 3, 50), (8, 4, 3, 3), {"pads": [4, 1, 5, 1]}),
    "dilated_asymmetric": ((1, 6, 9, 60), (8, 6, 3, 3), {"pads": [3, 1, 0, 1],
                                                         "dilations": [2, 1]}),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(PADDED_EDGES))
def test_pads_give_the_bits_of_the_same_zeros_written_into_x(forced_isa, name, dtype):
    # a term w * 0 left out of a sum changes no bit while w is finite (the sum never is -0):
    # X padded by hand, with no pads, gives every sum the same terms in the same order
    x_shape, w_shape, attrs = PADDED_EDGES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    pads = attrs["pads"]
    padded = np.pad(X, [(0, 0), (0, 0), *zip(pads[:2], pads[2:], strict=True)])
    rest = {key: value for key, value in attrs.items() if key != "pads"}
    assert conv(X, W, B, **attrs).tobytes() == conv(padded, W, B, **rest).tobytes()


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(PADDED_EDGES))
def test_a_non_finite_weight_on_a_tap_that_reads_padding_still_meets_the_zeros(
        forced_isa, name, dtype, value):
    # inf * 0 = nan where the tap reads padding, +-inf elsewhere: the taps are not left out
    x_shape, w_shape, attrs = PADDED_EDGES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    W[1, 0, 0, 0] = value  # the first tap: padding under the first rows
    W[-1, -1, -1, -1] = value  # the last: padding under the last rows
    got = conv(X, W, B, **attrs)
    want = tap_oracle(X, W, B, **attrs)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isposinf(got), np.isposinf(want))
    assert np.array_equal(np.isneginf(got), np.isneginf(want))
    assert np.isnan(got[:, [1, -1]]).any()


REAL_CASES = [  # the benchmark's eight Conv cases, some smaller, and more
    ((1, 64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 112, 112), (64, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((1, 256, 28, 28), (128, 256, 1, 1), {}),
    ((1, 256, 56, 56), (256, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 256}),
    ((4, 16, 4000), (32, 16, 9), {"pads": [4, 4]}),
    ((1, 8, 32, 32, 32), (16, 8, 3, 3, 3), {"pads": [1] * 6}),
    ((1, 32, 64, 64), (32, 32, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 64, 12, 12, 12), (8, 32, 3, 3, 3), {"group": 2, "pads": [1] * 6}),
    ((1, 32, 30, 40), (8, 32, 2, 5), {"auto_pad": "SAME_LOWER"}),
    ((1, 32, 28, 28), (64, 1, 5, 5), {"group": 32, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", REAL_CASES, ids=str)
def test_real_sizes_within_the_bound_and_next_to_onnxruntime(x_shape, w_shape, attrs):
    from test_conv_kernel import run_onnxruntime

    X, W, B = random_inputs(x_shape, w_shape, np.float32, seed=5)
    Y = conv(X, W, B, **attrs)
    assert_conv_within_bound(Y, X, W, B, reference=tap_oracle, **attrs)
    assert_conv_within_bound(Y, X, W, B, reference=tap_oracle, slack=2,
                             expected=run_onnxruntime(X, W, B, attrs), **attrs)


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((3, 64, 34, 36), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((3, 8, 80, 70), (16, 8, 3, 3), {"strides": [2, 1], "pads": [1, 1, 1, 1]}),
        ((3, 8, 16, 20, 20), (8, 1, 3, 3, 3), {"group": 8, "pads": [1] * 6}),
    ],
)
def test_an_image_gets_the_same_bits_alone_as_in_a_batch(forced_isa, x_shape, w_shape, attrs):
    X, W, B = random_inputs(x_shape, w_shape, np.float32, seed=9)
    batch = conv(X, W, B, **attrs)
    for image in range(x_shape[0]):
        alone = conv(X[image : image + 1], W, B, **attrs)
        assert alone.tobytes() == batch[image : image + 1].tobytes()


def test_the_thread_variable_is_used_and_checked(monkeypatch):
    monkeypatch.setenv(native.THREADS_VARIABLE, "3")
    assert native.thread_count() == 3
    monkeypatch.setenv(native.THREADS_VARIABLE, "zero")
    with pytest.raises(PadconvError, match=native.THREADS_VARIABLE):
        native.thread_count()


def test_without_the_thread_variable_every_usable_cpu_is_a_thread(monkeypatch):
    monkeypatch.setenv(native.THREADS_VARIABLE, "5")
    assert native.thread_count() == 5
    monkeypatch.delenv(native.THREADS_VARIABLE)  # read afresh on every call
    want = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert native.thread_count() == want


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_process_confined_to_one_cpu_counts_one_thread():
    code = textwrap.dedent("""
        import os
        os.environ.pop("PADCONV_NATIVE_THREADS", None)
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        from padconv_cli.kernels import native
        print(native.thread_count())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "1"


def test_the_isa_variable_is_read_on_every_call(monkeypatch):
    monkeypatch.setenv(native.ISA_VARIABLE, " Generic ")
    assert native.selected_isa() == "generic"
    monkeypatch.delenv(native.ISA_VARIABLE)
    assert native.selected_isa() == native.available_isas()[0]


def test_an_unknown_or_missing_isa_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv(native.ISA_VARIABLE, "sse9")
    with pytest.raises(PadconvError, match="PADCONV_NATIVE_ISA=sse9 is not available"):
        conv(np.ones((1, 1, 3), np.float32), np.ones((1, 1, 2), np.float32))


def test_the_extension_rejects_arrays_it_cannot_read_safely():
    x = np.ones((1, 2, 5), np.float32)
    y = np.empty((1, 3, 3), np.float32)
    with pytest.raises(ValueError, match="channels"):
        native.conv_into(x, np.ones((3, 1, 3), np.float32), None, y, strides=[1],
                         dilations=[1], pads_begin=[0], group=1)
    with pytest.raises(TypeError, match="float32"):
        native.conv_into(x, np.ones((3, 2, 3), np.float64), None, y, strides=[1],
                         dilations=[1], pads_begin=[0], group=1)
    with pytest.raises(ValueError):  # not C-contiguous
        native.conv_into(np.ones((1, 2, 10), np.float32)[:, :, ::2],
                         np.ones((3, 2, 3), np.float32), None, y, strides=[1], dilations=[1],
                         pads_begin=[0], group=1)


# The native Conv stops early: on the main thread when a Python signal handler raises (Ctrl-C),
# on any thread after ``request_stop()``; the call raises, and later calls are unaffected.


def _long_conv_inputs() -> tuple[np.ndarray, ...]:
    """About 65 GFLOP on the portable kernels and two threads: seconds on any machine."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64, 256, 256), dtype=np.float32)
    w = rng.standard_normal((64, 64, 11, 11), dtype=np.float32)
    return x, w, np.empty((1, 64, 256, 256), np.float32)


def _long_conv(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    native.conv_into(x, w, None, y, strides=(1, 1), dilations=(1, 1), pads_begin=(5, 5),
                     group=1, threads=2, isa="generic")


def _a_small_conv_is_still_right() -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    y = conv(x, np.ones((1, 1, 2, 2), np.float32))
    assert y.tolist() == [[[[10, 14, 18], [26, 30, 34], [42, 46, 50]]]]


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_signal_handler_that_raises_stops_a_conv_on_the_main_thread():
    inputs = _long_conv_inputs()
    assert seconds_to_stop_on_a_signal(lambda: _long_conv(*inputs)) < STOP_SECONDS
    _a_small_conv_is_still_right()


def test_request_stop_stops_a_conv_on_another_thread():
    """A request affects the calls running when it is made: it is repeated until the call,
    started on its thread meanwhile, has ended."""
    inputs = _long_conv_inputs()
    outcome = outcome_when_stopped_from_another_thread(lambda: _long_conv(*inputs))
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
    _a_small_conv_is_still_right()
