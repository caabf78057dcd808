"""The hostile-input corpus, as data: each case builds its files in a fresh folder and names the
``padconv`` command to run there and what the one-line error must mention.

Nothing here is a committed binary: every file is produced by a builder from a few lines of
code, so the corpus is readable and reviewable.  The folder layout of a case is::

    ROOT/            files that must stay out of reach (secret.bin) and the PWNED sentinel
    ROOT/case/       the inputs; the command runs here and is asked to write out.npy

Every case must end with exit code 2, exactly one stderr line without a traceback, no new or
changed file in ROOT (in particular no out.npy and no PWNED), a peak memory below
runner.MAX_PEAK_RSS_BYTES.  A run still going after runner.CHILD_TIMEOUT_SECONDS is killed and
fails as hung; there is no tighter time bound (wall time on a shared machine says nothing about
correctness).
A new case is one more entry in a list below.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from npy_bytes import MAGIC, header_dict, npy_image, npy_preamble

SENTINEL_NAME = "PWNED"
SECRET_BYTES = b"top secret bytes outside the work folder\n" * 4

Builder = Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    """One hostile input or flag set (``hostile`` says what it is) and the words the one-line
    error must name: all of ``must_mention``, one of ``any_of``."""

    name: str
    hostile: str
    args: tuple[str, ...]
    build: Builder
    must_mention: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    stdin: Callable[[Path], bytes] | None = None


def work_dir(root: Path) -> Path:
    """The folder the command runs in."""
    return root / "case"


def sentinel_path(root: Path) -> Path:
    """The file a payload would create if padconv ever executed it."""
    return root / SENTINEL_NAME


# --- byte builders -------------------------------------------------------------------------


class _CreatesFileWhenUnpickled:
    """Pickles to ``exec("open(PATH, 'w').close()")``: unpickling it creates PATH."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (exec, (f"open({self.path!r}, 'w').close()",))


def pickled_object_npy(root: Path) -> bytes:
    """An object-dtype ``.npy`` whose pickle would create the sentinel file when loaded."""
    payload = np.array([_CreatesFileWhenUnpickled(sentinel_path(root))], dtype=object)
    buffer = io.BytesIO()
    np.save(buffer, payload, allow_pickle=True)
    return buffer.getvalue()


def valid_npy(array: np.ndarray) -> bytes:
    """``array`` saved as ``.npy`` bytes."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def small_matrix(dtype: str = "float32") -> np.ndarray:
    """The 2x3 tensor the flag cases pad."""
    return np.arange(6).reshape(2, 3).astype(dtype)


def random_bytes(count: int, seed: int) -> bytes:
    """Deterministic noise."""
    return np.random.default_rng(seed).bytes(count)


def tensor_proto(*, data_type: int = 1, dims=(), external: dict | None = None, **fields) -> bytes:
    """A serialized ``onnx.TensorProto`` with exactly the given fields set (no validation)."""
    from onnx import TensorProto

    proto = TensorProto()
    proto.data_type = data_type
    proto.dims.extend(dims)
    for field, value in fields.items():
        if isinstance(value, (list, tuple)):
            getattr(proto, field).extend(value)
        else:
            setattr(proto, field, value)
    if external is not None:
        proto.data_location = TensorProto.EXTERNAL
        for key, value in external.items():
            entry = proto.external_data.add()
            entry.key, entry.value = key, str(value)
    return proto.SerializeToString()


def npz_image(members: dict[str, bytes]) -> bytes:
    """A zip archive holding the given raw member files (names as given)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


# --- folder builders -------------------------------------------------------------------------


def files(**contents: bytes | Callable[[Path], bytes]) -> Builder:
    """A builder writing each ``name=bytes`` (or ``name=f(root) -> bytes``) into case/.

    A double underscore in a keyword stands for a dot: ``x__npy`` is ``x.npy``.
    """

    def build(root: Path) -> None:
        for key, content in contents.items():
            data = content(root) if callable(content) else content
            (work_dir(root) / key.replace("__", ".")).write_bytes(data)

    return build


def both(*builders: Builder) -> Builder:
    """A builder running several builders in order."""

    def build(root: Path) -> None:
        for builder in builders:
            builder(root)

    return build


