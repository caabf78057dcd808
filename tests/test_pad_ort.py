"""The Pad kernel against onnxruntime (a one-node Pad-25 model run by InferenceSession).

Where onnxruntime and padconv differ (each is skipped or tested separately below):

* reflect with a pad >= the (cropped) axis length, or on a one-element axis: onnxruntime
  refuses; padconv repeats the reflection like numpy.pad.
* strings, bfloat16, complex, float8/float4, int4/uint4, int16/uint16: onnxruntime 1.32 has no
  CPU Pad kernel for them (INVALID_GRAPH or NOT_IMPLEMENTED).
* cropping more elements than an axis has (e.g. dim 3, pads -4/+2): onnxruntime returns a
  constant-filled axis of length dim + begin + end; padconv refuses it.
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

from padconv_cli.errors import AttributeValueError
from padconv_cli.kernels.pad import pad

ort = pytest.importorskip("onnxruntime")
helper = pytest.importorskip("onnx.helper")
TensorProto = pytest.importorskip("onnx").TensorProto

ort.set_default_logger_severity(3)

OPSET = 25
ORT_DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "uint32", "int64"]
ORT_DTYPES += ["uint64", "bool"]
MISSING_IN_ORT = {
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


def run_onnxruntime(data, pads, constant_value, axes, mode):
    elem_type = helper.np_dtype_to_tensor_dtype(data.dtype)
    inputs = [
        helper.make_tensor_value_info("data", elem_type, None),
        helper.make_tensor_value_info("pads", TensorProto.INT64, [len(pads)]),
        helper.make_tensor_value_info("constant_value", elem_type, []),
    ]
    feeds = {
        "data": data,
        "pads": np.array(pads, np.int64),
        "constant_value": np.array(constant_value, data.dtype),
    }
    names = ["data", "pads", "constant_value"]
    if axes is not None:
        inputs.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [len(axes)]))
        feeds["axes"] = np.array(axes, np.int64)
        names.append("axes")
    node = helper.make_node("Pad", names, ["output"], mode=mode)
    output = helper.make_tensor_value_info("output", elem_type, None)
    graph = helper.make_graph([node], "pad", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


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


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", ORT_DTYPES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_matches_onnxruntime(mode, dtype, case):
    shape, pads, axes = CASES[case]
    if mode == "reflect" and reflect_beyond_ort(shape, pads, axes):
        pytest.skip("onnxruntime refuses reflect pads >= the axis length (padconv follows numpy)")
    data = make_data(dtype, shape, (mode, dtype, case))
    constant = True if dtype == "bool" else 3
    expected = run_onnxruntime(data, pads, constant, axes, mode)
    actual = pad(data, pads, constant, axes, mode)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes()


@pytest.mark.parametrize("mode", ["constant", "edge"])
@pytest.mark.parametrize("dtype", sorted(MISSING_IN_ORT))
def test_dtypes_onnxruntime_may_lack(dtype, mode):
    """Compared when onnxruntime can run them; skipped with its error otherwise."""
    data = make_data(MISSING_IN_ORT[dtype], (2, 3), (dtype, mode))
    constant = "z" if dtype == "string" else 3
    try:
        expected = run_onnxruntime(data, [1, 0, 0, 2], constant, None, mode)
    except Exception as error:  # the model is valid: any failure is a missing kernel or type
        pytest.skip(f"onnxruntime {ort.__version__} cannot run Pad on {dtype}: {error!s:.120}")
    actual = pad(data, [1, 0, 0, 2], constant, None, mode)
    assert actual.shape == expected.shape
    assert actual.tolist() == expected.tolist()


def test_reflect_beyond_the_axis_differs_from_onnxruntime():
    """onnxruntime refuses; padconv gives numpy.pad's repeated reflection."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(Exception, match="exceeds maximum allowed"):
        run_onnxruntime(data, [0, 3, 0, 0], 0, None, "reflect")
    assert pad(data, [0, 3, 0, 0], mode="reflect").tolist() == [
        [1, 2, 1, 0, 1, 2],
        [4, 5, 4, 3, 4, 5],
    ]


def test_over_cropping_differs_from_onnxruntime():
    """onnxruntime pads a 3-long axis by -4/+2 to one constant element; padconv refuses."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert run_onnxruntime(data, [0, -4, 0, 2], 0, None, "constant").shape == (2, 1)
    with pytest.raises(AttributeValueError, match="would lose 4 elements"):
        pad(data, [0, -4, 0, 2])
