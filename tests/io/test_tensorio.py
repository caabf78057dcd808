"""Tensor I/O: round trips, literals, .npz members, stdin, stdout and atomic writes; string
tensors written in pieces; short lists in messages."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import types
import zipfile

import ml_dtypes
import numpy as np
import onnx
import pytest
from hostile.runner import run_padconv
from npy_bytes import MAGIC
from onnx import TensorProto, helper

from padconv_cli.dtypes import elem_type_info, numpy_dtype_of_elem_type
from padconv_cli.errors import InputError, OutputError, UnsupportedDtypeError
from padconv_cli.messages import LISTED_ITEMS, bounded_list, bounded_sequence
from padconv_cli.tensor_sources import read_named_tensor, read_tensor
from padconv_cli.tensorio import npy, tensor_to_bytes, write_tensor
from padconv_cli.tensorio.files import atomic_write
from padconv_cli.tensorio.literal import parse_literal

# Tensor I/O: round trips, literals, .npz members, stdin, stdout and atomic writes.


ONNX_DATA_TYPES = [value for _, value in onnx.TensorProto.DataType.items() if value != 0]
NPY_NATIVE_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "longdouble",
    "complex64",
    "complex128",
    "<U5",
    "S4",
    "datetime64[ms]",
    ">i4",
    ">f8",
    ">c16",
    ">u2",
    ">U3",
]


def sample_array(dtype: np.dtype, shape=(2, 3), seed: int = 0) -> np.ndarray:
    """Random values covering the whole bit range of ``dtype`` (NaN payloads included)."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape))
    if dtype == np.dtype(object):
        words = ["", "a", "héllo", "x\x00", "tab\there", "日本"]
        array = np.empty(count, dtype=object)
        array[:] = [words[i % len(words)] for i in range(count)]
        return array.reshape(shape)
    if dtype.kind == "U":
        return np.array(["ab", "", "ü", "xyz", "q", "é"][:count], dtype=dtype).reshape(shape)
    if dtype.kind == "S":
        return np.array([b"ab", b"", b"\x01", b"xyz", b"q", b"z"][:count], dtype=dtype).reshape(
            shape
        )
    if dtype == np.bool_:
        return rng.integers(0, 2, count).astype(np.bool_).reshape(shape)
    if dtype.kind == "M":
        return rng.integers(0, 2**40, count).astype(dtype).reshape(shape)
    bits = 8 * dtype.itemsize
    if getattr(dtype.type, "__module__", "").startswith("ml_dtypes"):
        from padconv_cli.dtypes import onnx_elem_type

        bits = elem_type_info(onnx_elem_type(dtype)).bits
    raw = rng.integers(0, 256, count * dtype.itemsize, dtype=np.uint8)
    if bits < 8:
        raw &= (1 << bits) - 1
    return raw.view(dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def assert_identical(expected: np.ndarray, actual: np.ndarray) -> None:
    """Same dtype, shape and bits (object arrays: same python values and types)."""
    assert actual.shape == expected.shape
    if expected.dtype == np.dtype(object):
        assert actual.dtype == np.dtype(object)
        assert actual.tolist() == expected.tolist()
        assert all(type(item) is str for item in actual.ravel())
        return
    assert actual.dtype == expected.dtype.newbyteorder("=")
    assert actual.dtype.isnative
    native = expected.astype(expected.dtype.newbyteorder("="))
    assert np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(native).tobytes()


# ---------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("elem_type", ONNX_DATA_TYPES)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4), (5,)])
def test_pb_round_trip_every_onnx_type(tmp_path, elem_type, shape):
    array = sample_array(numpy_dtype_of_elem_type(elem_type), shape, seed=elem_type)
    path = tmp_path / "t.pb"
    write_tensor(array, str(path), name="weights")
    name, back = read_named_tensor(str(path))
    assert name == "weights"
    assert onnx.load_tensor(str(path)).data_type == elem_type
    assert_identical(array, back)


@pytest.mark.parametrize("dtype", NPY_NATIVE_DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
def test_npy_round_trip_every_native_dtype(tmp_path, dtype, order):
    array = np.asarray(sample_array(np.dtype(dtype), (2, 3), seed=3), order=order)
    path = tmp_path / "t.npy"
    write_tensor(array, str(path))
    back = read_tensor(str(path))
    assert_identical(array, back)
    assert back.flags.writeable


@pytest.mark.parametrize("dtype", [">i8", ">f4", ">c16", ">u2", ">U3"])
def test_big_endian_arrays_are_written_to_pb(tmp_path, dtype):
    array = sample_array(np.dtype(dtype), (2, 3), seed=5)
    write_tensor(array, str(tmp_path / "be.pb"))
    back = read_tensor(str(tmp_path / "be.pb"))
    if array.dtype.kind == "U":
        assert back.tolist() == array.tolist()
    else:
        assert_identical(array, back)


def test_printable_escapes_control_characters_and_line_separators_only():
    from padconv_cli.tensorio.files import printable

    for code in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029):
        assert printable(f"a{chr(code)}b") == f"a{chr(code).encode('unicode_escape').decode()}b"
    kept = "x.npy \u00e9\u00a0\u200b\ufeff"  # printable, or not but no control character
    assert printable(kept) == kept


def test_pathlib_paths_are_accepted(tmp_path):
    write_tensor(np.arange(3), tmp_path / "p.npy")
    assert read_tensor(tmp_path / "p.npy").tolist() == [0, 1, 2]


def test_float_nan_payloads_survive_both_formats(tmp_path):
    payloads = np.array([0x7FC00001, 0x7F800001, 0xFFC12345], dtype=np.uint32).view(np.float32)
    for suffix in (".npy", ".pb"):
        path = tmp_path / f"nan{suffix}"
        write_tensor(payloads, str(path))
        assert read_tensor(str(path)).view(np.uint32).tolist() == payloads.view(np.uint32).tolist()


def test_float8_nan_patterns_survive_pb(tmp_path):
    bits = np.array([0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF], dtype=np.uint8)
    array = bits.view(ml_dtypes.float8_e5m2)
    write_tensor(array, str(tmp_path / "f8.pb"))
    assert read_tensor(str(tmp_path / "f8.pb")).view(np.uint8).tolist() == bits.tolist()


def test_big_endian_npy_is_read_as_native_with_same_values(tmp_path):
    values = np.arange(12, dtype=">f8").reshape(3, 4) / 7
    np.save(tmp_path / "be.npy", values)
    back = read_tensor(str(tmp_path / "be.npy"))
    assert back.dtype == np.dtype("=f8") and back.dtype.isnative
    assert np.array_equal(back, values)


def test_fortran_order_npy_keeps_layout_and_values(tmp_path):
    values = np.asfortranarray(np.arange(24, dtype=np.int16).reshape(2, 3, 4))
    np.save(tmp_path / "f.npy", values)
    back = read_tensor(str(tmp_path / "f.npy"))
    assert back.flags.f_contiguous and not back.flags.c_contiguous
    assert np.array_equal(back, values)


def test_structured_big_endian_npy_is_converted_field_by_field(tmp_path):
    values = np.array([(1, 2.5), (-3, 4.0)], dtype=[("a", "<i4"), ("b", ">f8")])
    np.save(tmp_path / "s.npy", values)
    back = read_tensor(str(tmp_path / "s.npy"))
    assert back.dtype.isnative
    assert back["a"].tolist() == [1, -3] and back["b"].tolist() == [2.5, 4.0]


def test_npy_version_3_header_is_read(tmp_path):
    values = np.zeros(2, dtype=[("é", "<i4")])
    path = tmp_path / "v3.npy"
    with open(path, "wb") as stream:
        np.lib.format.write_array(stream, values, version=(3, 0))
    assert read_tensor(str(path)).dtype.names == ("é",)


def test_string_object_array_is_written_to_npy_as_unicode(tmp_path):
    array = np.array(["a", "bcd"], dtype=object)
    write_tensor(array, str(tmp_path / "s.npy"))
    back = read_tensor(str(tmp_path / "s.npy"))
    assert back.dtype.kind == "U" and back.tolist() == ["a", "bcd"]


def test_unicode_npy_array_goes_to_pb_as_strings(tmp_path):
    write_tensor(np.array(["x", "yz"]), str(tmp_path / "u.pb"))
    back = read_tensor(str(tmp_path / "u.pb"))
    assert back.dtype == np.dtype(object) and back.tolist() == ["x", "yz"]


def test_pb_written_by_onnx_with_typed_fields_is_read(tmp_path):
    cases = [
        (onnx.TensorProto.FLOAT, [1.5, -2.0, 3.0], np.float32),
        (onnx.TensorProto.INT4, [-8, 7, 3], ml_dtypes.int4),
        (onnx.TensorProto.UINT2, [0, 3, 1, 2, 1], ml_dtypes.uint2),
        (onnx.TensorProto.BFLOAT16, [1.5, -2.0], ml_dtypes.bfloat16),
        (onnx.TensorProto.FLOAT8E4M3FN, [1.5, -2.0], ml_dtypes.float8_e4m3fn),
        (onnx.TensorProto.COMPLEX64, [1 + 2j, 3 - 4j], np.complex64),
        (onnx.TensorProto.UINT32, [0, 2**32 - 1], np.uint32),
        (onnx.TensorProto.BOOL, [True, False], np.bool_),
        (onnx.TensorProto.STRING, [b"a", b"bc"], object),
    ]
    for elem_type, values, dtype in cases:
        tensor = onnx.helper.make_tensor("t", elem_type, [len(values)], values)
        path = tmp_path / f"typed{elem_type}.pb"
        onnx.save_tensor(tensor, str(path))
        back = read_tensor(str(path))
        expected = onnx.numpy_helper.to_array(tensor)
        assert back.dtype == np.dtype(dtype)
        assert back.tolist() == expected.tolist()


def test_pb_with_external_data_inside_its_folder(tmp_path):
    values = np.arange(6, dtype=np.float32)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.bin").write_bytes(b"\x00" * 8 + values.tobytes() + b"tail")
    tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[2, 3])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "sub/w.bin"), ("offset", "8"), ("length", "24")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    onnx.save_tensor(tensor, str(tmp_path / "w.pb"))
    back = read_tensor(str(tmp_path / "w.pb"))
    assert np.array_equal(back, values.reshape(2, 3))
    assert back.flags.writeable


