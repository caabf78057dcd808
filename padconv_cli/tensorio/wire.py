"""Reading a serialized ``TensorProto`` from a stream of unknown length (stdin) field by field.

A stream has no size to check up front: ``< /dev/zero`` never ends.  Rather than buffering
everything and parsing at the end, the top-level protobuf fields are checked as they arrive:

* every tag must name a ``TensorProto`` field with a wire type protobuf accepts for it
  (``/dev/zero`` starts with field 0, ``yes`` with field 15: refused at the first byte);
* a length-delimited field may not announce more bytes than the input limit leaves;
* at most :data:`MAX_DIMS` ``dims`` entries (numpy's maximum rank);
* the bytes read so far never exceed ``limit``.

What passes is handed to the full parser and checks of :mod:`padconv_cli.tensorio.protobuf`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from padconv_cli.errors import InputError
from padconv_cli.units import human_bytes

MAX_DIMS = 64
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
# field number -> wire types protobuf accepts (packed and unpacked forms of repeated scalars)
TENSOR_FIELDS = {
    1: (_VARINT, _LENGTH),  # dims
    2: (_VARINT,),  # data_type
    3: (_LENGTH,),  # segment
    4: (_FIXED32, _LENGTH),  # float_data
    5: (_VARINT, _LENGTH),  # int32_data
    6: (_LENGTH,),  # string_data
    7: (_VARINT, _LENGTH),  # int64_data
    8: (_LENGTH,),  # name
    9: (_LENGTH,),  # raw_data
    10: (_FIXED64, _LENGTH),  # double_data
    11: (_VARINT, _LENGTH),  # uint64_data
    12: (_LENGTH,),  # doc_string
    13: (_LENGTH,),  # external_data
    14: (_VARINT,),  # data_location
    16: (_LENGTH,),  # metadata_props
}
_CHUNK = 1 << 20


class _Reader:
    """Bytes from ``stream`` kept in ``data``, never more than ``limit`` of them."""

    def __init__(self, stream: BinaryIO, head: bytes, limit: int, label: str,
                 over_limit: Callable[[str], Exception]) -> None:
        self.stream, self.limit, self.label, self.over_limit = stream, limit, label, over_limit
        self.data = bytearray(head)
        self.position = 0

    def _fill(self, count: int) -> bool:
        """Make ``count`` bytes available after ``position``; False at end of stream."""
        while len(self.data) - self.position < count:
            wanted = count - (len(self.data) - self.position)
            if len(self.data) + wanted > self.limit:
                raise self.over_limit(f"more than {human_bytes(self.limit)} arrive")
            chunk = self.stream.read(min(max(wanted, 1 << 16), _CHUNK, self.limit + 1
                                         - len(self.data)))
            if not chunk:
                return False
            self.data += chunk
        return True

    def at_end(self) -> bool:
        return not self._fill(1)

    def take(self, count: int, what: str) -> None:
        if not self._fill(count):
            raise InputError(f"{self.label}: not a TensorProto (truncated: {what} cut short "
                             f"at byte {len(self.data)})")
        self.position += count

    def varint(self, what: str) -> int:
        value = shift = 0
        for _ in range(10):
            self.take(1, what)
            byte = self.data[self.position - 1]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
        raise InputError(f"{self.label}: not a TensorProto (a varint longer than 10 bytes)")


def _skip_field(reader: _Reader, field: int, wire: int) -> None:
    if wire == _VARINT:
        reader.varint(f"field {field}")
    elif wire == _FIXED64:
        reader.take(8, f"field {field}")
    elif wire == _FIXED32:
        reader.take(4, f"field {field}")
    else:
        length = reader.varint(f"length of field {field}")
        if reader.position + length > reader.limit:
            raise reader.over_limit(f"field {field} announces {human_bytes(length)}")
        reader.take(length, f"field {field}")


def read_tensorproto_stream(stream: BinaryIO, head: bytes, limit: int, label: str,
                            over_limit: Callable[[str], Exception]) -> bytes:
    """The bytes of one ``TensorProto`` read from ``stream`` (``head``: bytes already read
    from it) up to its end, checked field by field (module rules).

    ``over_limit(what)`` builds the error for more than ``limit`` bytes.
    """
    reader = _Reader(stream, head, limit, label, over_limit)
    dims = 0
    while not reader.at_end():
        start = reader.position
        tag = reader.varint("tag")
        field, wire = tag >> 3, tag & 7
        if wire not in TENSOR_FIELDS.get(field, ()):
            raise InputError(
                f"{label}: not a TensorProto (byte {start} starts field {field} of wire "
                f"type {wire}, which TensorProto does not have)"
            )
        dims += field == 1 and wire == _VARINT
        if dims > MAX_DIMS:
            raise InputError(f"{label}: TensorProto with more than {MAX_DIMS} dims")
        _skip_field(reader, field, wire)
    return bytes(reader.data)
