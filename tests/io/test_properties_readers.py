"""Properties of the readers (hypothesis): whatever bytes or text a source holds, the result is
an array or a PadconvError, never anything else."""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx
import pytest
from hostile.cases import KNOWN_GAPS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from npy_bytes import header_dict, header_text, npy_image

from padconv_cli.dtypes import numpy_dtype_of_elem_type
from padconv_cli.errors import PadconvError
from padconv_cli.tensor_sources import read_tensor
from padconv_cli.tensorio import tensor_to_bytes
from padconv_cli.tensorio.literal import parse_literal
from padconv_cli.tensorio.npy import read_npy_bytes
from padconv_cli.tensorio.npz import read_npz_bytes
from padconv_cli.tensorio.protobuf import read_pb_bytes
from padconv_cli.tensorio.sniff import read_sniffed_bytes

# Properties of the public reader ``read_tensor`` on files (hypothesis).
#
# * Whatever bytes a ``.npy``/``.npz``/``.pb``/suffix-less file holds, and however a valid image
#   is mutated (bytes flipped, inserted, deleted, cut, chunks repeated), ``read_tensor`` returns
#   an array or raises a one-line :class:`PadconvError`, nothing else.
# * Whatever the external-data location of a ``.pb`` says, the bytes read come from inside the
#   ``.pb``'s folder: a secret file next to that folder is never returned.
# * ``FILE.npz:NAME`` returns the member NAME or a PadconvError, for any NAME.
#
# The readers' byte-level properties (``read_npy_bytes`` ...) are further down in this file;
# these go through the path handling, suffix dispatch and file checks on top of them.


def known_gap(function):
    """xfail(strict=True) for a test listed in KNOWN_GAPS (tests/hostile/cases.py)."""
    reason = KNOWN_GAPS.get(function.__name__)
    return pytest.mark.xfail(strict=True, reason=reason)(function) if reason else function


READER_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
SUFFIXES = [".npy", ".npz", ".pb", ".bin", ""]
SECRET = np.full(6, 7.25, np.float32).tobytes()


@contextmanager
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def read_or_padconv_error(source: str) -> np.ndarray | None:
    """The array, or None after a one-line PadconvError; any other exception fails the test."""
    try:
        return read_tensor(source)
    except PadconvError as error:
        assert "\n" not in str(error), str(error)
        assert str(error).strip(), "empty error message"
        return None


@READER_SETTINGS
@given(st.binary(max_size=600), st.sampled_from(SUFFIXES))
def test_files_of_arbitrary_bytes_raise_only_padconv_errors(data, suffix):
    with folder() as where:
        path = where / f"input{suffix}"
        path.write_bytes(data)
        read_or_padconv_error(str(path))


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _npz(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, a=array)
    return buffer.getvalue()


def _pb(array: np.ndarray) -> bytes:
    from onnx import numpy_helper

    native = array.astype(array.dtype.newbyteorder("="))
    return numpy_helper.from_array(native, name="t").SerializeToString()


def _pb_typed(array: np.ndarray) -> bytes:
    from onnx import helper

    proto = helper.make_tensor("t", 1, array.shape, array.astype(np.float32).ravel().tolist())
    return proto.SerializeToString()


IMAGES = {
    ".npy": _npy,
    ".npz": _npz,
    ".pb": _pb,
}
SAMPLE_ARRAYS = [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.asfortranarray(np.arange(12, dtype=">i8").reshape(3, 4)),
    np.array([True, False]),
    np.zeros((0, 3), np.float16),
    np.array(2.5),
]