def test_pb_read_through_symlink_inside_folder(tmp_path):
    write_tensor(np.arange(3, dtype=np.int8), str(tmp_path / "real.pb"))
    os.symlink(tmp_path / "real.pb", tmp_path / "link.pb")
    assert read_tensor(str(tmp_path / "link.pb")).tolist() == [0, 1, 2]


def test_arrays_read_from_pb_are_writable(tmp_path):
    write_tensor(np.ones(4, dtype=np.float32), str(tmp_path / "a.pb"))
    assert read_tensor(str(tmp_path / "a.pb")).flags.writeable


# ---------------------------------------------------------------------------------- literals


@pytest.mark.parametrize(
    ("text", "dtype", "expected", "expected_dtype"),
    [
        ("[[1.0, 1.2], [2.3, 3.4]]", None, [[1.0, 1.2], [2.3, 3.4]], np.float32),
        ("3", None, 3, np.int64),
        ("-3", None, -3, np.int64),
        ("+2.5", None, 2.5, np.float32),
        (".5", None, 0.5, np.float32),
        ("[1, 2.5]", None, [1.0, 2.5], np.float32),
        ('["a","b"]', None, ["a", "b"], object),
        ("['a', 'b']", None, ["a", "b"], object),
        ('"solo"', None, "solo", object),
        ("[true, false]", None, [True, False], np.bool_),
        ("[True, False]", None, [True, False], np.bool_),
        ("[1+2j]", None, [1 + 2j], np.complex128),
        ("[1-2j, 3j]", None, [1 - 2j, 3j], np.complex128),
        ("[]", None, [], np.float32),
        ("[[], []]", None, [[], []], np.float32),
        ("(1, 2)", None, [1, 2], np.int64),
        ("[nan, inf, -Infinity]", "float64", [np.nan, np.inf, -np.inf], np.float64),
        ("[1, 2]", "float", [1.0, 2.0], np.float32),
        ("[1, 2]", "double", [1.0, 2.0], np.float64),
        ("[1, 2]", "float16", [1.0, 2.0], np.float16),
        ("[1.5, 2]", "bfloat16", [1.5, 2.0], ml_dtypes.bfloat16),
        ("[1.5, -448]", "float8e4m3fn", [1.5, -448.0], ml_dtypes.float8_e4m3fn),
        ("[2, 0.5]", "float8e8m0", [2.0, 0.5], ml_dtypes.float8_e8m0fnu),
        ("[6, -0.5]", "float4e2m1", [6.0, -0.5], ml_dtypes.float4_e2m1fn),
        ("[-8, 7]", "int4", [-8, 7], ml_dtypes.int4),
        ("[0, 15]", "uint4", [0, 15], ml_dtypes.uint4),
        ("[-2, 1]", "int2", [-2, 1], ml_dtypes.int2),
        ("[127, -128]", "int8", [127, -128], np.int8),
        ("[18446744073709551615]", "uint64", [2**64 - 1], np.uint64),
        ("[1.0, 2.0]", "int32", [1, 2], np.int32),
        ("[0, 1, true]", "bool", [False, True, True], np.bool_),
        ("[1, 2]", "complex64", [1 + 0j, 2 + 0j], np.complex64),
        ('["x"]', "string", ["x"], object),
        ("[3]", "f4", [3.0], np.float32),
        ("[[1, 2], [3, 4]]", "INT64", [[1, 2], [3, 4]], np.int64),
    ],
)
def test_literals(text, dtype, expected, expected_dtype):
    array = read_tensor(text, dtype=dtype)
    assert array.dtype == np.dtype(expected_dtype)
    assert array.shape == np.shape(expected)
    if array.dtype == np.dtype(object):
        assert array.tolist() == expected
    else:
        np.testing.assert_array_equal(array, np.array(expected).astype(expected_dtype))


