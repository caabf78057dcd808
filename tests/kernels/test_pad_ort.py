"""The Pad kernel against onnxruntime (a one-node Pad-25 model run by InferenceSession).

Where onnxruntime and padconv differ (each is left out or tested separately below):

* reflect with a pad >= the (cropped) axis length, or on a one-element axis: onnxruntime
  refuses; padconv repeats the reflection like numpy.pad, which those cases are compared with.
* strings, float8, int16/uint16: onnxruntime 1.32 has no CPU Pad kernel for them
  (NOT_IMPLEMENTED), complex64 is no tensor type of it at all ("not currently registered"):
  those comparisons skip with onnxruntime's message, and every such dtype is also compared with
  onnx's reference evaluator, which never skips.  bfloat16 has a kernel but no numpy
  conversion in onnxruntime's Python API, so it travels as its uint16 bit pattern.
* a repeated axis: onnxruntime adds the pads up; padconv refuses it (the spec leaves it
  undefined).
* reflect/edge/wrap when cropping empties an axis: onnxruntime refuses even when that axis is
  not padded, but accepts an input that is already empty on an unpadded axis; padconv refuses
  an empty axis only when its pads are non-zero.
"""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from padconv_cli.errors import AttributeValueError
from padconv_cli.kernels.pad import pad

ort = pytest.importorskip("onnxruntime")
helper = pytest.importorskip("onnx.helper")
TensorProto = pytest.importorskip("onnx").TensorProto

ort.set_default_logger_severity(3)

OPSET = 25
ORT_DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "uint32", "int64"]
ORT_DTYPES += ["uint64", "bool"]
# dtypes outside onnxruntime's usual Pad kernels (name -> numpy type)
OTHER_DTYPES = {
    "int16": np.int16,
    "uint16": np.uint16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "complex64": np.complex64,
    "string": object,
}

# (shape, pads, axes)
CASES = [
    ((5,), [2, 3], None),
    ((3, 4), [1, 0, 2, 3], None),
    ((3, 4), [0, -1, 0, 2], None),
    ((3, 4), [-1, 2, 1, -2], None),
    ((2, 3, 4), [1, 2, 0, 2, 1, 3], None),
    ((2, 3, 4), [3, -1, 1, 2], [-1, 1]),
    ((2, 3, 4), [1, 2], [0]),
    ((2, 3, 4), [0, 5, 7, 0, 6, 9], None),  # pads longer than the axes
    ((2, 2, 3, 3), [0, 0, 2, 1, 0, 0, 1, 2], None),
    ((2, 2, 3, 3), [1, -1], [-2]),
]


def make_data(dtype, shape, seed_key) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(repr(seed_key).encode()))
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype) == object:
        return np.array(["ab", "c", "", "d"] * 6, dtype=object)[: int(np.prod(shape))].reshape(
            shape
        )
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dtype)
    values = rng.standard_normal(shape)
    values.reshape(-1)[0] = np.nan
    return values.astype(dtype)


