"""The dask engine's inputs and outputs, and the checks that every worker shares them.

Inputs: a ``.npy`` file read box by box with ``pread``, or a Zarr store.  A worker resolves a
path in its own file system: a path that exists only on the client would make it read another
file, or for Zarr no chunk at all (the fill value).  So local paths are made absolute on the
client; every worker compares the client's fingerprint of the input (:func:`npy_fingerprint`,
:func:`zarr_fingerprint`) before the first block and once per worker process in the block
tasks; a task refuses a chunk the client's store holds but the worker cannot find (a chunk is
the unit stored as one object: the shard of a sharded array); workers confirm they see the
client's temporary output.  A refusal names the worker and the path.

Outputs: a ``.npy`` result is a temporary file next to the target (:class:`NpyBlockOutput`).  A
Zarr result goes to a local folder or to a prefix of an object store (an fsspec URL such as
``s3://bucket/path/name.zarr``, credentials from the environment): the workers fill the
temporary store ``.NAME.zarr.padconv-XXXX`` next to the target, on chunks equal to the blocks,
which replaces the target only when every block is written.  That store holds an owner file (a
random token, the client's host and pid); a worker writes only while it is there and removes
the store when it is gone after its write (the run was given up meanwhile); a later run
removes the stores of runs that were given up.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import posixpath
import secrets
import shutil
import socket
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import InputError, OutputError, PadconvError
from padconv_cli.json_output import dumps
from padconv_cli.outofcore.npy_blocks import NpyOutput, check_disk_space, open_npy_input
from padconv_cli.tensorio import ZARR_MARKERS, is_zarr_path
from padconv_cli.tensorio.files import (
    ReadPolicy,
    check_read_bytes,
    input_limit,
    one_line,
    replace_folder,
)
from padconv_cli.tensorio.zarr_store import check_zarr_objects, open_zarr, stored_object_shape

OBJECT_STORE_SCHEMES = ("s3", "gs", "gcs", "az", "abfs", "abfss")
METADATA_NAMES = ("zarr.json", ".zarray", ".zattrs", ".zgroup")
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
        raise PadconvError(f"engine dask needs {', '.join(missing)}; install the optional packages "
                           "with: pip install 'padconv[dask]' (zarr 3 needs Python >= 3.11)",
                           param="engine")


def is_url(path: str) -> bool:
    """True for an fsspec URL such as ``s3://bucket/x.zarr`` (``scheme://``)."""
    head, sep, _ = path.partition("://")
    return bool(sep) and head.isidentifier()


def check_url(url: str, param: str) -> None:
    """Refuse a URL other than ``SCHEME://bucket/path/name.zarr`` of an object store, with no
    empty, ``.`` or ``..`` segment (``param`` names it)."""
    scheme, _, rest = url.partition("://")
    segments = rest.split("/")
    problem = None
    if scheme not in OBJECT_STORE_SCHEMES:
        problem = f"scheme {scheme}:// is not an object store ({', '.join(OBJECT_STORE_SCHEMES)})"
    elif len(segments) < 2 or any(s in ("", ".", "..") for s in segments):
        problem = "give bucket/path/name.zarr, without empty, '.' or '..' segments"
    elif not segments[-1].lower().endswith(".zarr"):
        problem = "only Zarr stores (name.zarr) can be read or written at a URL"
    if problem is not None:
        raise PadconvError(f"{url}: {problem}", param=param, source=url)


