"""A whole Zarr array (a folder with ``zarr.json`` or ``.zarray``) read into memory."""

from __future__ import annotations

import math
import os
import stat
from typing import Any

import numpy as np

from padconv_cli.errors import InputError, UnsupportedDtypeError
from padconv_cli.tensorio.files import (
    ReadPolicy,
    check_input_size,
    check_link_count,
    check_read_bytes,
    input_limit,
    one_line,
    printable,
)

ZARR_EXTRA_HINT = "pip install 'padconv[dask]' (zarr 3 needs Python >= 3.11)"


def check_store_entries(path: str, label: str, policy: ReadPolicy | None = None) -> None:
    """Rule: every entry of a local store is a regular file or a folder inside it (a symlink
    only to one inside); FIFOs, devices and sockets are refused (a read would block or never
    end), and so is a file of several hard links unless ``allow_hardlinks`` is set.  URLs
    (``s3://``) are not walked."""
    if "://" in path:
        return
    root = os.path.realpath(path)
    for folder, names, files in os.walk(path):
        for name in names + files:
            entry = os.path.join(folder, name)
            shown = f"{label}: Zarr entry {printable(os.path.relpath(entry, path))}"
            real = os.path.realpath(entry)
            if os.path.islink(entry) and os.path.commonpath([root, real]) != root:
                raise InputError(f"{shown} is a symlink leading outside the store", source=label)
            try:
                info = os.stat(entry)
            except OSError:
                continue  # a dangling link: zarr reads it as a missing chunk, the fill value
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                raise InputError(f"{shown} is not a regular file (FIFO, device or socket)",
                                 source=label)
            if stat.S_ISREG(info.st_mode):
                check_link_count(info.st_nlink, label, shown, "the store", policy)


def open_zarr(path: str, label: str, policy: ReadPolicy | None = None) -> Any:
    """The Zarr array at ``path`` opened read-only (nothing read), its entries checked; a
    fixed-size numeric or bool element type and chunks of at least one element per axis."""
    try:
        import zarr
    except ImportError:
        raise InputError(f"{label}: is a Zarr store; reading it needs zarr: {ZARR_EXTRA_HINT}",
                         source=label) from None
    check_store_entries(path, label, policy)
    try:
        store = zarr.open_array(path, mode="r")
    except Exception as exc:  # zarr raises many error types for missing or corrupt metadata
        raise InputError(f"{label}: not a readable Zarr array ({one_line(exc, 200)})",
                         source=label) from None
    if np.dtype(store.dtype).hasobject or np.dtype(store.dtype).kind not in "biufc":
        raise UnsupportedDtypeError(f"{label}: Zarr element type {store.dtype} is not a "
                                    "fixed-size numeric or bool type", source=label)
    shape, _kind = stored_object_shape(store)
    if any(length < 1 for length in shape):
        raise InputError(f"{label}: Zarr chunk shape {list(shape)} has a length below 1",
                         source=label)
    return store


def stored_object_shape(array: Any) -> tuple[tuple[int, ...], str]:
    """(shape, "shard" or "chunk") of the unit a Zarr array stores as one object."""
    shards = getattr(array, "shards", None)
    return (tuple(shards), "shard") if shards else (tuple(array.chunks), "chunk")


def read_zarr(path: str, label: str, policy: ReadPolicy | None = None) -> np.ndarray:
    """The Zarr array at ``path`` (:func:`open_zarr`) in memory, within the input limit."""
    store = open_zarr(path, label, policy)
    dtype = np.dtype(store.dtype)
    check_input_size(math.prod(store.shape) * dtype.itemsize, label,
                     f"declares shape {list(store.shape)} of {dtype}", policy)
    check_zarr_objects(store, label, input_limit(policy))
    try:
        return np.asarray(store[...])
    except Exception as exc:  # a chunk zarr cannot decode
        raise InputError(f"{label}: cannot read the Zarr chunks ({one_line(exc, 200)})",
                         source=label) from None


def check_zarr_objects(array: Any, label: str, limit: int) -> None:
    """Rule: a stored object (chunk, or shard), decoded whole whatever part is wanted, holds
    ``prod(object shape) * itemsize <= limit`` bytes."""
    shape, kind = stored_object_shape(array)
    size = math.prod(shape) * np.dtype(array.dtype).itemsize
    check_read_bytes(size, label, f"one Zarr {kind} of shape {list(shape)}", limit)
