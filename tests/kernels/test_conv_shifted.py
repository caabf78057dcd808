"""The shifted Conv path (one accumulating GEMM per kernel tap) and its BLAS wrapper."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_conv_kernel import (
    ORACLE_CASES,
    assert_conv_within_bound,
    check_nan_and_inf_stay_inside_their_receptive_field,
    oracle_conv,
    random_inputs,
    run_onnxruntime,
)

from padconv_cli.kernels import blas, conv_paths
from padconv_cli.kernels.conv import conv, plan_conv

RNG = np.random.default_rng(11)

needs_direct_gemm = pytest.mark.skipif(
    not blas.has_direct_gemm(np.dtype(np.float32)),
    reason="numpy's BLAS is not an ILP64 OpenBLAS padconv can call directly",
)

STRIDE_ONE_CASES = sorted(
    name
    for name, (x_shape, w_shape, attrs) in ORACLE_CASES.items()
    if all(s == 1 for s in attrs.get("strides", [1]))
)


@pytest.fixture
def shifted_everywhere(monkeypatch):
    """Send every stride-1 conv that is neither pointwise nor depthwise to the shifted path."""
    monkeypatch.setattr(conv_paths, "SHIFTED_MIN_CHANNELS", 1)
    monkeypatch.setattr(conv_paths, "MIN_GEMM_COLUMNS", 1)


def takes_shifted_path(x_shape, w_shape, attrs):
    return conv_paths.choose_path(plan_conv(x_shape, w_shape, **attrs)) is conv_paths.shifted_path


# --- the path against the loop oracle ---------------------------------------------------------


@needs_direct_gemm
@pytest.mark.parametrize("name", STRIDE_ONE_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shifted_path_matches_oracle(shifted_everywhere, name, dtype):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    expected = oracle_conv(X, W, B, **attrs)
    if takes_shifted_path(x_shape, w_shape, attrs):
        got = conv(X, W, B, **attrs)
        assert_conv_within_bound(got, X, W, B, expected=expected, **attrs)
    else:  # pointwise or depthwise: another path's business
        assert conv_paths.choose_path(plan_conv(x_shape, w_shape, **attrs)) in (
            conv_paths.pointwise_path, conv_paths.depthwise_path)


def test_stride_one_cases_reach_the_shifted_path(shifted_everywhere):
    if not blas.has_direct_gemm(np.dtype(np.float32)):
        pytest.skip("no direct BLAS")
    shifted = [name for name in STRIDE_ONE_CASES if takes_shifted_path(*ORACLE_CASES[name])]
    assert len(shifted) >= 15
    assert {"1d_plain", "2d_wide_rows_dilated", "3d_wide_rows", "2d_same_lower"} <= set(shifted)


@needs_direct_gemm
@pytest.mark.parametrize("block_bytes", [1, 200, 3000])
@pytest.mark.parametrize("name", ["2d_asym_pads", "2d_groups_3", "3d_plain", "1d_groups",
                                  "2d_wide_rows_dilated"])
def test_shifted_blocks_of_rows(shifted_everywhere, monkeypatch, name, block_bytes):
    monkeypatch.setattr(conv_paths, "SHIFTED_BLOCK_BYTES", block_bytes)
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, np.float64)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, **attrs)


@needs_direct_gemm
@pytest.mark.parametrize("name", ["2d_asym_pads", "2d_wide_rows_dilated", "3d_wide_rows"])
def test_shifted_nan_and_inf_stay_inside_their_receptive_field(shifted_everywhere, name):
    assert takes_shifted_path(*ORACLE_CASES[name])
    check_nan_and_inf_stay_inside_their_receptive_field(name)


@needs_direct_gemm
def test_infinite_weight_times_padding_is_nan(shifted_everywhere):
    # 0 * inf = nan: the padding zeros take part in the sums, as the spec's Xpad says
    X = np.ones((1, 2, 3, 3), np.float32)
    W = np.zeros((1, 2, 3, 3), np.float32)
    W[0, 0, 0, 0] = np.inf
    assert takes_shifted_path(X.shape, W.shape, {"pads": [1, 1, 1, 1]})
    Y = conv(X, W, pads=[1, 1, 1, 1])
    assert np.isnan(Y[0, 0, 0, :]).all() and np.isnan(Y[0, 0, :, 0]).all()
    assert np.isinf(Y[0, 0, 1:, 1:]).all()


# --- the path at its natural thresholds -------------------------------------------------------

REAL_CASES = [
    ((1, 64, 34, 36), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 32, 40, 40), (16, 32, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((2, 16, 1500), (8, 16, 9), {"pads": [4, 4]}),
    ((1, 64, 12, 12, 12), (8, 32, 3, 3, 3), {"group": 2, "pads": [1] * 6}),
    ((1, 32, 30, 40), (8, 32, 2, 5), {"auto_pad": "SAME_LOWER"}),
    ((1, 32, 35, 41), (8, 32, 3, 3), {}),
]


@needs_direct_gemm
@pytest.mark.parametrize("x_shape, w_shape, attrs", REAL_CASES)
def test_shifted_path_at_real_sizes_matches_float64(x_shape, w_shape, attrs):
    assert takes_shifted_path(x_shape, w_shape, attrs)
    X, W, B = random_inputs(x_shape, w_shape, np.float32, seed=5)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, reference=conv, **attrs)


@needs_direct_gemm
@pytest.mark.parametrize("x_shape, w_shape, attrs", REAL_CASES)
def test_shifted_path_at_real_sizes_matches_onnxruntime(x_shape, w_shape, attrs):
    X, W, B = random_inputs(x_shape, w_shape, np.float32, seed=6)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, reference=conv, slack=2,
                             expected=run_onnxruntime(X, W, B, attrs), **attrs)


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((1, 256, 14, 14), (16, 256, 3, 3), {"pads": [1, 1, 1, 1]}),  # few positions
        ((1, 16, 56, 56), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),  # few channels (2-D)
        ((1, 64, 56, 56), (16, 64, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ],
)
def test_im2col_keeps_what_the_shifted_path_does_worse(x_shape, w_shape, attrs):
    assert conv_paths.choose_path(plan_conv(x_shape, w_shape, **attrs)) is conv_paths.im2col_path


def test_no_shifted_path_without_direct_blas(monkeypatch):
    monkeypatch.setattr(blas, "has_direct_gemm", lambda dtype: False)
    x_shape, w_shape, attrs = REAL_CASES[0]
    assert conv_paths.choose_path(plan_conv(x_shape, w_shape, **attrs)) is conv_paths.im2col_path


# --- bits that do not depend on the batch -----------------------------------------------------


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((3, 64, 34, 36), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),  # shifted
        ((3, 8, 80, 70), (16, 8, 3, 3), {"strides": [2, 1], "pads": [1, 1, 1, 1]}),  # im2col
    ],
)
def test_an_image_gets_the_same_bits_alone_as_in_a_batch(x_shape, w_shape, attrs):
    X, W, B = random_inputs(x_shape, w_shape, np.float32, seed=9)
    batch = conv(X, W, B, **attrs)
    for image in range(x_shape[0]):
        alone = conv(X[image : image + 1], W, B, **attrs)
        assert alone.tobytes() == batch[image : image + 1].tobytes()


# --- blas.sum_of_products ---------------------------------------------------------------------


def windows_reference(a, source, starts, n):
    return sum(a[t].astype(np.float64) @ source[:, s : s + n].astype(np.float64)
               for t, s in enumerate(starts))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("direct", [True, False])
def test_sum_of_products_over_windows(monkeypatch, dtype, direct):
    if not direct:
        monkeypatch.setattr(blas, "_direct_gemm", lambda name: None)
    elif not blas.has_direct_gemm(np.dtype(dtype)):
        pytest.skip("no direct BLAS")
    a = RNG.standard_normal((4, 5, 6)).astype(dtype)
    base = RNG.standard_normal((6, 70)).astype(dtype)
    source = base[:, 3:60]  # rows strided by 70 elements
    c = np.full((5, 40), np.nan, dtype)  # stale contents are overwritten, not added to
    starts = [0, 7, 17, 2]
    blas.sum_of_products(a, source, starts, c)
    np.testing.assert_allclose(c, windows_reference(a, source, starts, 40), rtol=1e-5, atol=1e-5)


def test_sum_of_products_into_a_strided_target():
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    source = RNG.standard_normal((4, 30)).astype(np.float32)
    whole = np.zeros((3, 50), np.float32)
    blas.sum_of_products(a, source, [0, 5], whole[:, 10:30])
    np.testing.assert_allclose(whole[:, 10:30], windows_reference(a, source, [0, 5], 20),
                               rtol=1e-5)
    assert not whole[:, :10].any() and not whole[:, 30:].any()


def test_sum_of_products_layouts_blas_cannot_read_go_to_numpy():
    a = np.asfortranarray(RNG.standard_normal((2, 3, 4)).astype(np.float32))
    source = RNG.standard_normal((4, 60)).astype(np.float32)[:, ::2]  # strided columns
    c = np.empty((3, 10), np.float32)
    blas.sum_of_products(a, source, [0, 3], c)
    np.testing.assert_allclose(c, windows_reference(a, source, [0, 3], 10), rtol=1e-5)


def test_sum_of_products_of_no_terms_is_zero():
    c = np.ones((2, 3), np.float32)
    blas.sum_of_products(np.empty((0, 2, 4), np.float32), np.ones((4, 9), np.float32), [], c)
    assert not c.any()


@pytest.mark.parametrize(
    "a_shape, source_shape, starts, c_shape, message",
    [
        ((1, 2, 3), (3, 10), [8], (2, 4), "leaves a source"),
        ((1, 2, 3), (3, 10), [-1], (2, 4), "leaves a source"),
        ((2, 2, 3), (3, 10), [0], (2, 4), "windows"),
        ((1, 2, 3), (4, 10), [0], (2, 4), "windows"),
        ((1, 2, 3), (3, 10), [0], (3, 4), "windows"),
    ],
)
def test_sum_of_products_refuses_windows_outside_the_source(
    a_shape, source_shape, starts, c_shape, message
):
    with pytest.raises(ValueError, match=message):
        blas.sum_of_products(
            np.ones(a_shape, np.float32), np.ones(source_shape, np.float32), starts,
            np.empty(c_shape, np.float32),
        )


def test_sum_of_products_refuses_mixed_dtypes_and_read_only_targets():
    a, source = np.ones((1, 2, 3), np.float32), np.ones((3, 5), np.float32)
    with pytest.raises(ValueError, match="mixed dtypes"):
        blas.sum_of_products(a, source, [0], np.empty((2, 5), np.float64))
    target = np.empty((2, 5), np.float32)
    target.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        blas.sum_of_products(a, source, [0], target)


@needs_direct_gemm
@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((2, 32, 40, 36), (16, 32, 3, 3), {"pads": [2, 1, 0, 1]}),
        ((1, 64, 12, 12, 12), (8, 32, 3, 3, 3), {"group": 2, "pads": [1] * 6}),
        ((1, 32, 30, 40), (8, 32, 5, 3), {"dilations": [2, 1], "pads": [9, 0, 9, 2]}),
        ((2, 16, 1500), (8, 16, 9), {"pads": [4, 4]}),
    ],
)
def test_padding_row_blocks_one_by_one_gives_the_same_bits(monkeypatch, x_shape, w_shape, attrs):
    # large inputs are padded block by block (no padded copy of X): same values, same products
    X, W, B = random_inputs(x_shape, w_shape, np.float32, seed=4)
    assert takes_shifted_path(x_shape, w_shape, attrs)
    monkeypatch.setattr(conv_paths, "SHIFTED_LOCAL_PAD_BYTES", 2**62)
    whole_copy = conv(X, W, B, **attrs)
    monkeypatch.setattr(conv_paths, "SHIFTED_LOCAL_PAD_BYTES", 0)
    monkeypatch.setattr(conv_paths, "SHIFTED_BLOCK_BYTES", 20_000)  # several blocks per image
    block_by_block = conv(X, W, B, **attrs)
    monkeypatch.setattr(conv_paths, "SHIFTED_LOCAL_PAD_BYTES", 2**62)
    assert conv(X, W, B, **attrs).tobytes() == block_by_block.tobytes()
    assert_conv_within_bound(block_by_block, X, W, B, reference=conv, slack=2,
                             expected=whole_copy, **attrs)


def test_sum_of_products_reads_other_byte_orders_through_numpy():
    a = RNG.standard_normal((2, 3, 4)).astype(">f4")
    source = RNG.standard_normal((4, 30)).astype(">f4")
    c = np.empty((3, 20), ">f4")
    blas.sum_of_products(a, source, [0, 9], c)
    np.testing.assert_allclose(c, windows_reference(a, source, [0, 9], 20), rtol=1e-5, atol=1e-5)


def test_sum_of_products_refuses_a_target_inside_a_factor():
    source = np.ones((3, 40), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        blas.sum_of_products(np.ones((1, 3, 3), np.float32), source, [0], source[:, 20:])


@needs_direct_gemm
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("local_padding", [False, True])
def test_16_bit_inputs_are_the_float32_sum_rounded_once(monkeypatch, dtype, local_padding):
    if local_padding:
        monkeypatch.setattr(conv_paths, "SHIFTED_LOCAL_PAD_BYTES", 0)
    x_shape, w_shape, attrs = REAL_CASES[0]
    X, W, B = random_inputs(x_shape, w_shape, dtype, seed=8)
    got = conv(X, W, B, **attrs)
    wide = conv(X.astype(np.float32), W.astype(np.float32), B.astype(np.float32), **attrs)
    assert got.dtype == dtype
    assert got.tobytes() == wide.astype(dtype).tobytes()


@pytest.mark.parametrize("cores", [1, 2, 3, 4])
@pytest.mark.parametrize(
    "x_shape, w_shape, group",
    [((1, 64, 100, 100), (64, 64, 3, 3), 1), ((1, 32, 150, 150), (32, 32, 3, 3), 1),
     ((1, 64, 56, 56), (64, 64, 3, 3), 1), ((2, 64, 90, 90), (64, 32, 3, 3), 2)],
)
def test_shifted_blocks_share_evenly_between_the_cores(monkeypatch, cores, x_shape, w_shape,
                                                       group):
    # an odd number of blocks on two cores leaves one core idle for a whole block at the end
    monkeypatch.setattr(conv_paths.workers, "worker_count", lambda: cores)
    plan = plan_conv(x_shape, w_shape, pads=[1, 1, 1, 1], group=group)
    out0 = plan.output_shape[2]
    rows = conv_paths.shifted_block_rows(plan, 4)
    blocks = -(-out0 // rows)
    share = max(1, cores // group)
    assert blocks % share == 0
    per_block = (plan.output_shape[1] // group) * rows * (x_shape[3] + 2) * 4
    assert per_block <= conv_paths.SHIFTED_BLOCK_BYTES or rows == 1


def test_shifted_scratch_is_one_block_of_rows_per_core():
    plan = plan_conv((1, 64, 56, 56), (32, 64, 3, 3), pads=[1, 1, 1, 1])
    rows = conv_paths.shifted_block_rows(plan, 4)
    cores = conv_paths.workers.worker_count()
    assert conv_paths.shifted_scratch_bytes(plan, 4) == cores * 32 * rows * 58 * 4
    # a tile of 8 output channels over 5 output rows (7 padded rows of 20 columns)
    tile = conv_paths.shifted_scratch_bytes(plan, 4, 8, [7, 20])
    assert tile == cores * 8 * min(5, rows) * 20 * 4


def test_explain_counts_the_shifted_blocks():
    from padconv_cli.explain import conv_working_bytes

    plan = plan_conv((1, 64, 56, 56), (32, 64, 3, 3), pads=[1, 1, 1, 1])
    padded = 64 * 58 * 58 * 4
    assert conv_working_bytes(plan, np.dtype(np.float32)) == (
        padded + conv_paths.shifted_scratch_bytes(plan, 4))