@pytest.mark.parametrize(
    ("text", "dtype", "message"),
    [
        ("[[1, 2], [3]]", None, "ragged"),
        ("[[1, 2], 3]", None, "ragged"),
        ('["a", 1]', None, "mixes strings and numbers"),
        ("[300]", "uint8", r"300 is outside uint8 range \[0, 255\]"),
        ("[-1]", "uint32", "outside uint32"),
        ("[8]", "int4", r"outside int4 range \[-8, 7\]"),
        ("[1.5]", "int32", "1.5 is not an integer"),
        ("[nan]", "int64", "is not an integer"),
        ("[2]", "bool", "not a bool"),
        ("[1e10]", "float16", "not representable in float16"),
        ("[500]", "float8e4m3fn", "not representable in float8e4m3fn"),
        ("[7]", "float4e2m1", "not representable in float4e2m1"),
        ("[nan]", "float4e2m1", "not representable"),
        ("[inf]", "float8e4m3fn", "not representable"),
        ("[0]", "float8e8m0", "not representable"),
        ("[1e39]", "float32", "not representable in float32"),
        ("[65520]", "float16", "not representable in float16"),
        ("[464.1]", "float8e4m3fn", "not representable"),
        ("[1+2j]", "float32", "need a complex dtype"),
        ("[1]", "string", "needs quoted strings"),
        ('["a"]', "float32", "strings cannot be float32"),
        ("[9223372036854775808]", None, "outside int64 range"),
        ("1e400", None, "out of the float64 range"),
        ("__import__('os')", None, "not allowed"),
        ("[1, 2][0]", None, "not allowed"),
        ("[2 * 3]", None, r"only \+ and -"),
        ("[-'a']", None, "sign must precede a number"),
        ("[1 + 2]", None, "real\\+imagj"),
        ("[None]", None, "not allowed"),
        ("[null]", None, "not allowed"),
        ("{1: 2}", None, "not allowed"),
        ("[b'x']", None, "bytes values are not allowed"),
        ("[1, 2", None, "cannot parse"),
        ("[" * 300 + "]" * 300, None, "cannot parse"),
    ],
)
def test_bad_literals(text, dtype, message):
    with pytest.raises(InputError, match=message):
        parse_literal(text, dtype)