def _remove_tree(fs: Any, path: str) -> None:
    """Remove ``path`` and everything under it (nothing when absent)."""
    if not is_url(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            fs.rm(path, recursive=True)


class ZarrOutput:
    """A Zarr store filled block by block, put over its target by :meth:`commit`."""

    def __init__(self, target: str, shape: tuple[int, ...], dtype: np.dtype,
                 chunks: tuple[int, ...]) -> None:
        require_dask(("zarr",))
        import fsspec
        import zarr

        self.target, self.fs = target, fsspec.core.url_to_fs(target)[0]
        _check_zarr_target(self.fs, target)
        remove_abandoned_stores(target, self.fs)
        self.token = secrets.token_hex(16)
        folder, name = posixpath.split(target)  # POSIX paths, as URLs
        self.temp = posixpath.join(folder, f".{name}.padconv-{secrets.token_hex(6)}")
        try:
            if not is_url(self.temp):  # an object store's prefixes need no creation
                os.mkdir(self.temp, 0o700)
            owner = {"token": self.token, "host": socket.gethostname(), "pid": os.getpid()}
            self.fs.pipe_file(posixpath.join(self.temp, OWNER_FILE), dumps(owner).encode())
            zarr.create_array(store=self.temp, shape=shape, chunks=tuple(max(1, c) for c in chunks),
                              dtype=dtype, overwrite=False, fill_value=None)
        except BaseException as exc:  # Ctrl-C too: no ``with`` owns this object yet
            self.discard()
            if isinstance(exc, (OSError, ValueError, TypeError)):
                raise OutputError(f"{target}: cannot create a Zarr store ({one_line(exc, 200)})"
                                  ) from None
            raise

    def probe(self) -> str | None:
        """Why this process cannot write the client's temporary store (None when it can)."""
        owner = _read_owner(self.fs, self.temp) or {}
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

    def commit(self) -> None:
        """Put the store at the target once every block's chunk is in the client's view of it:
        renamed locally (:func:`replace_folder`); on an object store (no rename) the old
        target's objects removed, then the store's copied, chunks before the metadata (a reader
        never finds metadata whose chunks are missing), then removed."""
        import zarr

        array = zarr.open_array(self.temp, mode="r")
        stored, blocks = array.nchunks_initialized, array.nchunks
        if stored != blocks:
            self.discard()
            raise OutputError(f"{self.target}: {stored} of {blocks} blocks reached the client's "
                              "store; the workers must write to the same folder (a shared file "
                              "system)")
        with contextlib.suppress(OSError):
            self.fs.rm_file(posixpath.join(self.temp, OWNER_FILE))
        if not is_url(self.target):
            replace_folder(self.temp, self.target)
            return
        _remove_tree(self.fs, self.target)
        root = self.fs._strip_protocol(self.temp).rstrip("/")
        target_root = self.fs._strip_protocol(self.target).rstrip("/")
        objects = sorted(self.fs.find(root))
        chunks = [p for p in objects if p.rsplit("/", 1)[-1] not in METADATA_NAMES]
        for source in chunks + [p for p in objects if p not in chunks]:
            self.fs.copy(source, target_root + source[len(root):])
        _remove_tree(self.fs, self.temp)

    def discard(self) -> None:
        """Remove the temporary store."""
        if getattr(self, "temp", None):
            _remove_tree(self.fs, self.temp)

    __enter__, __exit__ = NpyOutput.__enter__, NpyOutput.__exit__  # commit, else discard


def _read_owner(fs: Any, folder: str) -> dict | None:
    try:
        owner = json.loads(fs.cat_file(posixpath.join(folder, OWNER_FILE)))
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def is_abandoned(fs: Any, folder: str) -> bool:
    """A temporary store of a run that was given up: no owner file, or an owner process on
    this host that no longer runs (a store owned on another host is left alone)."""
    owner = _read_owner(fs, folder)
    if owner is None:
        return True
    if owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    try:
        with contextlib.suppress(PermissionError):  # it runs, as another user
            os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def remove_abandoned_stores(target: str, fs: Any) -> None:
    """Remove the abandoned temporary stores of ``target`` (:func:`is_abandoned`)."""
    folder, stem = posixpath.split(target)
    with contextlib.suppress(OSError):
        for name in (p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(folder, detail=False)):
            path = posixpath.join(folder, name)
            if name.startswith(f".{stem}.padconv-") and is_abandoned(fs, path):
                _remove_tree(fs, path)


def _check_zarr_target(fs: Any, target: str) -> None:
    """Only a missing path, an empty folder or a Zarr store may be replaced by a Zarr result."""
    if not fs.exists(target) or (fs.isdir(target) and not fs.ls(target, detail=False)):
        return
    if not any(fs.exists(posixpath.join(target, m)) for m in ZARR_MARKERS):
        raise OutputError(f"{target}: exists and is not a Zarr store; refusing to replace it "
                          "with one")


class NpyBlockOutput(NpyOutput):
    """An :class:`NpyOutput` that dask workers write through ``target[box] = values``."""

    def probe(self) -> str | None:
        """Why this process cannot write the client's temporary file (None when it can)."""
        try:
            size = os.stat(self._temp).st_size
        except OSError:
            return f"does not see the client's temporary file {self._temp}"
        expected = self._data_offset + math.prod(self.shape) * self.dtype.itemsize
        if size != expected:
            return f"sees {self._temp} with {size} bytes, the client's has {expected}"
        return None


def block_output(target: str, shape: tuple[int, ...], dtype: np.dtype,
                 chunks: tuple[int, ...]) -> Any:
    """The writable result (Zarr or ``.npy`` by the name), committed by a clean ``with`` exit."""
    if is_zarr_path(target):
        return ZarrOutput(target, shape, dtype, chunks)
    check_disk_space(target, shape, dtype)
    return NpyBlockOutput(target, shape, dtype)


SAMPLE_BYTES = 64 * 2**10


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
    names = (found[len(root) + 1:] for found in fs.find(root))
    return {name for name in names
            if name and not (name.rsplit("/", 1)[-1].startswith(".") or name.endswith(".json"))}


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
    metadata = b"\0".join(read_key(path, key) or b"" for key in METADATA_NAMES)
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
