"""ONNX Pad and Conv on dask arrays, block by block with padconv's own kernels.

The output is cut into blocks by the same tiling as the out-of-core engine
(:mod:`padconv_cli.outofcore`), with a per-block memory budget.  Each output block depends on
the part of the input it reads — for Pad the windows of the block's pieces, for Conv the
block's stretch plus the halo ``(k - 1) * dilation``: its task receives every input chunk that
box touches (the halo comes from the neighbouring chunks), assembles the box, and runs
padconv's kernel with the block's explicit pads and crops.  All of ONNX's semantics
(negative pads, reflect/wrap longer than the axis, every auto_pad, strides, dilations,
groups) are therefore the kernels' own, and results match the in-memory path bit for bit
whenever the Conv tiling is exact (see :func:`padconv_cli.outofcore.tiled_conv.plan_conv_tiles`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from padconv_cli.kernels.conv import ConvPlan, plan_conv
from padconv_cli.kernels.pad import PadPlan, coerce_constant_value, pad_element_kind, plan_pad
from padconv_cli.outofcore.conv_geometry import ChannelTile
from padconv_cli.outofcore.conv_tiles import (
    TileInput,
    conv_on_tile,
    conv_tile_cost,
    fixed_bytes,
    plan_conv_tiles,
    tile_budget,
    tile_input,
)
from padconv_cli.outofcore.pad_geometry import TilePiece, crop_begins, tile_pieces
from padconv_cli.outofcore.pad_tiles import pad_output_dtype, plan_pad_tiles, run_pieces
from padconv_cli.outofcore.tiling import split_range


class ChunkGrid:
    """The chunk keys of a dask array, and where each chunk starts.

    A block reads the chunks its box touches; from a chunk it needs only part of (the halo
    from a neighbour) it gets a crop computed by a task of its own, next to the chunk, so
    that only the crop travels between workers (:attr:`crops` holds those tasks).
    """

    def __init__(self, x: Any) -> None:
        from dask.base import tokenize

        self.name = x.name
        self.bounds = [np.cumsum((0, *sizes)) for sizes in x.chunks]
        self.dtype = np.dtype(x.dtype)
        self.chunk_lengths = tuple(sizes[0] if sizes else 0 for sizes in x.chunks)
        self.crops: dict[Any, tuple] = {}
        self._crop_keys: dict[Any, Any] = {}
        self._crop_name = f"padconv-crop-{tokenize(x.name)}"

    def touching(self, box: tuple[slice, ...]) -> tuple[list[Any], list[tuple[int, ...]]]:
        """The keys of the chunks that overlap ``box``, and their start offsets."""
        per_axis = []
        for s, bounds in zip(box, self.bounds, strict=True):
            if s.start >= s.stop:
                return [], []
            first = int(np.searchsorted(bounds, s.start, side="right")) - 1
            last = int(np.searchsorted(bounds, s.stop, side="left"))
            per_axis.append(range(first, last))
        indices = list(itertools.product(*per_axis))
        starts = [tuple(int(self.bounds[a][i]) for a, i in enumerate(index)) for index in indices]
        return [(self.name, *index) for index in indices], starts

    def fetch_task(self, box: tuple[slice, ...]) -> tuple:
        """A task giving the values in ``box`` from the chunks (or crops) it overlaps."""
        keys, starts = self.touching(box)
        parts, origins = [], []
        for key, start in zip(keys, starts, strict=True):
            index = key[1:]
            stops = [int(self.bounds[a][i + 1]) for a, i in enumerate(index)]
            low = tuple(max(s.start, a) for s, a in zip(box, start, strict=True))
            high = tuple(min(s.stop, b) for s, b in zip(box, stops, strict=True))
            if low == tuple(start) and list(high) == stops:
                parts.append(key)
                origins.append(start)
                continue
            parts.append(self._crop(key, start, low, high))
            origins.append(low)
        return (gather, parts, origins, box, self.dtype)

    def _crop(self, key: Any, start: tuple, low: tuple, high: tuple) -> Any:
        local = tuple((lo - st, hi - st) for lo, hi, st in zip(low, high, start, strict=True))
        crop_key = self._crop_keys.get((key, local))
        if crop_key is None:
            crop_key = (self._crop_name, len(self._crop_keys))
            self._crop_keys[(key, local)] = crop_key
            self.crops[crop_key] = (crop_chunk, key, local)
        return crop_key


def crop_chunk(chunk: np.ndarray, local: tuple[tuple[int, int], ...]) -> np.ndarray:
    """A copy of ``chunk[local]`` (so the chunk itself can be released)."""
    return np.array(chunk[tuple(slice(lo, hi) for lo, hi in local)])


def aligned_split(ranges: list[tuple[int, int]], chunk: int) -> list[tuple[int, int]]:
    """An axis already cut into ranges of length ``L`` re-cut along a chunk grid of
    ``chunk``: ranges of ``chunk * floor(L / chunk)`` when ``L >= chunk``, else of
    ``ceil(chunk / ceil(chunk / L))`` (each chunk split evenly).  Never longer than ``L``, so
    the tile budget still holds; an axis in one range is kept whole."""
    if len(ranges) <= 1 or chunk <= 0:
        return ranges
    length = ranges[0][1] - ranges[0][0]
    total = ranges[-1][1]
    if length >= chunk:
        step = chunk * (length // chunk)
    else:
        step = -(-chunk // -(-chunk // length))
    return split_range(total, step)


class StorageSource:
    """An array in storage (a ``.npy`` memory map reader, a Zarr array) that each block task
    reads its own box from: no input chunk is held in memory between tasks."""

    def __init__(self, array: Any) -> None:
        self.array = array
        self.dtype = np.dtype(array.dtype)

    def fetch_task(self, box: tuple[slice, ...]) -> tuple:
        """A task giving the values in ``box``."""
        return (read_box, self.array, box)


def read_box(array: Any, box: tuple[slice, ...]) -> np.ndarray:
    """``array[box]`` as a C-contiguous numpy array."""
    return np.ascontiguousarray(array[box])


def block_source(x: Any) -> Any:
    """How block tasks get their input: chunks of a dask array, reads from a file or store
    opened by :func:`padconv_cli.engines.dask_io.open_block_input` (which check that the
    worker reads the client's data), or reads from any other array in storage."""
    if hasattr(x, "__dask_graph__"):
        return ChunkGrid(x)
    return x if hasattr(x, "fetch_task") else StorageSource(x)


def gather(
    chunks: list[np.ndarray], starts: list[tuple[int, ...]], box: tuple[slice, ...], dtype: Any
) -> np.ndarray:
    """The input values in ``box``, copied from the chunks that overlap it."""
    out = np.empty(tuple(s.stop - s.start for s in box), dtype=dtype)
    for chunk, origin in zip(chunks, starts, strict=True):
        source, target = [], []
        for s, o, n in zip(box, origin, chunk.shape, strict=True):
            low, high = max(s.start, o), min(s.stop, o + n)
            source.append(slice(low - o, high - o))
            target.append(slice(low - s.start, high - s.start))
        out[tuple(target)] = chunk[tuple(source)]
    return out


def blocks_array(
    label: str,
    tasks: dict[tuple[int, ...], tuple],
    chunks: tuple,
    dtype: Any,
    inputs: list[Any],
    extra: dict[str, Any] | None = None,
) -> Any:
    """A dask array whose block ``index`` is computed by ``tasks[index]``.

    A task is a tuple ``(function, arguments...)``; dask replaces the chunk keys in its list
    arguments by the chunks.  ``inputs`` (dask arrays and the operator's parameters) name the
    result; ``extra`` holds shared values (W, B) the tasks refer to by key.
    """
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    name = f"padconv-{label}-{tokenize(*inputs, chunks)}"
    graph = {(name, *index): task for index, task in tasks.items()}
    graph.update(extra or {})
    collections = [x for x in inputs if hasattr(x, "__dask_graph__")]
    layers = HighLevelGraph.from_collections(name, graph, dependencies=collections)
    return da.Array(layers, name, chunks=chunks, dtype=dtype)


def _indexed_tiles(axis_ranges: list[list[Any]]) -> Any:
    """``(grid index, tile)`` for every tile of the grid, in C order."""
    for index in np.ndindex(*(len(ranges) for ranges in axis_ranges)):
        yield index, tuple(ranges[i] for ranges, i in zip(axis_ranges, index, strict=True))


# --- Pad ---------------------------------------------------------------------------------


def pad_block(
    windows: list[np.ndarray],
    pieces: list[TilePiece],
    begins: tuple[int, ...],
    shape: tuple[int, ...],
    value: Any,
    mode: str,
    dtype: np.dtype,
) -> np.ndarray:
    """One output block of Pad from the input values of its pieces' windows (in order)."""
    out = np.empty(shape, dtype=dtype)
    def key(box: tuple[slice, ...]) -> tuple[tuple[int, int], ...]:
        return tuple((s.start, s.stop) for s in box)

    by_box = {
        key(piece.window_box(begins)): window
        for piece, window in zip(pieces, windows, strict=True)
    }

    def read(box: tuple[slice, ...]) -> np.ndarray:
        return by_box[key(box)]

    def write(box: tuple[slice, ...], values: np.ndarray) -> None:
        out[box] = values

    run_pieces(pieces, begins, read, write, value, mode)
    return out


def pad_aligned_ranges(
    plan: PadPlan, itemsize: int, axis_ranges: list, source: ChunkGrid, budget: int
) -> list:
    """Pad blocks along the input's chunk grid: exactly the chunks (in output coordinates)
    when a chunk-sized block fits the budget, else each axis re-cut by :func:`aligned_split`."""
    from padconv_cli.outofcore.pad_tiles import pad_tile_cost

    shape = tuple(
        min(max(1, c), n) for c, n in zip(source.chunk_lengths, plan.output_shape, strict=True)
    )
    if pad_tile_cost(shape, plan, itemsize) <= budget:
        return [split_range(n, c) for n, c in zip(plan.output_shape, shape, strict=True)]
    return [
        aligned_split(ranges, chunk)
        for ranges, chunk in zip(axis_ranges, source.chunk_lengths, strict=True)
    ]


def pad_dask(
    x: Any,
    pads: Any,
    constant_value: Any = None,
    axes: Any = None,
    mode: str = "constant",
    *,
    block_bytes: int,
    plan: PadPlan | None = None,
) -> Any:
    """ONNX Pad of ``x``: a dask array of blocks of about ``block_bytes``.

    ``x`` is a dask array, or an array in storage read block by block (see
    :func:`block_source`); ``plan``: the call's plan when the caller made it already.
    """
    pad_element_kind(x.dtype)
    if plan is None:
        plan = plan_pad(x.shape, pads, axes, mode)
    value = None if constant_value is None else coerce_constant_value(constant_value, x.dtype)
    out_dtype = pad_output_dtype(np.dtype(x.dtype), value, plan)
    itemsize = max(x.dtype.itemsize, out_dtype.itemsize)
    axis_ranges = plan_pad_tiles(plan, itemsize, block_bytes)
    begins = crop_begins(plan)
    source = block_source(x)
    if isinstance(source, ChunkGrid):
        axis_ranges = pad_aligned_ranges(plan, itemsize, axis_ranges, source, block_bytes)
    tasks = {}
    for index, tile in _indexed_tiles(axis_ranges):
        shape = tuple(stop - start for start, stop in tile)
        pieces = tile_pieces(tile, plan)
        fetches = [source.fetch_task(piece.window_box(begins)) for piece in pieces]
        tasks[index] = (pad_block, fetches, pieces, begins, shape, value, plan.mode, out_dtype)
    chunks = tuple(tuple(stop - start for start, stop in ranges) for ranges in axis_ranges)
    extra = source.crops if isinstance(source, ChunkGrid) else None
    inputs = [x, pads, constant_value, axes, mode]
    return blocks_array("pad", tasks, chunks, out_dtype, inputs, extra)


# --- Conv --------------------------------------------------------------------------------


def conv_block(
    block: np.ndarray | None,
    w: np.ndarray,
    b: np.ndarray | None,
    plan: ConvPlan,
    tile: TileInput,
    dtype: np.dtype,
) -> np.ndarray:
    """One output block of Conv from its input block (halo included); a tile that reads only
    padding (``block`` None) gets zeros."""
    if block is None:
        block = np.zeros(tile.zero_shape, dtype=dtype)
    return conv_on_tile(block, w, b, plan, tile)


def conv_dask(
    x: Any,
    w: np.ndarray,
    b: np.ndarray | None,
    *,
    block_bytes: int,
    plan: ConvPlan | None = None,
    **attributes: Any,
) -> tuple[Any, bool]:
    """ONNX Conv of ``x`` (a dask array or an array in storage, see :func:`block_source`) with
    ``w`` (and ``b``): a dask array of blocks.

    Returns the array and whether its tiling is exact (bit-identical to the in-memory kernel).
    ``plan``: the call's plan when the caller made it already.
    """
    if plan is None:
        plan = plan_conv(x.shape, w.shape, None if b is None else b.shape, **attributes)
    if 0 in plan.output_shape:  # an empty result (M = 0, N = 0): no block to compute
        import dask.array as da

        return da.zeros(plan.output_shape, dtype=x.dtype), True
    budget = tile_budget(block_bytes, w, b, "memory_limit: a block budget")
    tiling = plan_conv_tiles(plan, x.dtype.itemsize, budget, fixed_bytes(w, b))
    source = block_source(x)
    axis_ranges = tiling.axis_ranges
    if isinstance(source, ChunkGrid):
        axis_ranges = conv_aligned_ranges(
            plan, x.dtype.itemsize, tiling, source.chunk_lengths, budget
        )
    from dask.base import tokenize

    w_key, b_key = f"padconv-w-{tokenize(w)}", f"padconv-b-{tokenize(b)}"
    tasks = {}
    for index, (images, channels, *spatial) in _indexed_tiles(axis_ranges):
        tile = tile_input(plan, images, channels, tuple(spatial))
        fetch = None if tile.box is None else source.fetch_task(tile.box)
        tasks[index] = (conv_block, fetch, w_key, b_key, plan, tile, source.dtype)
    chunks = tuple(tuple(_range_length(r) for r in ranges) for ranges in axis_ranges)
    extra = {w_key: w, b_key: b, **(source.crops if isinstance(source, ChunkGrid) else {})}
    y = blocks_array("conv", tasks, chunks, x.dtype, [x, w, b, plan], extra)
    return y, tiling.exact


def conv_aligned_ranges(
    plan: ConvPlan, itemsize: int, tiling: Any, chunk_lengths: tuple[int, ...], budget: int
) -> list[Any]:
    """The tiling's spatial ranges re-cut along the input's chunk grid, on every spatial axis
    (no cut changes the kernel's sums: the native core sums each element in one order).

    Rule: the output chunk along an axis is ``ceil(chunk / stride)``; when a block of one
    output chunk on every such axis fits the budget, blocks are exactly those chunks; else each
    axis is re-cut by :func:`aligned_split`.
    """
    ranges = list(tiling.axis_ranges)
    free = list(range(2, len(ranges)))
    wanted = {axis: -(-chunk_lengths[axis] // plan.strides[axis - 2]) for axis in free}
    shape = [_range_length(r[0]) for r in ranges]
    for axis in free:
        shape[axis] = min(wanted[axis], plan.output_shape[axis])
    fits = conv_tile_cost(tuple(shape), plan=plan, itemsize=itemsize) <= budget
    for axis in free:
        if fits:
            ranges[axis] = split_range(plan.output_shape[axis], shape[axis])
        else:
            ranges[axis] = aligned_split(ranges[axis], wanted[axis])
    return ranges


def _range_length(item: Any) -> int:
    """Length of an axis range ``(start, stop)`` or a channel tile."""
    if isinstance(item, ChannelTile):
        return item.m1 - item.m0
    return item[1] - item[0]


def output_nbytes(array: Any) -> int:
    """Bytes of a dask array's result."""
    return math.prod(array.shape) * array.dtype.itemsize