@pytest.mark.parametrize(
    ("text", "dtype", "expected"),
    [
        ("[65519.99]", "float16", 65504.0),
        ("[464]", "float8e4m3fn", 448.0),
        ("[6.99]", "float4e2m1", 6.0),
    ],
)
def test_values_that_round_down_to_the_largest_finite_are_accepted(text, dtype, expected):
    assert parse_literal(text, dtype).astype(np.float64).tolist() == [expected]


@pytest.mark.parametrize("source", ["", "   "])
def test_empty_source(source):
    with pytest.raises(InputError, match="empty tensor source"):
        read_tensor(source)


def test_overlong_literal_is_refused_before_parsing():
    with pytest.raises(InputError, match="too long"):
        parse_literal("[" + "1," * 600_000 + "]")


def test_literal_with_unknown_dtype():
    with pytest.raises(UnsupportedDtypeError, match="unknown dtype 'float99'"):
        read_tensor("[1]", dtype="float99")


def test_existing_file_wins_over_literal_and_missing_paths_say_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("3.npy", np.array([7]))
    os.rename("3.npy", "3")
    assert read_tensor("3").tolist() == [7]
    assert read_tensor("4").tolist() == 4
    for missing in ("x.npy", "dir/x.pb", "./data", "../data", "a.npz:b", "nothing"):
        with pytest.raises(InputError, match="no such file"):
            read_tensor(missing)


