"""Tensors whose format is recognised from their first bytes (stdin), read against the limit.

A stream has no size to check up front (``< /dev/zero`` never ends): an ``.npy`` header is
checked before its body is read, an ``.npz`` is read against the input limit, and a
``TensorProto`` (without external data) is checked field by field as it arrives: every tag
names a ``TensorProto`` field with a wire type protobuf accepts for it (``/dev/zero`` starts
with field 0, ``yes`` with field 15: refused at the first byte), a length-delimited field may
not announce more bytes than the limit leaves, at most :data:`MAX_DIMS` ``dims``, and never
more bytes than the limit; then :mod:`padconv_cli.tensorio.protobuf` parses and checks it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import BinaryIO

import numpy as np

from padconv_cli.errors import InputError
from padconv_cli.tensorio.files import ReadPolicy, input_limit, limit_error, one_line, read_exact
from padconv_cli.tensorio.npy import MAGIC_LENGTH, NPY_MAGIC, read_npy_bytes, read_npy_stream
from padconv_cli.units import human_bytes

STDIN_LABEL = "<stdin>"
MAX_DIMS = 64
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
# field number -> wire types protobuf accepts (packed and unpacked forms of repeated scalars):
# 1 dims, 2 data_type, 3 segment, 4 float_data, 5 int32_data, 6 string_data, 7 int64_data,
# 8 name, 9 raw_data, 10 double_data, 11 uint64_data, 12 doc_string, 13 external_data,
# 14 data_location, 16 metadata_props
TENSOR_FIELDS = {
    1: (_VARINT, _LENGTH), 2: (_VARINT,), 4: (_FIXED32, _LENGTH), 5: (_VARINT, _LENGTH),
    7: (_VARINT, _LENGTH), 10: (_FIXED64, _LENGTH), 11: (_VARINT, _LENGTH), 14: (_VARINT,),
    **dict.fromkeys((3, 6, 8, 9, 12, 13, 16), (_LENGTH,)),
}
_CHUNK = 1 << 20


def sniff_format(head: bytes) -> str:
    """'npy', 'npz' or 'pb' from the first bytes of a tensor image: ``\\x93NUMPY`` -> npy,
    ``PK\\x03\\x04`` (an empty zip: ``PK\\x05\\x06``) -> npz, anything else a TensorProto."""
    if head.startswith(NPY_MAGIC):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "npz"
    return "pb"


def _sniffed_kind(head: bytes, member: str | None, label: str) -> str:
    """:func:`sniff_format` of a non-empty image; a member name only for an .npz archive."""
    if not head:
        raise InputError(f"{label}: empty input, no tensor")
    kind = sniff_format(head)
    if member is not None and kind != "npz":
        raise InputError(f"{label}: a member name ({member!r}) needs an .npz archive")
    return kind


def read_sniffed_bytes(data: bytes, label: str, member: str | None = None,
                       policy: ReadPolicy | None = None) -> tuple[str | None, np.ndarray]:
    """(name, array) from an in-memory image whose format is sniffed (see the module rule)."""
    kind = _sniffed_kind(data, member, label)
    if kind == "npy":
        return None, read_npy_bytes(data, label, policy)
    if kind == "npz":
        from padconv_cli.tensorio.npz import read_npz_bytes  # zipfile costs start-up time

        return read_npz_bytes(data, member, label, policy)
    from padconv_cli.tensorio.protobuf import read_pb_bytes

    return read_pb_bytes(data, label, policy=policy)


def _read_bounded(stream: BinaryIO, head: bytes, limit: int) -> bytes:
    """``head`` plus the rest of ``stream``, refused as soon as it exceeds ``limit`` bytes."""
    chunks = [head]
    total = len(head)
    while chunk := stream.read(min(_CHUNK, limit + 1 - total)):
        total += len(chunk)
        if total > limit:
            raise limit_error(STDIN_LABEL, f"more than {human_bytes(limit)} arrive", limit)
        chunks.append(chunk)
    return b"".join(chunks)


def read_stdin(member: str | None = None,
               policy: ReadPolicy | None = None) -> tuple[str | None, np.ndarray]:
    """(name, array) of the tensor on stdin, format sniffed, read against ``policy``'s limit."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(f"{STDIN_LABEL}: no binary standard input available (stdin is closed "
                         "or is a folder)")
    return read_stdin_stream(stream, member, policy)


