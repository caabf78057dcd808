"""The rulings of docs/semantics-family.md, one test (or a few) each, and the plan naming the
ruling it applied."""

from __future__ import annotations

import numpy as np
import pytest
from family_oracles import oracle_conv_transpose

from padconv_cli.errors import AttributeValueError
from padconv_cli.kernels.conv_transpose import conv_transpose, plan_conv_transpose
from padconv_cli.kernels.family_rulings import RULINGS
from padconv_cli.kernels.quantized_plan import Operand, plan_qlinear_conv


def ones(shape):
    return np.ones(shape, np.float64)


def test_same_with_output_padding_gives_in_times_stride():
    """Operator text: out = in * stride; output_padding goes into the total padding
    (shape inference says 7x7 here, onnxruntime and onnx.reference 6x6)."""
    plan = plan_conv_transpose((1, 1, 3, 3), (1, 1, 3, 3), auto_pad="SAME_UPPER",
                               strides=[2, 2], output_padding=[1, 1])
    assert plan.output_shape == (1, 1, 6, 6)
    assert plan.pads == (1, 1, 1, 1)  # total = 2*2 + 1 + 3 - 6 = 2
    assert "same-target-in-times-stride" in plan.rulings


def test_same_lower_puts_the_odd_element_first():
    """Total ``2 * (3 - 1) + k - 6``: even for k = 4, odd (1) for k = 3."""
    plan = plan_conv_transpose((1, 1, 3), (1, 1, 4), auto_pad="SAME_LOWER", strides=[2])
    assert plan.output_shape[2:] == (6,) and plan.pads == (1, 1)
    plan = plan_conv_transpose((1, 1, 3), (1, 1, 3), auto_pad="SAME_LOWER", strides=[2])
    assert plan.pads == (1, 0) and "floor-division-split" in plan.rulings
    plan = plan_conv_transpose((1, 1, 3), (1, 1, 3), auto_pad="SAME_UPPER", strides=[2])
    assert plan.pads == (0, 1)


def test_negative_total_from_output_shape_extends_at_the_end():
    """ONNX's test_convtranspose_output_shape: total -1 splits (0, -1) by floor division, so
    the last row and column hold the bias only."""
    x = np.arange(9, dtype=np.float64).reshape(1, 1, 3, 3)
    w = ones((1, 2, 3, 3))
    b = np.array([5.0, 7.0])
    plan = plan_conv_transpose(x.shape, w.shape, b.shape, strides=[3, 2],
                               output_shape=[10, 8])
    assert plan.pads == (0, 0, -1, -1)
    assert {"floor-division-split", "negative-padding-extends"} <= set(plan.rulings)
    y = conv_transpose(x, w, b, strides=[3, 2], output_shape=[10, 8])
    np.testing.assert_array_equal(y[0, :, -1, :], [[5.0] * 8, [7.0] * 8])
    np.testing.assert_array_equal(y[0, :, :, -1], [[5.0] * 10, [7.0] * 10])


def test_same_beyond_the_uncropped_output_extends_both_sides():
    """in * stride = 9 > 7 = un-cropped length: total -2, pads (-1, -1); onnx.reference agrees,
    onnxruntime returns the 7 un-cropped values."""
    x = np.array([[[1.0, 2.0, 3.0]]])
    w = np.array([[[10.0]]])
    b = np.array([0.5])
    y = conv_transpose(x, w, b, auto_pad="SAME_UPPER", strides=[3])
    np.testing.assert_array_equal(
        y, [[[0.5, 10.5, 0.5, 0.5, 20.5, 0.5, 0.5, 30.5, 0.5]]])
    assert plan_conv_transpose(x.shape, w.shape, auto_pad="SAME_UPPER", strides=[3]).pads \
        == (-1, -1)