# ------------------------------------------------------------------------------ .npz members


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, weight=np.arange(4.0), bias=np.ones(2, dtype=np.int32))
    return path


@pytest.mark.parametrize("saver", [np.savez, np.savez_compressed])
def test_npz_member_selection(tmp_path, saver):
    path = tmp_path / "m.npz"
    saver(path, weight=np.arange(4.0), bias=np.ones(2, dtype=np.int32))
    name, array = read_named_tensor(f"{path}:bias")
    assert name == "bias" and array.tolist() == [1, 1] and array.dtype == np.int32
    assert read_tensor(f"{path}:weight.npy").tolist() == [0.0, 1.0, 2.0, 3.0]


def test_npz_single_member_needs_no_name(tmp_path):
    np.savez(tmp_path / "one.npz", only=np.arange(3))
    assert read_named_tensor(str(tmp_path / "one.npz"))[0] == "only"


def test_npz_missing_member_lists_names(archive):
    with pytest.raises(InputError, match=r"no array named 'gamma' \(available: bias, weight\)"):
        read_tensor(f"{archive}:gamma")


def test_npz_several_members_without_name_is_ambiguous(archive):
    with pytest.raises(InputError, match=r"ambiguous.*\(bias, weight\)"):
        read_tensor(str(archive))


def test_member_name_on_non_npz_file(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(2))
    os.rename(tmp_path / "a.npy", tmp_path / "a.npz")
    with pytest.raises(InputError, match="not a readable .npz"):
        read_tensor(f"{tmp_path / 'a.npz'}:x")


# ------------------------------------------------------------------------------------- stdin


def feed_stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(data)))


def test_stdin_npy(monkeypatch):
    feed_stdin(monkeypatch, tensor_to_bytes(np.arange(6, dtype=np.int16).reshape(2, 3), "npy"))
    array = read_tensor("-")
    assert array.dtype == np.int16 and array.shape == (2, 3)


def test_unnamed_pb_has_no_name(monkeypatch, tmp_path):
    data = tensor_to_bytes(np.ones(2, dtype=np.float32), "pb")
    feed_stdin(monkeypatch, data)
    assert read_named_tensor("-")[0] is None
    (tmp_path / "u.pb").write_bytes(data)
    assert read_named_tensor(str(tmp_path / "u.pb"))[0] is None


def test_stdin_pb(monkeypatch):
    feed_stdin(monkeypatch, tensor_to_bytes(np.ones(3, dtype=ml_dtypes.bfloat16), "pb", name="n"))
    name, array = read_named_tensor("-")
    assert name == "n" and array.dtype == ml_dtypes.bfloat16


def test_stdin_npz_with_and_without_member(monkeypatch, archive):
    data = archive.read_bytes()
    feed_stdin(monkeypatch, data)
    assert read_tensor("-:bias").tolist() == [1, 1]
    feed_stdin(monkeypatch, data)
    with pytest.raises(InputError, match="<stdin>: ambiguous"):
        read_tensor("-")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty input"),
        (MAGIC + b"\x01\x00\xff", "truncated"),
        (b"\xff\xff\xff\xff", "not a TensorProto"),
        (b"PK\x03\x04garbage", "not a readable .npz"),
    ],
)
def test_stdin_garbage(monkeypatch, data, message):
    feed_stdin(monkeypatch, data)
    with pytest.raises(InputError, match=f"<stdin>: {message}"):
        read_tensor("-")


@pytest.mark.parametrize("reader", ["image", "stream"])
@pytest.mark.parametrize(
    ("data", "member", "message"),
    [
        (b"", None, "empty input, no tensor"),
        (b"", "a", "empty input, no tensor"),
        (b"\xff\xff\xff\xff", "a", "a member name [(]'a'[)] needs an .npz archive"),
        (MAGIC + b"\x01\x00", "a", "a member name [(]'a'[)] needs an .npz archive"),
    ],
)
def test_sniffed_images_and_streams_share_their_rules(reader, data, member, message):
    """The in-memory image (a file of unknown suffix) and the stream (stdin) are refused alike:
    nothing to read, or a member name for what is no archive."""
    from padconv_cli.tensorio.sniff import read_sniffed_bytes, read_stdin_stream

    with pytest.raises(InputError, match=f"^<stdin>: {message}$"):
        if reader == "image":
            read_sniffed_bytes(data, "<stdin>", member)
        else:
            read_stdin_stream(io.BytesIO(data), member)


