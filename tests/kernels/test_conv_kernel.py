"""Conv kernel: spec examples, a direct-loop oracle, dtypes, chunking, onnxruntime, properties,
and taps and outputs that read only padding cut off without changing a bit."""

from __future__ import annotations

import itertools
import os
import signal

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import (  # noqa: F401  (re-exported for the other conv test files)
    assert_conv_within_bound,
    fp16_spec_example,
    oracle_conv,
    random_inputs,
    resolve_pads,
)

import padconv_cli.kernels.conv as conv_module
from padconv_cli.kernels.conv import conv, plan_conv

# Conv kernel: spec examples, a direct-loop oracle, dtypes, chunking, onnxruntime, properties.


GRID_5x5 = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
GRID_7x5 = np.arange(35, dtype=np.float32).reshape(1, 1, 7, 5)
ONES_3x3 = np.ones((1, 1, 3, 3), dtype=np.float32)

SPEC_EXAMPLES = {
    "basic_conv_with_padding": (
        GRID_5x5, ONES_3x3, None, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        [[12, 21, 27, 33, 24], [33, 54, 63, 72, 51], [63, 99, 108, 117, 81],
         [93, 144, 153, 162, 111], [72, 111, 117, 123, 84]],
    ),
    "basic_conv_without_padding": (
        GRID_5x5, ONES_3x3, None, {"kernel_shape": [3, 3]},
        [[54, 63, 72], [99, 108, 117], [144, 153, 162]],
    ),
    "conv_with_autopad_same": (
        np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), ONES_3x3,
        np.array([0.5], dtype=np.float32), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"},
        [[10.5, 18.5, 24.5, 18.5], [27.5, 45.5, 54.5, 39.5], [51.5, 81.5, 90.5, 63.5],
         [42.5, 66.5, 72.5, 50.5]],
    ),
    "conv_with_strides_and_asymmetric_padding": (
        GRID_7x5, ONES_3x3, None,
        {"kernel_shape": [3, 3], "pads": [1, 0, 1, 0], "strides": [2, 2]},
        [[21, 33], [99, 117], [189, 207], [171, 183]],
    ),
    "conv_with_strides_no_padding": (
        GRID_7x5, ONES_3x3, None, {"kernel_shape": [3, 3], "strides": [2, 2]},
        [[54, 72], [144, 162], [234, 252]],
    ),
    "conv_with_strides_padding": (
        GRID_7x5, ONES_3x3, None,
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
        [[12, 27, 24], [63, 108, 81], [123, 198, 141], [112, 177, 124]],
    ),
}


@pytest.mark.parametrize("name", sorted(SPEC_EXAMPLES))
def test_spec_example(name):
    X, W, B, attrs, expected = SPEC_EXAMPLES[name]
    Y = conv(X, W, B, **attrs)
    assert Y.dtype == np.float32
    np.testing.assert_array_equal(Y, np.array(expected, dtype=np.float32)[None, None])


