"""Dask arrays from ``.npy`` files and Zarr stores, and block-wise writing of results.

Inputs: a ``.npy`` file becomes a dask array whose chunks are read with ``pread``
(:class:`padconv_cli.outofcore.npy_blocks.NpyInput`, same header checks as tensorio); a
Zarr store (a folder with ``zarr.json`` or ``.zarray``) is opened with ``dask.array.from_zarr``.

Outputs: a ``.npy`` target is created in a temporary file that the workers fill block by
block with ``pwrite`` (:class:`padconv_cli.outofcore.npy_blocks.NpyOutput`), then renamed over
the target; a ``.zarr`` target is written to a
temporary store next to it, block by block on chunks equal to the blocks (no two tasks touch
one chunk), then moved into place.  Either way the target is replaced only when every block
is written.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import socket
from collections.abc import Iterator
from typing import Any

import numpy as np

from padconv_cli.engines.cluster import require_dask
from padconv_cli.engines.locations import Location
from padconv_cli.engines.shared_files import (
    Fingerprint,
    absolute,
    check_chunks,
    ensure_confirmed,
    npy_fingerprint,
    zarr_fingerprint,
)
from padconv_cli.engines.zarr_store import (
    keys_touching,
    object_shape,
    open_zarr_input,
    stored_chunk_keys,
)
from padconv_cli.errors import OutputError
from padconv_cli.json_output import dumps
from padconv_cli.outofcore.npy_blocks import NpyOutput, check_disk_space, open_npy_input
from padconv_cli.tensorio import ZARR_MARKERS, is_zarr_path
from padconv_cli.tensorio.files import ReadPolicy, check_read_bytes, input_limit, one_line
from padconv_cli.tensorio.zarr_store import check_zarr_objects


def open_block_input(path: str, policy: ReadPolicy | None = None) -> Any:
    """The ``.npy`` file or Zarr store ``path`` (made absolute) as a source that each dask
    block task reads its own box from, with the input's fingerprint (see
    :mod:`padconv_cli.engines.shared_files`)."""
    path = absolute(path)
    if is_zarr_path(path):
        return ZarrSource(path, policy)
    return NpySource(path, policy)


class NpySource:
    """A ``.npy`` file read box by box through short-lived memory maps on the workers."""

    def __init__(self, path: str, policy: ReadPolicy | None = None) -> None:
        self.array = open_npy_input(path, policy)
        header = self.array.header
        self.fingerprint = npy_fingerprint(path, header.data_offset, header.shape, header.dtype)
        self.shape, self.dtype, self.ndim = self.array.shape, self.array.dtype, self.array.ndim

    def __dask_tokenize__(self) -> Any:
        return self.fingerprint

    def chunked(self, block_bytes: int) -> Any:
        """Blocks read their own boxes of a ``.npy`` file (no chunk grid to follow)."""
        return self

    def fetch_task(self, box: tuple[slice, ...]) -> tuple:
        """A task giving the values in ``box`` (after the worker confirmed the file); a box
        over the input limit is refused here, on the client, before any block runs."""
        self.array.check_reads([box])
        return (read_npy_box, self.array, self.fingerprint, box)


def read_npy_box(array: Any, expected: Fingerprint, box: tuple[slice, ...]) -> np.ndarray:
    """``array[box]`` from the worker's view of the file, once it is confirmed to be the
    client's."""
    ensure_confirmed(expected)
    return np.ascontiguousarray(array[box])


