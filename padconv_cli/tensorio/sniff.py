"""Tensors whose format is recognised from their first bytes: stdin, files of unknown suffix.

``\\x93NUMPY`` -> ``.npy``; ``PK\\x03\\x04`` (or an empty zip's ``PK\\x05\\x06``) -> ``.npz``;
anything else -> a serialized ONNX ``TensorProto``, which on stdin may not use external data.
"""

from __future__ import annotations

import sys
from typing import BinaryIO

import numpy as np

from padconv_cli.errors import InputError
from padconv_cli.tensorio.files import one_line, read_exact
from padconv_cli.tensorio.npy import NPY_MAGIC, read_npy_bytes, read_npy_stream
from padconv_cli.units import human_bytes

ZIP_MAGIC = b"PK\x03\x04"  # an .npz is a zip archive (read by tensorio.npz, imported when met:
EMPTY_ZIP_MAGIC = b"PK\x05\x06"  # zipfile pulls in pathlib, urllib, shutil...)


def read_npz_bytes(data: bytes, member: str | None, label: str) -> tuple[str, np.ndarray]:
    """:func:`padconv_cli.tensorio.npz.read_npz_bytes`, imported when an archive is met."""
    from padconv_cli.tensorio.npz import read_npz_bytes as read

    return read(data, member, label)

STDIN_LABEL = "<stdin>"


def sniff_format(head: bytes) -> str:
    """'npy', 'npz' or 'pb' from the first bytes of a tensor image."""
    if head.startswith(NPY_MAGIC):
        return "npy"
    if head.startswith((ZIP_MAGIC, EMPTY_ZIP_MAGIC)):
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


def read_sniffed_bytes(
    data: bytes, label: str, member: str | None = None
) -> tuple[str | None, np.ndarray]:
    """(name, array) from an in-memory image whose format is sniffed (see the module rule).

    A TensorProto read this way cannot use external data (there is no folder to confine it to).
    """
    kind = _sniffed_kind(data, member, label)
    if kind == "npy":
        return None, read_npy_bytes(data, label)
    if kind == "npz":
        return read_npz_bytes(data, member, label)
    from padconv_cli.tensorio.protobuf import read_pb_bytes

    return read_pb_bytes(data, label, base_dir=None)


def _stdin_stream() -> BinaryIO:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(f"{STDIN_LABEL}: no binary standard input available (stdin is closed "
                         "or is a folder)")
    return stream


def _read_bounded(stream: BinaryIO, head: bytes, limit: int) -> bytes:
    """``head`` plus the rest of ``stream``, refused as soon as it exceeds ``limit`` bytes."""
    chunks = [head]
    total = len(head)
    while True:
        chunk = stream.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise _over_limit(f"more than {human_bytes(limit)} arrive", limit)
        chunks.append(chunk)


def _over_limit(what: str, limit: int) -> InputError:
    from padconv_cli.read_policy import limit_error

    return limit_error(STDIN_LABEL, what, limit)


def _read_stdin_tensor(stream: BinaryIO, member: str | None) -> tuple[str | None, np.ndarray]:
    """Header first: the first bytes decide the format, an .npy header is checked before its
    body is read, a TensorProto field by field, an .npz against the input limit."""
    from padconv_cli.read_policy import input_limit

    head = read_exact(stream, len(NPY_MAGIC) + 2)
    kind = _sniffed_kind(head, member, STDIN_LABEL)
    if kind == "npy":
        return None, read_npy_stream(Prefixed(head, stream), None, STDIN_LABEL)
    limit = input_limit()
    if kind == "npz":
        return read_npz_bytes(_read_bounded(stream, head, limit), member, STDIN_LABEL)
    from padconv_cli.tensorio.protobuf import PROTOBUF_LIMIT, read_pb_bytes
    from padconv_cli.tensorio.wire import read_tensorproto_stream

    limit = min(limit, PROTOBUF_LIMIT)
    data = read_tensorproto_stream(stream, head, limit, STDIN_LABEL,
                                   lambda what: _over_limit(what, limit))
    return read_pb_bytes(data, STDIN_LABEL, base_dir=None)


def read_stdin(member: str | None = None) -> tuple[str | None, np.ndarray]:
    """(name, array) of the tensor on stdin, format sniffed from its first bytes, read against
    the input limit (:mod:`padconv_cli.read_policy`)."""
    return read_stdin_stream(_stdin_stream(), member)


def read_stdin_stream(stream: BinaryIO, member: str | None = None) -> tuple[str | None, np.ndarray]:
    """:func:`read_stdin` on any binary stream (the rules of a stream of unknown length)."""
    try:
        return _read_stdin_tensor(stream, member)
    except OSError as exc:
        raise InputError(f"{STDIN_LABEL}: read error ({one_line(exc.strerror or exc)})") from None


class Prefixed:
    """A read-only stream: ``head`` (bytes already read) followed by the rest of ``stream``."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self.head, self.stream = memoryview(head), stream

    def read(self, count: int = -1) -> bytes:
        """Up to ``count`` bytes (all of ``head`` first; a short read is allowed)."""
        if not self.head:
            return self.stream.read(count)
        size = len(self.head) if count < 0 else min(count, len(self.head))
        taken, self.head = bytes(self.head[:size]), self.head[size:]
        return taken

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` from ``head``, then from the stream; the number of bytes read."""
        if self.head:
            count = min(len(buffer), len(self.head))
            buffer[:count] = self.head[:count]
            self.head = self.head[count:]
            return count
        return self.stream.readinto(buffer)
