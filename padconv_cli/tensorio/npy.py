"""Reading and writing ``.npy`` data without trusting the header.

The header is parsed before any array memory is allocated, and refused for a wrong magic or
version, a header over :data:`MAX_HEADER_SIZE` bytes (checked on its length field), python
objects (pickle), dimensions that are not integers >= 0, and more declared bytes than the
source holds after the header (``np.load`` would allocate first).  Arrays come back in native
byte order (swapped in place, bit-exact), in C or Fortran order as stored.
"""

from __future__ import annotations

import ast
import io
import math
import struct
from typing import BinaryIO, NamedTuple

import numpy as np

from padconv_cli.dtypes import is_npy_native
from padconv_cli.errors import InputError, UnsupportedDtypeError
from padconv_cli.messages import bounded_sequence
from padconv_cli.tensorio.files import (
    ReadPolicy,
    check_input_size,
    one_line,
    read_exact,
    read_into,
)

NPY_MAGIC = b"\x93NUMPY"
MAGIC_LENGTH = 8  # prefix + major + minor version bytes
MAX_HEADER_SIZE = 10_000  # numpy's own default limit for np.load
# format version -> struct format of the header length field (3.0 is 2.0 with UTF-8 text)
_LENGTH_FIELDS = {(1, 0): "<H", (2, 0): "<I", (3, 0): "<I"}
_HEADER_KEYS = {"descr", "fortran_order", "shape"}


class NpyHeader(NamedTuple):
    """What an ``.npy`` header declares, and where the data starts."""

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype
    data_offset: int

    @property
    def data_bytes(self) -> int:
        """Bytes of data the header promises: product(shape) * itemsize."""
        return math.prod(self.shape) * self.dtype.itemsize


def _read_version(stream: BinaryIO, label: str, head: bytes) -> tuple[int, int]:
    magic = head + read_exact(stream, MAGIC_LENGTH - len(head))
    if not magic:
        raise InputError(f"{label}: empty file, not an .npy array")
    if not magic.startswith(NPY_MAGIC):
        raise InputError(f"{label}: not an .npy file (magic {magic[:6]!r}, expected {NPY_MAGIC!r})")
    if len(magic) < MAGIC_LENGTH:
        raise InputError(f"{label}: truncated .npy file ({len(magic)} bytes)")
    version = (magic[6], magic[7])
    if version not in _LENGTH_FIELDS:
        raise InputError(f"{label}: unsupported .npy format version {version[0]}.{version[1]}")
    return version


def _read_header_text(stream: BinaryIO, version: tuple[int, int], label: str) -> bytes:
    """Length field + header bytes, refusing an oversized header before reading it."""
    length_format = _LENGTH_FIELDS[version]
    length_field = read_exact(stream, struct.calcsize(length_format))
    if len(length_field) < struct.calcsize(length_format):
        raise InputError(f"{label}: truncated .npy header")
    (header_length,) = struct.unpack(length_format, length_field)
    if header_length > MAX_HEADER_SIZE:
        raise InputError(f"{label}: .npy header of {header_length} bytes exceeds the limit of "
                         f"{MAX_HEADER_SIZE} bytes")
    header = read_exact(stream, header_length)
    if len(header) < header_length:
        raise InputError(f"{label}: truncated .npy header ({len(header)} of {header_length} bytes)")
    return length_field + header


def _parse_header_v3(text: str) -> tuple[tuple, bool, np.dtype]:
    """Version 3.0 is 2.0 in UTF-8 text; numpy has no public reader for it."""
    fields = ast.literal_eval(text)
    if not isinstance(fields, dict) or set(fields) != _HEADER_KEYS:
        raise ValueError("header is not a dict with keys descr, fortran_order, shape")
    if not isinstance(fields["fortran_order"], bool):
        raise ValueError(f"fortran_order is not a bool: {fields['fortran_order']!r}")
    if not isinstance(fields["shape"], tuple):
        raise ValueError(f"shape is not a tuple: {fields['shape']!r}")
    dtype = np.lib.format.descr_to_dtype(fields["descr"])
    return fields["shape"], fields["fortran_order"], dtype


def _parse_header(raw: bytes, version: tuple[int, int], label: str) -> tuple:
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns about Python 2 era headers
            if version == (3, 0):
                return _parse_header_v3(raw[4:].decode("utf8"))
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else (
                np.lib.format.read_array_header_2_0)
            return read(io.BytesIO(raw), max_header_size=MAX_HEADER_SIZE)
    except Exception as exc:  # untrusted text through numpy's parser: any failure = corrupt
        raise InputError(f"{label}: corrupt .npy header ({one_line(exc, 200)})") from None


