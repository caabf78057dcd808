"""Result arrays whose memory is recycled from earlier results the caller has let go of.

A fresh allocation of more than 32 MiB (glibc's largest threshold for serving ``malloc`` from
its heap; other allocators have similar limits) is a new mapping of the kernel's, and the
kernel zeroes every page of it on first touch: for a Pad, whose work is one pass over its
output, that is a third of the call. :func:`new_array` hands out such large results from
buffers freed by earlier results instead, as onnxruntime's arena does.

A result is a view of a per-result array ``flat`` over a kept raw buffer: every array made
from the result (views, subclass views, arrays over its buffer) keeps ``flat`` alive, and only
when the last of them is gone does the buffer come back here, so memory the caller can still
reach through arrays is never handed out again. (Code that digs past those arrays through
``.base`` to the memoryview or the raw buffer, and keeps only that, gets no such promise.)

At most about RECYCLE_KEEP_BYTES of free buffers are kept, and they stay resident while
idle until :func:`release`. A request that no free buffer fits exactly frees them all first,
so that a run of differently sized results needs no more memory at its peak than plain
allocations would.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

RECYCLE_MIN_BYTES = 32 * 2**20
"""Results of at least this size are recycled; smaller ones the C allocator already reuses."""

RECYCLE_KEEP_BYTES = 256 * 2**20
"""Free buffers kept for reuse, at most this many bytes in all."""

# id -> buffer, oldest first; single dict operations are atomic under the GIL: no lock needed
_free: dict[int, np.ndarray] = {}


def new_array(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-ordered array, like ``np.empty(shape, dtype)``.

    Arrays of RECYCLE_MIN_BYTES or more reuse the memory of a dropped earlier result of the
    same byte size when there is one; they do not own their data (``base`` is set), so
    ``ndarray.resize`` refuses them. Dtypes holding Python objects are never recycled.
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < RECYCLE_MIN_BYTES or dtype.hasobject or any(size < 0 for size in shape):
        return np.empty(shape, dtype=dtype)
    raw = _take(nbytes)
    if raw is None:
        release()
        raw = np.empty(nbytes, dtype=np.uint8)
    # Through a memoryview, ``flat``'s base is not an array, so numpy's collapsing of chains of
    # views (down to the first array whose base is not an array of the same type, or that owns
    # its data) stops at ``flat``: everything made from the result keeps it alive.
    flat = np.frombuffer(memoryview(raw), dtype=dtype)
    if isinstance(flat.base, np.ndarray):  # a numpy that unwraps the memoryview: don't recycle
        return np.empty(shape, dtype=dtype)
    weakref.finalize(flat, _give_back, raw).atexit = False
    return flat.reshape(shape)


def release() -> None:
    """Free every kept buffer now (they are kept only between results)."""
    _free.clear()


def kept_bytes() -> int:
    """Bytes held in free buffers, waiting to be reused."""
    return sum(raw.nbytes for raw in list(_free.values()))


def _take(nbytes: int) -> np.ndarray | None:
    """A free buffer of exactly ``nbytes``, removed from the free list, or None."""
    for key, raw in list(_free.items()):
        if raw.nbytes == nbytes and _free.pop(key, None) is not None:  # else taken meanwhile
            return raw
    return None


def _give_back(raw: np.ndarray) -> None:
    """Keep ``raw`` for reuse, dropping the oldest buffers beyond RECYCLE_KEEP_BYTES."""
    if raw.nbytes > RECYCLE_KEEP_BYTES:
        return
    _free[id(raw)] = raw
    while kept_bytes() > RECYCLE_KEEP_BYTES:
        oldest = next(iter(list(_free)), None)
        if oldest is None:
            return
        _free.pop(oldest, None)
