"""Properties of the public reader ``read_tensor`` on files (hypothesis).

* Whatever bytes a ``.npy``/``.npz``/``.pb``/suffix-less file holds, and however a valid image
  is mutated (bytes flipped, inserted, deleted, cut, chunks repeated), ``read_tensor`` returns
  an array or raises a one-line :class:`PadconvError`, nothing else.
* Whatever the external-data location of a ``.pb`` says, the bytes read come from inside the
  ``.pb``'s folder: a secret file next to that folder is never returned.
* ``FILE.npz:NAME`` returns the member NAME or a PadconvError, for any NAME.

The readers' byte-level properties (``read_npy_bytes`` ...) live in test_tensorio_fuzz.py;
these go through the path handling, suffix dispatch and file checks on top of them.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hostile.cases import KNOWN_GAPS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from padconv_cli.errors import PadconvError
from padconv_cli.tensor_sources import read_tensor


def known_gap(function):
    """xfail(strict=True) for a test listed in KNOWN_GAPS (tests/hostile/cases.py)."""
    reason = KNOWN_GAPS.get(function.__name__)
    return pytest.mark.xfail(strict=True, reason=reason)(function) if reason else function


READER_SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow]
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
