"""QLinearConv against the exact int64/rational oracle; its requantization ties; input rules;
onnxruntime's float32 requantization as a classified 1-LSB deviation."""

from __future__ import annotations

import numpy as np
import pytest
from family_oracles import exact_requantize, integer_sums, oracle_qlinear_conv
from hypothesis import given, settings
from hypothesis import strategies as st

from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError
from padconv_cli.kernels.integer_conv import qlinear_conv
from padconv_cli.kernels.requantize import channel_multipliers, requantize

TYPES = [np.int8, np.uint8]


def random_integers(shape, dtype, rng):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64).astype(dtype)


def quantized_case(rng, x_type, w_type, y_type, x_shape, w_shape, per_channel, bias=True):
    m = w_shape[0]
    x = random_integers(x_shape, x_type, rng)
    w = random_integers(w_shape, w_type, rng)
    xs = np.float32(rng.uniform(0.001, 0.05))
    ws = rng.uniform(0.001, 0.05, size=m if per_channel else ()).astype(np.float32)
    ys = np.float32(rng.uniform(0.05, 2.0))
    xz = random_integers((), x_type, rng)
    wz = random_integers((m,) if per_channel else (), w_type, rng)
    yz = random_integers((), y_type, rng)
    b = rng.integers(-5000, 5000, size=m).astype(np.int32) if bias else None
    return [x, xs, xz, w, ws, wz, ys, yz, b]


@pytest.mark.parametrize("x_type", TYPES)
@pytest.mark.parametrize("w_type", TYPES)
@pytest.mark.parametrize("y_type", TYPES)
@pytest.mark.parametrize("per_channel", [False, True])
def test_every_type_combination_is_exact(x_type, w_type, y_type, per_channel):
    rng = np.random.default_rng(7)
    args = quantized_case(rng, x_type, w_type, y_type, (1, 4, 5, 5), (6, 2, 3, 3), per_channel)
    attrs = {"group": 2, "pads": [1, 1, 0, 2], "strides": [1, 2]}
    y = qlinear_conv(*args, **attrs)
    assert y.dtype == np.dtype(y_type)
    np.testing.assert_array_equal(y, oracle_qlinear_conv(*args, **attrs))


@pytest.mark.parametrize("rank", [1, 3])
def test_per_channel_in_one_and_three_dimensions(rank):
    """onnx.reference gets per-channel scales wrong outside 2-D; the rule is the same."""
    rng = np.random.default_rng(8)
    spatial = (5,) * rank
    args = quantized_case(rng, np.uint8, np.int8, np.uint8, (1, 3, *spatial),
                          (4, 3, *(2,) * rank), True)
    y = qlinear_conv(*args, pads=[1] * 2 * rank)
    np.testing.assert_array_equal(y, oracle_qlinear_conv(*args, pads=[1] * 2 * rank))


@pytest.mark.parametrize(("acc", "x_scale", "y_scale", "expected"), [
    (-99, 0.75, 5.5, -14),     # -13.5 exactly: to even; float64 alone gives -13
    (175, 1.75, 12.5, 24),     # 24.5: to even; float64 alone gives 25
    (17298, 0.0078125, 2.90625, 46),  # 46.5; float64 alone gives 47
    (3, 0.5, 1.0, 2),          # 1.5 -> 2
    (5, 0.5, 1.0, 2),          # 2.5 -> 2
    (-5, 0.5, 1.0, -2),        # -2.5 -> -2
])
def test_ties_round_to_even_from_the_exact_value(acc, x_scale, y_scale, expected):
    factors = channel_multipliers(np.float32(x_scale), np.ones(1, np.float32),
                                  np.float32(y_scale))
    y = requantize(np.array([[acc]], np.int64), factors, 0, np.dtype(np.int32))
    assert int(y[0, 0]) == expected
    assert exact_requantize(acc, x_scale, 1.0, y_scale, 0, -2**31, 2**31 - 1) == expected


@settings(max_examples=60, deadline=None)
@given(acc=st.integers(-2**34, 2**34),
       scales=st.tuples(*[st.floats(2.0**-20, 1024.0, width=32)] * 3),
       zero=st.integers(-128, 127))
