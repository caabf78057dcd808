"""Tensor I/O: ``.npy``, ``.npz``, ONNX ``TensorProto`` (``.pb``), Zarr, polygraphy JSON,
stdin, inline literals.

Reading (:func:`read_io_source`) never trusts a file: headers and messages are validated before
memory is allocated, pickles are never loaded, every problem is an ``InputError`` naming the
source.  Arrays come back in native byte order; string tensors are ``object`` arrays of
``str`` (``<U`` ``.npy`` arrays stay unicode).  Writing (:func:`write_tensor`) is atomic for
files and streams bytes for ``-``.  Only the ``.npy`` code loads with this package.

What a source string names, in order:

1. ``-`` is stdin; ``-:NAME`` is member NAME of an ``.npz`` archive on stdin.
2. A string naming an existing path is a file.
3. ``ARCHIVE.npz:NAME`` names an array in the archive; ``MODEL.onnx:NAME`` (kind ``model``,
   read by :mod:`padconv_cli.tensor_sources`) a tensor the model stores; NAME may hold ``:``
   and ``/``: the model path ends at the first ``.onnx:`` whose prefix is an existing file
   (else at the first one).
4. A string ending in ``.npy``, ``.npz`` or ``.pb``, or starting with ``/``, ``./``, ``../`` or
   ``~``, is a file (missing -> "no such file").
5. A string that starts like a literal (``[``, digit, sign, ``.``, quote, true/false/nan/inf)
   is an inline literal.
6. Anything else is taken as a file name, which then does not exist.
"""

from __future__ import annotations

import io
import os
import re
import sys
from typing import BinaryIO, NamedTuple

import numpy as np

from padconv_cli.errors import InputError, OutputError
from padconv_cli.tensorio.files import (
    ReadPolicy,
    atomic_write,
    open_regular_file,
    printable,
    read_exact,
    write_stream,
)
from padconv_cli.tensorio.npy import check_npy_writable, read_npy_stream, write_npy

__all__ = ["OUTPUT_FORMATS", "ReadPolicy", "check_requested_dtype", "check_suffix_agrees",
           "classify_source", "is_zarr_path", "read_io_source", "resolve_format",
           "tensor_to_bytes", "write_tensor"]

TENSOR_SUFFIXES = {".npy": "npy", ".npz": "npz", ".pb": "pb"}
OUTPUT_FORMATS = ("npy", "pb")
STDOUT_TARGET = "-"
ZARR_MARKERS = ("zarr.json", ".zarray")
_PATH_STARTS = ("/", "./", "../", "~", ".\\", "..\\")
# patterns, compiled on first use (re caches them): most sources are existing files
_MODEL_MARK = r"(?i)\.onnx:"
_MEMBER_PATTERN = r"(?i)(?P<archive>.+\.npz):(?P<member>[^/\\]+)"
_LITERAL_STARTS = set("[(-+.0123456789\"'")
_LITERAL_WORDS = {"true", "false", "nan", "inf", "infinity", "-inf", "+inf", "-infinity"}


class Source(NamedTuple):
    """A classified source: kind is 'stdin', 'file', 'model' or 'literal'."""

    kind: str
    path: str
    member: str | None = None  # .npz member or stored tensor name, when one was given


def classify_source(source: str) -> Source:
    """Classify ``source`` by the module rules."""
    if source == "-":
        return Source("stdin", source)
    if source.startswith("-:") and len(source) > 2:
        return Source("stdin", "-", member=source[2:])
    if os.path.lexists(source):
        return Source("file", source)
    starts = [m.end() for m in re.finditer(_MODEL_MARK, source) if m.end() < len(source)]
    if starts:  # rule 3: the first split whose model file exists, else the first split
        end = next((e for e in starts if os.path.isfile(source[: e - 1])), starts[0])
        return Source("model", source[: end - 1], member=source[end:])
    match = re.fullmatch(_MEMBER_PATTERN, source)
    if match:
        return Source("file", match["archive"], member=match["member"])
    if os.path.splitext(source)[1].lower() in TENSOR_SUFFIXES or source.startswith(_PATH_STARTS):
        return Source("file", source)
    stripped = source.strip()
    if stripped and (stripped[0] in _LITERAL_STARTS or stripped.lower() in _LITERAL_WORDS):
        return Source("literal", source)
    return Source("file", source)