class ZarrSource:
    """A Zarr array read box by box on the workers; each task names the stored chunks of its
    box, which the worker must find (a missing one is an error, never the fill value)."""

    def __init__(self, path: str, policy: ReadPolicy | None = None) -> None:
        self.array = open_zarr_input(path, policy)
        self.path = path
        self.limit = input_limit(policy)
        check_zarr_objects(self.array, path, self.limit)
        self.fingerprint = zarr_fingerprint(self.array, path)
        self.stored = stored_chunk_keys(self.array)
        self.shape, self.dtype = tuple(self.array.shape), np.dtype(self.array.dtype)
        self.ndim = len(self.shape)

    def __dask_tokenize__(self) -> Any:
        return self.fingerprint

    def fetch_task(self, box: tuple[slice, ...]) -> tuple:
        """A task giving the values in ``box`` (within the input limit)."""
        box_bytes = math.prod(len(range(*s.indices(n))) for s, n in zip(box, self.shape,
                                                                         strict=True))
        check_read_bytes(box_bytes * self.dtype.itemsize, self.path, "one dask block",
                         self.limit)
        keys = [key for key in keys_touching(self.array, box) if key in self.stored]
        return (read_zarr_box, self.array, self.fingerprint, box, keys)

    def chunked(self, block_bytes: int) -> Any:
        """A dask array with one read task per stored object (chunk, or shard) when one fits
        ``block_bytes``: each is then read and decompressed once, and blocks aligned with it
        get their halo as small crops of the neighbours (see
        :class:`padconv_cli.engines.dask_ops.ChunkGrid`); else this source, whose blocks read
        their own boxes."""
        import dask.array as da
        from dask.array.core import normalize_chunks
        from dask.base import tokenize

        grid = object_shape(self.array)
        if math.prod(grid) * self.dtype.itemsize > block_bytes or not math.prod(self.shape):
            return self
        chunks = normalize_chunks(grid, self.shape)
        name = f"padconv-read-{tokenize(self.fingerprint, chunks)}"
        starts = [np.cumsum((0, *sizes)) for sizes in chunks]
        graph = {}
        for index in np.ndindex(*(len(sizes) for sizes in chunks)):
            box = tuple(
                slice(int(axis[i]), int(axis[i + 1])) for axis, i in zip(starts, index, strict=True)
            )
            graph[(name, *index)] = self.fetch_task(box)
        return da.Array(graph, name, chunks=chunks, dtype=self.dtype)


def read_zarr_box(
    array: Any, expected: Fingerprint, box: tuple[slice, ...], keys: list[str]
) -> np.ndarray:
    """``array[box]`` once the worker confirmed the store and found each chunk in ``keys``."""
    ensure_confirmed(expected)
    check_chunks(array, expected.path, keys)
    try:
        return np.ascontiguousarray(array[box])
    except Exception as exc:  # a chunk the codec cannot decode (corrupt, truncated, forged)
        from padconv_cli.errors import InputError

        raise InputError(f"{expected.path}: cannot read the Zarr chunks ({one_line(exc, 200)})",
                         source=expected.path) from None


TEMP_TAG = ".padconv-"
OWNER_FILE = "padconv-owner.json"


class ZarrOutput:
    """A Zarr store filled block by block, moved over its target by :meth:`commit`.

    The temporary store ``.NAME.zarr.padconv-XXXX`` next to the target (a folder, or a prefix
    of an object store, see :mod:`padconv_cli.engines.locations`) holds an owner file (a
    random token, the client's host and process id).  A worker writes a block only while that
    file is there, and removes the whole temporary store when the file is gone after its write
    (the client gave the run up while the worker was still writing), so nothing partial stays
    behind.  Creating a store first removes the temporary stores of earlier runs that were
    given up: no owner file, or an owner process on this host that no longer runs.
    """

    def __init__(
        self, target: str, shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...]
    ) -> None:
        require_dask(("zarr",))
        import zarr

        self.target = target
        self.shown_path = target
        self.location = Location(target)
        _check_zarr_target(target, self.location)
        remove_abandoned_stores(target, self.location)
        self.token = secrets.token_hex(16)
        name = _temp_prefix(target) + secrets.token_hex(6)
        self.temp = self.location.join(self.location.parent(target) or ".", name)
        try:
            self.location.make_folder(self.temp)
            _write_owner(self.location, self.temp, self.token)
            zarr.create_array(
                store=self.temp,
                shape=shape,
                chunks=tuple(max(1, c) for c in chunks),
                dtype=dtype,
                overwrite=False,
                fill_value=None,
            )
        except (OSError, ValueError, TypeError) as exc:
            self.discard()
            raise OutputError(
                f"{target}: cannot create a Zarr store ({one_line(exc, 200)})"
            ) from None
        except BaseException:  # Ctrl-C: no ``with`` owns this object yet
            self.discard()
            raise

    def probe(self) -> str | None:
        """Why this process cannot write the client's temporary store (None when it can)."""
        if _owner_token(self.location, self.temp) != self.token:
            return f"does not see the client's temporary store {self.temp}"
        return None

    def __setitem__(self, box: tuple[slice, ...], values: np.ndarray) -> None:
        import zarr

        if self.probe() is not None:
            raise OutputError(f"{self.target}: the temporary store was removed (run given up)")
        array = _open_writing_empty_chunks(zarr, self.temp)
        array[box] = values
        if self.probe() is not None:
            self.discard()
            raise OutputError(f"{self.target}: the temporary store was removed (run given up)")

    def check_complete(self, blocks: int) -> None:
        """Every block's chunk is in the client's view of the store (each block is one chunk,
        written even when it holds only the fill value)."""
        import zarr

        stored = len(stored_chunk_keys(zarr.open_array(self.temp, mode="r")))
        if stored != blocks:
            raise OutputError(
                f"{self.target}: {stored} of {blocks} blocks reached the client's store; "
                "the workers must write to the same folder (a shared file system)"
            )

    def commit(self) -> None:
        """Replace the target (an old Zarr store there is removed only after the move)."""
        self.location.remove(self.location.join(self.temp, OWNER_FILE))
        self.location.publish(self.temp, self.target)

    def discard(self) -> None:
        """Remove the temporary store."""
        temp = getattr(self, "temp", None)
        if temp:
            self.location.remove_tree(temp)


