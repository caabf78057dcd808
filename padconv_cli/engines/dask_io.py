"""Dask arrays from ``.npy`` files and Zarr stores, and block-wise writing of results.

Inputs: a ``.npy`` file becomes a dask array whose chunks are read through short-lived memory
maps (:class:`padconv_cli.outofcore.npy_memmap.NpyInput`, same header checks as tensorio); a
Zarr store (a folder with ``zarr.json`` or ``.zarray``) is opened with ``dask.array.from_zarr``.

Outputs: a ``.npy`` target is created with ``open_memmap`` in a temporary file that the
workers fill block by block, then renamed over the target; a ``.zarr`` target is written to a
temporary store next to it, block by block on chunks equal to the blocks (no two tasks touch
one chunk), then moved into place.  Either way the target is replaced only when every block
is written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from padconv_cli.engines.cluster import require_dask
from padconv_cli.engines.zarr_paths import has_zarr_metadata, is_zarr_path
from padconv_cli.errors import InputError, OutputError, UnsupportedDtypeError
from padconv_cli.outofcore.npy_memmap import NpyOutput, check_disk_space, open_npy_memmap
from padconv_cli.tensorio.files import one_line


def input_chunks(shape: tuple[int, ...], dtype: np.dtype, chunk_bytes: int) -> Any:
    """Chunks of about ``chunk_bytes`` (dask's ``auto`` rule with that limit)."""
    from dask.array.core import normalize_chunks

    return normalize_chunks("auto", shape, limit=max(chunk_bytes, 1), dtype=dtype)


def open_block_input(path: str) -> Any:
    """The ``.npy`` file or Zarr store ``path`` as an array that dask tasks read boxes from:
    an :class:`~padconv_cli.outofcore.npy_memmap.NpyInput` or a ``zarr.Array``."""
    if is_zarr_path(path):
        return _open_zarr(path)
    return open_npy_memmap(path)


def _open_zarr(path: str) -> Any:
    require_dask(("zarr",))
    import zarr

    try:
        store = zarr.open_array(path, mode="r")
    except Exception as exc:  # zarr raises many error types for missing or corrupt metadata
        raise InputError(f"{path}: not a readable Zarr array ({one_line(exc, 200)})") from None
    dtype = np.dtype(store.dtype)
    if dtype.hasobject or dtype.kind not in "biufc":
        raise UnsupportedDtypeError(
            f"{path}: Zarr element type {store.dtype} is not a fixed-size numeric or bool type"
        )
    return store


class ZarrOutput:
    """A Zarr store filled block by block, moved over its target by :meth:`commit`."""

    def __init__(
        self, target: str, shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...]
    ) -> None:
        require_dask(("zarr",))
        import zarr

        self.target = target
        folder = os.path.dirname(os.path.abspath(target)) or "."
        _check_zarr_target(target)
        try:
            self.temp = tempfile.mkdtemp(
                prefix=f".{os.path.basename(target.rstrip('/'))}.", dir=folder
            )
            zarr.create_array(
                store=self.temp,
                shape=shape,
                chunks=tuple(max(1, c) for c in chunks),
                dtype=dtype,
                overwrite=True,
                fill_value=None,
            )
        except (OSError, ValueError, TypeError) as exc:
            self.discard()
            raise OutputError(
                f"{target}: cannot create a Zarr store ({one_line(exc, 200)})"
            ) from None

    def __setitem__(self, box: tuple[slice, ...], values: np.ndarray) -> None:
        import zarr

        zarr.open_array(self.temp, mode="r+")[box] = values

    def commit(self) -> None:
        """Replace the target (an old Zarr store there is removed only after the move)."""
        old = None
        if os.path.exists(self.target):
            old = tempfile.mkdtemp(
                prefix=".old.", dir=os.path.dirname(os.path.abspath(self.target))
            )
            os.replace(self.target, os.path.join(old, "store"))
        os.replace(self.temp, self.target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def discard(self) -> None:
        """Remove the temporary store."""
        temp = getattr(self, "temp", None)
        if temp:
            shutil.rmtree(temp, ignore_errors=True)


def _check_zarr_target(target: str) -> None:
    """Only a missing path, an empty folder or a Zarr store may be replaced by a Zarr result."""
    empty_folder = os.path.isdir(target) and not os.listdir(target)
    if os.path.exists(target) and not (empty_folder or has_zarr_metadata(target)):
        raise OutputError(
            f"{target}: exists and is not a Zarr store; refusing to replace it with one"
        )


class NpyBlockOutput(NpyOutput):
    """An :class:`NpyOutput` that dask workers write through ``target[box] = values``."""

    def __setitem__(self, box: tuple[slice, ...], values: np.ndarray) -> None:
        self.write(box, values)


@contextlib.contextmanager
def block_output(
    target: str, shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...]
) -> Iterator[Any]:
    """The writable result (Zarr or ``.npy`` by the target's name), committed on success."""
    if is_zarr_path(target):
        output: Any = ZarrOutput(target, shape, dtype, chunks)
    else:
        check_disk_space(target, shape, dtype)
        output = NpyBlockOutput(target, shape, dtype)
    try:
        yield output
    except BaseException:
        output.discard()
        raise
    output.commit()