def _check_shape_and_dtype(shape: tuple, dtype: np.dtype, label: str) -> None:
    if any(type(dim) is not int or dim < 0 for dim in shape):
        raise InputError(f"{label}: .npy header shape {bounded_sequence(map(repr, shape))} "
                         "has a dimension that is not an integer >= 0")
    if dtype.hasobject:
        raise InputError(f"{label}: .npy holds python objects ({dtype}), which need pickle; "
                         "refused")
    if dtype.subdtype is not None:
        raise InputError(f"{label}: .npy element type {dtype} is a subarray, not supported")
    if dtype.itemsize == 0:
        raise InputError(f"{label}: .npy element type {dtype} has size 0")


def read_npy_header(stream: BinaryIO, label: str, head: bytes = b"") -> NpyHeader:
    """Parse and check an ``.npy`` header (``head``: its first bytes, read from ``stream``
    already); leaves ``stream`` at the first data byte."""
    version = _read_version(stream, label, head)
    raw = _read_header_text(stream, version, label)
    shape, fortran_order, dtype = _parse_header(raw, version, label)
    _check_shape_and_dtype(shape, dtype, label)
    return NpyHeader(shape, fortran_order, dtype, MAGIC_LENGTH + len(raw))


def check_declared_size(header: NpyHeader, total_size: int | None, label: str) -> None:
    """Rule: the declared body fits in what the source holds after the header (when known)."""
    if total_size is not None and header.data_bytes > total_size - header.data_offset:
        raise InputError(f"{label}: {_declared(header)} but only "
                         f"{max(total_size - header.data_offset, 0)} bytes follow "
                         "(truncated or forged)")


def _declared(header: NpyHeader) -> str:
    return (f"header declares shape {bounded_sequence(header.shape)} of {header.dtype} = "
            f"{header.data_bytes} bytes")


def to_native_byte_order(array: np.ndarray) -> np.ndarray:
    """The same values in native byte order (swapped in place, so NaN payloads survive)."""
    if array.dtype.isnative:
        return array
    if array.dtype.fields:  # fields may differ in byte order: let numpy cast field by field
        return array.astype(array.dtype.newbyteorder("="))
    array.byteswap(inplace=True)
    return array.view(array.dtype.newbyteorder("="))


def check_bool_bytes(array: np.ndarray, label: str) -> None:
    """Rule: every byte of a bool array is 0 or 1 (other bytes make numpy bools misbehave)."""
    if array.dtype == np.bool_ and array.size and array.view(np.uint8).max() > 1:
        raise InputError(f"{label}: bool data holds bytes other than 0 and 1")


def read_npy_stream(stream: BinaryIO, total_size: int | None, label: str,
                    policy: ReadPolicy | None = None, head: bytes = b"") -> np.ndarray:
    """Read an ``.npy`` image of ``total_size`` bytes (None: unknown) from ``stream``, whose
    first bytes ``head`` were read already.

    Rule: product(shape) * itemsize fits in total_size - header length and in the input limit
    of ``policy``, checked before allocation; trailing bytes are ignored.
    """
    header = read_npy_header(stream, label, head)
    check_declared_size(header, total_size, label)
    check_input_size(header.data_bytes, label, _declared(header), policy)
    try:
        flat = np.empty(math.prod(header.shape), dtype=header.dtype)
    except (MemoryError, ValueError) as exc:
        raise InputError(f"{label}: cannot allocate shape {bounded_sequence(header.shape)} of "
                         f"{header.dtype} ({one_line(exc, 120)})") from None
    try:
        got = read_into(stream, memoryview(flat.view(np.uint8)))
    except OSError as exc:
        raise InputError(f"{label}: read error ({one_line(exc.strerror or exc)})") from None
    if got < flat.nbytes:
        raise InputError(f"{label}: truncated .npy data ({got} of {flat.nbytes} bytes)")
    order = "F" if header.fortran_order else "C"
    try:
        array = to_native_byte_order(flat.reshape(header.shape, order=order))
    except (ValueError, TypeError) as exc:  # exotic dtypes the checks above did not foresee
        raise InputError(f"{label}: cannot arrange .npy data ({one_line(exc, 120)})") from None
    check_bool_bytes(array, label)
    return array