def test_stdin_pb_may_not_use_external_data(monkeypatch):
    tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[1])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "w.bin"
    feed_stdin(monkeypatch, tensor.SerializeToString())
    with pytest.raises(InputError, match="stdin cannot use external data"):
        read_tensor("-")


def test_dtype_given_for_a_file_must_match(tmp_path):
    np.save(tmp_path / "d.npy", np.arange(3.0))
    assert read_tensor(str(tmp_path / "d.npy"), dtype="double").dtype == np.float64
    with pytest.raises(InputError, match="holds float64, not the requested float32"):
        read_tensor(str(tmp_path / "d.npy"), dtype="float")


# ----------------------------------------------------------------------------------- writing


def test_write_to_stdout_gives_the_same_bytes(monkeypatch):
    array = np.arange(5, dtype=np.float32)
    for fmt in ("npy", "pb"):
        buffer = io.BytesIO()
        monkeypatch.setattr(sys, "stdout", types.SimpleNamespace(buffer=buffer))
        write_tensor(array, "-", fmt=fmt)
        assert buffer.getvalue() == tensor_to_bytes(array, fmt)


class ClosedPipe(io.RawIOBase):
    def writable(self):
        return True

    def write(self, data):
        raise BrokenPipeError(32, "Broken pipe")


def test_closed_stdout_raises_broken_pipe_for_the_cli(monkeypatch):
    stream = io.BufferedWriter(ClosedPipe(), buffer_size=16)
    monkeypatch.setattr(sys, "stdout", types.SimpleNamespace(buffer=stream))
    with pytest.raises(BrokenPipeError):
        write_tensor(np.zeros(1000), "-")


def test_closed_stdout_through_a_real_pipe(tmp_path):
    code = (
        "import numpy as np, padconv_cli.tensorio as t\n"
        "try:\n    t.write_tensor(np.zeros(1 << 18), '-')\n"
        "except BrokenPipeError:\n    print('broken pipe', file=__import__('sys').stderr)\n"
    )
    reader, writer = os.pipe()
    os.close(reader)
    result = subprocess.run([sys.executable, "-c", code], stdout=writer, stderr=subprocess.PIPE)
    os.close(writer)
    assert b"broken pipe" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("target", "fmt", "expected"),
    [("a.npy", None, "npy"), ("a.pb", None, "pb"), ("noext", None, "npy"), ("a.bin", "pb", "pb")],
)
def test_format_from_suffix(tmp_path, target, fmt, expected):
    write_tensor(np.arange(3, dtype=np.int32), str(tmp_path / target), fmt=fmt)
    head = (tmp_path / target).read_bytes()[:6]
    assert (head == MAGIC) == (expected == "npy")


@pytest.mark.parametrize(
    ("target", "fmt"), [("out.npz", None), ("out.txt", None), ("o.npy", "csv")]
)
def test_unknown_suffix_or_format_is_refused(tmp_path, target, fmt):
    with pytest.raises(OutputError, match="unknown output"):
        write_tensor(np.arange(3), str(tmp_path / target), fmt=fmt)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "dtype",
    [
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.int4,
        ml_dtypes.uint4,
        ml_dtypes.int2,
        ml_dtypes.float4_e2m1fn,
    ],
)
def test_npy_refuses_types_numpy_cannot_name(tmp_path, dtype):
    with pytest.raises(UnsupportedDtypeError, match=r"\.pb.*\(format pb\)"):
        write_tensor(np.zeros(2, dtype=dtype), str(tmp_path / "x.npy"))
    with pytest.raises(UnsupportedDtypeError):
        tensor_to_bytes(np.zeros(2, dtype=dtype), "npy")


def test_object_array_of_non_strings_is_refused(tmp_path):
    with pytest.raises(UnsupportedDtypeError, match="object array holds"):
        write_tensor(np.array([1, "a"], dtype=object), str(tmp_path / "x.npy"))
    with pytest.raises(UnsupportedDtypeError):
        write_tensor(np.array([1, 2], dtype=object), str(tmp_path / "x.pb"))


