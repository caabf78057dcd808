"""ONNX Pad from a ``.npy`` file to a ``.npy`` file, one tile at a time, bit-identical to the
in-memory kernel, within a memory budget (:func:`pad_tile_cost`).

An output tile takes the range ``[t0, t1)`` of each axis.  The kernel's index table of that
range (:func:`.kernels.pad.source_indices`: the cropped input index each output position
reads, -1 for the constant) says which input indices the tile needs: they are read as the
runs of consecutive indices (:func:`axis_reads`; a wrap tile reads both ends of the axis, not
what lies between), packed side by side, and the kernel fills the tile from the packed input
through the tables renumbered into it.  Pad is separable: the boxes of a tile are the
Cartesian product of the runs of its axes.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from padconv_cli.kernels import pad as kernel
from padconv_cli.outofcore.npy_blocks import NpyInput, open_npy_input
from padconv_cli.outofcore.progress import TiledResult
from padconv_cli.outofcore.tiling import choose_tile_shape, split_range, write_tiles

# What one axis of a tile reads: the runs ``(start, stop)`` of cropped input indices, in
# order, and each output position's index into their concatenation (-1: the constant).
AxisReads = tuple[list[tuple[int, int]], np.ndarray]
TABLE_BYTES = 48  # per position of a tile's axis: its tables and their temporaries (int64)


def axis_reads(t0: int, t1: int, axis: kernel.AxisPad, mode: str) -> AxisReads:
    """The input runs output range ``[t0, t1)`` of an axis reads, and its packed table."""
    table = kernel.source_indices(axis, mode, t0, t1)
    needed = np.unique(table[table >= 0])
    breaks = np.flatnonzero(np.diff(needed) != 1) + 1
    runs = [(int(part[0]), int(part[-1]) + 1) for part in np.split(needed, breaks) if part.size]
    return runs, np.where(table >= 0, np.searchsorted(needed, table), -1)


def read_boxes(tile: tuple[tuple[int, int], ...], plan: kernel.PadPlan) -> list[tuple[slice, ...]]:
    """The boxes of the original input (before cropping) a tile reads, in C order."""
    per_axis = [[slice(a + axis.crop_begin, b + axis.crop_begin)
                 for a, b in axis_reads(t0, t1, axis, plan.mode)[0]]
                for (t0, t1), axis in zip(tile, plan.per_axis, strict=True)]
    return list(itertools.product(*per_axis))


def pad_tile(windows: Iterable[np.ndarray], tile: tuple[tuple[int, int], ...],
             plan: kernel.PadPlan, fill: Any, dtype: np.dtype) -> np.ndarray:
    """One output tile from the windows of its :func:`read_boxes` (read one at a time when
    ``windows`` is lazy): packed side by side, then ``tile[i...] = packed[table_a[i_a]...]``
    (``fill`` where a table holds -1); the tables are made here, not held for every tile."""
    reads = [axis_reads(t0, t1, axis, plan.mode)
             for (t0, t1), axis in zip(tile, plan.per_axis, strict=True)]
    offsets = [list(itertools.accumulate((b - a for a, b in runs), initial=0))
               for runs, _ in reads]
    packed = np.empty(tuple(o[-1] for o in offsets), dtype=dtype)
    corners = itertools.product(*(o[:-1] for o in offsets))
    for corner, window in zip(corners, windows, strict=True):
        packed[tuple(slice(c, c + n) for c, n in zip(corner, window.shape, strict=True))] = window
        del window
    out = np.empty(tuple(b - a for a, b in tile), dtype=dtype)
    kernel.fill_from_tables(packed, out, [table for _, table in reads], fill)
    return out


def pad_tile_cost(tile_shape: tuple[int, ...], plan: kernel.PadPlan, itemsize: int) -> int:
    """Upper bound of the bytes a tile of ``tile_shape`` needs: ``itemsize * (2 * prod(min(tile,
    n)) + 2 * prod(tile)) + TABLE_BYTES * sum(tile)`` (the packed input and a window of it, the
    tile and its copy, the index tables; an axis reads at most one index per position and each
    of its ``n`` cropped indices once)."""
    packed = math.prod(min(tile, axis.cropped_dim)
                       for tile, axis in zip(tile_shape, plan.per_axis, strict=True))
    return itemsize * (2 * packed + 2 * math.prod(tile_shape)) + TABLE_BYTES * sum(tile_shape)


def plan_pad_tiles(plan: kernel.PadPlan, itemsize: int, budget: int) -> list[list[tuple[int, int]]]:
    """Per-axis output ranges of a tile grid whose tiles each fit ``budget`` bytes."""
    shape = choose_tile_shape(plan.output_shape, lambda tile: pad_tile_cost(tile, plan, itemsize),
                              budget, what="Pad tile")
    return [split_range(n, step) for n, step in zip(plan.output_shape, shape, strict=True)]


def pad_tiling(shape: tuple[int, ...], dtype: np.dtype, pads: Any, constant_value: Any,
               axes: Any, mode: str, plan: kernel.PadPlan | None, budget: int) -> tuple:
    """``(plan, fill element, result type, itemsize, tile ranges)`` of a call, the tiles
    within ``budget`` bytes (``plan``: the call's, when the caller made it already); the
    result's type is the kernel's for the fill value (a ``<U`` type may widen)."""
    kernel.pad_element_kind(dtype)
    plan = plan if plan is not None else kernel.plan_pad(shape, pads, axes, mode)
    fill = kernel.fill_value(constant_value, dtype, plan)
    out_dtype = kernel.output_dtype(np.dtype(dtype), fill)
    itemsize = max(dtype.itemsize, out_dtype.itemsize)
    return plan, fill, out_dtype, itemsize, plan_pad_tiles(plan, itemsize, budget)


def tiled_pad(source: str | NpyInput, target: str, pads: Any, constant_value: Any = None,
              axes: Any = None, mode: str = "constant", *, memory_limit: int,
              show_progress: bool | str = False, plan: kernel.PadPlan | None = None) -> TiledResult:
    """The kernel's ``pad`` of the ``.npy`` ``source`` into ``target``, within ``memory_limit``."""
    data = open_npy_input(source) if isinstance(source, str) else source
    plan, fill, out_dtype, _, axis_ranges = pad_tiling(
        data.shape, data.dtype, pads, constant_value, axes, mode, plan, memory_limit)
    tiles = []
    for tile in itertools.product(*axis_ranges):
        compute = functools.partial(pad_tile, tile=tile, plan=plan, fill=fill, dtype=out_dtype)
        tiles.append((tuple(slice(*r) for r in tile), read_boxes(tile, plan), compute))
    return write_tiles(data, target, plan.output_shape, out_dtype, "pad", show_progress, tiles)