def pad_model(elem_type: int, mode: str, with_axes: bool):
    """A one-node Pad-25 model with inputs data, pads, constant_value (and axes)."""
    names = ["data", "pads", "constant_value"] + (["axes"] if with_axes else [])
    inputs = [
        helper.make_tensor_value_info("data", elem_type, None),
        helper.make_tensor_value_info("pads", TensorProto.INT64, [None]),
        helper.make_tensor_value_info("constant_value", elem_type, []),
        helper.make_tensor_value_info("axes", TensorProto.INT64, [None]),
    ][: len(names)]
    node = helper.make_node("Pad", names, ["output"], mode=mode)
    output = helper.make_tensor_value_info("output", elem_type, None)
    graph = helper.make_graph([node], "pad", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    return model


def pad_feeds(data, pads, constant_value, axes) -> dict[str, np.ndarray]:
    feeds = {
        "data": data,
        "pads": np.array(pads, np.int64),
        "constant_value": np.array(constant_value, data.dtype),
    }
    if axes is not None:
        feeds["axes"] = np.array(axes, np.int64)
    return feeds


def padded_shape(shape, pads, axes) -> tuple[int, ...]:
    """Each padded axis grows by its begin and end pads (the spec's output shape)."""
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    result = list(shape)
    for i, axis in enumerate(axes):
        result[axis] += pads[i] + pads[i + len(axes)]
    return tuple(result)


def run_onnxruntime(data, pads, constant_value, axes, mode):
    elem_type = helper.np_dtype_to_tensor_dtype(data.dtype)
    model = pad_model(elem_type, mode, axes is not None)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = pad_feeds(data, pads, constant_value, axes)
    if data.dtype == ml_dtypes.bfloat16:
        output_shape = padded_shape(data.shape, pads, axes)
        return run_with_bit_patterns(session, feeds, elem_type, output_shape)
    return session.run(None, feeds)[0]


def run_with_bit_patterns(session, feeds, elem_type, output_shape) -> np.ndarray:
    """Run ``session`` on bfloat16 data: onnxruntime's Python API cannot convert bfloat16
    numpy arrays, so inputs and the output buffer are bound as their uint16 bit patterns."""
    binding = session.io_binding()
    for name, array in feeds.items():
        if array.dtype == ml_dtypes.bfloat16:
            bits = array.view(np.uint16)
            value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, elem_type)
        else:
            value = ort.OrtValue.ortvalue_from_numpy(array)
        binding.bind_ortvalue_input(name, value)
    bits = np.zeros(output_shape, np.uint16)
    output = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, elem_type)
    binding.bind_ortvalue_output("output", output)
    session.run_with_iobinding(binding)
    return bits.view(ml_dtypes.bfloat16)


def run_onnx_reference(data, pads, constant_value, axes, mode):
    """The same model run by onnx's reference evaluator (plain numpy, every Pad dtype)."""
    model = pad_model(helper.np_dtype_to_tensor_dtype(data.dtype), mode, axes is not None)
    return ReferenceEvaluator(model).run(None, pad_feeds(data, pads, constant_value, axes))[0]


def numpy_pad(data, pads, axes, mode):
    """Crop the negative pads by slicing, then numpy.pad the positive ones."""
    rank = data.ndim
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    widths = [(0, 0)] * rank
    crop = [slice(None)] * rank
    for i, axis in enumerate(axes):
        begin, end = pads[i], pads[i + len(axes)]
        crop[axis] = slice(max(-begin, 0), data.shape[axis] - max(-end, 0))
        widths[axis] = (max(begin, 0), max(end, 0))
    return np.pad(data[tuple(crop)], widths, mode=mode)


def assert_same_tensor(actual, expected):
    """Same dtype, shape and bytes (NaNs included); strings compared as values."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if actual.dtype == object:
        assert actual.tolist() == expected.tolist()
    else:
        assert actual.tobytes() == expected.tobytes()


def reflect_beyond_ort(shape, pads, axes) -> bool:
    """onnxruntime's reflect needs every pad < the cropped axis length (so length >= 2)."""
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    k = len(axes)
    for i, axis in enumerate(axes):
        begin, end = pads[i], pads[i + k]
        length = shape[axis] - max(-begin, 0) - max(-end, 0)
        if max(begin, end) > 0 and max(begin, end) >= length:
            return True
    return False


MODES = ["constant", "reflect", "edge", "wrap"]


def ort_parameters():
    """Every mode x dtype x case onnxruntime accepts (reflect beyond the axis is left out)."""
    for mode in MODES:
        for case, (shape, pads, axes) in enumerate(CASES):
            if mode == "reflect" and reflect_beyond_ort(shape, pads, axes):
                continue
            for dtype in ORT_DTYPES:
                yield pytest.param(mode, dtype, case, id=f"{mode}-{dtype}-{case}")


REFLECT_BEYOND_ORT = [
    case for case, (shape, pads, axes) in enumerate(CASES) if reflect_beyond_ort(shape, pads, axes)
]


@pytest.mark.parametrize(("mode", "dtype", "case"), list(ort_parameters()))
def test_matches_onnxruntime(mode, dtype, case):
    shape, pads, axes = CASES[case]
    data = make_data(dtype, shape, (mode, dtype, case))
    constant = True if dtype == "bool" else 3
    expected = run_onnxruntime(data, pads, constant, axes, mode)
    assert_same_tensor(pad(data, pads, constant, axes, mode), expected)


