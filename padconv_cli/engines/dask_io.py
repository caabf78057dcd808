"""The dask engine's inputs and outputs, and the checks that every worker shares them.

Inputs: a ``.npy`` file read box by box with ``pread`` (tensorio's header checks), or a Zarr
store.  Outputs: a temporary ``.npy`` file, or a temporary Zarr store on chunks equal to the
blocks, that the workers fill block by block, put in place (:mod:`.locations`) only when every
block is written.

A worker resolves a path in its own file system: a path that exists only on the client would
make it read another file, or for Zarr no chunk at all (the fill value).  So local paths are
made absolute on the client; every worker compares the client's fingerprint of the input (a
``.npy`` file's size, mtime, shape, dtype and the SHA-256 of its header and of three 64 KiB
ranges of data; a Zarr store's shape, dtype, chunk grid, metadata, number of stored chunks and
the SHA-256 of three of them) before the first block and once per worker process in the block
tasks; a task refuses a chunk the client's store holds but the worker cannot find (a chunk is
the unit stored as one object: the shard of a sharded array); workers confirm they see the
client's temporary output.  A refusal names the worker and the path.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import secrets
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.engines.locations import Location, is_url
from padconv_cli.errors import InputError, OutputError, PadconvError
from padconv_cli.json_output import dumps
from padconv_cli.outofcore.npy_blocks import NpyOutput, check_disk_space, open_npy_input
from padconv_cli.tensorio import ZARR_MARKERS, is_zarr_path
from padconv_cli.tensorio.files import ReadPolicy, check_read_bytes, input_limit, one_line
from padconv_cli.tensorio.zarr_store import check_zarr_objects, open_zarr

SAMPLE_BYTES = 64 * 2**10
METADATA_KEYS = ("zarr.json", ".zarray", ".zattrs")
OWNER_FILE = "padconv-owner.json"


def require_dask(modules: tuple[str, ...] = ("dask.array", "distributed")) -> None:
    """Raise a one-line :class:`PadconvError` naming the missing ones of ``modules``."""
    missing = []
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            missing.append(module.split(".")[0])
    if missing:
        raise PadconvError(
            f"engine dask needs {', '.join(missing)}; install the optional packages with: "
            "pip install 'padconv[dask]' (zarr 3 needs Python >= 3.11)",
            param="engine",
        )


def absolute(path: str) -> str:
    """``path`` made absolute on the client (URLs unchanged)."""
    return path if is_url(path) else os.path.abspath(path)


def _store_call(array: Any, name: str, *args: Any) -> Any:
    """``store.name(*args)`` of the store under ``array`` run to the end (a key or prefix,
    the first argument, relative to the array)."""
    from zarr.core.sync import sync

    path = array.store_path.path
    prefix = path.rstrip("/") + "/" if path else ""
    method = getattr(array.store_path.store, name)
    if name == "list_prefix":
        async def listing() -> list[str]:
            return [key[len(prefix):] async for key in method(prefix)]

        return sync(listing())
    return sync(method(prefix + args[0], *args[1:]))


def object_shape(array: Any) -> tuple[int, ...]:
    """Shape of the unit stored as one object (shard, else chunk)."""
    shards = getattr(array, "shards", None)
    return tuple(shards) if shards else tuple(array.chunks)


def stored_chunk_keys(array: Any) -> set[str]:
    """The keys of every chunk object the store holds (metadata documents excluded)."""
    keys = set()
    for name in _store_call(array, "list_prefix"):
        leaf = name.rsplit("/", 1)[-1]
        if name and not (leaf in METADATA_KEYS or leaf.startswith(".") or leaf.endswith(".json")):
            keys.add(name)
    return keys


def read_key(array: Any, key: str) -> bytes | None:
    """The raw bytes of ``key`` (relative to the array), None when absent."""
    from zarr.core.buffer import default_buffer_prototype

    buffer = _store_call(array, "get", key, default_buffer_prototype())
    return None if buffer is None else buffer.to_bytes()


def open_zarr_input(path: str, policy: ReadPolicy | None = None) -> Any:
    """The Zarr array at ``path`` (:func:`padconv_cli.tensorio.zarr_store.open_zarr`), with
    chunks of at least one element per axis."""
    require_dask(("zarr",))
    store = open_zarr(path, path, policy)
    if any(length < 1 for length in object_shape(store)):
        raise InputError(f"{path}: Zarr chunk shape {list(object_shape(store))} has a length "
                         "below 1")
    return store


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
        for name, value in self.facts:
            if theirs.get(name) != value:
                return f"{name} is {theirs.get(name, 'unknown')}, the client's is {value}"
        return None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def npy_fingerprint(path: str, header: Any, policy: ReadPolicy | None) -> Fingerprint:
    """Fingerprint of a ``.npy`` file (module docstring); raises OSError when unreadable."""
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
    """Fingerprint of an open Zarr array whose stored chunk keys are ``keys`` (module
    docstring)."""
    keys = sorted(keys)
    samples = sorted({keys[0], keys[len(keys) // 2], keys[-1]}) if keys else []
    grid = tuple(-(-n // c) for n, c in zip(array.shape, object_shape(array), strict=True))
    metadata = b"\0".join(read_key(array, key) or b"" for key in METADATA_KEYS)
    facts = (
        ("shape", str(tuple(array.shape))),
        ("dtype", str(array.dtype)),
        ("chunk grid", str(grid)),
        ("metadata digest", _digest(metadata)),
        ("stored chunks", str(len(keys))),
        ("chunk digests", ",".join(f"{k}:{_digest(read_key(array, k) or b'')}" for k in samples)),
    )
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
    """Why this process does not see the client's input ``expected`` (None when it does: it
    is remembered as confirmed)."""
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


def ensure_confirmed(expected: Fingerprint) -> None:
    """Check ``expected`` in this worker process once (later calls return at once)."""
    problem = None if expected in _CONFIRMED else problem_with(expected)
    if problem is not None:
        raise refusal(here(), expected.path, problem)


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
    """The ``.npy`` file or Zarr store ``path`` (made absolute) as a source that each block
    task reads its own box from, with the input's fingerprint."""
    path = absolute(path)
    return ZarrSource(path, policy) if is_zarr_path(path) else NpySource(path, policy)


