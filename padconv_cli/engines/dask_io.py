"""The dask engine's inputs (a ``.npy`` file read box by box with ``pread``, or a Zarr store),
and the checks that every worker shares the client's inputs and outputs (:mod:`.locations`).

A worker resolves a path in its own file system: a path that exists only on the client would
make it read another file, or for Zarr no chunk at all (the fill value).  So local paths are
made absolute on the client; every worker compares the client's fingerprint of the input
(:func:`npy_fingerprint`, :func:`zarr_fingerprint`) before the first block and once per worker
process in the block tasks; a task refuses a chunk the client's store holds but the worker
cannot find (a chunk is the unit stored as one object: the shard of a sharded array); workers
confirm they see the client's temporary output.  A refusal names the worker and the path.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.engines.locations import is_url, require_dask
from padconv_cli.errors import InputError
from padconv_cli.outofcore.npy_blocks import open_npy_input
from padconv_cli.tensorio import is_zarr_path
from padconv_cli.tensorio.files import ReadPolicy, check_read_bytes, input_limit, one_line
from padconv_cli.tensorio.zarr_store import check_zarr_objects, open_zarr, stored_object_shape

SAMPLE_BYTES = 64 * 2**10
METADATA_KEYS = ("zarr.json", ".zarray", ".zattrs")


def absolute(path: str) -> str:
    """``path`` made absolute on the client (URLs unchanged)."""
    return path if is_url(path) else os.path.abspath(path)


def _store_files(path: str) -> tuple[Any, str]:
    """The fsspec file system holding the Zarr store ``path``, and the store's root in it."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(path)
    return fs, root.rstrip("/")


def stored_chunk_keys(path: str) -> set[str]:
    """The keys of every chunk object the store ``path`` holds (metadata documents excluded)."""
    fs, root = _store_files(path)
    keys = set()
    for name in (found[len(root) + 1:] for found in fs.find(root)):
        leaf = name.rsplit("/", 1)[-1]
        if name and not (leaf in METADATA_KEYS or leaf.startswith(".") or leaf.endswith(".json")):
            keys.add(name)
    return keys