def fifo(name: str) -> Builder:
    def build(root: Path) -> None:
        os.mkfifo(work_dir(root) / name)

    return build


def directory(name: str) -> Builder:
    def build(root: Path) -> None:
        (work_dir(root) / name).mkdir()

    return build


def symlink(name: str, target: str | Callable[[Path], Path]) -> Builder:
    def build(root: Path) -> None:
        destination = target(root) if callable(target) else target
        (work_dir(root) / name).symlink_to(destination)

    return build


def sparse_file(name: str, size: int) -> Builder:
    """A file of ``size`` bytes that takes no disk space (a hole)."""

    def build(root: Path) -> None:
        with open(work_dir(root) / name, "wb") as handle:
            handle.truncate(size)

    return build


def nothing(root: Path) -> None:
    """No input file at all."""


def prepare(case: Case, root: Path) -> None:
    """Lay out the case's folder: the secret outside case/, then the case's own files."""
    work_dir(root).mkdir(parents=True)
    (root / "secret.bin").write_bytes(SECRET_BYTES)
    case.build(root)


# --- the corpus ------------------------------------------------------------------------------

OUT = ("-o", "out.npy")
PAD_X = ("pad", "x.npy", "--pads", "1", "1", "1", "1", *OUT)
PAD_PB = ("pad", "x.pb", "--pads", "1", "1", "1", "1", *OUT)
PAD_NPZ = ("pad", "x.npz", "--pads", "1", "1", "1", "1", *OUT)
SIZE_WORDS = ("bytes", "truncated", "declares", "size")
X_NPY = valid_npy(small_matrix())
FLOAT = 1
STRING = 8


def _raw_float(count: int) -> bytes:
    return np.arange(count, dtype="<f4").tobytes()


def _external(location: str | Callable[[Path], str], **more) -> Callable[[Path], bytes]:
    def content(root: Path) -> bytes:
        where = location(root) if callable(location) else location
        return tensor_proto(data_type=FLOAT, dims=[2, 3], external={"location": where, **more})

    return content