def _temp_prefix(target: str) -> str:
    return f".{target.rstrip('/').rsplit('/', 1)[-1]}{TEMP_TAG}"


def _write_owner(location: Location, folder: str, token: str) -> None:
    owner = {"token": token, "host": socket.gethostname(), "pid": os.getpid()}
    location.write_text(location.join(folder, OWNER_FILE), dumps(owner))


def _read_owner(location: Location, folder: str) -> dict | None:
    text = location.read_text(location.join(folder, OWNER_FILE))
    try:
        owner = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return owner if isinstance(owner, dict) else None


def _owner_token(location: Location, folder: str) -> str | None:
    owner = _read_owner(location, folder)
    return None if owner is None else owner.get("token")


def _process_runs(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_abandoned(location: Location, folder: str) -> bool:
    """A temporary store of a run that was given up: no owner file, or an owner process on
    this host that no longer runs (a store owned on another host is left alone)."""
    owner = _read_owner(location, folder)
    if owner is None:
        return True
    return owner.get("host") == socket.gethostname() and not _process_runs(owner.get("pid"))


def remove_abandoned_stores(target: str, location: Location | None = None) -> list[str]:
    """Remove the abandoned temporary stores of ``target`` (see :func:`is_abandoned`);
    returns their paths."""
    location = location or Location(target)
    folder = location.parent(target) or "."
    prefix = _temp_prefix(target)
    removed = []
    for name in location.names(folder):
        path = location.join(folder, name)
        if name.startswith(prefix) and is_abandoned(location, path):
            location.remove_tree(path)
            removed.append(path)
    return removed


def _open_writing_empty_chunks(zarr: Any, path: str) -> Any:
    """The Zarr array at ``path``, opened to write every chunk, empty ones included.

    ``Array.with_config`` exists from zarr 3.1.6 (which needs numpy 2); before it, the array
    takes the setting from the global config at the time it is opened.
    """
    array = zarr.open_array(path, mode="r+")
    if hasattr(array, "with_config"):
        return array.with_config({"write_empty_chunks": True})
    with zarr.config.set({"array.write_empty_chunks": True}):
        return zarr.open_array(path, mode="r+")


def _check_zarr_target(target: str, location: Location) -> None:
    """Only a missing path, an empty folder or a Zarr store may be replaced by a Zarr result."""
    if not location.exists(target) or location.is_empty_folder(target):
        return
    if any(location.exists(location.join(target, m)) for m in ZARR_MARKERS):
        return
    raise OutputError(
        f"{target}: exists and is not a Zarr store; refusing to replace it with one"
    )


class NpyBlockOutput(NpyOutput):
    """An :class:`NpyOutput` that dask workers write through ``target[box] = values``."""

    def check_complete(self, blocks: int) -> None:
        """Nothing to count: a worker that does not see the temporary file cannot write."""

    @property
    def shown_path(self) -> str:
        """The target, as refusals name it."""
        return self.target

    def probe(self) -> str | None:
        """Why this process cannot write the client's temporary file (None when it can)."""
        try:
            size = os.stat(self._temp).st_size
        except OSError:
            return f"does not see the client's temporary file {self._temp}"
        if size != self._expected_size:
            return f"sees {self._temp} with {size} bytes, the client's has {self._expected_size}"
        return None

    def _create(self) -> Any:
        header = super()._create()
        self._expected_size = os.stat(self._temp).st_size
        return header

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
