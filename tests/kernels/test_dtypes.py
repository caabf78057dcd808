"""ONNX element types <-> numpy dtypes."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest

from padconv_cli.dtypes import (
    ONNX_TYPE_NAMES,
    dtype_name,
    elem_type_info,
    element_kind,
    float_info,
    integer_range,
    is_npy_native,
    numpy_dtype_of_elem_type,
    onnx_elem_type,
    parse_dtype,
)
from padconv_cli.errors import UnsupportedDtypeError

ONNX_DATA_TYPES = [value for _, value in onnx.TensorProto.DataType.items() if value != 0]


@pytest.mark.parametrize("elem_type", ONNX_DATA_TYPES)
def test_numpy_dtype_matches_onnx_helper(elem_type):
    expected = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    assert numpy_dtype_of_elem_type(elem_type) == expected


@pytest.mark.parametrize("elem_type", ONNX_DATA_TYPES)
def test_elem_type_round_trip(elem_type):
    dtype = numpy_dtype_of_elem_type(elem_type)
    assert onnx_elem_type(dtype) == elem_type
    assert parse_dtype(dtype_name(dtype)) == dtype


@pytest.mark.parametrize("elem_type", ONNX_DATA_TYPES)
def test_onnx_spelling_is_accepted(elem_type):
    onnx_name = onnx.TensorProto.DataType.Name(elem_type)
    assert onnx_elem_type(parse_dtype(onnx_name)) == elem_type
    assert onnx_elem_type(parse_dtype(f"tensor({onnx_name.lower()})")) == elem_type


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("float", np.float32),
        ("FLOAT", np.float32),
        ("double", np.float64),
        ("half", np.float16),
        ("f4", np.float32),
        ("<i8", np.int64),
        ("int8", np.int8),
        ("uint64", np.uint64),
        ("bool", np.bool_),
        ("complex64", np.complex64),
        ("string", object),
        ("str", object),
        ("bfloat16", ml_dtypes.bfloat16),
        ("float8e4m3fn", ml_dtypes.float8_e4m3fn),
        ("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
        ("float8e5m2fnuz", ml_dtypes.float8_e5m2fnuz),
        ("int4", ml_dtypes.int4),
        ("uint4", ml_dtypes.uint4),
        ("float4e2m1", ml_dtypes.float4_e2m1fn),
        ("float8e8m0", ml_dtypes.float8_e8m0fnu),
        (" Int32 ", np.int32),
    ],
)
def test_parse_dtype(name, expected):
    assert parse_dtype(name) == np.dtype(expected)


@pytest.mark.parametrize("name", ["float128", "datetime64", "O", "U5", "i4,f8", "nonsense", ""])
def test_parse_dtype_refuses_types_onnx_lacks(name):
    with pytest.raises(UnsupportedDtypeError, match="unknown dtype"):
        parse_dtype(name)


@pytest.mark.parametrize(
    ("dtype", "name"),
    [
        (np.float32, "float32"),
        (np.dtype(">f4"), "float32"),
        (np.float64, "float64"),
        (np.dtype("<U5"), "string"),
        (np.dtype("S3"), "string"),
        (object, "string"),
        (ml_dtypes.bfloat16, "bfloat16"),
        (ml_dtypes.float8_e4m3fnuz, "float8e4m3fnuz"),
        (ml_dtypes.int4, "int4"),
        (np.longdouble, str(np.dtype(np.longdouble))),
    ],
)
def test_dtype_name(dtype, name):
    assert dtype_name(dtype) == name


@pytest.mark.parametrize("dtype", [np.longdouble, "datetime64[s]", [("a", "i4")], "V4"])
def test_onnx_elem_type_refuses_types_onnx_lacks(dtype):
    if np.dtype(dtype) == np.float64:  # platforms where longdouble is double
        pytest.skip("longdouble is float64 here")
    with pytest.raises(UnsupportedDtypeError):
        onnx_elem_type(dtype)


@pytest.mark.parametrize(
    ("dtype", "native"),
    [
        (np.float32, True),
        (np.dtype(">i8"), True),
        (np.complex128, True),
        (np.dtype("<U3"), True),
        ([("a", "<i4"), ("b", ">f8")], True),
        (object, False),
        ([("a", "<i4"), ("b", object)], False),
        (ml_dtypes.bfloat16, False),
        (ml_dtypes.float8_e5m2, False),
        (ml_dtypes.int4, False),
        ([("a", ml_dtypes.bfloat16)], False),
    ],
)
def test_is_npy_native(dtype, native):
    assert is_npy_native(dtype) is native


@pytest.mark.parametrize("elem_type", [0, -1, 29, 1000])
def test_unknown_elem_type(elem_type):
    with pytest.raises(UnsupportedDtypeError, match="unknown ONNX element type"):
        elem_type_info(elem_type)


def test_all_canonical_names_are_unique_and_parse():
    assert len(set(ONNX_TYPE_NAMES)) == len(ONNX_TYPE_NAMES)
    for name in ONNX_TYPE_NAMES:
        assert dtype_name(parse_dtype(name)) == name


def test_importing_dtypes_does_not_import_ml_dtypes():
    code = (
        "import sys, padconv_cli.dtypes as d; d.parse_dtype('float32'); "
        "print('ml_dtypes' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def _expected_kind(name: str) -> str:
    if name == "bool":
        return "bool"
    if name == "string":
        return "string"
    if name.startswith("complex"):
        return "complex"
    if name.startswith(("float", "bfloat")):
        return "float"
    return "int"


@pytest.mark.parametrize("name", ONNX_TYPE_NAMES)
def test_every_onnx_type_has_one_element_kind(name):
    """The one classifier: each ONNX element type is bool, int, float, complex or string, by
    the name's family (float16, bfloat16, float8*, float6*, float4 are floats)."""
    assert element_kind(parse_dtype(name)) == _expected_kind(name)


@pytest.mark.parametrize(
    "dtype, kind",
    [("<U3", "string"), ("|S2", "string"), ("M8[s]", "other"), ([("a", "<f4")], "other"),
     (np.longdouble, "float")],
)
def test_element_kind_of_numpy_only_types(dtype, kind):
    assert element_kind(np.dtype(dtype)) == kind


@pytest.mark.parametrize(
    "dtype, limits",
    [(np.int8, (-128, 127)), (np.uint64, (0, 2**64 - 1)), (ml_dtypes.int4, (-8, 7)),
     (ml_dtypes.uint2, (0, 3)), (np.float32, None), (ml_dtypes.float8_e5m2, None),
     (np.bool_, None)],
)
def test_integer_range(dtype, limits):
    assert integer_range(np.dtype(dtype)) == limits


@pytest.mark.parametrize(
    "dtype, largest",
    [(np.float16, 65504.0), (ml_dtypes.bfloat16, 3.3895313892515355e38),
     (ml_dtypes.float8_e5m2, 57344.0), (ml_dtypes.float8_e4m3fn, 448.0),
     (np.complex64, float(np.finfo(np.float32).max))],
)
def test_float_info_covers_numpy_and_ml_dtypes(dtype, largest):
    assert float(float_info(np.dtype(dtype)).max) == largest