class NpySource:
    """A ``.npy`` file read box by box on the workers."""

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
        return (read_npy_box, self.array, self.fingerprint, box)


def read_npy_box(array: Any, expected: Fingerprint, box: tuple[slice, ...]) -> np.ndarray:
    """``array[box]`` from the worker's view of the file, once it is the client's."""
    ensure_confirmed(expected)
    return array.read(box)


class ZarrSource(NpySource):
    """A Zarr array read box by box on the workers; each task names the stored chunks of its
    box, which the worker must find (a missing one is an error, never the fill value)."""

    def __init__(self, path: str, policy: ReadPolicy | None = None) -> None:
        self.array = open_zarr_input(path, policy)
        self.path, self.limit = path, input_limit(policy)
        check_zarr_objects(self.array, path, self.limit)
        self.stored = stored_chunk_keys(self.array)
        self.fingerprint = zarr_fingerprint(self.array, path, self.stored, policy)
        self.shape, self.dtype = tuple(self.array.shape), np.dtype(self.array.dtype)

    def fetch_task(self, box: tuple[slice, ...]) -> tuple:
        """A task giving the values in ``box`` (within the input limit) and the keys of the
        stored objects it overlaps."""
        count = math.prod(len(range(*s.indices(n))) for s, n in zip(box, self.shape, strict=True))
        check_read_bytes(count * self.dtype.itemsize, self.path, "one dask block", self.limit)
        per_axis = [range(s.start // c, (s.stop - 1) // c + 1) if s.start < s.stop else ()
                    for s, c in zip(box, object_shape(self.array), strict=True)]
        keys = [key for key in map(self.array.metadata.encode_chunk_key,
                                   itertools.product(*per_axis)) if key in self.stored]
        return (read_zarr_box, self.array, self.fingerprint, box, keys)

    def chunked(self, block_bytes: int) -> Any:
        """A dask array of one read task per stored object (chunk or shard) when one fits
        ``block_bytes``: each is read and decompressed once, and aligned blocks get their halo
        as crops of the neighbours (:class:`padconv_cli.engines.dask_ops.ChunkGrid`); else
        this source, whose blocks read their own boxes."""
        import dask.array as da
        from dask.array.core import normalize_chunks, slices_from_chunks
        from dask.base import tokenize

        grid = object_shape(self.array)
        if math.prod(grid) * self.dtype.itemsize > block_bytes or not math.prod(self.shape):
            return self
        chunks = normalize_chunks(grid, self.shape)
        name = f"padconv-read-{tokenize(self.fingerprint, chunks)}"
        indices = np.ndindex(*(len(sizes) for sizes in chunks))
        graph = {(name, *index): self.fetch_task(box)
                 for index, box in zip(indices, slices_from_chunks(chunks), strict=True)}
        return da.Array(graph, name, chunks=chunks, dtype=self.dtype)


def read_zarr_box(array: Any, expected: Fingerprint, box: tuple[slice, ...],
                  keys: list[str]) -> np.ndarray:
    """``array[box]`` once the worker confirmed the store and found each chunk in ``keys``
    (stored in the client's store: a missing one would read as the fill value)."""
    ensure_confirmed(expected)
    for key in keys:
        if not _store_call(array, "exists", key):
            raise refusal(here(), expected.path,
                          f"chunk {key} is stored in the client's store but missing here")
    try:
        return np.ascontiguousarray(array[box])
    except Exception as exc:  # a chunk the codec cannot decode (corrupt, truncated, forged)
        raise InputError(f"{expected.path}: cannot read the Zarr chunks ({one_line(exc, 200)})",
                         source=expected.path) from None


class ZarrOutput:
    """A Zarr store filled block by block, moved over its target by :meth:`commit`.

    The temporary store ``.NAME.zarr.padconv-XXXX`` next to the target holds an owner file
    (a random token, the client's host and pid); a worker writes only while it is there and
    removes the store when it is gone after its write (the run was given up meanwhile).
    """

    def __init__(self, target: str, shape: tuple[int, ...], dtype: np.dtype,
                 chunks: tuple[int, ...]) -> None:
        require_dask(("zarr",))
        import zarr

        self.target, self.location = target, Location(target)
        _check_zarr_target(target, self.location)
        remove_abandoned_stores(target, self.location)
        self.token = secrets.token_hex(16)
        name = _temp_prefix(target) + secrets.token_hex(6)
        self.temp = self.location.join(self.location.parent(target) or ".", name)
        try:
            self.location.make_folder(self.temp)
            owner = {"token": self.token, "host": socket.gethostname(), "pid": os.getpid()}
            self.location.fs.pipe_file(self.location.join(self.temp, OWNER_FILE),
                                       dumps(owner).encode())
            zarr.create_array(store=self.temp, shape=shape, chunks=tuple(max(1, c) for c in chunks),
                              dtype=dtype, overwrite=False, fill_value=None)
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
        owner = _read_owner(self.location, self.temp) or {}
        if owner.get("token") != self.token:
            return f"does not see the client's temporary store {self.temp}"
        return None

    def __setitem__(self, box: tuple[slice, ...], values: np.ndarray) -> None:
        import zarr

        given_up = OutputError(f"{self.target}: the temporary store was removed (run given up)")
        if self.probe() is not None:
            raise given_up
        # every chunk written, empty ones included (each block is one chunk)
        array = zarr.open_array(self.temp, mode="r+")
        if hasattr(array, "with_config"):  # zarr >= 3.1.6; before, the global config rules
            array.with_config({"write_empty_chunks": True})[box] = values
        else:
            with zarr.config.set({"array.write_empty_chunks": True}):
                zarr.open_array(self.temp, mode="r+")[box] = values
        if self.probe() is not None:
            self.discard()
            raise given_up

    def check_complete(self, blocks: int) -> None:
        """Every block's chunk is in the client's view of the store."""
        import zarr

        stored = len(stored_chunk_keys(zarr.open_array(self.temp, mode="r")))
        if stored != blocks:
            raise OutputError(
                f"{self.target}: {stored} of {blocks} blocks reached the client's store; "
                "the workers must write to the same folder (a shared file system)"
            )

    def commit(self) -> None:
        """Replace the target (an old Zarr store there is removed only after the move)."""
        with contextlib.suppress(OSError):
            self.location.fs.rm_file(self.location.join(self.temp, OWNER_FILE))
        self.location.publish(self.temp, self.target)

    def discard(self) -> None:
        """Remove the temporary store."""
        if getattr(self, "temp", None):
            self.location.remove_tree(self.temp)


def _temp_prefix(target: str) -> str:
    return f".{target.rstrip('/').rsplit('/', 1)[-1]}.padconv-"


def _read_owner(location: Location, folder: str) -> dict | None:
    try:
        owner = json.loads(location.fs.cat_file(location.join(folder, OWNER_FILE)))
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def is_abandoned(location: Location, folder: str) -> bool:
    """A temporary store of a run that was given up: no owner file, or an owner process on
    this host that no longer runs (a store owned on another host is left alone)."""
    owner = _read_owner(location, folder)
    if owner is None:
        return True
    if owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it runs, as another user
        pass
    return False


def remove_abandoned_stores(target: str, location: Location | None = None) -> list[str]:
    """Remove the abandoned temporary stores of ``target`` (:func:`is_abandoned`); returns
    their paths."""
    location = location or Location(target)
    folder = location.parent(target) or "."
    removed = []
    for name in location.names(folder):
        path = location.join(folder, name)
        if name.startswith(_temp_prefix(target)) and is_abandoned(location, path):
            location.remove_tree(path)
            removed.append(path)
    return removed


def _check_zarr_target(target: str, location: Location) -> None:
    """Only a missing path, an empty folder or a Zarr store may be replaced by a Zarr result."""
    fs = location.fs
    if not fs.exists(target) or (fs.isdir(target) and not fs.ls(target, detail=False)):
        return
    if any(fs.exists(location.join(target, m)) for m in ZARR_MARKERS):
        return
    raise OutputError(f"{target}: exists and is not a Zarr store; refusing to replace it with one")


class NpyBlockOutput(NpyOutput):
    """An :class:`NpyOutput` that dask workers write through ``target[box] = values``."""

    def check_complete(self, blocks: int) -> None:
        """Nothing to count: a worker that does not see the temporary file cannot write."""

    def probe(self) -> str | None:
        """Why this process cannot write the client's temporary file (None when it can)."""
        try:
            size = os.stat(self._temp).st_size
        except OSError:
            return f"does not see the client's temporary file {self._temp}"
        expected = self._header.data_offset + math.prod(self.shape) * self.dtype.itemsize
        if size != expected:
            return f"sees {self._temp} with {size} bytes, the client's has {expected}"
        return None


@contextlib.contextmanager
def block_output(target: str, shape: tuple[int, ...], dtype: np.dtype,
                 chunks: tuple[int, ...]) -> Iterator[Any]:
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
