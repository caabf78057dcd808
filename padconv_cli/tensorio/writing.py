"""Writing tensors: ``.npy`` or ONNX ``TensorProto`` (``.pb``), to a file or stdout."""

from __future__ import annotations

import io
import os
import sys
from typing import BinaryIO

import numpy as np

from padconv_cli.errors import OutputError
from padconv_cli.tensorio.atomic import atomic_write
from padconv_cli.tensorio.files import one_line, printable
from padconv_cli.tensorio.npy import check_npy_writable, write_npy

OUTPUT_FORMATS = ("npy", "pb")
STDOUT_TARGET = "-"
_SUFFIX_FORMATS = {".npy": "npy", ".pb": "pb"}


def resolve_format(target: str, fmt: str | None) -> str:
    """The output format: ``fmt`` if given, else from the suffix (.npy/.pb), else npy.

    Rules: an unknown suffix without ``fmt`` is an :class:`OutputError` naming the suffix (so
    that ``out.npz`` or ``out.txt`` is not silently written as something else); a known suffix
    (.npy/.pb) and a different ``fmt`` contradict each other, also an :class:`OutputError`.
    """
    target = printable(target)
    suffix = "" if target == STDOUT_TARGET else os.path.splitext(target)[1].lower()
    if fmt is not None:
        normalized = fmt.strip().lower().lstrip(".")
        if normalized not in OUTPUT_FORMATS:
            raise OutputError(f"{target}: unknown output format {fmt!r} (expected npy or pb)")
        check_suffix_agrees(target, normalized)
        return normalized
    if not suffix:
        return "npy"
    if suffix not in _SUFFIX_FORMATS:
        raise OutputError(
            f"{target}: unknown output suffix {suffix!r} (expected .npy or .pb); give the "
            "format npy or pb",
            param="format",
        )
    return _SUFFIX_FORMATS[suffix]


def check_suffix_agrees(target: str, fmt: str) -> None:
    """Refuse ``-o y.npy --format pb`` and the like: the file would lie about its content.

    Rule: a target ending in a known suffix (.npy/.pb) must have that format; other suffixes
    and stdout (``-``) accept any format.
    """
    suffix = "" if target == STDOUT_TARGET else os.path.splitext(target)[1].lower()
    implied = _SUFFIX_FORMATS.get(suffix)
    if implied is not None and implied != fmt:
        raise OutputError(
            f"{target}: suffix says {implied}, not {fmt}; make the suffix agree with "
            f"format {fmt}",
            param="format",
        )


def write_tensor_to_stream(
    array: np.ndarray,
    stream: BinaryIO,
    fmt: str = "npy",
    *,
    name: str | None = None,
    target: str = STDOUT_TARGET,
    string_dtype: np.dtype | None = None,
) -> None:
    """Write ``array`` in format ``fmt`` (npy or pb) to a binary stream.

    ``name`` is the TensorProto name (pb only); ``target`` only labels error messages;
    ``string_dtype`` is the fixed-width type a string ``object`` array is written at in
    ``.npy`` (default: the width of its longest element).
    """
    fmt = resolve_format(target, fmt)
    if fmt == "pb":
        from padconv_cli.tensorio.protobuf import tensor_proto_bytes

        stream.write(tensor_proto_bytes(array, name=name, target=target))
    else:
        write_npy(np.asarray(array), stream, target, string_dtype)


def tensor_to_bytes(array: np.ndarray, fmt: str = "npy", *, name: str | None = None) -> bytes:
    """The bytes of ``array`` in format ``fmt`` (npy or pb), as a file would hold them."""
    buffer = io.BytesIO()
    write_tensor_to_stream(array, buffer, fmt, name=name)
    return buffer.getvalue()


def _check_writable(array: np.ndarray, fmt: str, target: str) -> None:
    """Refuse unwritable dtypes before any temporary file is created."""
    if fmt == "npy":
        check_npy_writable(np.asarray(array), target)


class _WriteOnly:
    """Hides a stream's file descriptor so numpy writes through ``write`` instead of ``tofile``.

    ``ndarray.tofile`` reports a closed pipe as a bare ``OSError("N requested and M written")``;
    through ``write`` it surfaces as ``BrokenPipeError``, which the CLI turns into a quiet exit.
    """

    def __init__(self, stream: BinaryIO):
        self.write = stream.write


def _stdout_buffer() -> BinaryIO:
    """The binary stdout; OutputError when stdout is closed (``padconv ... >&-``)."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:
        raise OutputError("<stdout>: standard output is closed; give -o FILE")
    return stream


def _write_stdout(array: np.ndarray, fmt: str, name: str | None,
                  string_dtype: np.dtype | None = None) -> None:
    stream = _stdout_buffer()
    try:
        write_tensor_to_stream(array, _WriteOnly(stream), fmt, name=name,
                               string_dtype=string_dtype)
        stream.flush()
    except BrokenPipeError:
        raise  # the reader went away: not an error of ours (the CLI exits quietly)
    except OSError as exc:
        raise OutputError(f"<stdout>: write failed ({one_line(exc.strerror or exc)})") from None


def write_tensor(
    array: np.ndarray,
    target: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    name: str | None = None,
    string_dtype: np.dtype | None = None,
) -> None:
    """Write ``array`` to the file ``target`` (atomically) or to stdout when target is ``-``.

    ``fmt`` is npy or pb (default: from the suffix, else npy; see :func:`resolve_format`);
    ``string_dtype``: see :func:`write_tensor_to_stream`.
    ``.npy`` cannot hold bfloat16/float8/int4 ... (UnsupportedDtypeError naming ``.pb``);
    ``.pb`` is limited to 2 GiB (OutputError naming ``.npy``).  ``name`` names the TensorProto.
    """
    target = os.fspath(target)
    resolved = resolve_format(target, fmt)
    if target == STDOUT_TARGET:
        _write_stdout(array, resolved, name, string_dtype)
        return
    label = printable(target)
    _check_writable(array, resolved, label)
    atomic_write(
        target,
        lambda stream: write_tensor_to_stream(array, stream, resolved, name=name, target=label,
                                              string_dtype=string_dtype),
    )