def test_pb_over_two_gib_is_refused_suggesting_npy(tmp_path):
    huge = np.broadcast_to(np.uint8(0), (2**31 + 1,))
    with pytest.raises(OutputError, match=r"2 GiB.*\.npy"):
        write_tensor(huge, str(tmp_path / "big.pb"))
    assert not list(tmp_path.iterdir())


def test_pb_of_dtype_onnx_lacks_is_refused(tmp_path):
    with pytest.raises(UnsupportedDtypeError, match="TensorProto"):
        write_tensor(np.zeros(2, dtype=np.longdouble), str(tmp_path / "x.pb"))


# ---------------------------------------------------------------------------- atomic writes


def test_failed_write_leaves_existing_file_and_no_temp(tmp_path):
    target = tmp_path / "keep.npy"
    target.write_bytes(b"original")

    def explode(stream):
        stream.write(b"partial data")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write(str(target), explode)
    assert target.read_bytes() == b"original"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.npy"]


def test_unsupported_dtype_leaves_existing_file_untouched(tmp_path):
    target = tmp_path / "keep.npy"
    target.write_bytes(b"original")
    with pytest.raises(UnsupportedDtypeError):
        write_tensor(np.zeros(2, dtype=ml_dtypes.bfloat16), str(target))
    assert target.read_bytes() == b"original"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.npy"]


def test_os_error_during_write_is_output_error_and_cleans_up(tmp_path):
    target = tmp_path / "x.npy"

    def fail(stream):
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="No space left"):
        atomic_write(str(target), fail)
    assert not list(tmp_path.iterdir())


def test_write_to_missing_folder(tmp_path):
    with pytest.raises(OutputError, match="does not exist"):
        write_tensor(np.arange(3), str(tmp_path / "no" / "x.npy"))


def _unwritable_folder(tmp_path):
    if os.geteuid() == 0:  # root ignores permission bits; /proc refuses new files to anyone
        return "/proc"
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    return str(folder)


def test_write_to_unwritable_folder(tmp_path):
    folder = _unwritable_folder(tmp_path)
    with pytest.raises(OutputError, match="not writable|cannot create"):
        write_tensor(np.arange(3), os.path.join(folder, "padconv-test-x.npy"))
    assert not os.path.exists(os.path.join(folder, "padconv-test-x.npy"))


def test_target_is_a_directory(tmp_path):
    with pytest.raises(OutputError, match="is a directory"):
        write_tensor(np.arange(3), str(tmp_path))


def test_control_characters_in_output_names_are_escaped(tmp_path):
    with pytest.raises(OutputError) as excinfo:
        write_tensor(np.arange(3), str(tmp_path / "bad\nname.txt"))
    assert "\n" not in str(excinfo.value) and "bad\\nname.txt" in str(excinfo.value)


def test_target_with_trailing_slash_is_refused(tmp_path):
    with pytest.raises(OutputError, match="names a folder"):
        write_tensor(np.arange(3), str(tmp_path / "new") + "/")
    assert not list(tmp_path.iterdir())


def test_target_fifo_without_a_reader_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "pipe.npy")
    with pytest.raises(OutputError, match="FIFO that nobody reads"):
        write_tensor(np.arange(3), str(tmp_path / "pipe.npy"))
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe.npy").st_mode)