def read_stdin_stream(stream: BinaryIO, member: str | None = None,
                      policy: ReadPolicy | None = None) -> tuple[str | None, np.ndarray]:
    """:func:`read_stdin` on any binary stream (the rules of a stream of unknown length)."""
    try:
        head = read_exact(stream, MAGIC_LENGTH)
        kind = _sniffed_kind(head, member, STDIN_LABEL)
        if kind == "npy":
            return None, read_npy_stream(stream, None, STDIN_LABEL, policy, head=head)
        limit = input_limit(policy)
        if kind == "npz":
            data = _read_bounded(stream, head, limit)
        else:
            from padconv_cli.tensorio.protobuf import PROTOBUF_LIMIT

            limit = min(limit, PROTOBUF_LIMIT)
            data = read_tensorproto_stream(stream, head, limit, STDIN_LABEL,
                                           lambda what: limit_error(STDIN_LABEL, what, limit))
        return read_sniffed_bytes(data, STDIN_LABEL, member, policy)
    except OSError as exc:
        raise InputError(f"{STDIN_LABEL}: read error ({one_line(exc.strerror or exc)})") from None


# ------------------------------------------------------------ a TensorProto, field by field


def read_tensorproto_stream(stream: BinaryIO, head: bytes, limit: int, label: str,
                            over_limit: Callable[[str], Exception]) -> bytes:
    """The bytes of one ``TensorProto`` read from ``stream`` (``head``: bytes read from it
    already), checked field by field (module rules); ``over_limit(what)`` builds the error for
    more than ``limit`` bytes."""
    data = bytearray(head)
    position = dims = 0

    def arrives(count: int) -> bool:
        """Whether ``count`` bytes follow ``position``, read as needed (False: end of stream)."""
        while len(data) - position < count:
            if position + count > limit:
                raise over_limit(f"more than {human_bytes(limit)} arrive")
            wanted = position + count - len(data)
            chunk = stream.read(min(max(wanted, 1 << 16), _CHUNK, limit + 1 - len(data)))
            if not chunk:
                return False
            data.extend(chunk)
        return True

    def take(count: int, what: str) -> int:
        """Step over ``count`` bytes; the last of them."""
        nonlocal position
        if not arrives(count):
            raise InputError(f"{label}: not a TensorProto (truncated: {what} cut short "
                             f"at byte {len(data)})")
        position += count
        return data[position - 1]

    def varint(what: str) -> int:
        value = 0
        for shift in range(0, 70, 7):
            byte = take(1, what)
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
        raise InputError(f"{label}: not a TensorProto (a varint longer than 10 bytes)")

    while arrives(1):
        start = position
        tag = varint("tag")
        field, wire = tag >> 3, tag & 7
        if wire not in TENSOR_FIELDS.get(field, ()):
            raise InputError(f"{label}: not a TensorProto (byte {start} starts field {field} of "
                             f"wire type {wire}, which TensorProto does not have)")
        dims += field == 1 and wire == _VARINT
        if dims > MAX_DIMS:
            raise InputError(f"{label}: TensorProto with more than {MAX_DIMS} dims")
        if wire == _VARINT:
            varint(f"field {field}")
            continue
        length = 8 if wire == _FIXED64 else 4
        if wire == _LENGTH:
            length = varint(f"length of field {field}")
            if position + length > limit:
                raise over_limit(f"field {field} announces {human_bytes(length)}")
        take(length, f"field {field}")
    return bytes(data)