def test_some_reflect_cases_go_beyond_what_onnxruntime_accepts():
    """The numpy comparison below is not empty (and the ort one not the whole of reflect)."""
    assert 0 < len(REFLECT_BEYOND_ORT) < len(CASES)


@pytest.mark.parametrize("dtype", ORT_DTYPES)
@pytest.mark.parametrize("case", REFLECT_BEYOND_ORT)
def test_reflect_beyond_the_axis_matches_numpy(case, dtype):
    shape, pads, axes = CASES[case]
    data = make_data(dtype, shape, ("reflect", dtype, case))
    assert_same_tensor(pad(data, pads, 0, axes, "reflect"), numpy_pad(data, pads, axes, "reflect"))


ORT_LACKS_IT = ("NOT_IMPLEMENTED", "is not currently registered")


def other_dtype_inputs(dtype: str, mode: str):
    data = make_data(OTHER_DTYPES[dtype], (2, 3), (dtype, mode))
    constant = "z" if dtype == "string" else 3
    return data, [1, 0, 0, 2], constant


@pytest.mark.parametrize("mode", ["constant", "edge"])
@pytest.mark.parametrize("dtype", sorted(OTHER_DTYPES))
def test_other_dtypes_match_the_onnx_reference(dtype, mode):
    data, pads, constant = other_dtype_inputs(dtype, mode)
    expected = run_onnx_reference(data, pads, constant, None, mode)
    assert_same_tensor(pad(data, pads, constant, None, mode), expected)


@pytest.mark.parametrize("mode", ["constant", "edge"])
@pytest.mark.parametrize("dtype", sorted(OTHER_DTYPES))
def test_other_dtypes_match_onnxruntime_where_it_has_them(dtype, mode):
    """Skipped only when onnxruntime says it has no kernel or type for the dtype; any other
    failure of the (valid) model is a failure of this test."""
    data, pads, constant = other_dtype_inputs(dtype, mode)
    try:
        expected = run_onnxruntime(data, pads, constant, None, mode)
    except Exception as error:  # onnxruntime raises its own exception types
        if not any(marker in str(error) for marker in ORT_LACKS_IT):
            raise
        pytest.skip(f"onnxruntime {ort.__version__} has no Pad for {dtype}: {error!s:.120}")
    assert_same_tensor(pad(data, pads, constant, None, mode), expected)


def test_reflect_beyond_the_axis_differs_from_onnxruntime():
    """onnxruntime refuses; padconv gives numpy.pad's repeated reflection."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(Exception, match="exceeds maximum allowed"):
        run_onnxruntime(data, [0, 3, 0, 0], 0, None, "reflect")
    assert pad(data, [0, 3, 0, 0], mode="reflect").tolist() == [
        [1, 2, 1, 0, 1, 2],
        [4, 5, 4, 3, 4, 5],
    ]


@pytest.mark.parametrize(
    ("shape", "pads"),
    [
        ((2, 3), [0, -4, 0, 2]),  # crop 4 of 3, pad 2: one constant element
        ((2, 3), [0, 5, 0, -6]),  # pad 5, crop 6 of 3: two constant elements
        ((2, 3), [-3, 0, 1, 0]),  # crop the whole axis 0, pad 1 at the end
        ((0,), [-1, 1]),  # the case: an empty axis stays empty
        ((2, 18, 4), [1, 1048576, -2, -3, 0, 1]),  # axis 0 nets 0: an empty result
    ],
)
def test_over_cropping_follows_the_shape_rule_like_onnxruntime(shape, pads):
    """out_dim = dim + begin + end >= 0: a crop longer than the axis leaves constants only."""
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    expected = run_onnxruntime(data, pads, 100, None, "constant")
    result = pad(data, pads, np.float32(100))
    assert result.shape == expected.shape == padded_shape(shape, pads, None)
    np.testing.assert_array_equal(result, expected)


def test_a_negative_output_length_is_refused():
    with pytest.raises(AttributeValueError, match=r"dim \+ begin \+ end = -2 elements"):
        pad(np.zeros((2, 3), np.float32), [0, -4, 0, -1])
