"""Where the dask engine writes its result, and how the result is put in place.

A ``.npy`` result is a temporary file next to the target (:class:`NpyBlockOutput`).  A Zarr
result goes to a local folder or to a prefix of an object store (an fsspec URL such as
``s3://bucket/path/name.zarr``, credentials from the environment): the workers fill the
temporary store ``.NAME.zarr.padconv-XXXX`` next to the target, on chunks equal to the blocks,
which replaces the target only when every block is written.  That store holds an owner file (a
random token, the client's host and pid); a worker writes only while it is there and removes
the store when it is gone after its write (the run was given up meanwhile); a later run
removes the stores of runs that were given up.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import posixpath
import secrets
import shutil
import socket
from typing import Any

import numpy as np

from padconv_cli.errors import OutputError, PadconvError
from padconv_cli.json_output import dumps
from padconv_cli.outofcore.npy_blocks import NpyOutput, check_disk_space
from padconv_cli.tensorio import ZARR_MARKERS, is_zarr_path
from padconv_cli.tensorio.files import one_line, replace_folder

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