FILE_CASES = [
    Case("npy_pickled_object", "object-dtype .npy whose pickle creates a file", PAD_X,
         files(x__npy=pickled_object_npy), ("x.npy",), ("object", "pickle")),
    Case("npy_structured_object_field", "structured dtype with an object field", PAD_X,
         files(x__npy=npy_image(header_dict([("a", "<f4"), ("b", "|O")], (2,)), b"\0" * 24)),
         ("x.npy",), ("object", "pickle")),
    Case("npy_header_terabytes", "header declares 1M x 1M float64 (8 TiB), 16 bytes follow", PAD_X,
         files(x__npy=npy_image(header_dict("<f8", (2**20, 2**20)), b"\0" * 16)), ("x.npy",),
         SIZE_WORDS),
    Case("npy_header_shape_overflow", "shape whose product overflows int64", PAD_X,
         files(x__npy=npy_image(header_dict("<f4", (2**40, 2**40, 2**40)))), ("x.npy",),
         SIZE_WORDS + ("overflow", "large")),
    Case("npy_header_oversized", "header length field 65535 (limit 10000)", PAD_X,
         files(x__npy=npy_preamble(65535) + b" " * 65535), ("x.npy", "header")),
    Case("npy_header_length_beyond_file", "v2 header length 2^31-1, file of 40 bytes", PAD_X,
         files(x__npy=npy_preamble(2**31 - 1, (2, 0)) + b"{" * 28), ("x.npy", "header")),
    Case(
        "npy_header_code_injection",
        "header text is python code that would create a file",
        PAD_X,
        files(
            x__npy=npy_image(
                "{'descr': __import__('os').system('touch ../PWNED'), "
                "'fortran_order': False, 'shape': (2,)}"
            )
        ),
        ("x.npy", "header"),
    ),
    Case("npy_negative_shape", "shape (-1, 4)", PAD_X,
         files(x__npy=npy_image(header_dict("<f4", (-1, 4)), b"\0" * 16)), ("x.npy",),
         ("shape", "dimension")),
    Case("npy_bad_descr", "descr '<q9' is no dtype", PAD_X,
         files(x__npy=npy_image(header_dict("<q9", (2,)), b"\0" * 16)), ("x.npy",),
         ("descr", "header", "dtype")),
    Case("npy_zero_itemsize", "dtype |V0 (elements of 0 bytes)", PAD_X,
         files(x__npy=npy_image(header_dict("|V0", (2**40,)))), ("x.npy",),
         ("size 0", "dtype", "type", "V0")),
    Case("npy_truncated_data", "64x64 float32 header, half of the data", PAD_X,
         files(x__npy=valid_npy(np.ones((64, 64), np.float32))[: 128 + 64 * 64 * 2]), ("x.npy",),
         SIZE_WORDS),
    Case("npy_truncated_header", "magic and version only (8 bytes)", PAD_X,
         files(x__npy=MAGIC + b"\x01\x00"), ("x.npy",), ("truncated", "header")),
    Case("npy_wrong_magic", "magic \\x93NUMPZ", PAD_X, files(x__npy=b"\x93NUMPZ" + X_NPY[6:]),
         ("x.npy",), ("magic", "not an .npy")),
    Case("npy_bad_version", "format version 9.9", PAD_X,
         files(x__npy=MAGIC + b"\x09\x09" + X_NPY[8:]), ("x.npy", "version")),
    Case("npy_empty_file", "0 bytes", PAD_X, files(x__npy=b""), ("x.npy", "empty")),
    Case("npy_bool_bytes", "bool array holding the byte 7", PAD_X,
         files(x__npy=npy_image(header_dict("|b1", (2, 3)), bytes([0, 1, 7, 1, 0, 1]))),
         ("x.npy", "bool")),
    Case("input_missing", "x.npy does not exist", PAD_X, nothing, ("x.npy",),
         ("no such file", "not found", "does not exist")),
    Case("input_is_directory", "x.npy is a directory", PAD_X, directory("x.npy"),
         ("x.npy", "directory")),
    Case(
        "input_is_fifo",
        "x.npy is a FIFO nobody writes to (must not block)",
        PAD_X,
        fifo("x.npy"),
        ("x.npy",),
        ("fifo", "pipe", "regular"),
    ),
    Case("input_symlink_to_device", "x.npy is a symlink to /dev/zero (endless bytes)", PAD_X,
         symlink("x.npy", "/dev/zero"), ("x.npy",), ("device", "regular")),
    Case("pb_random_bytes", "4 KiB of random bytes", PAD_PB,
         files(x__pb=random_bytes(4096, seed=1)), ("x.pb",)),
    Case("pb_empty_file", "0 bytes (parses as an empty TensorProto)", PAD_PB, files(x__pb=b""),
         ("x.pb",), ("empty", "type", "undefined")),
    Case("pb_negative_dims", "dims [-1, 4] with 4 floats", PAD_PB,
         files(x__pb=tensor_proto(dims=[-1, 4], float_data=[1.0] * 4)), ("x.pb",),
         ("negative", "dims", "dimension")),
    Case("pb_dims_disagree_raw", "dims [3, 3] float, raw_data of 16 bytes", PAD_PB,
         files(x__pb=tensor_proto(dims=[3, 3], raw_data=_raw_float(4))), ("x.pb",),
         ("bytes", "elements", "values", "dims", "shape")),
    Case("pb_dims_disagree_typed", "dims [3, 3] float, float_data of 4 values", PAD_PB,
         files(x__pb=tensor_proto(dims=[3, 3], float_data=[1.0] * 4)), ("x.pb",),
         ("elements", "values", "dims", "shape")),
    Case("pb_dims_terabytes", "dims [2^20, 2^20] float, raw_data of 8 bytes", PAD_PB,
         files(x__pb=tensor_proto(dims=[2**20, 2**20], raw_data=_raw_float(2))), ("x.pb",),
         ("bytes", "elements", "values", "dims", "shape")),
    Case("pb_dims_overflow", "dims [2^62, 2^62, 4]: product overflows int64", PAD_PB,
         files(x__pb=tensor_proto(dims=[2**62, 2**62, 4], raw_data=_raw_float(2))), ("x.pb",),
         ("bytes", "elements", "values", "dims", "overflow", "large")),
    Case("pb_several_data_fields", "raw_data and float_data both set", PAD_PB,
         files(x__pb=tensor_proto(dims=[4], raw_data=_raw_float(4), float_data=[1.0] * 4)),
         ("x.pb",), ("raw_data", "fields", "several", "both", "more than one")),
    Case("pb_wrong_typed_field", "data_type FLOAT with its values in int64_data", PAD_PB,
         files(x__pb=tensor_proto(dims=[2], int64_data=[1, 2])), ("x.pb",),
         ("int64_data", "field")),
    Case("pb_unknown_data_type", "data_type 999", PAD_PB,
         files(x__pb=tensor_proto(data_type=999, dims=[2], raw_data=b"\0" * 8)), ("x.pb", "999")),
    Case("pb_undefined_data_type", "data_type 0 (UNDEFINED) with raw_data", PAD_PB,
         files(x__pb=tensor_proto(data_type=0, dims=[2], raw_data=b"\0" * 8)), ("x.pb",),
         ("undefined", "type", " 0")),
    Case("pb_string_raw_data", "STRING tensor with raw_data (the spec forbids it)", PAD_PB,
         files(x__pb=tensor_proto(data_type=STRING, dims=[2], raw_data=b"abcd")), ("x.pb",),
         ("raw_data", "string")),
    Case("pb_external_parent", "external data location ../secret.bin (exists)", PAD_PB,
         files(x__pb=_external("../secret.bin")), ("x.pb",), ("..", "outside", "escape", "parent")),
    Case("pb_external_nested_parent", "external data location sub/../../secret.bin", PAD_PB,
         files(x__pb=_external("sub/../../secret.bin")), ("x.pb",),
         ("..", "outside", "escape", "parent")),
    Case("pb_external_absolute", "external data location is the absolute path of an existing file",
         PAD_PB, files(x__pb=_external(lambda root: str(root / "secret.bin"))), ("x.pb",),
         ("absolute", "outside")),
    Case(
        "pb_external_symlink",
        "external data location is a symlink to a file outside the folder",
        PAD_PB,
        both(
            files(x__pb=_external("link.bin")),
            symlink("link.bin", lambda root: root / "secret.bin"),
        ),
        ("x.pb",),
        ("symlink", "symbolic", "link", "outside"),
    ),
    Case("pb_external_to_device", "external data location is a symlink to /dev/zero", PAD_PB,
         both(files(x__pb=_external("zero.bin")), symlink("zero.bin", "/dev/zero")), ("x.pb",),
         ("symlink", "symbolic", "link", "device", "regular", "outside")),
    Case("pb_external_missing", "external data file does not exist", PAD_PB,
         files(x__pb=_external("nope.bin")), ("x.pb",), ("nope.bin",)),
    Case("pb_external_short", "external data file holds 8 of the 24 bytes needed", PAD_PB,
         files(x__pb=_external("data.bin"), data__bin=_raw_float(2)), ("x.pb",),
         ("bytes", "short", "length", "truncated")),
    Case("pb_external_offset_beyond", "external data offset 4096 in a 24-byte file", PAD_PB,
         files(x__pb=_external("data.bin", offset=4096), data__bin=_raw_float(6)), ("x.pb",),
         ("offset", "bytes", "beyond", "past")),
    Case("pb_external_negative_offset", "external data offset -8", PAD_PB,
         files(x__pb=_external("data.bin", offset=-8), data__bin=_raw_float(6)),
         ("x.pb", "offset")),
    Case("pb_external_location_not_utf8",
         "external data location with the invalid UTF-8 byte 0x82 (found by fuzzing)", PAD_PB,
         files(x__pb=lambda root: _external("daXa.bin")(root).replace(b"daXa", b"da\x82a")),
         ("x.pb",), ("utf-8", "utf8", "location", "external")),
    Case("pb_external_location_control_chars",
         "external data location holding a carriage return, a bell and an escape sequence", PAD_PB,
         files(x__pb=_external("nope\r\x07\x1b[2J.bin")), ("x.pb",)),
    Case("pb_over_2gib", "a 2 GiB + 16 byte .pb (sparse file)", PAD_PB,
         sparse_file("x.pb", 2**31 + 16), ("x.pb", ".npy")),
    Case("npz_missing_member", "x.npz:missing_member, archive holds a and b",
         ("pad", "x.npz:missing_member", "--pads", "1", "1", "1", "1", *OUT),
         files(x__npz=npz_image({"a.npy": X_NPY, "b.npy": X_NPY})), ("x.npz", "missing_member")),
    Case("npz_ambiguous_member", "x.npz holds a and b, no member named", PAD_NPZ,
         files(x__npz=npz_image({"a.npy": X_NPY, "b.npy": X_NPY})), ("x.npz",),
         ("member", "several", "ambiguous", "arrays", "name")),
    Case("npz_member_name_newline",
         "no member named, members 'a<newline>b' and 'zz_second' (the message must stay whole)",
         PAD_NPZ, files(x__npz=npz_image({"a\nb.npy": X_NPY, "zz_second.npy": X_NPY})),
         ("x.npz", "zz_second")),
    Case("npz_member_name_control_chars",
         "no member named, member names holding a carriage return and a bell", PAD_NPZ,
         files(x__npz=npz_image({"a\rb.npy": X_NPY, "c\x07.npy": X_NPY})), ("x.npz",)),
    Case("npz_no_member", "an empty archive", PAD_NPZ, files(x__npz=npz_image({})), ("x.npz",),
         ("empty", "no ", "member", "arrays")),
    Case("npz_not_a_zip", "4 KiB of random bytes", PAD_NPZ,
         files(x__npz=random_bytes(4096, seed=2)), ("x.npz",)),
    Case("npz_pickled_member", "member a is an object .npy whose pickle creates a file", PAD_NPZ,
         files(x__npz=lambda root: npz_image({"a.npy": pickled_object_npy(root)})), ("x.npz",),
         ("object", "pickle")),
    Case("npz_member_header_terabytes", "member header declares 8 TiB", PAD_NPZ,
         files(x__npz=npz_image({"a.npy": npy_image(header_dict("<f8", (2**20, 2**20)))})),
         ("x.npz",), SIZE_WORDS),
    Case("npz_member_not_npy", "member a.npy holds text", PAD_NPZ,
         files(x__npz=npz_image({"a.npy": b"hello, world\n"})), ("x.npz",)),
    Case("stdin_random_bytes", "4 KiB of random bytes on stdin",
         ("pad", "-", "--pads", "1", "1", "1", "1", *OUT), nothing, (),
         ("stdin", "format", "magic", "recogni"), stdin=lambda root: random_bytes(4096, seed=3)),
    Case("stdin_empty", "nothing on stdin", ("pad", "-", "--pads", "1", "1", "1", "1", *OUT),
         nothing, ("empty",), stdin=lambda root: b""),
    Case("stdin_pickled_object", "object .npy with a live pickle on stdin",
         ("pad", "-", "--pads", "1", "1", *OUT), nothing, (), ("object", "pickle"),
         stdin=pickled_object_npy),
    Case("stdin_truncated_npy", "a 64x64 float32 .npy cut in half on stdin",
         ("pad", "-", "--pads", "1", "1", "1", "1", *OUT), nothing, (), SIZE_WORDS,
         stdin=lambda root: valid_npy(np.ones((64, 64), np.float32))[:8000]),
    Case("literal_code_injection", "a python expression as inline data",
         ("pad", "__import__('os').system('touch ../PWNED')", "--pads", "1", "1", *OUT), nothing),
    Case("literal_ragged", "ragged nested list [[1, 2], [3]]",
         ("pad", "[[1, 2], [3]]", "--pads", "1", "1", "1", "1", *OUT), nothing),
    Case("literal_deeply_nested", "50000 nested brackets",
         ("pad", "[" * 50000 + "1" + "]" * 50000, "--pads", "1", "1", *OUT), nothing),
    Case("literal_unknown_dtype", "--dtype float99",
         ("pad", "[1, 2]", "--dtype", "float99", "--pads", "1", "1", *OUT), nothing, ("float99",)),
    Case("literal_out_of_range_for_dtype", "300 as int8",
         ("pad", "[1, 300]", "--dtype", "int8", "--pads", "1", "1", *OUT), nothing, ("300",)),
]

