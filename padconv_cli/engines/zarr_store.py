"""The storage under an open ``zarr.Array``: which chunk objects exist, and their bytes.

Zarr reads a chunk that is not stored as the array's fill value; these helpers let padconv
tell a chunk that was never written from one that a worker cannot see.  A chunk here is the
unit stored as one object: the shard when the array is sharded, else the chunk.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from padconv_cli.errors import InputError, UnsupportedDtypeError

METADATA_KEYS = ("zarr.json", ".zarray", ".zattrs")


def _sync(coroutine: Any) -> Any:
    from zarr.core.sync import sync

    return sync(coroutine)


def _store_and_prefix(array: Any) -> tuple[Any, str]:
    store_path = array.store_path
    prefix = store_path.path
    return store_path.store, (prefix.rstrip("/") + "/" if prefix else "")


def object_shape(array: Any) -> tuple[int, ...]:
    """Shape of the unit stored as one object (shard, else chunk)."""
    shards = getattr(array, "shards", None)
    return tuple(shards) if shards else tuple(array.chunks)


def chunk_grid_shape(array: Any) -> tuple[int, ...]:
    """Number of stored objects per axis: ``ceil(shape / object_shape)``."""
    return tuple(
        math.ceil(n / c) if c else 0 for n, c in zip(array.shape, object_shape(array), strict=True)
    )


def chunk_key(array: Any, coords: tuple[int, ...]) -> str:
    """The store key of the object at grid ``coords`` (``c/0/1`` or ``0.1``...)."""
    return array.metadata.encode_chunk_key(tuple(coords))


def stored_chunk_keys(array: Any) -> set[str]:
    """The keys of every chunk object the store holds (metadata documents excluded)."""
    store, prefix = _store_and_prefix(array)

    async def listing() -> list[str]:
        return [key async for key in store.list_prefix(prefix)]

    keys = set()
    for key in _sync(listing()):
        name = key[len(prefix):]
        leaf = name.rsplit("/", 1)[-1]
        if name and not (leaf in METADATA_KEYS or leaf.startswith(".") or leaf.endswith(".json")):
            keys.add(name)
    return keys


def keys_touching(array: Any, box: tuple[slice, ...]) -> list[str]:
    """Keys of the stored objects that overlap ``box`` (whether stored or not)."""
    shape = object_shape(array)
    per_axis = []
    for s, c in zip(box, shape, strict=True):
        if s.start >= s.stop:
            return []
        per_axis.append(range(s.start // c, (s.stop - 1) // c + 1))
    return [chunk_key(array, coords) for coords in itertools.product(*per_axis)]


def has_key(array: Any, key: str) -> bool:
    """True when the store holds the object ``key`` (relative to the array)."""
    store, prefix = _store_and_prefix(array)
    return bool(_sync(store.exists(prefix + key)))


def read_key(array: Any, key: str) -> bytes | None:
    """The raw bytes of ``key`` (relative to the array), None when absent."""
    from zarr.core.buffer import default_buffer_prototype

    store, prefix = _store_and_prefix(array)
    buffer = _sync(store.get(prefix + key, prototype=default_buffer_prototype()))
    return None if buffer is None else buffer.to_bytes()


def metadata_bytes(array: Any) -> bytes:
    """The array's metadata documents, concatenated in a fixed order."""
    return b"\0".join(read_key(array, key) or b"" for key in METADATA_KEYS)


def open_zarr_input(path: str, policy: Any = None) -> Any:
    """The Zarr array at ``path``, opened read-only; a numeric or bool element type."""
    from padconv_cli.engines.cluster import require_dask
    from padconv_cli.tensorio.files import one_line

    require_dask(("zarr",))
    import zarr

    from padconv_cli.tensorio.zarr_store import check_store_entries

    check_store_entries(path, path, policy)
    try:
        store = zarr.open_array(path, mode="r")
    except Exception as exc:  # zarr raises many error types for missing or corrupt metadata
        raise InputError(f"{path}: not a readable Zarr array ({one_line(exc, 200)})") from None
    dtype = np.dtype(store.dtype)
    if dtype.hasobject or dtype.kind not in "biufc":
        raise UnsupportedDtypeError(
            f"{path}: Zarr element type {store.dtype} is not a fixed-size numeric or bool type"
        )
    if any(length < 1 for length in object_shape(store)):
        raise InputError(f"{path}: Zarr chunk shape {list(object_shape(store))} has a length "
                         "below 1")
    return store