def test_output_padding_below_the_dilation_is_accepted():
    """output_padding 1 >= stride 1 but < dilation 2: accepted (torch accepts; onnxruntime
    refuses)."""
    x, w = ones((1, 1, 3)), ones((1, 1, 3))
    plan = plan_conv_transpose(x.shape, w.shape, dilations=[2], output_padding=[1])
    assert plan.output_shape[2:] == (8,)
    assert "output-padding-below-stride-or-dilation" in plan.rulings
    y = conv_transpose(x, w, dilations=[2], output_padding=[1])
    np.testing.assert_array_equal(y, oracle_conv_transpose(x, w, dilations=[2],
                                                           output_padding=[1]))
    assert y[0, 0, -1] == 0.0


@pytest.mark.parametrize(("strides", "dilations", "padding"), [
    ([1], [2], [2]), ([2], [1], [2]), ([3], [3], [3]),
])
def test_output_padding_at_or_above_both_is_refused(strides, dilations, padding):
    with pytest.raises(AttributeValueError, match="output_padding") as caught:
        plan_conv_transpose((1, 1, 3), (1, 1, 3), strides=strides, dilations=dilations,
                            output_padding=padding)
    assert caught.value.param == "output_padding"


def test_output_shape_overrides_pads():
    """Operator text: with output_shape, pads are ignored (onnxruntime agrees; onnx.reference
    uses the pads, or raises)."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 1, 3, 3)), rng.standard_normal((1, 1, 3, 3))
    with_pads = conv_transpose(x, w, strides=[2, 2], pads=[0, 0, 1, 1], output_shape=[6, 6])
    without = conv_transpose(x, w, strides=[2, 2], output_shape=[6, 6])
    np.testing.assert_array_equal(with_pads, without)
    plan = plan_conv_transpose(x.shape, w.shape, strides=[2, 2], pads=[0, 0, 1, 1],
                               output_shape=[6, 6])
    assert plan.pads == (1, 1, 0, 0) and "output-shape-overrides-pads" in plan.rulings


def test_output_shape_with_batch_and_channels_is_refused():
    """ONNX shape inference and onnxruntime refuse an output_shape of rank + 2 values."""
    with pytest.raises(AttributeValueError, match="leave out N and M") as caught:
        plan_conv_transpose((2, 1, 3), (1, 4, 3), output_shape=[2, 4, 6], strides=[2])
    assert caught.value.param == "output_shape"


def test_integer_plans_name_their_rulings():
    u8, i8, f32 = np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.float32)
    plan = plan_qlinear_conv(Operand((1, 1, 4), u8), Operand((), f32), Operand((), u8),
                             Operand((2, 1, 3), i8), Operand((2,), f32), Operand((2,), i8),
                             Operand((), f32), Operand((), u8), pads=[1, 1])
    assert plan.rulings == ("integer-padding-is-zero-point", "qlinear-exact-accumulation",
                            "qlinear-exactly-rounded")
    assert plan.w_scale_per_channel and plan.w_zero_point_per_channel


def test_every_ruling_is_written_down():
    import pathlib

    text = (pathlib.Path(__file__).parents[2] / "docs" / "semantics-family.md").read_text()
    for name in RULINGS:
        assert f"`{name}`" in text, name


ort = pytest.importorskip("onnxruntime")


def _ort_conv_transpose(x, w, **attrs):
    from onnx import TensorProto, helper

    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                      for n, a in (("x", x), ("w", w))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x, "w": w})[0]


@pytest.mark.parametrize("attrs", [
    {"auto_pad": "SAME_UPPER", "strides": [2, 2], "output_padding": [1, 1]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 2], "output_padding": [1, 0]},
    {"strides": [3, 2], "output_shape": [10, 8]},
    {"strides": [2, 2], "pads": [0, 0, 1, 1], "output_shape": [6, 6]},
])
def test_onnxruntime_agrees_on(attrs):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    expected = _ort_conv_transpose(x, w, **attrs)
    got = conv_transpose(x.astype(np.float64), w.astype(np.float64), **attrs)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