HAS_X = files(x__npy=X_NPY)


def _pad(*flags: str, data: str = "x.npy") -> tuple[str, ...]:
    return ("pad", data, *flags, *OUT)


def _typed_x(dtype: str) -> Builder:
    return files(x__npy=valid_npy(small_matrix(dtype)))


INT64_MAX = str(2**63 - 1)
INT64_MIN = str(-(2**63))
TOO_BIG = str(2**63)
ABSURD = ("max-output-bytes",)
GIANT_UNITS = ("GiB", "TiB", "PiB", "EiB")

PAD_FLAG_CASES = [
    Case("pad_mode_unknown", "--mode circular",
         _pad("--pads", "1", "1", "1", "1", "--mode", "circular"), HAS_X, ("--mode",)),
    Case("pad_pads_missing", "no --pads", _pad(), HAS_X, ("--pads",)),
    Case("pad_pads_odd_count", "3 pads for a 2-D tensor", _pad("--pads", "1", "1", "1"), HAS_X,
         ("pads",)),
    Case("pad_pads_wrong_count", "2 pads for a 2-D tensor (needs 4)", _pad("--pads", "1", "1"),
         HAS_X, ("pads",)),
    Case("pad_pads_not_integer", "--pads 1.5,0,0,0", _pad("--pads", "1.5,0,0,0"), HAS_X,
         ("--pads", "1.5")),
    Case("pad_pads_over_int64", "a pad of 2^63", _pad("--pads", TOO_BIG, "0", "0", "0"), HAS_X,
         ("--pads", "int64")),
    Case("pad_pads_int64_max", "a pad of 2^63-1 (output dim overflows int64)",
         _pad("--pads", "0", INT64_MAX, "0", "0"), HAS_X, (),
         ("max-output-bytes", "int64", "overflow", "cannot be allocated")),
    Case("pad_pads_int64_min", "a pad of -2^63", _pad("--pads", INT64_MIN, "0", "0", "0"), HAS_X,
         ("pads",)),
    Case("pad_crop_below_zero", "crop 5 from an axis of 2", _pad("--pads", "-5", "0", "0", "0"),
         HAS_X, ("pads",)),
    Case("pad_output_absurd",
         "pads 10^7 on every side (1.5 PB of float32: more than any memory or disk)",
         _pad("--pads", *["10000000"] * 4), HAS_X, ABSURD, GIANT_UNITS),
    Case(
        "pad_output_absurd_to_stdout",
        "pads 100000 on every side (149 GiB), result to stdout (held in memory) with "
        "--max-output-bytes 1G",
        ("pad", "x.npy", "--pads", *["100000"] * 4, "-o", "-", "--max-output-bytes", "1G"),
        HAS_X,
        (*ABSURD, "149.0 GiB", "1.0 GiB"),
    ),
    Case("pad_output_over_limit", "--max-output-bytes 100 for a 1.6 KiB result",
         _pad("--pads", "10", "10", "10", "10", "--max-output-bytes", "100"), HAS_X,
         ("max-output-bytes", "100")),
    Case("pad_max_output_bytes_garbage", "--max-output-bytes lots",
         _pad("--pads", "1", "1", "1", "1", "--max-output-bytes", "lots"), HAS_X,
         ("--max-output-bytes",)),
    Case("pad_axes_out_of_range", "--axes 5 on a 2-D tensor",
         _pad("--pads", "1", "1", "--axes", "5"), HAS_X, ("axes",)),
    Case("pad_axes_negative_out_of_range", "--axes -3 on a 2-D tensor",
         _pad("--pads", "1", "1", "--axes", "-3"), HAS_X, ("axes",)),
    Case("pad_axes_repeated", "--axes 0 -2 (the same axis twice)",
         _pad("--pads", "1", "1", "1", "1", "--axes", "0", "-2"), HAS_X, ("axes",)),
    Case("pad_axes_over_int64", "--axes 2^63", _pad("--pads", "1", "1", "--axes", TOO_BIG), HAS_X,
         ("--axes", "int64")),
    Case("pad_constant_not_a_number", "--constant-value abc on float32",
         _pad("--pads", "1", "1", "1", "1", "--constant-value", "abc"), HAS_X, ("abc",)),
    Case("pad_constant_wraps_int8", "--constant-value 300 on int8",
         _pad("--pads", "1", "1", "1", "1", "--constant-value", "300"), _typed_x("int8"), ("300",),
         ("int8",)),
    Case("pad_constant_negative_uint8", "--constant-value -1 on uint8",
         _pad("--pads", "1", "1", "1", "1", "--constant-value", "-1"), _typed_x("uint8"), ("-1",),
         ("uint8",)),
    Case("pad_constant_fraction_int32", "--constant-value 1.5 on int32",
         _pad("--pads", "1", "1", "1", "1", "--constant-value", "1.5"), _typed_x("int32"),
         ("1.5",)),
    Case("pad_constant_nan_int32", "--constant-value nan on int32",
         _pad("--pads", "1", "1", "1", "1", "--constant-value", "nan"), _typed_x("int32"),
         ("nan",)),
    Case("pad_constant_over_int64", "--constant-value 2^63 on int64",
         _pad("--pads", "1", "1", "1", "1", "--constant-value", TOO_BIG), _typed_x("int64"),
         (TOO_BIG,)),
    Case("pad_reflect_empty_axis", "reflect-pad an axis of length 0",
         _pad("--pads", "1", "0", "1", "0", "--mode", "reflect"),
         files(x__npy=valid_npy(np.zeros((0, 3), np.float32))), ("reflect",)),
    Case("pad_pads_file_float", "--pads @p.npy holding floats", _pad("--pads", "@p.npy"),
         both(HAS_X, files(p__npy=valid_npy(np.ones(4, np.float32)))), ("p.npy",), ("integer",)),
    Case("pad_pads_file_pickled", "--pads @p.npy holding a live pickle", _pad("--pads", "@p.npy"),
         both(HAS_X, files(p__npy=pickled_object_npy)), ("p.npy",), ("object", "pickle")),
    Case("pad_pads_file_uint64_huge", "--pads @p.npy holding uint64 2^64-1",
         _pad("--pads", "@p.npy"),
         both(HAS_X, files(p__npy=valid_npy(np.array([2**64 - 1, 0, 0, 0], np.uint64)))),
         ("p.npy",), ("int64",)),
]

