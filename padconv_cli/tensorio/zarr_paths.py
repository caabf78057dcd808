"""Recognising Zarr stores by name and metadata, without importing dask or zarr."""

from __future__ import annotations

import os

ZARR_MARKERS = ("zarr.json", ".zarray")


def is_zarr_path(path: str) -> bool:
    """A Zarr store: a name ending in ``.zarr``, or a folder holding ``zarr.json``/``.zarray``."""
    if path.rstrip("/\\").lower().endswith(".zarr"):
        return True
    return has_zarr_metadata(path)


def has_zarr_metadata(path: str) -> bool:
    """True for a folder holding Zarr metadata (``zarr.json`` or ``.zarray``)."""
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, m)) for m in ZARR_MARKERS)


__all__ = ["ZARR_MARKERS", "has_zarr_metadata", "is_zarr_path"]
