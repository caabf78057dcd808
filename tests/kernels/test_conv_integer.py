"""ConvInteger against the int64 loop oracle, exactly; its int32 wrap; its input rules."""

from __future__ import annotations

import numpy as np
import pytest
from family_oracles import integer_sums, oracle_conv_integer
from hypothesis import given, settings
from hypothesis import strategies as st

from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError
from padconv_cli.kernels.integer_conv import conv_integer, plan_conv_integer
from padconv_cli.kernels.quantized_plan import Operand

TYPES = [np.int8, np.uint8]


def random_integers(shape, dtype, rng):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64).astype(dtype)


@pytest.mark.parametrize("x_type", TYPES)
@pytest.mark.parametrize("w_type", TYPES)
@pytest.mark.parametrize("per_channel", [False, True])
def test_every_type_combination_is_exact(x_type, w_type, per_channel):
    rng = np.random.default_rng(1)
    x = random_integers((2, 4, 5, 6), x_type, rng)
    w = random_integers((6, 2, 3, 3), w_type, rng)
    xz = random_integers((), x_type, rng)
    wz = random_integers((6,) if per_channel else (), w_type, rng)
    attrs = {"group": 2, "pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 2]}
    y = conv_integer(x, w, xz, wz, **attrs)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, oracle_conv_integer(x, w, xz, wz, **attrs))


def test_padded_taps_add_nothing():
    """The padding holds x_zero_point: a 1x1 image with a 3x3 kernel and pads 1 is the centre
    tap alone."""
    x = np.array([[[[7]]]], np.uint8)
    w = np.arange(9, dtype=np.uint8).reshape(1, 1, 3, 3) + 1
    y = conv_integer(x, w, np.uint8(3), np.uint8(0), pads=[1, 1, 1, 1])
    assert y.shape == (1, 1, 1, 1) and int(y[0, 0, 0, 0]) == (7 - 3) * 5


def test_int32_sum_wraps_modulo_two_to_the_32():
    """255 * 255 * 33100 = 2152327500 > 2**31 - 1: the int32 result wraps."""
    n = 33100
    x = np.full((1, n, 1), 255, np.uint8)
    w = np.full((1, n, 1), 255, np.uint8)
    y = conv_integer(x, w)
    exact = 255 * 255 * n
    assert exact > 2**31 - 1
    assert int(y.reshape(-1)[0]) == exact - 2**32


def test_default_zero_points_are_zero():
    rng = np.random.default_rng(2)
    x = random_integers((1, 3, 4), np.int8, rng)
    w = random_integers((2, 3, 2), np.int8, rng)
    np.testing.assert_array_equal(conv_integer(x, w), integer_sums(x, w))