def test_new_file_mode_follows_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_tensor(np.arange(3), str(tmp_path / "new.npy"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.npy").st_mode) == 0o640


def test_existing_file_keeps_its_mode(tmp_path):
    target = tmp_path / "old.npy"
    target.write_bytes(b"x")
    target.chmod(0o604)
    write_tensor(np.arange(3), str(target))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o604
    assert read_tensor(str(target)).tolist() == [0, 1, 2]


def test_symlink_target_is_written_through(tmp_path):
    (tmp_path / "real.npy").write_bytes(b"x")
    os.symlink("real.npy", tmp_path / "link.npy")
    write_tensor(np.arange(2), str(tmp_path / "link.npy"))
    assert os.path.islink(tmp_path / "link.npy")
    assert read_tensor(str(tmp_path / "real.npy")).tolist() == [0, 1]


# ------------------------------------------------------------------------------ import cost


def test_import_does_not_load_onnx_ml_dtypes_or_rich():
    code = (
        "import sys, padconv_cli.tensor_sources as t; t.read_tensor('[1.5]'); "
        "print(sorted(m for m in ('onnx', 'ml_dtypes', 'rich', 'google.protobuf') "
        "if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


# Lists quoted in error messages stay short: at most a dozen names, then "and N more".


def test_short_list_is_shown_whole():
    assert bounded_list(["a", "b", "c"]) == "a, b, c"


def test_long_list_names_the_first_dozen_and_counts_the_rest():
    text = bounded_list(f"m{i}" for i in range(100_000))
    assert text.startswith("m0, m1, ")
    assert f"m{LISTED_ITEMS - 1} ... and {100_000 - LISTED_ITEMS} more" in text
    assert f"m{LISTED_ITEMS}," not in text


def test_empty_list_and_sequence():
    assert bounded_list([]) == "(none)"
    assert bounded_sequence([]) == "[]"
    assert bounded_sequence(range(3)) == "[0, 1, 2]"


def _archive(count: int) -> bytes:
    buffer = io.BytesIO()
    member = io.BytesIO()
    np.save(member, np.zeros(1, np.float32))
    with zipfile.ZipFile(buffer, "w") as archive:
        for index in range(count):
            archive.writestr(f"member{index}.npy", member.getvalue())
    return buffer.getvalue()


@pytest.mark.parametrize("source", ["many.npz", "many.npz:absent"])
def test_npz_with_many_members_gives_a_short_message(tmp_path, source):
    (tmp_path / "many.npz").write_bytes(_archive(3000))
    with pytest.raises(InputError) as caught:
        read_tensor(str(tmp_path / source))
    message = str(caught.value)
    assert len(message) < 600, message
    assert f"and {3000 - LISTED_ITEMS} more" in message


def test_tensorproto_with_a_million_dims_gives_a_short_message(tmp_path):
    from onnx import TensorProto

    proto = TensorProto(data_type=TensorProto.FLOAT)
    proto.dims.extend([1] * 1_000_000)
    proto.dims.append(-1)
    (tmp_path / "dims.pb").write_bytes(proto.SerializeToString())
    with pytest.raises(InputError) as caught:
        read_tensor(str(tmp_path / "dims.pb"))
    assert len(str(caught.value)) < 600
    assert "more" in str(caught.value)


# String tensors are written to ``.npy`` at a fixed width in pieces: a padded string array is
# far larger as a file than in memory, and only the file needs to be that large.


@pytest.mark.parametrize(
    "array",
    [
        np.array(["ab", "", "h\u00e9llo"], dtype=object),
        np.array([["a", "bb"], ["ccc", "d"]], dtype=object)[:, ::-1],
        np.array([b"x", b"yz", b""], dtype=object),
        np.array("solo", dtype=object),
        np.array(["", ""], dtype=object),
        np.empty((0, 3), dtype=object),
    ],
)
def test_written_strings_equal_their_fixed_width_array(array, monkeypatch):
    monkeypatch.setattr(npy, "STRING_CHUNK_BYTES", 8)  # many pieces
    buffer = io.BytesIO()
    npy.write_npy(array, buffer, "t.npy")
    buffer.seek(0)
    kind = np.bytes_ if array.size and isinstance(array.flat[0], bytes) else np.str_
    expected = array.astype(kind)
    result = np.load(buffer, allow_pickle=False)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)


def test_mixed_object_arrays_are_refused():
    with pytest.raises(Exception, match="only all-str or all-bytes"):
        npy.write_npy(np.array(["a", b"b"], dtype=object), io.BytesIO(), "t.npy")


def test_padding_one_long_string_costs_the_file_not_the_memory(tmp_path):
    tensor = helper.make_tensor("s", TensorProto.STRING, [1], [b"x" * 30000])
    (tmp_path / "s.pb").write_bytes(tensor.SerializeToString())
    run = run_padconv(["pad", "s.pb", "--pads", "2000", "2000", "-o", "out.npy"], cwd=tmp_path,
                      measure_memory=True)
    assert run.returncode == 0, run.stderr_text
    out = np.load(tmp_path / "out.npy")
    assert out.dtype == np.dtype("<U30000") and out.shape == (4001,)
    assert out[2000] == "x" * 30000 and (out[:2000] == "").all() and (out[2001:] == "").all()
    # the file is 480 MB; the run holds the strings once, plus one piece of 16 MiB
    assert run.peak_rss_bytes < 300 * 2**20