HAS_XWB = files(
    x__npy=valid_npy(np.ones((1, 2, 5, 5), np.float32)),
    w__npy=valid_npy(np.ones((3, 2, 3, 3), np.float32)),
    b__npy=valid_npy(np.ones(3, np.float32)),
)


def _conv(*flags: str, inputs: tuple[str, ...] = ("x.npy", "w.npy")) -> tuple[str, ...]:
    return ("conv", *inputs, *flags, *OUT)


def _with(**contents: bytes | Callable[[Path], bytes]) -> Builder:
    return both(HAS_XWB, files(**contents))


CONV_FLAG_CASES = [
    Case("conv_group_zero", "--group 0", _conv("--group", "0"), HAS_XWB, ("group",)),
    Case("conv_group_negative", "--group -1", _conv("--group", "-1"), HAS_XWB, ("group",)),
    Case("conv_group_mismatch", "--group 2 with C=2, W.shape[1]=2", _conv("--group", "2"), HAS_XWB,
         ("group",)),
    Case("conv_group_over_int64", "--group 2^63", _conv("--group", TOO_BIG), HAS_XWB, ("group",)),
    Case("conv_strides_zero", "--strides 0 1", _conv("--strides", "0", "1"), HAS_XWB, ("strides",)),
    Case("conv_strides_negative", "--strides -1 1", _conv("--strides", "-1", "1"), HAS_XWB,
         ("strides",)),
    Case("conv_strides_wrong_count", "3 strides for 2 spatial axes",
         _conv("--strides", "1", "1", "1"), HAS_XWB, ("strides",)),
    Case("conv_strides_over_int64", "--strides 2^63 1", _conv("--strides", TOO_BIG, "1"), HAS_XWB,
         ("--strides", "int64")),
    Case("conv_dilations_zero", "--dilations 0 1", _conv("--dilations", "0", "1"), HAS_XWB,
         ("dilations",)),
    Case("conv_dilations_negative", "--dilations 1 -2", _conv("--dilations", "1", "-2"), HAS_XWB,
         ("dilations",)),
    Case("conv_dilations_int64_max", "--dilations 2^63-1 1 (kernel extent overflows)",
         _conv("--dilations", INT64_MAX, "1"), HAS_XWB, (), ("dilations", "output", "int64")),
    Case("conv_pads_negative", "--pads -1 0 0 0", _conv("--pads", "-1", "0", "0", "0"), HAS_XWB,
         ("pads",)),
    Case("conv_pads_wrong_count", "2 pads for 2 spatial axes (needs 4)", _conv("--pads", "1", "1"),
         HAS_XWB, ("pads",)),
    Case("conv_pads_absurd",
         "pads 10^7 on every side (4.4 PB of float32: more than any memory or disk)",
         _conv("--pads", *["10000000"] * 4), HAS_XWB, ABSURD, GIANT_UNITS),
    Case("conv_pads_int64_max", "pads of 2^63-1 (output dim overflows int64)",
         _conv("--pads", INT64_MAX, "0", "0", "0"), HAS_XWB, (),
         ("max-output-bytes", "int64", "overflow", "pads")),
    Case("conv_auto_pad_unknown", "--auto-pad SAME", _conv("--auto-pad", "SAME"), HAS_XWB,
         ("--auto-pad",)),
    Case("conv_auto_pad_with_pads", "--auto-pad VALID with --pads 1 1 1 1",
         _conv("--auto-pad", "VALID", "--pads", "1", "1", "1", "1"), HAS_XWB, ("pads",),
         ("auto_pad", "auto-pad")),
    Case("conv_kernel_shape_mismatch", "--kernel-shape 2 2 with a 3x3 W",
         _conv("--kernel-shape", "2", "2"), HAS_XWB, ("kernel",)),
    Case("conv_kernel_larger_than_input", "7x7 kernel on a 5x5 input, no pads", _conv(),
         _with(w__npy=valid_npy(np.ones((3, 2, 7, 7), np.float32))), (),
         ("output", "kernel", "larger", "input")),
    Case("conv_channels_mismatch", "X has C=2, W.shape[1]=4", _conv(),
         _with(w__npy=valid_npy(np.ones((3, 4, 3, 3), np.float32))), (),
         ("channel", "C=", "W.shape[1]")),
    Case("conv_w_rank_mismatch", "W with 1 spatial axis, X with 2", _conv(),
         _with(w__npy=valid_npy(np.ones((3, 2, 3), np.float32))), ("W",)),
    Case("conv_x_without_spatial_axes", "X of shape (1, 2)", _conv(),
         _with(x__npy=valid_npy(np.ones((1, 2), np.float32))), ("X",)),
    Case(
        "conv_bias_wrong_shape",
        "B of shape (4,) for M=3",
        _conv(inputs=("x.npy", "w.npy", "b.npy")),
        _with(b__npy=valid_npy(np.ones(4, np.float32))),
        ("B",),
    ),
    Case("conv_dtype_mismatch", "X float32, W float64", _conv(),
         _with(w__npy=valid_npy(np.ones((3, 2, 3, 3), np.float64))), (), ("float64", "type")),
    Case(
        "conv_integer_dtype",
        "X and W int32 (Conv takes float types only)",
        _conv(),
        _with(
            x__npy=valid_npy(np.ones((1, 2, 5, 5), np.int32)),
            w__npy=valid_npy(np.ones((3, 2, 3, 3), np.int32)),
        ),
        ("int32",),
    ),
    Case("conv_bias_pickled", "B is an object .npy with a live pickle",
         _conv(inputs=("x.npy", "w.npy", "b.npy")), _with(b__npy=pickled_object_npy), ("b.npy",),
         ("object", "pickle")),
    Case("conv_w_external_escape", "W is a .pb with external data ../secret.bin",
         _conv(inputs=("x.npy", "w.pb")), _with(w__pb=_external("../secret.bin")), ("w.pb",),
         ("..", "outside", "escape", "parent")),
]

# The second round's cases use the builders above, so they are imported here, at the end.
from hostile.cases_models_streams import MODEL_AND_STREAM_CASES  # noqa: E402

CASES = FILE_CASES + PAD_FLAG_CASES + CONV_FLAG_CASES + MODEL_AND_STREAM_CASES
CASES_BY_NAME = {case.name: case for case in CASES}


# Cases, tests or fuzzing regressions that fail on the current tree: name -> reason.  The tests
# mark them xfail(strict=True) so that a fix is noticed.
KNOWN_GAPS: dict[str, str] = {}