@pytest.mark.parametrize("threads", ["1", "2"])
def test_result_does_not_depend_on_the_thread_count(monkeypatch, threads):
    rng = np.random.default_rng(3)
    x = random_integers((1, 32, 12, 12), np.uint8, rng)
    w = random_integers((16, 32, 3, 3), np.int8, rng)
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", threads)
    y = conv_integer(x, w, np.uint8(128), pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(y, oracle_conv_integer(x, w, np.uint8(128), None,
                                                         pads=[1, 1, 1, 1]))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_attributes_are_exact(data):
    rank = data.draw(st.integers(1, 2))
    group = data.draw(st.integers(1, 2))
    cg, mg = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
    x_type, w_type = data.draw(st.sampled_from(TYPES)), data.draw(st.sampled_from(TYPES))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    size = [data.draw(st.integers(1, 5)) for _ in range(rank)]
    kernel = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    attrs = {"group": group,
             "strides": [data.draw(st.integers(1, 3)) for _ in range(rank)],
             "dilations": [data.draw(st.integers(1, 2)) for _ in range(rank)]}
    mode = data.draw(st.sampled_from(["pads", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if mode == "pads":
        attrs["pads"] = [data.draw(st.integers(0, 2)) for _ in range(2 * rank)]
    else:
        attrs["auto_pad"] = mode
    x = random_integers((1, cg * group, *size), x_type, rng)
    w = random_integers((mg * group, cg, *kernel), w_type, rng)
    xz = random_integers((), x_type, rng)
    wz = random_integers(data.draw(st.sampled_from([(), (mg * group,)])), w_type, rng)
    try:
        y = conv_integer(x, w, xz, wz, **attrs)
    except AttributeValueError:
        return  # an empty output
    np.testing.assert_array_equal(y, oracle_conv_integer(x, w, xz, wz, **attrs))


@pytest.mark.parametrize(("arguments", "param"), [
    ({"x": np.zeros((1, 1, 3), np.int16)}, "x"),
    ({"w": np.zeros((1, 1, 1), np.float32)}, "w"),
    ({"x_zero_point": np.int8(0)}, "x_zero_point"),
    ({"x_zero_point": np.zeros(2, np.uint8)}, "x_zero_point"),
    ({"w_zero_point": np.zeros(3, np.int8)}, "w_zero_point"),
    ({"w_zero_point": np.uint8(1)}, "w_zero_point"),
])
def test_bad_inputs_name_their_parameter(arguments, param):
    values = {"x": np.zeros((1, 1, 3), np.uint8), "w": np.zeros((2, 1, 1), np.int8),
              "x_zero_point": None, "w_zero_point": None, **arguments}
    with pytest.raises((AttributeValueError, UnsupportedDtypeError)) as caught:
        conv_integer(**values)
    assert caught.value.param == param


def test_conv_attribute_errors_name_the_operator_and_parameter():
    with pytest.raises(AttributeValueError, match="ConvInteger") as caught:
        conv_integer(np.zeros((1, 1, 3), np.uint8), np.zeros((1, 1, 1), np.uint8),
                     strides=[0])
    assert caught.value.param == "strides"


def test_plan_names_its_rulings():
    plan = plan_conv_integer(Operand((1, 1, 3), np.dtype(np.uint8)),
                             Operand((1, 1, 3), np.dtype(np.uint8)), pads=[1, 1])
    assert plan.rulings == ("integer-padding-is-zero-point", "conv-integer-int32-wraps")


ort = pytest.importorskip("onnxruntime")


def test_agrees_with_onnxruntime_per_tensor():
    """onnxruntime runs ConvInteger with uint8 X and per-tensor zero points."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(4)
    x = random_integers((1, 8, 9, 9), np.uint8, rng)
    w = random_integers((4, 8, 3, 3), np.uint8, rng)
    xz, wz = np.uint8(100), np.uint8(120)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1],
                            strides=[2, 2])
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TensorProto.UINT8, s) for n, s in
         [("x", x.shape), ("w", w.shape), ("xz", []), ("wz", [])]],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x, "w": w, "xz": np.array(xz), "wz": np.array(wz)})
    np.testing.assert_array_equal(conv_integer(x, w, xz, wz, pads=[1, 1, 1, 1], strides=[2, 2]),
                                  expected)


def _isas():
    from padconv_cli.kernels import native

    return native.available_isas()


@pytest.mark.parametrize("isa", ["avx512", "avx2", "generic"])
@pytest.mark.parametrize("x_type", TYPES)
@pytest.mark.parametrize("w_type", TYPES)
def test_every_instruction_set_is_exact(monkeypatch, isa, x_type, w_type):
    """VNNI (u8 x s8, no 16-bit saturation), AVX2 (int16 pairs) and portable kernels: the
    extreme values 255 * -128 in every product, and the int32 wrap."""
    if isa not in _isas():
        pytest.skip(f"{isa} is not available on this CPU")
    monkeypatch.setenv("PADCONV_NATIVE_ISA", isa)
    rng = np.random.default_rng(12)
    x = random_integers((2, 6, 7, 9), x_type, rng)
    w = random_integers((10, 3, 3, 2), w_type, rng)
    xz, wz = random_integers((), x_type, rng), random_integers((10,), w_type, rng)
    attrs = {"group": 2, "pads": [2, 1, 0, 1], "strides": [1, 2], "dilations": [2, 1]}
    np.testing.assert_array_equal(conv_integer(x, w, xz, wz, **attrs),
                                  oracle_conv_integer(x, w, xz, wz, **attrs))
    extreme_x = np.full((1, 40000, 1), np.iinfo(x_type).max, x_type)
    extreme_w = np.full((1, 40000, 1), np.iinfo(w_type).min, w_type)
    expected = np.iinfo(x_type).max * np.iinfo(w_type).min * 40000
    got = int(conv_integer(extreme_x, extreme_w).reshape(-1)[0])
    assert got == (expected + 2**31) % 2**32 - 2**31


@pytest.mark.parametrize("isa", ["avx512", "avx2", "generic"])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), [
    ((2, 10, 7, 9), (6, 5, 3, 2), {"group": 2, "pads": [2, 0, 1, 3], "dilations": [2, 1]}),
    ((1, 3, 11), (4, 3, 4), {"pads": [3, 1], "dilations": [3]}),
    ((1, 6, 4, 5, 3), (4, 3, 2, 3, 2), {"group": 2, "pads": [1, 0, 2, 0, 1, 1]}),
    ((1, 9, 6, 6), (9, 1, 3, 3), {"group": 9, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 8, 300), (5, 8, 3), {"pads": [1, 2]}),  # 1-D, many tiles
    ((1, 6, 9, 70), (7, 6, 3, 3), {"pads": [1, 1, 1, 1], "dilations": [1, 2]}),  # wide rows
    ((1, 4, 5, 6, 7), (3, 4, 2, 3, 2), {"pads": [0, 1, 1, 1, 0, 1]}),
    ((1, 16, 9, 9), (70, 16, 3, 3), {"pads": [1, 1, 1, 1]}),  # many rows of W
])
def test_stride_one_convolutions_are_exact(monkeypatch, isa, x_shape, w_shape, attrs):
    """Every stride 1: the VNNI kernel reads a transformed, padded X directly (no panel)."""
    if isa not in _isas():
        pytest.skip(f"{isa} is not available on this CPU")
    monkeypatch.setenv("PADCONV_NATIVE_ISA", isa)
    rng = np.random.default_rng(13)
    for x_type, w_type in [(np.uint8, np.int8), (np.int8, np.uint8)]:
        x, w = random_integers(x_shape, x_type, rng), random_integers(w_shape, w_type, rng)
        xz = random_integers((), x_type, rng)
        wz = random_integers((w_shape[0],), w_type, rng)
        np.testing.assert_array_equal(conv_integer(x, w, xz, wz, **attrs),
                                      oracle_conv_integer(x, w, xz, wz, **attrs))


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs", "param"), [
    ((1, 2, 3), (1, 3, 1), {}, "w"),
    ((1, 2), (1, 2), {}, "x"),
    ((1, 2, 3), (3, 1, 1), {"group": 2}, "group"),
    ((1, 1, 3), (1, 1, 5), {}, "pads"),
    ((1, 1, 3), (1, 1, 1), {"pads": [-1, 0]}, "pads"),
    ((1, 1, 3), (1, 1, 1), {"auto_pad": "SAME_UPPER", "pads": [0, 0]}, ("pads", "auto_pad")),
    ((1, 1, 3), (1, 1, 1), {"dilations": [0]}, "dilations"),
])
def test_geometry_errors_name_their_parameter(x_shape, w_shape, attrs, param):
    with pytest.raises(AttributeValueError, match="ConvInteger") as caught:
        conv_integer(np.zeros(x_shape, np.uint8), np.zeros(w_shape, np.uint8), **attrs)
    assert caught.value.param == param


@pytest.mark.parametrize(("attrs", "param"), [
    ({"strides": [1.0, 1.0]}, "strides"), ({"strides": [True, True]}, "strides"),
    ({"group": True}, "group"), ({"pads": (1.0, 1, 1, 1)}, "pads"),
])
def test_attributes_equal_to_accepted_ones_but_of_another_type_are_refused(attrs, param):
    """1.0 and True equal 1 but are refused, also right after an accepted call with 1."""
    x, w = np.zeros((1, 4, 5, 5), np.uint8), np.zeros((2, 4, 3, 3), np.uint8)
    conv_integer(x, w, strides=[1, 1], group=1, pads=(1, 1, 1, 1))
    with pytest.raises(AttributeValueError) as error:
        conv_integer(x, w, **attrs)
    assert error.value.param == param