@st.composite
def mutated_images(draw):
    suffix = draw(st.sampled_from([*IMAGES, ".pbtyped"]))
    array = draw(st.sampled_from(SAMPLE_ARRAYS))
    image = bytearray(_pb_typed(array) if suffix == ".pbtyped" else IMAGES[suffix](array))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "repeat", "cut"]))
        at = draw(st.integers(0, max(len(image) - 1, 0)))
        if kind == "flip" and image:
            image[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            image[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del image[at : at + draw(st.integers(1, 8))]
        elif kind == "repeat":
            image[at:at] = image[at : at + draw(st.integers(1, 16))]
        else:
            del image[at:]
    return suffix.replace("typed", ""), bytes(image)


@READER_SETTINGS
@given(mutated_images(), st.booleans())
def test_mutated_images_raise_only_padconv_errors(mutated, keep_suffix):
    suffix, image = mutated
    with folder() as where:
        path = where / ("input" + (suffix if keep_suffix else ".data"))
        path.write_bytes(image)
        read_or_padconv_error(str(path))


LOCATION_PARTS = st.sampled_from(
    [
        "..",
        ".",
        "data.bin",
        "secret.bin",
        "link.bin",
        "sub",
        "uplink",
        "",
        "/",
        "//",
        "~",
        "data.bin\0",
        "%2e%2e",
        "..\\secret.bin",
    ]
)


def _external_pb(location: str, offset: str | None, length: str | None) -> bytes:
    from onnx import TensorProto

    proto = TensorProto()
    proto.data_type = TensorProto.FLOAT
    proto.dims.extend([6])
    proto.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": offset, "length": length}
    for key, value in entries.items():
        if value is not None:
            entry = proto.external_data.add()
            entry.key, entry.value = key, value
    return proto.SerializeToString()


def _lay_out_confinement_folders(root: Path) -> Path:
    """root/secret.bin (outside), root/case/{data.bin, sub/, link.bin -> ../secret.bin,
    uplink -> ..}; returns root/case."""
    work = root / "case"
    (work / "sub").mkdir(parents=True)
    (root / "secret.bin").write_bytes(SECRET)
    (work / "data.bin").write_bytes(np.arange(12, dtype=np.float32).tobytes())
    (work / "sub" / "data.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    (work / "link.bin").symlink_to(root / "secret.bin")
    (work / "uplink").symlink_to(root)
    return work


@READER_SETTINGS
@given(
    st.lists(LOCATION_PARTS, min_size=1, max_size=5).map("/".join),
    st.booleans(),
    st.one_of(st.none(), st.sampled_from(["0", "4", "-4", "24", "x", "99999999999999999999"])),
    st.one_of(st.none(), st.sampled_from(["0", "24", "-1", "48", "1e3"])),
)
def test_external_data_never_leaves_the_folder(location, absolute, offset, length):
    with folder() as root:
        work = _lay_out_confinement_folders(root)
        if absolute:
            location = str(root) + "/" + location
        (work / "t.pb").write_bytes(_external_pb(location, offset, length))
        array = read_or_padconv_error(str(work / "t.pb"))
        if array is not None:
            assert array.tobytes() != SECRET, f"{location!r} read the secret outside the folder"


@READER_SETTINGS
@given(st.text(st.characters(blacklist_characters="\x00"), min_size=1, max_size=20))
def test_npz_member_lookup_is_exact_or_an_error(name):
    """(NUL bytes in a source have their own test below.)"""
    with folder() as where:
        archive = where / "x.npz"
        np.savez(archive, a=np.arange(3), b=np.ones(2))
        cwd = os.getcwd()
        try:
            os.chdir(where)
            array = read_or_padconv_error(f"x.npz:{name}")
        finally:
            os.chdir(cwd)
        if array is not None:
            expected = {"a": np.arange(3), "b": np.ones(2)}
            assert name in expected, f"member {name!r} was read from an archive without it"
            np.testing.assert_array_equal(array, expected[name])


def test_external_data_inside_the_folder_is_read():
    """The confinement property is not vacuous: in-folder locations do read."""
    with folder() as root:
        work = _lay_out_confinement_folders(root)
        (work / "t.pb").write_bytes(_external_pb("sub/data.bin", None, None))
        np.testing.assert_array_equal(read_tensor(str(work / "t.pb")), np.arange(6))
        (work / "t.pb").write_bytes(_external_pb("data.bin", "24", "24"))
        np.testing.assert_array_equal(read_tensor(str(work / "t.pb")), np.arange(6, 12))


@known_gap
@pytest.mark.parametrize("source", ["x\x00.npy", "x.npz:/\x00", "/tmp/\x00/x.pb", "\x00"])
def test_source_with_a_nul_byte_is_an_input_error(source):
    """A NUL cannot come from a command line, but the library takes any string."""
    with pytest.raises(PadconvError):
        read_tensor(source)


# Properties: arbitrary bytes and text never escape as anything but a PadconvError.


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

npy_headers = st.builds(
    header_text,
    st.one_of(
        st.sampled_from(
            [
                "'<f4'",
                "'>i8'",
                "'|b1'",
                "'O'",
                "'<U3'",
                "'|V0'",
                "'>M8[D]'",
                "'<m8'",
                "'S0'",
                "[('a', '<i2')]",
                "[('a', '>i2', (2,)), ('', '|V3')]",
                "[('a', 'O', (2,))]",
                "('<i2', (3,))",
                "('<f8', (10**9,))",
                "[]",
                "5",
            ]
        ),
        st.text(max_size=12).map(repr),
    ),
    st.sampled_from(["False", "True", "0", "None"]),
    st.one_of(
        st.lists(st.integers(-3, 2**40), max_size=4).map(lambda dims: repr(tuple(dims))),
        st.text(max_size=20),
    ),
)


CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def assert_only_padconv_errors(function, *args) -> None:
    try:
        function(*args)
    except PadconvError as exc:
        assert not CONTROL_CHARACTERS.search(str(exc)), repr(str(exc))


@FUZZ
@given(st.binary(max_size=300))
def test_npy_reader_on_arbitrary_bytes(data):
    assert_only_padconv_errors(read_npy_bytes, data, "f.npy")


@FUZZ
@given(npy_headers, st.binary(max_size=64), st.sampled_from([1, 2, 3]))
def test_npy_reader_on_plausible_headers(header, data, version):
    image = npy_image(header.encode("utf8"), data, (version, 0), aligned=False)
    assert_only_padconv_errors(read_npy_bytes, image, "f.npy")


@FUZZ
@given(st.binary(max_size=300))
def test_pb_reader_on_arbitrary_bytes(data):
    assert_only_padconv_errors(read_pb_bytes, data, "f.pb", None)


@FUZZ
@given(st.binary(max_size=300))
def test_stdin_sniffer_on_arbitrary_bytes(data):
    assert_only_padconv_errors(read_sniffed_bytes, data, "<stdin>")


@FUZZ
@given(st.binary(max_size=300))
def test_npz_reader_on_zip_prefixed_bytes(data):
    assert_only_padconv_errors(read_npz_bytes, b"PK\x03\x04" + data, None, "f.npz")


@FUZZ
@given(st.data())
def test_mutated_real_images_fail_cleanly(data):
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    fmt = data.draw(st.sampled_from(["npy", "pb"]))
    image = bytearray(tensor_to_bytes(array, fmt))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(image) - 1))
        image[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(image)))
    assert_only_padconv_errors(read_sniffed_bytes, bytes(image[:cut]), "<stdin>")


