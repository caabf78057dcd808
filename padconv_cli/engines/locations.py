"""Where a Zarr result is written: a local folder, or a prefix of an object store (an fsspec
URL such as ``s3://bucket/path/name.zarr``, credentials from the environment).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import Any

from padconv_cli.errors import PadconvError

OBJECT_STORE_SCHEMES = ("s3", "gs", "gcs", "az", "abfs", "abfss")
METADATA_NAMES = ("zarr.json", ".zarray", ".zattrs", ".zgroup")


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


class Location:
    """File operations on a local folder or an object store, through fsspec's file system of
    the path (the local one for a local path)."""

    def __init__(self, path: str) -> None:
        import fsspec

        self.url = is_url(path)
        self.fs: Any = fsspec.core.url_to_fs(path)[0]

    def join(self, folder: str, name: str) -> str:
        """``folder/name``."""
        return f"{folder.rstrip('/')}/{name}" if self.url else os.path.join(folder, name)

    def parent(self, path: str) -> str:
        """The folder (or prefix) holding ``path``."""
        return path.rstrip("/").rsplit("/", 1)[0] if self.url else os.path.dirname(path)

    def names(self, folder: str) -> list[str]:
        """The names directly inside ``folder``."""
        with contextlib.suppress(OSError):
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(folder, detail=False)]
        return []

    def remove_tree(self, path: str) -> None:
        """Remove ``path`` and everything under it (nothing when absent)."""
        if not self.url:
            shutil.rmtree(path, ignore_errors=True)
            return
        with contextlib.suppress(OSError):
            self.fs.rm(path, recursive=True)

    def make_folder(self, path: str) -> None:
        """Create the (empty) folder ``path``; on an object store prefixes need no creation."""
        if not self.url:
            os.mkdir(path, 0o700)

    def publish(self, temp: str, target: str) -> None:
        """Put the store ``temp`` at ``target``: renamed locally; on an object store (no
        rename) the old target's objects removed, then ``temp``'s copied, chunks before the
        metadata (a reader never finds metadata whose chunks are missing), then removed."""
        if not self.url:
            replace_folder(temp, target)
            return
        self.remove_tree(target)
        root = self.fs._strip_protocol(temp).rstrip("/")
        target_root = self.fs._strip_protocol(target).rstrip("/")
        objects = sorted(self.fs.find(root))
        chunks = [p for p in objects if p.rsplit("/", 1)[-1] not in METADATA_NAMES]
        for source in chunks + [p for p in objects if p not in chunks]:
            self.fs.copy(source, target_root + source[len(root):])
        self.remove_tree(temp)


def replace_folder(temp: str, target: str) -> None:
    """Move the local store ``temp`` to ``target``.  An old store there is moved aside first,
    into a folder named before the ``try``; if the move is cut short (a Ctrl-C) and ``target``
    is left empty, the old store goes back; the folder aside is removed in any case."""
    aside = None
    if os.path.lexists(target):
        aside = os.path.join(os.path.dirname(target) or ".", f".old.{os.urandom(6).hex()}")
    try:
        if aside is not None:
            os.mkdir(aside, 0o700)
            os.replace(target, os.path.join(aside, "store"))
        os.replace(temp, target)
    finally:
        if aside is not None:
            old = os.path.join(aside, "store")
            if not os.path.lexists(target) and os.path.lexists(old):
                os.replace(old, target)
            shutil.rmtree(aside, ignore_errors=True)
