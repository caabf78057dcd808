"""Hostile and corrupt tensor sources: every one is a one-line InputError, nothing else;
external data through a hard link is refused."""

from __future__ import annotations

import io
import os
import re
import struct
import zipfile

import numpy as np
import onnx
import pytest
from npy_bytes import MAGIC, header_text, npy_image, npy_preamble
from onnx import TensorProto, helper

from padconv_cli.errors import InputError
from padconv_cli.tensor_sources import read_named_tensor, read_tensor
from padconv_cli.tensorio import ReadPolicy, write_tensor
from padconv_cli.tensorio.npy import MAX_HEADER_SIZE, read_npy_bytes
from padconv_cli.tensorio.protobuf import read_pb_bytes

# Hostile and corrupt tensor sources: every one must be a one-line InputError, nothing else.


CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def assert_one_line_input_error(excinfo: pytest.ExceptionInfo, *fragments: str) -> None:
    message = str(excinfo.value)
    assert not CONTROL_CHARACTERS.search(message), repr(message)
    for fragment in fragments:
        assert fragment in message


# ------------------------------------------------------------------------------------- .npy


class CreatesSentinel:
    """Unpickling this would create a file: proof that a pickle was (not) loaded."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickled_object_npy_is_refused_without_unpickling(tmp_path):
    sentinel = tmp_path / "pwned"
    payload = np.array([CreatesSentinel(str(sentinel))], dtype=object)
    np.save(tmp_path / "evil.npy", payload, allow_pickle=True)
    with pytest.raises(InputError) as excinfo:
        read_tensor(str(tmp_path / "evil.npy"))
    assert_one_line_input_error(excinfo, "evil.npy", "pickle")
    assert not sentinel.exists()


def test_pickled_object_in_npz_is_refused_without_unpickling(tmp_path):
    sentinel = tmp_path / "pwned"
    np.savez(tmp_path / "evil.npz", x=np.array([CreatesSentinel(str(sentinel))], dtype=object))
    with pytest.raises(InputError, match="pickle"):
        read_tensor(str(tmp_path / "evil.npz"))
    assert not sentinel.exists()


@pytest.mark.parametrize(
    ("image", "fragments"),
    [
        (npy_image(header_text(shape="(1000000000000,)"), b"\0" * 64),
         ("8000000000000 bytes", "64")),
        (npy_image(header_text(shape="(2**40,)")), ("corrupt .npy header",)),
        (npy_image(header_text(shape="(-5,)")), ("integer >= 0",)),
        (npy_image(header_text(shape="(2, -3)")), ("integer >= 0",)),
        (npy_image(header_text(shape="(2.5,)")), ("corrupt .npy header",)),
        (npy_image(header_text(shape="(True,)"), b"\0" * 8), ("integer >= 0",)),
        (npy_image(header_text(shape="(3,)"), b"\0" * 23), ("declares", "only 23 bytes")),
        (npy_image(header_text(descr="'O'"), b"\0" * 16), ("pickle",)),
        (npy_image(header_text(descr="[('a', 'O')]"), b"\0" * 16), ("pickle",)),
        (npy_image(header_text(descr="'V0'"), b""), ("size 0",)),
        (npy_image(header_text(descr="('<i2', (3,))"), b"\0" * 12), ("subarray",)),
        (npy_image(header_text(descr="('<i2', (3,))", shape="()"), b"\0" * 6), ("subarray",)),
        (npy_image(header_text(descr="'<q9'")), ("corrupt .npy header",)),
        (npy_image(header_text(fortran="1")), ("corrupt .npy header",)),
        (npy_image("[1, 2, 3]"), ("corrupt .npy header",)),
        (npy_image("{'descr': '<f8', 'shape': (2,)}"), ("corrupt .npy header",)),
        (npy_image("__import__('os').system('true')"), ("corrupt .npy header",)),
        (npy_image(header_text(), version=(9, 9)), ("unsupported .npy format version 9.9",)),
        (npy_preamble(60000) + b" " * 100, ("exceeds the limit",)),
        (npy_preamble(2**32 - 1, (2, 0)), ("exceeds the limit",)),
        (npy_preamble(200) + b"{", ("truncated .npy header",)),
        (MAGIC + b"\x01", ("truncated",)),
        (b"\x93NUMPZ\x01\x00" + b"\0" * 100, ("not an .npy file",)),
        (b"PK\x03\x04" + b"\0" * 100, ("not an .npy file",)),
        (b"", ("empty file",)),
        (npy_image(header_text(descr="'|b1'"), b"\x00\x07"), ("bool data",)),
    ],
)
def test_corrupt_npy_files(tmp_path, image, fragments):
    path = tmp_path / "bad.npy"
    path.write_bytes(image)
    with pytest.raises(InputError) as excinfo:
        read_tensor(str(path))
    assert_one_line_input_error(excinfo, "bad.npy", *fragments)


def test_npy_header_at_the_size_limit_is_still_read():
    long_header = header_text(shape="(2,)") + " " * (MAX_HEADER_SIZE - 200)
    image = npy_image(long_header, np.arange(2.0).tobytes())
    assert read_npy_bytes(image, "x").tolist() == [0.0, 1.0]


def test_truncated_real_npy(tmp_path):
    np.save(tmp_path / "t.npy", np.arange(1000, dtype=np.float64))
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[:-1])
    with pytest.raises(InputError, match="7999 bytes follow"):
        read_tensor(str(tmp_path / "t.npy"))


def test_directory_named_like_a_tensor(tmp_path):
    (tmp_path / "d.npy").mkdir()
    with pytest.raises(InputError, match="d.npy: is a directory"):
        read_tensor(str(tmp_path / "d.npy"))


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".pb", ""])
def test_fifo_is_refused_without_blocking(tmp_path, suffix):
    os.mkfifo(tmp_path / f"pipe{suffix}")
    with pytest.raises(InputError, match="FIFO"):
        read_tensor(str(tmp_path / f"pipe{suffix}"))


def test_character_device_is_refused():
    with pytest.raises(InputError, match="/dev/zero: is a character device"):
        read_tensor("/dev/zero")


def test_unreadable_file(tmp_path, monkeypatch):
    path = tmp_path / "secret.npy"
    np.save(path, np.arange(2))
    real_open = os.open

    def deny(name, *args, **kwargs):  # root ignores mode bits, so deny the way the OS would
        if os.fspath(name) == str(path):
            raise PermissionError(13, "Permission denied", name)
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    with pytest.raises(InputError, match="secret.npy: permission denied"):
        read_tensor(str(path))


def test_unknown_suffix_with_unknown_content(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="unknown tensor file format"):
        read_tensor(str(tmp_path / "notes.txt"))


def test_unknown_suffix_with_npy_content_is_sniffed(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(3))
    os.rename(tmp_path / "a.npy", tmp_path / "a.bin")
    assert read_tensor(str(tmp_path / "a.bin")).tolist() == [0, 1, 2]


# ------------------------------------------------------------------------------------- .npz


def zip_with(members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_npz_member_whose_header_lies_about_its_size(tmp_path):
    liar = npy_image(header_text(shape="(1000000000000,)"), b"\0" * 16)
    (tmp_path / "lie.npz").write_bytes(zip_with({"x.npy": liar}))
    with pytest.raises(InputError) as excinfo:
        read_tensor(str(tmp_path / "lie.npz"))
    assert_one_line_input_error(excinfo, "lie.npz:x", "8000000000000 bytes")


def test_npz_compressed_member_whose_header_lies(tmp_path):
    liar = npy_image(header_text(shape="(100000000,)"), b"\0" * 4096)
    (tmp_path / "lie.npz").write_bytes(zip_with({"x.npy": liar}, zipfile.ZIP_DEFLATED))
    with pytest.raises(InputError, match="800000000 bytes"):
        read_tensor(str(tmp_path / "lie.npz"))


def test_npz_entry_claiming_more_than_deflate_can_produce(tmp_path):
    member = npy_image(header_text(), b"\0" * 16)
    data = bytearray(zip_with({"x.npy": member}, zipfile.ZIP_DEFLATED))
    # Patch the uncompressed size in the local header (offset 22) and central directory.
    real_size = len(npy_image(header_text(), b"\0" * 16))
    forged = struct.pack("<I", 2**31)
    data[22:26] = forged
    central = data.rfind(b"PK\x01\x02")
    data[central + 24 : central + 28] = forged
    assert struct.unpack("<I", bytes(data[central + 24 : central + 28]))[0] != real_size
    (tmp_path / "bomb.npz").write_bytes(bytes(data))
    with pytest.raises(InputError, match="more than deflate can produce"):
        read_tensor(str(tmp_path / "bomb.npz"))


def test_npz_bzip2_member_is_refused(tmp_path):
    image = npy_image(header_text(), b"\0" * 16)
    (tmp_path / "bz.npz").write_bytes(zip_with({"x.npy": image}, zipfile.ZIP_BZIP2))
    with pytest.raises(InputError, match="unsupported zip compression"):
        read_tensor(str(tmp_path / "bz.npz"))


def test_npz_with_corrupted_member_data_fails_crc(tmp_path):
    image = npy_image(header_text(), np.arange(2.0).tobytes())
    data = bytearray(zip_with({"x.npy": image}))
    data[data.find(np.arange(2.0).tobytes()) + 9] ^= 0xFF
    (tmp_path / "crc.npz").write_bytes(bytes(data))
    with pytest.raises(InputError, match="CRC"):
        read_tensor(str(tmp_path / "crc.npz"))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [(b"", "not a readable .npz"), (b"PK\x03\x04\0\0", "not a readable .npz")],
)
def test_npz_garbage(tmp_path, data, fragment):
    (tmp_path / "g.npz").write_bytes(data)
    with pytest.raises(InputError, match=fragment):
        read_tensor(str(tmp_path / "g.npz"))


def test_empty_npz(tmp_path):
    (tmp_path / "e.npz").write_bytes(zip_with({}))
    with pytest.raises(InputError, match="holds no arrays"):
        read_tensor(str(tmp_path / "e.npz"))


# -------------------------------------------------------------------------------------- .pb


def float_tensor(**fields) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name="t", data_type=onnx.TensorProto.FLOAT, dims=[2, 3])
    for key, value in fields.items():
        if key == "dims":
            del tensor.dims[:]
        if isinstance(value, list):
            getattr(tensor, key).extend(value)
        else:
            setattr(tensor, key, value)
    return tensor


def with_external(tensor: onnx.TensorProto, **entries: str) -> onnx.TensorProto:
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in entries.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


SIX_FLOATS = np.arange(6, dtype=np.float32).tobytes()


@pytest.mark.parametrize(
    ("tensor", "fragment"),
    [
        (float_tensor(raw_data=SIX_FLOATS, dims=[-2, 3]), "negative dimension"),
        (
            float_tensor(raw_data=SIX_FLOATS, dims=[2, 4]),
            "need 32 bytes of raw_data but it holds 24",
        ),
        (float_tensor(raw_data=SIX_FLOATS, dims=[2, 2]), "need 16 bytes"),
        (float_tensor(float_data=[1.0] * 5), "need 6 entries of float_data but it holds 5"),
        (float_tensor(raw_data=SIX_FLOATS, float_data=[1.0] * 6), "several data fields"),
        (float_tensor(float_data=[1.0] * 6, int64_data=[1] * 6), "several data fields"),
        (float_tensor(int64_data=[1] * 6), "cannot carry its data in int64_data"),
        (float_tensor(raw_data=SIX_FLOATS, data_type=99), "unknown ONNX element type 99"),
        (float_tensor(raw_data=SIX_FLOATS, data_type=0), "UNDEFINED"),
        (float_tensor(), "holds no data"),
        (
            float_tensor(data_type=onnx.TensorProto.STRING, raw_data=b"abcdef"),
            "cannot carry its data in raw_data",
        ),
        (
            float_tensor(data_type=onnx.TensorProto.UINT8, int32_data=[1, 2, 3, 4, 5, 300]),
            "outside [0, 255]",
        ),
        (
            float_tensor(data_type=onnx.TensorProto.BOOL, int32_data=[0, 1, 0, 1, 0, 2]),
            "outside [0, 1]",
        ),
        (float_tensor(data_type=onnx.TensorProto.BOOL, raw_data=b"\0\1\0\1\0\5"), "bool data"),
        (
            float_tensor(data_type=onnx.TensorProto.INT4, raw_data=b"\0\0\0\0"),
            "need 3 bytes of raw_data but it holds 4",
        ),
        (
            float_tensor(data_type=onnx.TensorProto.INT4, int32_data=[1, 2]),
            "need 3 entries of int32_data",
        ),
        (
            float_tensor(data_type=onnx.TensorProto.COMPLEX64, float_data=[1.0] * 6),
            "need 12 entries",
        ),
        (
            float_tensor(data_type=onnx.TensorProto.STRING, string_data=[b"\xff"] * 6),
            "not valid UTF-8",
        ),
        (
            with_external(float_tensor(raw_data=SIX_FLOATS), location="x.bin"),
            "several data fields",
        ),
        (
            float_tensor(raw_data=SIX_FLOATS, external_data=[onnx.StringStringEntryProto()]),
            "not EXTERNAL",
        ),
    ],
)
def test_invalid_tensor_protos(tmp_path, tensor, fragment):
    (tmp_path / "bad.pb").write_bytes(tensor.SerializeToString())
    with pytest.raises(InputError) as excinfo:
        read_tensor(str(tmp_path / "bad.pb"))
    assert_one_line_input_error(excinfo, "bad.pb", fragment)


def test_segment_is_refused(tmp_path):
    tensor = float_tensor(raw_data=SIX_FLOATS)
    tensor.segment.begin = 0
    tensor.segment.end = 6
    (tmp_path / "s.pb").write_bytes(tensor.SerializeToString())
    with pytest.raises(InputError, match="segments"):
        read_tensor(str(tmp_path / "s.pb"))


@pytest.mark.parametrize(
    "data", [b"\xff\xff\xff\xff", b"\x0a\xff\xff\xff\xff\x0f", os.urandom(0) + b"\x93", b"\x08"]
)
def test_random_bytes_pb(tmp_path, data):
    (tmp_path / "r.pb").write_bytes(data)
    with pytest.raises(InputError, match="r.pb"):
        read_tensor(str(tmp_path / "r.pb"))


def test_empty_pb(tmp_path):
    (tmp_path / "e.pb").write_bytes(b"")
    with pytest.raises(InputError, match="UNDEFINED"):
        read_tensor(str(tmp_path / "e.pb"))


def test_pb_over_two_gib_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.pb"
    with open(path, "wb") as stream:
        stream.truncate(2**31 + 10)  # sparse: costs no disk space
    with pytest.raises(InputError, match=r"2 GiB.*\.npy"):
        read_tensor(str(path))


@pytest.fixture
def outside(tmp_path):
    """A folder with a model dir inside and a secret file outside of it."""
    (tmp_path / "model").mkdir()
    (tmp_path / "secret.bin").write_bytes(SIX_FLOATS)
    return tmp_path


def write_external_pb(folder, **entries) -> str:
    path = folder / "model" / "t.pb"
    path.write_bytes(with_external(float_tensor(), **entries).SerializeToString())
    return str(path)


@pytest.mark.parametrize(
    ("location", "fragment"),
    [
        ("../secret.bin", "contains '..'"),
        ("sub/../../secret.bin", "contains '..'"),
        ("..\\secret.bin", "contains '..'"),
        ("/etc/passwd", "absolute path"),
        ("\\\\server\\share", "absolute path"),
        ("C:secret.bin", "absolute path"),
        ("", "without a location"),
        ("nul\x00byte", "NUL byte"),
        ("missing.bin", "no such file"),
    ],
)
def test_external_data_locations_are_confined(outside, location, fragment):
    path = write_external_pb(outside, location=location)
    with pytest.raises(InputError) as excinfo:
        read_tensor(path)
    assert_one_line_input_error(excinfo, fragment)


def test_external_data_symlink_escape(outside):
    os.symlink(outside / "secret.bin", outside / "model" / "inside.bin")
    path = write_external_pb(outside, location="inside.bin")
    with pytest.raises(InputError, match="leads outside"):
        read_tensor(path)


def test_external_data_through_a_symlinked_subfolder_escape(outside):
    os.symlink(outside, outside / "model" / "up")
    path = write_external_pb(outside, location="up/secret.bin")
    with pytest.raises(InputError, match="leads outside"):
        read_tensor(path)


@pytest.mark.parametrize(
    ("entries", "fragment"),
    [
        ({"offset": "100"}, "past its end"),
        ({"offset": "8", "length": "24"}, "past its end"),
        ({"length": "20"}, "need 24 bytes but 20 are given"),
        ({"offset": "4"}, "need 24 bytes but 20 are given"),
        ({"offset": "-1"}, "not an integer >= 0"),
        ({"length": "1e3"}, "not an integer >= 0"),
        ({"checksum": "x", "basepath": "/"}, "unknown external_data key 'basepath'"),
    ],
)
def test_external_data_offsets_and_lengths(outside, entries, fragment):
    (outside / "model" / "w.bin").write_bytes(SIX_FLOATS)
    path = write_external_pb(outside, location="w.bin", **entries)
    with pytest.raises(InputError, match=fragment):
        read_tensor(path)


def test_external_data_pointing_at_a_fifo(outside):
    os.mkfifo(outside / "model" / "w.bin")
    path = write_external_pb(outside, location="w.bin")
    with pytest.raises(InputError, match="FIFO"):
        read_tensor(path)


def test_external_data_duplicate_key(outside):
    (outside / "model" / "w.bin").write_bytes(SIX_FLOATS)
    tensor = with_external(float_tensor(), location="w.bin")
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "other.bin"
    (outside / "model" / "t.pb").write_bytes(tensor.SerializeToString())
    with pytest.raises(InputError, match="given twice"):
        read_tensor(str(outside / "model" / "t.pb"))


def test_valid_external_data_still_works(outside):
    (outside / "model" / "w.bin").write_bytes(SIX_FLOATS)
    path = write_external_pb(outside, location="w.bin", offset="0", length="24")
    assert read_tensor(path).ravel().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_read_pb_bytes_returns_name_and_array():
    name, array = read_pb_bytes(float_tensor(raw_data=SIX_FLOATS).SerializeToString(), "ok.pb")
    assert name == "t" and array.shape == (2, 3) and array.dtype == np.float32


def test_checker_failure_becomes_one_line_input_error(monkeypatch):
    def reject(tensor):
        raise onnx.checker.ValidationError("first line\n  second line\n")

    monkeypatch.setattr(onnx.checker, "check_tensor", reject)
    with pytest.raises(InputError) as excinfo:
        read_pb_bytes(float_tensor(raw_data=SIX_FLOATS).SerializeToString(), "c.pb")
    assert str(excinfo.value) == "c.pb: invalid TensorProto (first line second line)"


def test_failed_read_does_not_create_or_change_files(tmp_path):
    write_tensor(np.arange(3), str(tmp_path / "good.npy"))
    (tmp_path / "bad.pb").write_bytes(b"\xff")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InputError):
        read_tensor(str(tmp_path / "bad.pb"))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_large_external_data_is_decoded_without_protobuf(outside, monkeypatch):
    from padconv_cli.tensorio import protobuf

    monkeypatch.setattr(protobuf, "PROTOBUF_LIMIT", 1024 + 16)  # pretend 24 bytes is "huge"
    (outside / "model" / "w.bin").write_bytes(b">" + SIX_FLOATS[1:])
    path = write_external_pb(outside, location="w.bin")
    array = read_tensor(path)
    assert array.dtype == np.float32 and array.flags.writeable
    assert array.tobytes() == b">" + SIX_FLOATS[1:]


def test_large_external_sub_byte_data_is_refused(outside, monkeypatch):
    from padconv_cli.tensorio import protobuf

    monkeypatch.setattr(protobuf, "PROTOBUF_LIMIT", 1024 + 2)
    (outside / "model" / "w.bin").write_bytes(b"\x12\x34\x56")
    tensor = with_external(
        onnx.TensorProto(name="q", data_type=onnx.TensorProto.INT4, dims=[6]), location="w.bin"
    )
    (outside / "model" / "t.pb").write_bytes(tensor.SerializeToString())
    with pytest.raises(InputError, match="over 2 GiB is not supported"):
        read_tensor(str(outside / "model" / "t.pb"))


def test_large_external_bool_data_is_still_checked(outside, monkeypatch):
    from padconv_cli.tensorio import protobuf

    monkeypatch.setattr(protobuf, "PROTOBUF_LIMIT", 1024 + 2)
    (outside / "model" / "w.bin").write_bytes(b"\x00\x01\x02")
    tensor = with_external(
        onnx.TensorProto(name="b", data_type=onnx.TensorProto.BOOL, dims=[3]), location="w.bin"
    )
    (outside / "model" / "t.pb").write_bytes(tensor.SerializeToString())
    with pytest.raises(InputError, match="bool data"):
        read_tensor(str(outside / "model" / "t.pb"))


def _proto_field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_external_location_that_is_not_utf8(outside):
    entry = _proto_field(1, b"location") + _proto_field(2, b"da\x82a.bin")
    message = b"\x08\x06\x10\x01" + _proto_field(13, entry) + b"\x70\x01"
    (outside / "model" / "t.pb").write_bytes(message)
    with pytest.raises(InputError, match="not valid UTF-8"):
        read_tensor(str(outside / "model" / "t.pb"))


def test_tensor_name_that_is_not_utf8_is_replaced(tmp_path):
    message = float_tensor(raw_data=SIX_FLOATS, name="").SerializeToString()
    (tmp_path / "n.pb").write_bytes(message + _proto_field(8, b"w\xff"))
    name, array = read_named_tensor(str(tmp_path / "n.pb"))
    assert name == "w\ufffd" and array.shape == (2, 3)


@pytest.mark.parametrize("bad_name", ["a\nb", "tab\there", "esc\x1b[31m", "ls\u2028x"])
def test_control_characters_in_member_names_are_escaped(tmp_path, bad_name):
    image = npy_image(header_text(), b"\0" * 16)
    (tmp_path / "c.npz").write_bytes(zip_with({f"{bad_name}.npy": image, "other.npy": image}))
    with pytest.raises(InputError) as excinfo:
        read_tensor(str(tmp_path / "c.npz"))
    assert_one_line_input_error(excinfo, "ambiguous", "other")


def test_control_characters_in_file_names_are_escaped(tmp_path):
    path = tmp_path / "evil\nname.npy"
    path.write_bytes(b"garbage!")
    with pytest.raises(InputError) as excinfo:
        read_tensor(str(path))
    assert_one_line_input_error(excinfo, "evil\\nname.npy", "not an .npy file")


def test_control_characters_in_external_location_are_escaped(outside):
    path = write_external_pb(outside, location="x\n\x1b.bin")
    with pytest.raises(InputError) as excinfo:
        read_tensor(path)
    assert_one_line_input_error(excinfo, "no such file")


# External data through a hard link: a path check cannot see that ``hard.bin`` in the
# tensor's folder is the same file as one outside it, so a file with more than one link is
# refused (checked on the opened descriptor) unless --allow-hardlinks is given.


SECRET = np.arange(6, dtype="<f4") * 1000


def _external_tensor(location: str, name: str = "W") -> TensorProto:
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[1, 1, 2, 3])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return tensor


@pytest.fixture
def layout(tmp_path):
    """ROOT/secret.bin outside; ROOT/case/hard.bin a hard link to it; ROOT/case/x.pb uses it."""
    (tmp_path / "secret.bin").write_bytes(SECRET.tobytes())
    case = tmp_path / "case"
    case.mkdir()
    os.link(tmp_path / "secret.bin", case / "hard.bin")
    (case / "x.pb").write_bytes(_external_tensor("hard.bin").SerializeToString())
    return case


def _model_with_external_initializer(case) -> str:
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="c")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 2, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [_external_tensor("hard.bin")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (case / "m.onnx").write_bytes(model.SerializeToString())
    return str(case / "m.onnx")


def test_library_refuses_a_hardlinked_external_file(layout):
    with pytest.raises(InputError, match="2 hard links") as caught:
        read_tensor(layout / "x.pb")
    assert caught.value.param == "allow_hardlinks"


def test_library_reads_it_when_allowed(layout):
    allowed = ReadPolicy(allow_hardlinks=True)
    np.testing.assert_array_equal(read_tensor(layout / "x.pb", policy=allowed).ravel(), SECRET)


@pytest.mark.parametrize("command", [
    ["pad", "x.pb", "--pads", "0", "0", "0", "0", "1", "1", "1", "1", "-o", "out.npy"],
    ["show", "x.pb"],
    ["compare", "x.pb", "x.pb"],
])
def test_commands_refuse_it_in_one_line(run_cli, layout, monkeypatch, command):
    monkeypatch.chdir(layout)
    result = run_cli(*command)
    assert result.exit_code == 2, result.stdout
    assert "hard.bin" in result.stderr and "hard links" in result.stderr
    assert "--allow-hardlinks" in result.stderr
    assert "1000" not in result.stdout
    assert not (layout / "out.npy").exists()


def test_from_model_refuses_a_hardlinked_initializer(run_cli, layout, monkeypatch):
    monkeypatch.chdir(layout)
    np.save("x.npy", np.ones((1, 1, 2, 3), np.float32))
    model = _model_with_external_initializer(layout)
    result = run_cli("conv", "x.npy", "--from-model", model, "-o", "out.npy")
    assert result.exit_code == 2
    assert "hard links" in result.stderr and "initializer 'W'" in result.stderr
    allowed = run_cli("conv", "x.npy", "--from-model", model, "-o", "out.npy",
                      "--allow-hardlinks")
    assert allowed.exit_code == 0, allowed.stderr
    assert np.load("out.npy").item() == pytest.approx(SECRET.sum())


def test_flag_lets_the_command_read_it(run_cli, layout, monkeypatch):
    monkeypatch.chdir(layout)
    result = run_cli("pad", "x.pb", "--pads", *["0"] * 8, "-o", "out.npy", "--allow-hardlinks")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load("out.npy").ravel(), SECRET)


def test_a_single_link_file_is_read_as_before(tmp_path):
    (tmp_path / "data.bin").write_bytes(SECRET.tobytes())
    (tmp_path / "x.pb").write_bytes(_external_tensor("data.bin").SerializeToString())
    np.testing.assert_array_equal(read_tensor(tmp_path / "x.pb").ravel(), SECRET)