tensor_fields = st.fixed_dictionaries(
    {
        "data_type": st.integers(-2, 30),
        "dims": st.lists(st.integers(-2, 6), max_size=3),
        "raw_data": st.one_of(st.none(), st.binary(max_size=40)),
        "int32_data": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=8),
        "float_data": st.lists(st.floats(width=32), max_size=8),
        "int64_data": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4),
        "string_data": st.lists(st.binary(max_size=5), max_size=4),
        "uint64_data": st.lists(st.integers(0, 2**64 - 1), max_size=4),
    }
)


@FUZZ
@given(tensor_fields)
def test_structured_tensor_protos_fail_cleanly_or_match_onnx(fields):
    tensor = onnx.TensorProto(data_type=fields["data_type"], dims=fields["dims"])
    if fields["raw_data"] is not None:
        tensor.raw_data = fields["raw_data"]
    for name in ("int32_data", "float_data", "int64_data", "string_data", "uint64_data"):
        getattr(tensor, name).extend(fields[name])
    try:
        _, array = read_pb_bytes(tensor.SerializeToString(), "f.pb", None)
    except PadconvError as exc:
        assert not CONTROL_CHARACTERS.search(str(exc)), repr(str(exc))
        return
    # Accepted: it must be exactly what onnx itself makes of the message.
    assert array.dtype == numpy_dtype_of_elem_type(tensor.data_type)
    assert array.shape == tuple(tensor.dims)
    expected = onnx.numpy_helper.to_array(tensor)
    assert np.asarray(array).tobytes() == np.asarray(expected).tobytes() or (
        array.dtype == object and array.tolist() == expected.tolist()
    )


@FUZZ
@given(st.text(max_size=60))
def test_literal_parser_on_arbitrary_text(text):
    assert_only_padconv_errors(parse_literal, text, None)


@FUZZ
@given(
    st.recursive(
        st.one_of(
            st.integers(-(2**70), 2**70),
            st.floats(),
            st.booleans(),
            st.text(max_size=3),
            st.complex_numbers(allow_nan=False),
        ),
        lambda children: st.lists(children, max_size=3),
        max_leaves=8,
    ),
    st.sampled_from(
        [
            None,
            "float",
            "int8",
            "uint4",
            "bfloat16",
            "float8e4m3fn",
            "bool",
            "string",
            "complex64",
            "float4e2m1",
            "float8e8m0",
            "uint64",
        ]
    ),
)
def test_literal_of_python_values_is_exact_or_refused(values, dtype):
    try:
        array = parse_literal(repr(values), dtype)
    except PadconvError as exc:
        assert not CONTROL_CHARACTERS.search(str(exc)), repr(str(exc))
        return
    assert array.shape == np.shape(np.array(values, dtype=object)) or array.size == 0


@pytest.mark.parametrize("version", [1, 2, 3])
def test_fuzz_helper_builds_readable_images(version):
    """Guard for the fuzz helper itself: a well-formed image must read back."""
    header = header_dict("<i2", (2,))
    image = npy_image(header, np.array([1, 2], dtype="<i2").tobytes(), (version, 0), aligned=False)
    assert read_npy_bytes(image, "f.npy").tolist() == [1, 2]


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (payloads here stay under 128 bytes)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


@FUZZ
@given(
    st.one_of(st.sampled_from([b"location", b"offset", b"length"]), st.binary(max_size=12)),
    st.binary(max_size=12),
    st.binary(max_size=8),
)
def test_external_entries_with_arbitrary_bytes_fail_cleanly(tmp_path_factory, key, value, name):
    """Invalid UTF-8 in string fields comes back from protobuf as bytes, not str."""
    folder = tmp_path_factory.mktemp("ext")
    entry = _field(1, key) + _field(2, value)
    message = (
        b"\x08\x02"  # dims: [2]
        + b"\x10\x01"  # data_type: FLOAT
        + _field(8, name)
        + _field(13, entry)
        + b"\x70\x01"  # data_location: EXTERNAL
    )
    assert_only_padconv_errors(read_pb_bytes, message, "f.pb", str(folder))