def test_requantization_is_exactly_rounded(acc, scales, zero):
    xs, ws, ys = (np.float32(s) for s in scales)
    factors = channel_multipliers(xs, np.array([ws]), ys)
    y = requantize(np.array([[acc]], np.int64), factors, zero, np.dtype(np.int8))
    assert int(y[0, 0]) == exact_requantize(acc, xs, ws, ys, zero, -128, 127)


def test_saturates_at_the_output_range():
    x = np.full((1, 1, 1), 255, np.uint8)
    w = np.full((1, 1, 1), 127, np.int8)
    args = [x, np.float32(1), np.uint8(0), w, np.float32(1), np.int8(0), np.float32(1)]
    assert int(qlinear_conv(*args, np.uint8(0)).reshape(-1)[0]) == 255
    assert int(qlinear_conv(*args, np.int8(0)).reshape(-1)[0]) == 127
    negative = np.full((1, 1, 1), -128, np.int8)
    assert int(qlinear_conv(x, np.float32(1), np.uint8(0), negative, np.float32(1), np.int8(0),
                            np.float32(1), np.int8(0)).reshape(-1)[0]) == -128


def test_accumulation_is_exact_past_int32():
    """255 * 127 * 70000 > 2**31: no 32-bit wrap before requantization."""
    n = 70000
    x = np.full((1, n, 1), 255, np.uint8)
    w = np.full((1, n, 1), 127, np.int8)
    y = qlinear_conv(x, np.float32(1), np.uint8(0), w, np.float32(2.0**-30), np.int8(0),
                     np.float32(1), np.uint8(0))
    assert int(y.reshape(-1)[0]) == round(255 * 127 * n / 2**30)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_attributes_are_exact(data):
    rank = data.draw(st.integers(1, 2))
    group = data.draw(st.integers(1, 2))
    cg, mg = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
    types = [data.draw(st.sampled_from(TYPES)) for _ in range(3)]
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
    args = quantized_case(rng, *types, (1, cg * group, *size), (mg * group, cg, *kernel),
                          data.draw(st.booleans()), data.draw(st.booleans()))
    try:
        y = qlinear_conv(*args, **attrs)
    except AttributeValueError:
        return  # an empty output
    np.testing.assert_array_equal(y, oracle_qlinear_conv(*args, **attrs))


def good_arguments():
    return {"x": np.zeros((1, 1, 3), np.uint8), "x_scale": np.float32(0.5),
            "x_zero_point": np.uint8(0), "w": np.zeros((2, 1, 1), np.int8),
            "w_scale": np.float32(0.5), "w_zero_point": np.int8(0),
            "y_scale": np.float32(1), "y_zero_point": np.uint8(0), "b": None}


@pytest.mark.parametrize(("change", "param"), [
    ({"x_scale": np.float32(0)}, "x_scale"),
    ({"w_scale": np.float32(-1)}, "w_scale"),
    ({"y_scale": np.float32(np.inf)}, "y_scale"),
    ({"y_scale": np.float32(np.nan)}, "y_scale"),
    ({"x_scale": np.float64(0.1)}, "x_scale"),
    ({"x_scale": np.int32(1)}, "x_scale"),
    ({"w_scale": np.ones(3, np.float32)}, "w_scale"),
    ({"w_zero_point": np.zeros(3, np.int8)}, "w_zero_point"),
    ({"w_zero_point": np.uint8(0)}, "w_zero_point"),
    ({"x_zero_point": np.int8(0)}, "x_zero_point"),
    ({"x_zero_point": np.zeros(2, np.uint8)}, "x_zero_point"),
    ({"y_zero_point": np.int32(0)}, "y_zero_point"),
    ({"y_scale": np.ones(2, np.float32)}, "y_scale"),
    ({"b": np.zeros(2, np.int64)}, "B"),
    ({"b": np.zeros(3, np.int32)}, "B"),
    ({"x": np.zeros((1, 1, 3), np.int16)}, "x"),
    ({"w": np.zeros((2, 1, 1), np.float32)}, "w"),
])
def test_bad_inputs_name_their_parameter(change, param):
    arguments = {**good_arguments(), **change}
    with pytest.raises((AttributeValueError, UnsupportedDtypeError)) as caught:
        qlinear_conv(**arguments)
    assert caught.value.param == param