def is_zarr_path(path: str) -> bool:
    """A Zarr store: a name ending in ``.zarr``, or a folder holding ``zarr.json``/``.zarray``."""
    return path.rstrip("/\\").lower().endswith(".zarr") or has_zarr_metadata(path)


def has_zarr_metadata(path: str) -> bool:
    """True for a folder holding Zarr metadata (``zarr.json`` or ``.zarray``)."""
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, m)) for m in ZARR_MARKERS)


def _sniffed_kind(stream: BinaryIO, path: str) -> str:
    """'npy' or 'npz' for a file without a tensor suffix that starts like one (``stream`` is
    left at its start)."""
    from padconv_cli.tensorio.sniff import sniff_format

    kind = sniff_format(read_exact(stream, 8))
    stream.seek(0)
    if kind != "pb":
        return kind
    if path.lower().endswith(".onnx"):
        raise InputError(f"{printable(path)}: a model, not a tensor; name one of its stored "
                         f"tensors as {printable(path)}:NAME (padconv show lists them)")
    raise InputError(f"{printable(path)}: unknown tensor file format (expected a .npy, .npz "
                     "or .pb file)")


def _read_file(source: Source, policy: ReadPolicy | None) -> tuple[str | None, np.ndarray]:
    """(name, array) of a tensor file, its format from its suffix, else its first bytes."""
    path, label = source.path, printable(source.path)
    stream, size = open_regular_file(path, label)
    with stream:
        kind = TENSOR_SUFFIXES.get(os.path.splitext(path)[1].lower())
        kind = kind or _sniffed_kind(stream, path)
        if kind == "npy":
            return None, read_npy_stream(stream, size, label, policy)
        if kind == "npz":
            from padconv_cli.tensorio.npz import read_npz_stream  # zipfile costs start-up time

            return read_npz_stream(stream, size, source.member, label, policy)
        from padconv_cli.tensorio.protobuf import read_pb_stream  # imports onnx: when needed

        return read_pb_stream(stream, size, label, os.path.dirname(os.path.abspath(path)),
                              policy)


def check_requested_dtype(array: np.ndarray, dtype: str | None, label: str) -> np.ndarray:
    """A dtype given for a file or stdin must match what the source holds (no silent cast)."""
    if dtype is None:
        return array
    from padconv_cli.dtypes import dtype_name, parse_dtype

    wanted = parse_dtype(dtype)
    if dtype_name(wanted) != dtype_name(array.dtype):
        raise InputError(f"{label}: holds {dtype_name(array.dtype)}, not the requested "
                         f"{dtype_name(wanted)}")
    return array


def read_io_source(source: str | os.PathLike[str], *, dtype: str | None = None,
                   policy: ReadPolicy | None = None) -> tuple[str | None, np.ndarray]:
    """(name, array) of any source but ``MODEL.onnx:NAME`` (module rules; a Zarr store,
    polygraphy's ``FILE.json[:NAME]`` too); name: the TensorProto or .npz member name, or None.

    ``dtype`` (ONNX or numpy name) sets a literal's element type; for anything stored it must
    match the stored type.  Every read follows ``policy`` (None: ``ReadPolicy()``).
    """
    source = os.fspath(source)
    if not source.strip():
        raise InputError("empty tensor source (give a path, - for stdin, or a literal)")
    if has_zarr_metadata(source):
        from padconv_cli.tensorio.zarr_store import read_zarr

        label = printable(source)
        return None, check_requested_dtype(read_zarr(source, label, policy), dtype, label)
    if ".json" in source.lower():  # the module (and json) only for what may be one
        from padconv_cli.tensorio.polygraphy_json import read_json_tensor, split_json_source

        json_source = split_json_source(source)
        if json_source is not None:
            label = printable(json_source[0])
            name, array = read_json_tensor(*json_source, label, policy)
            return name, check_requested_dtype(array, dtype, f"{label}:{name}")
    classified = classify_source(source)
    if classified.kind == "literal":
        from padconv_cli.tensorio.literal import parse_literal

        return None, parse_literal(source, dtype)
    if classified.kind == "stdin":
        from padconv_cli.tensorio.sniff import STDIN_LABEL, read_stdin

        name, array = read_stdin(classified.member, policy)
        label = STDIN_LABEL
    elif classified.kind == "model":
        raise InputError(f"{printable(source)}: a tensor a model stores is read by "
                         "padconv_cli.read_tensor, not by the file readers")
    else:
        name, array = _read_file(classified, policy)
        label = printable(classified.path)
    return name or None, check_requested_dtype(array, dtype, label)