def read_npy_bytes(data: bytes, label: str, policy: ReadPolicy | None = None) -> np.ndarray:
    """Read an ``.npy`` image held in memory (stdin)."""
    return read_npy_stream(io.BytesIO(data), len(data), label, policy)


def check_npy_writable(array: np.ndarray, target: str) -> None:
    """Refuse what :func:`write_npy` cannot write: object arrays other than all-str or
    all-bytes, and types numpy cannot name (bfloat16, float8*, int4 ...: ``.pb`` holds them)."""
    if array.dtype == np.object_:
        _fixed_width_type(array.ravel(order="K").tolist(), target)
    else:
        check_npy_dtype(array.dtype, target)


def check_npy_dtype(dtype: np.dtype, target: str, where: str = "") -> None:
    """Rule: ``.npy`` holds a dtype it names without pickle (not objects, bfloat16, float8,
    int4 ...); ``where`` ends the hint (", on the memory engine")."""
    if dtype.hasobject or not is_npy_native(dtype):
        from padconv_cli.dtypes import dtype_name

        raise UnsupportedDtypeError(f"{target}: .npy cannot store dtype {dtype_name(dtype)}; "
                                    f"write a .pb TensorProto instead (format pb{where})",
                                    param="format")


def write_npy_header(stream: BinaryIO, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """A C-order ``.npy`` header of ``shape`` and ``dtype``: version 1.0, 2.0 when over 64 KiB."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": tuple(int(d) for d in shape)}
    try:
        np.lib.format.write_array_header_1_0(stream, header)
    except ValueError:  # a header over 64 KiB
        np.lib.format.write_array_header_2_0(stream, header)


STRING_CHUNK_BYTES = 16 * 2**20  # fixed-width string bytes converted at a time


def write_npy(array: np.ndarray, stream: BinaryIO, target: str,
              string_dtype: np.dtype | None = None) -> None:
    """Write ``array`` as ``.npy`` (never pickled) to ``stream``.

    A string ``object`` array becomes fixed-width ``<U``/``|S`` elements (``string_dtype``, else
    the longest element's width) converted STRING_CHUNK_BYTES at a time, a wider element in
    pieces: the padded file may be far larger than the array, memory needs not be.
    """
    if array.dtype != np.object_:
        check_npy_writable(array, target)
        np.lib.format.write_array(stream, array, allow_pickle=False)
        return
    flat = array.ravel(order="C")
    width_type = _fixed_width_type(flat.tolist(), target)
    given = width_type if string_dtype is None else np.dtype(string_dtype)
    if given.kind != width_type.kind or given.itemsize < width_type.itemsize:
        raise UnsupportedDtypeError(f"{target}: strings of type {width_type} do not fit {given}")
    width_type = given
    write_npy_header(stream, array.shape, width_type)
    if width_type.itemsize > STRING_CHUNK_BYTES:
        for item in flat:
            _write_wide_element(stream, item, width_type)
        return
    step = STRING_CHUNK_BYTES // max(width_type.itemsize, 1)
    for start in range(0, flat.size, step):
        stream.write(np.asarray(flat[start:start + step], dtype=width_type).tobytes())


def _write_wide_element(stream: BinaryIO, item: str | bytes, width_type: np.dtype) -> None:
    """An element wider than STRING_CHUNK_BYTES: its characters (UTF-32 in the type's byte
    order, or bytes), then zeros to the width, in pieces."""
    unit = 4 if width_type.kind == "U" else 1
    codec = "utf-32-be" if width_type.byteorder == ">" else "utf-32-le"
    step = STRING_CHUNK_BYTES // unit
    for start in range(0, len(item), step):
        piece = item[start:start + step]
        stream.write(piece.encode(codec) if unit == 4 else bytes(piece))
    remaining = width_type.itemsize - unit * len(item)
    zeros = memoryview(bytes(min(remaining, STRING_CHUNK_BYTES)))
    while remaining > 0:
        size = min(remaining, len(zeros))
        stream.write(zeros[:size])
        remaining -= size


def _fixed_width_type(elements: list, target: str) -> np.dtype:
    """``<U{longest}`` for all-str elements, ``|S{longest}`` for all-bytes ones."""
    for kind, code in ((str, "<U"), (bytes, "|S")):
        if all(isinstance(item, kind) for item in elements):
            return np.dtype(f"{code}{max(map(len, elements), default=0) or 1}")
    kinds = sorted({type(item).__name__ for item in elements})
    raise UnsupportedDtypeError(f"{target}: object array holds {', '.join(kinds)}; only all-str "
                                "or all-bytes object arrays can be written")