def test_a_float64_scale_that_is_a_float32_value_is_accepted():
    arguments = {**good_arguments(), "x_scale": 0.5, "w_scale": np.array([0.25, 0.5])}
    assert qlinear_conv(**arguments).dtype == np.uint8


def float32_requantization(acc, x_scale, w_scale, y_scale, y_zero_point, dtype):
    """onnxruntime's rule as observed: the multiplier x_scale * w_scale / y_scale in float32,
    times float32(acc) in float32, rounded half to even, plus the zero point, saturated."""
    info = np.iinfo(dtype)
    m = acc.shape[1]
    multiplier = (np.float32(x_scale) * np.broadcast_to(np.float32(w_scale), (m,)).astype(
        np.float32) / np.float32(y_scale)).astype(np.float32)
    scaled = (acc.astype(np.float32) * multiplier.reshape(1, m, 1, 1)).astype(np.float32)
    return np.clip(np.rint(scaled).astype(np.int64) + int(y_zero_point), info.min,
                   info.max).astype(dtype)


ort = pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("per_channel", [False, True])
def test_onnxruntime_differs_only_by_its_float32_requantization(per_channel):
    """Every element where onnxruntime differs is 1 apart and is what float32 requantization
    gives; everywhere else the two agree exactly."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(11)
    args = quantized_case(rng, np.uint8, np.int8, np.uint8, (1, 16, 12, 12), (8, 16, 3, 3),
                          per_channel)
    # W within [-64, 63]: onnxruntime's AVX2 kernel (no AVX-512, no VNNI) adds pairs of
    # uint8 x int8 products in int16, which saturates beyond that (onnxruntime#16105, seen on
    # an AMD EPYC); this test is about requantization, so the sums stay within int16
    args[3] = args[3] // 2
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"]
    types = [TensorProto.UINT8, TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8,
             TensorProto.FLOAT, TensorProto.INT8, TensorProto.FLOAT, TensorProto.UINT8,
             TensorProto.INT32]
    node = helper.make_node("QLinearConv", names, ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, t, np.shape(a)) for n, t, a in
         zip(names, types, args, strict=True)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {n: np.asarray(a) for n, a in zip(names, args, strict=True)})
    ours = qlinear_conv(*args, pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(ours, oracle_qlinear_conv(*args, pads=[1, 1, 1, 1]))
    differ = ours != theirs
    if differ.any():
        acc = integer_sums(args[0], args[3], args[2], args[5], pads=[1, 1, 1, 1])
        acc = acc + args[8].astype(np.int64).reshape(1, -1, 1, 1)
        modelled = float32_requantization(acc, args[1], args[4], args[6], args[7], np.uint8)
        assert np.all(np.abs(ours.astype(int) - theirs.astype(int))[differ] == 1)
        np.testing.assert_array_equal(theirs[differ], modelled[differ])


# Exact ties (real value k + 1/2) where a float32 multiplier lands on the other side:
# (acc, x_scale, y_scale, exactly rounded result) with w_scale 1.
FLOAT32_TIES = [
    (-227, 3570 * 2.0**-14, 3405 * 2.0**-12, -60),   # -59.5
    (61, 3048 * 2.0**-14, 732 * 2.0**-12, 64),       # 63.5
    (1494, 316 * 2.0**-14, 996 * 2.0**-12, 118),     # 118.5
]


def one_product(acc):
    """A uint8 X and int8 W of one element each whose product is ``acc``."""
    x_value = abs(acc) if abs(acc) < 256 else abs(acc) // 6
    return (np.array([[[x_value]]], np.uint8), np.array([[[acc // x_value]]], np.int8))


@pytest.mark.parametrize(("acc", "x_scale", "y_scale", "expected"), FLOAT32_TIES)
def test_ties_that_float32_requantization_rounds_the_other_way(acc, x_scale, y_scale,
                                                               expected):
    x, w = one_product(acc)
    args = [x, np.float32(x_scale), np.uint8(0), w, np.float32(1), np.int8(0),
            np.float32(y_scale), np.uint8(128)]
    ours = int(qlinear_conv(*args).reshape(-1)[0]) - 128
    assert ours == expected
    modelled = float32_requantization(np.array([[[[acc]]]], np.int64), x_scale, 1.0, y_scale,
                                      128, np.uint8)
    assert abs(int(modelled.reshape(-1)[0]) - 128 - ours) == 1


@pytest.mark.parametrize(("acc", "x_scale", "y_scale", "expected"), FLOAT32_TIES)
def test_onnxruntime_at_a_tie_gives_the_exact_or_the_float32_result(acc, x_scale, y_scale,
                                                                    expected):
    """onnxruntime 1.32 gives the float32 result at these ties (a classified deviation)."""
    from onnx import TensorProto, helper

    x, w = one_product(acc)
    values = [x, np.float32(x_scale), np.uint8(0), w, np.float32(1), np.int8(0),
              np.float32(y_scale), np.uint8(128)]
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    types = [TensorProto.UINT8, TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8,
             TensorProto.FLOAT, TensorProto.INT8, TensorProto.FLOAT, TensorProto.UINT8]
    graph = helper.make_graph(
        [helper.make_node("QLinearConv", names, ["y"])], "g",
        [helper.make_tensor_value_info(n, t, np.shape(a)) for n, t, a in
         zip(names, types, values, strict=True)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {n: np.asarray(a) for n, a in zip(names, values, strict=True)})
    modelled = float32_requantization(np.array([[[[acc]]]], np.int64), x_scale, 1.0, y_scale,
                                      128, np.uint8)
    assert int(theirs.reshape(-1)[0]) in (expected + 128, int(modelled.reshape(-1)[0]))


def test_per_channel_ties_in_many_channels_round_to_even():
    """Power-of-two scales make half the sums exact ties, in every channel."""
    rng = np.random.default_rng(21)
    x = random_integers((1, 3, 6, 6), np.uint8, rng)
    w = random_integers((4, 3, 2, 2), np.int8, rng)
    args = [x, np.float32(0.5), np.uint8(3), w, np.array([0.5, 0.25, 1.0, 0.125], np.float32),
            np.array([1, -2, 0, 3], np.int8), np.float32(8.0), np.uint8(100),
            rng.integers(-300, 300, 4).astype(np.int32)]
    y = qlinear_conv(*args, pads=[1, 0, 0, 1])
    np.testing.assert_array_equal(y, oracle_qlinear_conv(*args, pads=[1, 0, 0, 1]))


@pytest.mark.parametrize("y_type", TYPES)
def test_every_instruction_set_marks_the_same_near_ties(y_type):
    """The fused requantization of each kernel (AVX-512, AVX2, portable) and the standalone
    one give the same outputs and mark the same elements near a tie, ties included."""
    from padconv_cli.kernels import native
    from padconv_cli.kernels.requantize import float64_multipliers

    rng = np.random.default_rng(5)
    x = random_integers((1, 8, 11, 37), np.uint8, rng)
    w = random_integers((6, 8, 3, 3), np.int8, rng)
    wz = np.zeros(6, np.int32)
    bias = rng.integers(-300, 300, 6).astype(np.int32)
    factors = float64_multipliers(0.5, np.array([0.5, 0.25, 1.0, 0.125, 2**-7, 3e-3],
                                               np.float32), 8.0, 6)
    yz = 128 if y_type == np.uint8 else 5
    results = []
    for isa in [i for i in ("avx512", "avx2", "generic") if i in native.available_isas()]:
        acc = np.empty((1, 6, 11, 37), np.int32)
        y, unsure = np.empty(acc.shape, y_type), np.empty(acc.shape, np.uint8)
        marked = native.extension().qconv(x, False, w, True, 3, wz, acc, [1, 1], [1, 1],
                                          [1, 1], 1, 2, isa, (bias, factors, yz, y, unsure))
        assert marked == int(unsure.sum()) > 0
        alone_y, alone_unsure = np.empty_like(y), np.zeros_like(unsure)
        native.extension().requantize(acc, bias, factors, yz, alone_y, alone_unsure)
        np.testing.assert_array_equal(y, alone_y)
        np.testing.assert_array_equal(unsure, alone_unsure)
        results.append((acc, y, unsure))
    for other in results[1:]:
        for mine, theirs in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(mine, theirs)
