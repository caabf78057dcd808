"""Tensors whose format is recognised from their first bytes: stdin, files of unknown suffix.

``\\x93NUMPY`` -> ``.npy``; ``PK\\x03\\x04`` (or an empty zip's ``PK\\x05\\x06``) -> ``.npz``;
anything else -> a serialized ONNX ``TensorProto``, which on stdin may not use external data.
"""

from __future__ import annotations

import sys

import numpy as np

from padconv_cli.errors import InputError
from padconv_cli.tensorio.files import one_line
from padconv_cli.tensorio.npy import NPY_MAGIC, read_npy_bytes
from padconv_cli.tensorio.npz import EMPTY_ZIP_MAGIC, ZIP_MAGIC, read_npz_bytes

STDIN_LABEL = "<stdin>"


def sniff_format(head: bytes) -> str:
    """'npy', 'npz' or 'pb' from the first bytes of a tensor image."""
    if head.startswith(NPY_MAGIC):
        return "npy"
    if head.startswith((ZIP_MAGIC, EMPTY_ZIP_MAGIC)):
        return "npz"
    return "pb"


def read_sniffed_bytes(
    data: bytes, label: str, member: str | None = None
) -> tuple[str | None, np.ndarray]:
    """(name, array) from an in-memory image whose format is sniffed (see the module rule).

    A TensorProto read this way cannot use external data (there is no folder to confine it to).
    """
    if not data:
        raise InputError(f"{label}: empty input, no tensor")
    kind = sniff_format(data)
    if member is not None and kind != "npz":
        raise InputError(f"{label}: a member name ({member!r}) needs an .npz archive")
    if kind == "npy":
        return None, read_npy_bytes(data, label)
    if kind == "npz":
        return read_npz_bytes(data, member, label)
    from padconv_cli.tensorio.protobuf import read_pb_bytes

    return read_pb_bytes(data, label, base_dir=None)


def read_stdin_bytes() -> bytes:
    """All of stdin as bytes (``sys.stdin.buffer``)."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(f"{STDIN_LABEL}: no binary standard input available")
    try:
        return stream.read()
    except OSError as exc:
        raise InputError(f"{STDIN_LABEL}: read error ({one_line(exc.strerror or exc)})") from None


def read_stdin(member: str | None = None) -> tuple[str | None, np.ndarray]:
    """(name, array) of the tensor on stdin, format sniffed from its first bytes."""
    return read_sniffed_bytes(read_stdin_bytes(), STDIN_LABEL, member)