def read_key(path: str, key: str) -> bytes | None:
    """The raw bytes of ``key`` in the store ``path``, None when absent."""
    fs, root = _store_files(path)
    try:
        return fs.cat_file(f"{root}/{key}")
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class Fingerprint:
    """What identifies one input: its path and the facts compared between machines; and the
    read policy a worker opens it under (``--allow-hardlinks`` holds on the workers too)."""

    path: str
    facts: tuple[tuple[str, str], ...]
    policy: ReadPolicy | None = None

    def difference(self, other: Fingerprint) -> str | None:
        """The first fact in which ``other`` differs from this one (None when equal)."""
        theirs = dict(other.facts)
        return next((f"{name} is {theirs.get(name, 'unknown')}, the client's is {value}"
                     for name, value in self.facts if theirs.get(name) != value), None)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def npy_fingerprint(path: str, header: Any, policy: ReadPolicy | None) -> Fingerprint:
    """Fingerprint of a ``.npy`` file: size, mtime, shape, dtype and the SHA-256 of its header
    and of three 64 KiB ranges of data; raises OSError when unreadable."""
    info, start = os.stat(path), header.data_offset
    length = info.st_size - start
    count = min(SAMPLE_BYTES, length)
    with open(path, "rb") as stream:
        digests = [_digest(stream.read(start))]
        for offset in sorted({start, start + (length - count) // 2, start + length - count}
                             if length > 0 else ()):
            stream.seek(offset)
            digests.append(_digest(stream.read(count)))
    facts = (("size", str(info.st_size)), ("mtime", str(info.st_mtime_ns)),
             ("shape", str(tuple(header.shape))), ("dtype", str(header.dtype)),
             ("content digest", ",".join(digests)))
    return Fingerprint(path, facts, policy)


def zarr_fingerprint(array: Any, path: str, keys: set[str],
                     policy: ReadPolicy | None) -> Fingerprint:
    """Fingerprint of an open Zarr array whose stored chunk keys are ``keys``: shape, dtype,
    chunk grid, metadata, number of stored chunks and the SHA-256 of three of them."""
    keys = sorted(keys)
    samples = sorted({keys[0], keys[len(keys) // 2], keys[-1]}) if keys else []
    objects, _ = stored_object_shape(array)
    grid = tuple(-(-n // c) for n, c in zip(array.shape, objects, strict=True))
    metadata = b"\0".join(read_key(path, key) or b"" for key in METADATA_KEYS)
    facts = (("shape", str(tuple(array.shape))), ("dtype", str(array.dtype)),
             ("chunk grid", str(grid)), ("metadata digest", _digest(metadata)),
             ("stored chunks", str(len(keys))),
             ("chunk digests", ",".join(f"{k}:{_digest(read_key(path, k) or b'')}"
                                        for k in samples)))
    return Fingerprint(path, facts, policy)


def here() -> str:
    """The address of the dask worker running this code (or ``this process``)."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return "this process"


_CONFIRMED: set[Fingerprint] = set()


def problem_with(expected: Fingerprint) -> str | None:
    """Why this process does not see the client's input (None when it does, remembered)."""
    try:
        found = open_block_input(expected.path, expected.policy).fingerprint
    except Exception as exc:  # any failure to read (missing file, no credentials...) refuses
        return f"cannot read it ({one_line(exc, 160)})"
    difference = expected.difference(found)
    if difference is not None:
        return f"not the client's file: {difference}"
    _CONFIRMED.add(expected)
    return None


def refusal(worker: str, path: str, problem: str) -> InputError:
    """The one-line error for a worker that does not see the client's ``path``."""
    return InputError(f"worker {worker}: {path}: {problem}; every worker must see the client's "
                      "files at the same absolute path (a shared file system or object store)",
                      source=path)


def worker_problems(inputs: list[Fingerprint], outputs: list[Any]) -> list[tuple[str, str]]:
    """``(path, problem)`` for every input or output this worker does not share."""
    found = [(expected.path, problem_with(expected)) for expected in inputs]
    found += [(output.target, output.probe()) for output in outputs]
    return [(path, problem) for path, problem in found if problem is not None]


def confirm_on_workers(client: Any, inputs: list[Fingerprint], outputs: list[Any]) -> None:
    """Every worker of ``client`` confirms the inputs and outputs (module docstring); raises
    :class:`InputError` naming the first worker and path that differ."""
    answers = client.run(worker_problems, inputs, outputs)
    for worker in sorted(answers):
        for path, problem in answers[worker]:
            raise refusal(worker, path, problem)


def open_block_input(path: str, policy: ReadPolicy | None = None) -> Any:
    """The ``.npy`` file or Zarr store ``path`` (made absolute) as a block source."""
    path = absolute(path)
    return ZarrSource(path, policy) if is_zarr_path(path) else NpySource(path, policy)


class NpySource:
    """A ``.npy`` file read box by box on the workers; as every source (:class:`ZarrSource`
    too), dask names it by its fingerprint."""

    def __init__(self, path: str, policy: ReadPolicy | None = None) -> None:
        self.array = open_npy_input(path, policy)
        self.fingerprint = npy_fingerprint(path, self.array.header, policy)
        self.shape, self.dtype = self.array.shape, self.array.dtype

    def __dask_tokenize__(self) -> Any:
        return self.fingerprint

    def chunked(self, block_bytes: int) -> Any:
        """Blocks read their own boxes of a ``.npy`` file (no chunk grid to follow)."""
        return self

    def fetch_task(self, box: tuple[slice, ...]) -> tuple:
        """A task giving the values in ``box`` once the worker confirmed the file; a box over
        the input limit is refused here, on the client, before any block runs."""
        self.array.check_reads([box])
        return (read_box, self.array, self.fingerprint, box)


class ZarrSource(NpySource):
    """A Zarr array read box by box on the workers; each task names the stored chunks of its
    box, which the worker must find (a missing one is an error, never the fill value)."""

    def __init__(self, path: str, policy: ReadPolicy | None = None) -> None:
        require_dask(("zarr",))
        self.array = open_zarr(path, path, policy)
        self.path, self.limit = path, input_limit(policy)
        check_zarr_objects(self.array, path, self.limit)
        self.stored = stored_chunk_keys(path)
        self.fingerprint = zarr_fingerprint(self.array, path, self.stored, policy)
        self.shape, self.dtype = tuple(self.array.shape), np.dtype(self.array.dtype)
        self.objects, _ = stored_object_shape(self.array)

    def fetch_task(self, box: tuple[slice, ...]) -> tuple:
        """A task giving the values in ``box`` (within the input limit) and its stored keys."""
        count = math.prod(len(range(*s.indices(n))) for s, n in zip(box, self.shape, strict=True))
        check_read_bytes(count * self.dtype.itemsize, self.path, "one dask block", self.limit)
        per_axis = [range(s.start // c, (s.stop - 1) // c + 1) if s.start < s.stop else ()
                    for s, c in zip(box, self.objects, strict=True)]
        keys = [key for key in map(self.array.metadata.encode_chunk_key,
                                   itertools.product(*per_axis)) if key in self.stored]
        return (read_box, self.array, self.fingerprint, box, keys)

    def chunked(self, block_bytes: int) -> Any:
        """A dask array of one read task per stored object (chunk or shard) when one fits
        ``block_bytes``: each is decoded once, blocks get their halo as crops of the neighbours
        (:class:`.dask_ops.ChunkGrid`); else this source, whose blocks read their own boxes."""
        import dask.array as da
        from dask.array.core import normalize_chunks, slices_from_chunks
        from dask.base import tokenize

        if math.prod(self.objects) * self.dtype.itemsize > block_bytes or not math.prod(self.shape):
            return self
        chunks = normalize_chunks(self.objects, self.shape)
        name = f"padconv-read-{tokenize(self.fingerprint, chunks)}"
        indices = np.ndindex(*(len(sizes) for sizes in chunks))
        graph = {(name, *index): self.fetch_task(box)
                 for index, box in zip(indices, slices_from_chunks(chunks), strict=True)}
        return da.Array(graph, name, chunks=chunks, dtype=self.dtype)


def read_box(array: Any, expected: Fingerprint, box: tuple[slice, ...],
             keys: list[str] | None = None) -> np.ndarray:
    """``array[box]`` from the worker's view of the input, once it is the client's; of a Zarr
    store, once each chunk in ``keys`` (stored in the client's store) is found here: a missing
    one would read as the fill value.  The input is checked once per worker process."""
    problem = None if expected in _CONFIRMED else problem_with(expected)
    if problem is not None:
        raise refusal(here(), expected.path, problem)
    if keys is None:
        return array.read(box)
    fs, root = _store_files(expected.path)
    for key in keys:
        if not fs.exists(f"{root}/{key}"):
            raise refusal(here(), expected.path,
                          f"chunk {key} is stored in the client's store but missing here")
    try:
        return np.ascontiguousarray(array[box])
    except Exception as exc:  # a chunk the codec cannot decode (corrupt, truncated, forged)
        raise InputError(f"{expected.path}: cannot read the Zarr chunks ({one_line(exc, 200)})",
                         source=expected.path) from None
