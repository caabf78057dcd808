"""Tensor I/O: ``.npy``, ``.npz``, ONNX ``TensorProto`` (``.pb``), stdin, inline literals.

Reading (:func:`read_io_source`) never trusts a file: headers and
messages are validated before memory is allocated, pickles are never loaded, and every problem
is an :class:`~padconv_cli.errors.InputError` with a one-line message naming the source.
Arrays come back in native byte order.  String tensors are numpy ``object`` arrays of python
``str`` (as ``onnx.numpy_helper`` gives them); unicode ``.npy`` arrays (``<U5``) stay unicode.

A tensor a model stores (``MODEL.onnx:NAME``) is read one layer up, by
:mod:`padconv_cli.tensor_sources` (the public ``read_tensor``), which dispatches every kind of
source: this package imports nothing of the model readers, which read through it.

Writing (:func:`write_tensor`) is atomic for files and streams bytes for ``-`` (stdout).

Importing this package does not import onnx, ml_dtypes or rich: those load only when a ``.pb``
or such a dtype is involved.
"""

from __future__ import annotations

import os

import numpy as np

from padconv_cli.errors import InputError
from padconv_cli.tensorio.files import open_regular_file, printable, read_exact
from padconv_cli.tensorio.literal import parse_literal
from padconv_cli.tensorio.npy import read_npy_file
from padconv_cli.tensorio.sniff import read_stdin, sniff_format
from padconv_cli.tensorio.sources import Source, classify_source
from padconv_cli.tensorio.writing import (
    OUTPUT_FORMATS,
    resolve_format,
    tensor_to_bytes,
    write_tensor,
    write_tensor_to_stream,
)

__all__ = [
    "OUTPUT_FORMATS",
    "check_requested_dtype",
    "classify_source",
    "read_io_source",
    "resolve_format",
    "tensor_to_bytes",
    "write_tensor",
    "write_tensor_to_stream",
]


def read_npz_file(path: str, member: str | None = None) -> tuple[str, np.ndarray]:
    """:func:`padconv_cli.tensorio.npz.read_npz_file`, imported when an archive is read
    (zipfile and what it imports cost start-up time)."""
    from padconv_cli.tensorio.npz import read_npz_file as read

    return read(path, member)


def _read_unknown_suffix(path: str) -> tuple[str | None, np.ndarray]:
    """An existing file without a tensor suffix: accepted when it starts like .npy or .npz."""
    stream, _size = open_regular_file(path)
    with stream:
        head = read_exact(stream, 8)
    kind = sniff_format(head)
    if kind == "npy":
        return None, read_npy_file(path)
    if kind == "npz":
        return read_npz_file(path)
    if path.lower().endswith(".onnx"):
        raise InputError(f"{printable(path)}: a model, not a tensor; name one of its stored "
                         f"tensors as {printable(path)}:NAME (padconv show lists them)")
    raise InputError(
        f"{printable(path)}: unknown tensor file format (expected a .npy, .npz or .pb file)"
    )


def _read_file(source: Source) -> tuple[str | None, np.ndarray]:
    kind = source.suffix_format
    if source.member is not None and kind != "npz":
        raise InputError(f"{printable(source.path)}: a member name needs an .npz archive")
    if kind == "npy":
        return None, read_npy_file(source.path)
    if kind == "npz":
        return read_npz_file(source.path, source.member)
    if kind == "pb":
        from padconv_cli.tensorio.protobuf import read_pb_file  # imports onnx: only when needed

        return read_pb_file(source.path)
    return _read_unknown_suffix(source.path)


def check_requested_dtype(array: np.ndarray, dtype: str | None, label: str) -> np.ndarray:
    """A dtype given for a file or stdin must match what the source holds (no silent cast)."""
    if dtype is None:
        return array
    from padconv_cli.dtypes import dtype_name, parse_dtype

    wanted = parse_dtype(dtype)
    if dtype_name(wanted) != dtype_name(array.dtype):
        raise InputError(
            f"{label}: holds {dtype_name(array.dtype)}, not the requested {dtype_name(wanted)}"
        )
    return array


def read_io_source(
    source: str | os.PathLike[str], *, dtype: str | None = None
) -> tuple[str | None, np.ndarray]:
    """(name, array) of a source tensor I/O reads by itself; name is the TensorProto or .npz
    member name, or None.

    ``source``: a path (``.npy``, ``.npz``, ``file.npz:name``, ``.pb``, a Zarr store when zarr
    is installed, polygraphy's ``FILE.json`` or ``FILE.json:NAME``), ``-`` for stdin (format
    sniffed from the first bytes; ``-:name`` picks an .npz member), or a literal.  ``dtype``
    (ONNX or numpy name) sets a literal's element type; for files and stdin it must match the
    stored type.  ``MODEL.onnx:NAME`` is not read here (an :class:`InputError` says so):
    :func:`padconv_cli.tensor_sources.read_named_tensor` reads every kind of source.
    """
    source = os.fspath(source)  # pathlib paths are welcome too
    if not source.strip():
        raise InputError("empty tensor source (give a path, - for stdin, or a literal)")
    from padconv_cli.tensorio.zarr_paths import has_zarr_metadata

    if has_zarr_metadata(source):
        from padconv_cli.tensorio.zarr_store import read_zarr

        label = printable(source)
        return None, check_requested_dtype(read_zarr(source, label), dtype, label)
    json_source = _polygraphy_source(source)
    if json_source is not None:
        from padconv_cli.tensorio.polygraphy_json import read_json_tensor

        path, member = json_source
        label = printable(path)
        name, array = read_json_tensor(path, member, label)
        return name, check_requested_dtype(array, dtype, f"{label}:{name}")
    classified = classify_source(source)
    if classified.kind == "literal":
        return None, parse_literal(source, dtype)
    if classified.kind == "stdin":
        name, array = read_stdin(classified.member)
        label = "<stdin>"
    elif classified.kind == "model":
        raise InputError(f"{printable(source)}: a tensor a model stores is read by "
                         "padconv_cli.read_tensor, not by the file readers")
    else:
        name, array = _read_file(classified)
        label = printable(classified.path)
    return name or None, check_requested_dtype(array, dtype, label)


def _polygraphy_source(source: str) -> tuple[str, str | None] | None:
    """``(path, name)`` when ``source`` is an existing ``FILE.json`` (``:NAME``): polygraphy's
    JSON tensor files."""
    if ".json" not in source.lower():  # the module (and json) only for what may be one
        return None
    from padconv_cli.tensorio.polygraphy_json import split_json_source

    split = split_json_source(source)
    return split if split is not None and os.path.isfile(split[0]) else None