def test_spec_example_fp16_bit_for_bit():
    X, W, B, expected = fp16_spec_example()
    Y = conv(X, W, B, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert Y.dtype == np.float16
    assert Y.tobytes() == expected.tobytes()


# --- against the oracle -------------------------------------------------------------------------

ORACLE_CASES = {
    # 1-D
    "1d_plain": ((2, 3, 11), (4, 3, 3), {}),
    "1d_stride_dilation_asym": ((2, 3, 13), (4, 3, 3), {"strides": [2], "dilations": [2],
                                                         "pads": [2, 1]}),
    "1d_groups": ((1, 4, 9), (6, 2, 2), {"group": 2, "pads": [0, 3]}),
    "1d_depthwise_multiplier": ((2, 3, 10), (6, 1, 3), {"group": 3, "pads": [1, 1]}),
    "1d_depthwise_strided": ((1, 3, 10), (3, 1, 4), {"group": 3, "strides": [3],
                                                     "pads": [2, 0]}),
    "1d_same_lower_stride": ((1, 2, 10), (3, 2, 4), {"auto_pad": "SAME_LOWER",
                                                     "strides": [3]}),
    "1d_pointwise": ((3, 4, 7), (5, 4, 1), {}),
    "1d_pointwise_strided_padded": ((1, 4, 7), (5, 4, 1), {"strides": [2], "pads": [1, 2]}),
    # 2-D
    "2d_asym_pads": ((1, 2, 6, 5), (3, 2, 3, 2), {"pads": [1, 0, 2, 1]}),
    "2d_strides_dilations": ((2, 2, 9, 8), (3, 2, 3, 2), {"strides": [2, 3],
                                                          "dilations": [2, 1],
                                                          "pads": [1, 2, 0, 1]}),
    "2d_groups_3": ((1, 6, 5, 5), (6, 2, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    "2d_depthwise": ((2, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    "2d_depthwise_multiplier_3": ((1, 2, 5, 6), (6, 1, 2, 3), {"group": 2,
                                                               "dilations": [2, 1]}),
    "2d_depthwise_multiplier_8": ((1, 2, 5, 5), (16, 1, 3, 3), {"group": 2,
                                                                "pads": [1, 1, 1, 1]}),
    "2d_depthwise_strided": ((1, 3, 7, 7), (3, 1, 3, 3), {"group": 3, "strides": [2, 2],
                                                          "pads": [1, 0, 0, 1]}),
    "2d_single_channel_many_outputs": ((2, 1, 5, 5), (7, 1, 2, 2), {}),
    "2d_same_upper": ((1, 2, 5, 6), (2, 2, 3, 4), {"auto_pad": "SAME_UPPER"}),
    "2d_same_lower": ((1, 2, 5, 6), (2, 2, 3, 4), {"auto_pad": "SAME_LOWER"}),
    "2d_same_upper_strided": ((1, 2, 7, 6), (2, 2, 3, 3), {"auto_pad": "SAME_UPPER",
                                                           "strides": [2, 3]}),
    "2d_same_lower_dilated": ((1, 2, 7, 6), (2, 2, 3, 2), {"auto_pad": "SAME_LOWER",
                                                           "dilations": [2, 3]}),
    "2d_same_upper_dilated_strided": ((1, 1, 8, 7), (2, 1, 2, 3),
                                      {"auto_pad": "SAME_UPPER", "dilations": [3, 2],
                                       "strides": [2, 2]}),
    "2d_valid": ((1, 2, 6, 7), (2, 2, 3, 2), {"auto_pad": "VALID", "strides": [2, 2]}),
    "2d_pointwise_groups": ((2, 4, 3, 4), (6, 2, 1, 1), {"group": 2}),
    "2d_kernel_larger_than_input_with_pads": ((1, 1, 2, 2), (1, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    "2d_pads_only_output": ((1, 1, 1, 1), (2, 1, 2, 2), {"pads": [3, 2, 3, 2],
                                                         "strides": [2, 2]}),
    "2d_wide_rows": ((2, 3, 6, 12), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    "2d_wide_rows_groups": ((1, 4, 5, 16), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "2d_wide_rows_dilated": ((1, 2, 7, 20), (2, 2, 2, 3), {"dilations": [2, 2],
                                                           "pads": [0, 2, 1, 2]}),
    # 3-D
    "3d_wide_rows": ((1, 2, 4, 5, 12), (3, 2, 2, 1, 3), {"pads": [0, 0, 1, 0, 0, 1]}),
    "3d_plain": ((1, 2, 4, 5, 4), (3, 2, 2, 3, 2), {}),
    "3d_everything": ((2, 4, 5, 6, 5), (4, 2, 2, 3, 2), {"group": 2, "strides": [1, 2, 2],
                                                          "dilations": [2, 1, 1],
                                                          "pads": [1, 0, 1, 0, 2, 1]}),
    "3d_depthwise": ((1, 3, 4, 4, 4), (3, 1, 3, 3, 3), {"group": 3, "pads": [1] * 6}),
    "3d_same_lower": ((1, 1, 5, 4, 3), (2, 1, 2, 3, 2), {"auto_pad": "SAME_LOWER"}),
    "3d_valid": ((1, 2, 4, 5, 4), (1, 2, 3, 3, 3), {"auto_pad": "VALID"}),
}


@pytest.mark.parametrize("name", sorted(ORACLE_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_oracle(name, dtype):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    Y = conv(X, W, B, **attrs)
    expected = oracle_conv(X, W, B, **attrs)
    assert Y.dtype == dtype
    assert Y.shape == expected.shape == plan_conv(X.shape, W.shape, **attrs).output_shape
    assert_conv_within_bound(Y, X, W, B, expected=expected, **attrs)


@pytest.mark.parametrize("name", ["1d_plain", "2d_groups_3", "3d_everything", "2d_depthwise"])
def test_without_bias(name):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, _ = random_inputs(x_shape, w_shape, np.float64)
    assert_conv_within_bound(conv(X, W, **attrs), X, W, **attrs)


# --- element types ------------------------------------------------------------------------------

LOW_PRECISION = [np.float16, ml_dtypes.bfloat16]


@pytest.mark.parametrize("name", ["1d_groups", "2d_strides_dilations", "2d_depthwise",
                                  "1d_pointwise", "3d_plain"])
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_low_precision_rounds_the_float32_sum_once(name, dtype):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    Y = conv(X, W, B, **attrs)
    assert Y.dtype == np.dtype(dtype)
    exact = oracle_conv(X.astype(np.float64), W.astype(np.float64), B.astype(np.float64),
                        **attrs)
    # one rounding of a float32 sum: the float32 bound plus one rounding to the output type
    assert_conv_within_bound(Y, X, W, B, expected=exact, **attrs)
    from_float32 = conv(X.astype(np.float32), W.astype(np.float32), B.astype(np.float32),
                        **attrs)
    assert Y.tobytes() == from_float32.astype(dtype).tobytes()


def test_float64_keeps_precision_float32_would_lose():
    X = np.array([[[1e8, 1.0, -1e8]]])
    W = np.ones((1, 1, 3))
    assert conv(X, W)[0, 0, 0] == 1.0
    assert conv(X.astype(np.float32), W.astype(np.float32)).dtype == np.float32


# --- chunking, memory, empty batches ------------------------------------------------------------


@pytest.mark.parametrize("name", ["2d_depthwise", "2d_depthwise_strided",
                                  "2d_depthwise_multiplier_3", "3d_depthwise",
                                  "1d_depthwise_multiplier"])
def test_depthwise_cases(name):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, np.float64)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, **attrs)


def test_wide_overhead_case_still_correct():
    X, W, B = random_inputs((1, 2, 3, 2), (2, 1, 1, 3), np.float64)
    attrs = {"group": 2, "pads": [0, 4, 0, 4], "dilations": [1, 4]}
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"),
    [((0, 3, 5, 5), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
     ((0, 4, 6), (4, 1, 3), {"group": 4}),
     ((0, 4, 6), (8, 4, 1), {})],
)
def test_empty_batch(x_shape, w_shape, attrs, dtype):
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    Y = conv(X, W, B, **attrs)
    assert Y.dtype == dtype
    assert Y.shape == (0, w_shape[0], *plan_conv(x_shape, w_shape, **attrs).output_shape[2:])


def test_zero_input_channels_gives_the_bias():
    X = np.zeros((2, 0, 4), np.float32)
    W = np.zeros((3, 0, 2), np.float32)
    B = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(conv(X, W, B), np.broadcast_to(B[None, :, None], (2, 3, 3)))


def test_inputs_are_not_modified_and_non_contiguous_inputs_work():
    X, W, B = random_inputs((2, 4, 9, 7), (6, 4, 3, 3), np.float64)
    X_t = np.asfortranarray(X)
    W_view = np.concatenate([W, W], axis=0)[::2]
    before = (X_t.copy(), W_view.copy())
    attrs = {"pads": [1, 1, 0, 0]}
    assert_conv_within_bound(conv(X_t, W_view, B, **attrs), X, W_view, B, **attrs)
    np.testing.assert_array_equal(X_t, before[0])
    np.testing.assert_array_equal(W_view, before[1])


def test_calls_of_one_shape_take_any_layout_and_read_the_settings_each_time(monkeypatch):
    """What conv() remembers of a call's shapes does not hold on to its layout or settings."""
    from padconv_cli.errors import PadconvError
    from padconv_cli.kernels import native

    X, W, B = random_inputs((2, 8, 9, 9), (4, 8, 3, 3), np.float32)
    want = conv(X, W, B, pads=[1, 1, 1, 1])
    assert_conv_within_bound(want, X, W, B, pads=[1, 1, 1, 1])
    strided = np.repeat(W, 2, axis=0)[::2]  # W, every other row of a copy
    for x, w, b in [(np.asfortranarray(X), W, B), (X, strided, B), (X, W, B[::-1].copy()[::-1]),
                    (X.astype(">f4"), W, B)]:
        np.testing.assert_array_equal(conv(x, w, b, pads=[1, 1, 1, 1]), want)
    with pytest.raises(PadconvError, match="share one dtype"):
        conv(X, W, B.astype(np.float64), pads=[1, 1, 1, 1])
    monkeypatch.setenv(native.THREADS_VARIABLE, "1")
    np.testing.assert_array_equal(conv(X, W, B, pads=[1, 1, 1, 1]), want)
    monkeypatch.setenv(native.ISA_VARIABLE, "sse9")
    with pytest.raises(PadconvError, match="sse9 is not available"):
        conv(X, W, B, pads=[1, 1, 1, 1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("swapped", ["X and W", "W"])
@pytest.mark.parametrize("name", ["2d_groups_3", "2d_depthwise", "1d_pointwise"])
def test_big_endian_inputs(name, swapped, dtype):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    big = np.dtype(dtype).newbyteorder(">")
    Y = conv(X.astype(big) if swapped == "X and W" else X, W.astype(big), B, **attrs)
    assert_conv_within_bound(Y, X, W, B, **attrs)
    assert Y.dtype == np.dtype(dtype)


@pytest.mark.parametrize("name", ["2d_depthwise", "2d_depthwise_strided", "2d_groups_3",
                                  "1d_pointwise", "3d_everything", "2d_strides_dilations"])
def test_nan_and_inf_stay_inside_their_receptive_field(name):
    check_nan_and_inf_stay_inside_their_receptive_field(name)


def check_nan_and_inf_stay_inside_their_receptive_field(name):
    """A NaN and an Inf in X reach exactly the outputs the oracle says, the rest is exact."""
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, np.float64)
    X[(0, 0, *(size // 2 for size in x_shape[2:]))] = np.nan
    X[(-1, -1, *(size - 1 for size in x_shape[2:]))] = np.inf
    Y = conv(X, W, B, **attrs)
    expected = oracle_conv(X, W, B, **attrs)
    np.testing.assert_array_equal(np.isnan(Y), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(Y), np.isinf(expected))
    assert_conv_within_bound(Y, X, W, B, expected=expected, **attrs)


# --- differential: onnxruntime ------------------------------------------------------------------

ORT_DTYPES = {np.float32: 1, np.float64: 11, np.float16: 10}


def run_onnxruntime(X, W, B, attrs):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
            np.dtype(np.float16): TensorProto.FLOAT16}[X.dtype]
    names = ["X", "W"] + (["B"] if B is not None else [])
    node = helper.make_node("Conv", names, ["Y"], **attrs)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info(n, elem, None) for n in names],
        [helper.make_tensor_value_info("Y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    try:
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        pytest.skip(f"onnxruntime has no CPU Conv for {X.dtype}: {str(exc)[:120]}")
    feeds = dict(zip(names, [X, W, B][: len(names)], strict=True))
    return session.run(None, feeds)[0]


ORT_CASES = sorted(
    name for name, (_, w_shape, attrs) in ORACLE_CASES.items()
    # onnxruntime refuses SAME_* together with dilations (the spec formulas allow them)
    if not (attrs.get("auto_pad", "").startswith("SAME") and "dilations" in attrs)
)


@pytest.mark.parametrize("name", ORT_CASES)
def test_matches_onnxruntime_float32(name):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, np.float32, seed=1)
    # both sides are float32 sums in their own order: each within the bound of the exact value
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, expected=run_onnxruntime(
        X, W, B, attrs), slack=2, **attrs)


@pytest.mark.parametrize("name", ["2d_strides_dilations", "1d_depthwise_multiplier"])
def test_matches_onnxruntime_float16(name):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, np.float16, seed=2)
    expected = run_onnxruntime(X, W, B, attrs)
    np.testing.assert_allclose(conv(X, W, B, **attrs).astype(np.float64), expected,
                               rtol=5e-3, atol=5e-3)


def run_onnx_reference(X, W, B, attrs):
    """A one-node Conv-22 model run by onnx's reference evaluator (onnxruntime has no float64
    Conv on CPU)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    names = ["X", "W"] + (["B"] if B is not None else [])
    node = helper.make_node("Conv", names, ["Y"], **attrs)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info(n, TensorProto.DOUBLE, None) for n in names],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    feeds = dict(zip(names, [X, W, B][: len(names)], strict=True))
    return ReferenceEvaluator(model).run(None, feeds)[0]


@pytest.mark.parametrize("name", ["2d_strides_dilations", "1d_depthwise_multiplier",
                                  "2d_groups_3", "3d_everything"])
def test_matches_onnx_reference_float64(name):
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, np.float64, seed=2)
    expected = run_onnx_reference(X, W, B, attrs)
    assert expected.dtype == np.float64
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, expected=expected, slack=2, **attrs)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"),
    [((2, 16, 20, 20), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
     ((1, 3, 33, 31), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
     ((1, 32, 15, 15), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1]}),
     ((1, 32, 14, 14), (64, 32, 1, 1), {}),
     ((2, 8, 500), (16, 8, 9), {"pads": [4, 4]}),
     ((1, 4, 9, 10, 11), (8, 4, 3, 3, 3), {"pads": [1] * 6}),
     ((1, 8, 24, 24), (8, 8, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]})],
)
def test_benchmark_shapes_scaled_down_match_onnxruntime(x_shape, w_shape, attrs):
    X, W, B = random_inputs(x_shape, w_shape, np.float32, seed=3)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, expected=run_onnxruntime(
        X, W, B, attrs), slack=2, **attrs)


# --- properties ---------------------------------------------------------------------------------


@st.composite
def conv_problems(draw):
    """A random valid Conv: rank 1-3, groups, strides, dilations, pads or auto_pad."""
    rank = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    c_group = draw(st.integers(1, 2))
    m = group * draw(st.integers(1, 2))
    kernel = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    dilations = draw(st.lists(st.integers(1, 2), min_size=rank, max_size=rank))
    strides = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    spatial = [
        (k - 1) * d + 1 + draw(st.integers(0, 4)) for k, d in zip(kernel, dilations, strict=True)
    ]
    attrs = {"group": group, "strides": strides, "dilations": dilations, "auto_pad": auto_pad}
    if auto_pad == "NOTSET":
        attrs["pads"] = draw(st.lists(st.integers(0, 2), min_size=2 * rank, max_size=2 * rank))
    n = draw(st.integers(1, 2))
    return (n, group * c_group, *spatial), (m, c_group, *kernel), attrs


PROPERTY_SETTINGS = settings(max_examples=40, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(conv_problems(), st.integers(0, 2**32 - 1))
def test_property_matches_oracle(problem, seed):
    x_shape, w_shape, attrs = problem
    X, W, B = random_inputs(x_shape, w_shape, np.float64, seed=seed)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, **attrs)


@PROPERTY_SETTINGS
@given(conv_problems(), st.integers(0, 2**32 - 1), st.floats(-3, 3), st.floats(-3, 3))
def test_property_linear_in_x_and_in_w(problem, seed, a, b):
    x_shape, w_shape, attrs = problem
    X1, W1, _ = random_inputs(x_shape, w_shape, np.float64, seed=seed)
    X2, W2, _ = random_inputs(x_shape, w_shape, np.float64, seed=seed + 1)
    np.testing.assert_allclose(conv(a * X1 + b * X2, W1, **attrs),
                               a * conv(X1, W1, **attrs) + b * conv(X2, W1, **attrs),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(conv(X1, a * W1 + b * W2, **attrs),
                               a * conv(X1, W1, **attrs) + b * conv(X1, W2, **attrs),
                               rtol=1e-9, atol=1e-9)


@PROPERTY_SETTINGS
@given(conv_problems(), st.data())
def test_property_one_hot_kernel_is_a_shifted_crop(problem, data):
    """A kernel with one 1 at offset k copies Xpad[n, c, o*s + k*d] (identity over channels)."""
    x_shape, w_shape, attrs = problem
    channels, kernel = x_shape[1], w_shape[2:]
    offset = tuple(data.draw(st.integers(0, k - 1)) for k in kernel)
    W = np.zeros((channels, 1, *kernel))
    W[(slice(None), 0, *offset)] = 1.0
    attrs = {**attrs, "group": channels}
    X = np.random.default_rng(7).standard_normal(x_shape)
    Y = conv(X, W, **attrs)
    begins, ends = resolve_pads(x_shape[2:], kernel, attrs["strides"], attrs["dilations"],
                                attrs["auto_pad"], attrs.get("pads"))
    padded = np.pad(X, [(0, 0), (0, 0), *zip(begins, ends, strict=True)])
    crop = tuple(
        slice(k * d, k * d + (o - 1) * s + 1, s)
        for k, d, s, o in zip(
            offset, attrs["dilations"], attrs["strides"], Y.shape[2:], strict=True
        )
    )
    np.testing.assert_array_equal(Y, padded[(slice(None), slice(None), *crop)])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_worker_threads_are_recreated_in_a_forked_child(monkeypatch):
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", "2")
    x_shape, w_shape, attrs = ORACLE_CASES["2d_depthwise"]
    X, W, B = random_inputs(x_shape, w_shape, np.float64)
    expected = conv(X, W, B, **attrs)  # the parent's pool now exists
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 2
        try:
            signal.alarm(30)
            code = 0 if np.array_equal(conv(X, W, B, **attrs), expected) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# Taps and outputs that read only padding: found exactly, and cutting them off changes no bit
# of the result (NaN from ``0 * inf`` on the padding, bias, signed zeros, every dtype).


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
    part = conv_module.convolve_cut(plan, cut, X, W.astype(acc), B.astype(acc))
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