def _suffix_format(target: str) -> str | None:
    """'npy' or 'pb' from the suffix ('' for stdout or no suffix); None: another suffix."""
    suffix = "" if target == STDOUT_TARGET else os.path.splitext(target)[1].lower()
    return "" if not suffix else {".npy": "npy", ".pb": "pb"}.get(suffix)


def resolve_format(target: str, fmt: str | None) -> str:
    """The output format: ``fmt`` if given, else from the suffix (.npy/.pb), else npy.

    Rules: an unknown suffix without ``fmt`` is refused (``out.npz`` is not silently written
    as something else); a known suffix must agree with ``fmt`` (:func:`check_suffix_agrees`).
    """
    target = printable(target)
    if fmt is not None:
        normalized = fmt.strip().lower().lstrip(".")
        if normalized not in OUTPUT_FORMATS:
            raise OutputError(f"{target}: unknown output format {fmt!r} (expected npy or pb)")
        check_suffix_agrees(target, normalized)
        return normalized
    implied = _suffix_format(target)
    if implied is None:
        raise OutputError(f"{target}: unknown output suffix "
                          f"{os.path.splitext(target)[1].lower()!r} (expected .npy or .pb); "
                          "give the format npy or pb", param="format")
    return implied or "npy"


def check_suffix_agrees(target: str, fmt: str) -> None:
    """Rule: a target ending in .npy or .pb has that format (``-o y.npy --format pb`` would
    lie about its content); other suffixes and stdout accept any format."""
    implied = _suffix_format(target)
    if implied and implied != fmt:
        raise OutputError(f"{target}: suffix says {implied}, not {fmt}; make the suffix agree "
                          f"with format {fmt}", param="format")


def _write_to_stream(array: np.ndarray, stream: BinaryIO, fmt: str, name: str | None,
                     target: str, string_dtype: np.dtype | None) -> None:
    if fmt == "pb":
        from padconv_cli.tensorio.protobuf import tensor_proto_bytes

        stream.write(tensor_proto_bytes(array, name=name, target=target))
    else:
        write_npy(np.asarray(array), stream, target, string_dtype)


def tensor_to_bytes(array: np.ndarray, fmt: str = "npy", *, name: str | None = None) -> bytes:
    """The bytes of ``array`` in format ``fmt`` (npy or pb), as a file would hold them."""
    buffer = io.BytesIO()
    _write_to_stream(array, buffer, resolve_format(STDOUT_TARGET, fmt), name, STDOUT_TARGET,
                     None)
    return buffer.getvalue()


def write_tensor(array: np.ndarray, target: str | os.PathLike[str], *, fmt: str | None = None,
                 name: str | None = None, string_dtype: np.dtype | None = None) -> None:
    """Write ``array`` to the file ``target`` (atomically) or to stdout when target is ``-``.

    ``fmt``: :func:`resolve_format`; ``.npy`` cannot hold bfloat16/float8/int4 ... (refused,
    naming ``.pb``), ``.pb`` is limited to 2 GiB (refused, naming ``.npy``).  ``name`` names the
    TensorProto; ``string_dtype``: :func:`padconv_cli.tensorio.npy.write_npy`.
    """
    target = os.fspath(target)
    resolved = resolve_format(target, fmt)
    if target == STDOUT_TARGET:
        stream = getattr(sys.stdout, "buffer", None)
        if stream is None:  # ``padconv ... >&-``
            raise OutputError("<stdout>: standard output is closed; give -o FILE")
        write_stream(stream, lambda out: _write_to_stream(array, out, resolved, name, target,
                                                          string_dtype), "<stdout>")
        return
    label = printable(target)
    if resolved == "npy":  # unwritable dtypes are refused before a temporary file is made
        check_npy_writable(np.asarray(array), label)
    atomic_write(target, lambda stream: _write_to_stream(array, stream, resolved, name, label,
                                                         string_dtype))
