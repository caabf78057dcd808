"""ONNX Pad and Conv on dask arrays, block by block with padconv's own kernels.

The blocks are the tiled engine's tiles (:mod:`padconv_cli.outofcore`) within a per-block
budget.  Each block task receives the input chunks its box touches (the halo comes from the
neighbouring chunks), assembles the box and runs the tile's computation, so every ONNX rule is
the kernels' own and the result is bit-identical to the in-memory one.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from padconv_cli.kernels.conv import ConvPlan, plan_conv
from padconv_cli.kernels.pad import PadPlan
from padconv_cli.outofcore import conv_tiles, pad_tiles
from padconv_cli.outofcore.tiling import split_range


class ChunkGrid:
    """The chunk keys of a dask array and where each chunk starts.  From a chunk a block needs
    only part of (the halo of a neighbour) it gets a crop made by a task next to the chunk, so
    only the crop travels between workers (:attr:`crops` holds those tasks)."""

    def __init__(self, x: Any) -> None:
        from dask.base import tokenize

        self.name = x.name
        self.bounds = [np.cumsum((0, *sizes)) for sizes in x.chunks]
        self.dtype = np.dtype(x.dtype)
        self.chunk_lengths = tuple(sizes[0] if sizes else 0 for sizes in x.chunks)
        self.crops: dict[Any, tuple] = {}
        self._crop_keys: dict[Any, Any] = {}
        self._crop_name = f"padconv-crop-{tokenize(x.name)}"

    def fetch_task(self, box: tuple[slice, ...]) -> tuple:
        """A task giving the values in ``box`` from the chunks (or crops) it overlaps."""
        if any(s.start >= s.stop for s in box):
            return (gather, [], [], box, self.dtype)
        per_axis = [range(int(np.searchsorted(bounds, s.start, side="right")) - 1,
                          int(np.searchsorted(bounds, s.stop, side="left")))
                    for s, bounds in zip(box, self.bounds, strict=True)]
        parts, origins = [], []
        for index in itertools.product(*per_axis):
            key = (self.name, *index)
            start = tuple(int(self.bounds[a][i]) for a, i in enumerate(index))
            stop = tuple(int(self.bounds[a][i + 1]) for a, i in enumerate(index))
            low = tuple(max(s.start, a) for s, a in zip(box, start, strict=True))
            high = tuple(min(s.stop, b) for s, b in zip(box, stop, strict=True))
            origins.append(low)
            if low == start and high == stop:  # the whole chunk
                parts.append(key)
                continue
            local = tuple((lo - st, hi - st) for lo, hi, st in zip(low, high, start, strict=True))
            crop = self._crop_keys.setdefault((key, local), (self._crop_name, len(self._crop_keys)))
            self.crops[crop] = (crop_chunk, key, local)
            parts.append(crop)
        return (gather, parts, origins, box, self.dtype)


def crop_chunk(chunk: np.ndarray, local: tuple[tuple[int, int], ...]) -> np.ndarray:
    """A copy of ``chunk[local]`` (so the chunk itself can be released)."""
    return np.array(chunk[tuple(slice(lo, hi) for lo, hi in local)])


def gather(chunks: list[np.ndarray], starts: list[tuple[int, ...]], box: tuple[slice, ...],
           dtype: Any) -> np.ndarray:
    """The input values in ``box``, copied from its parts (chunks or crops inside it) starting
    at ``starts``."""
    out = np.empty(tuple(s.stop - s.start for s in box), dtype=dtype)
    for chunk, origin in zip(chunks, starts, strict=True):
        out[tuple(slice(o - s.start, o - s.start + n)
                  for s, o, n in zip(box, origin, chunk.shape, strict=True))] = chunk
    return out


def block_source(x: Any) -> Any:
    """How block tasks get their input: the chunks of a dask array (:class:`ChunkGrid`), or the
    ``fetch_task`` of a file or store (:func:`.dask_io.open_block_input`)."""
    return ChunkGrid(x) if hasattr(x, "__dask_graph__") else x


def aligned_split(ranges: list[tuple[int, int]], chunk: int) -> list[tuple[int, int]]:
    """An axis cut into ranges of length ``L`` re-cut along a chunk grid of ``chunk``: ranges
    of ``chunk * floor(L / chunk)`` when ``L >= chunk``, else of ``ceil(chunk / ceil(chunk /
    L))`` (each chunk split evenly); never longer than ``L``, so the budget still holds."""
    if len(ranges) <= 1 or chunk <= 0:
        return ranges
    length = ranges[0][1] - ranges[0][0]
    step = chunk * (length // chunk) if length >= chunk else -(-chunk // -(-chunk // length))
    return split_range(ranges[-1][1], step)


def aligned_ranges(axis_ranges: list, wanted: dict[int, int], output_shape: tuple[int, ...],
                   cost: Any, budget: int) -> list:
    """The tile grid re-cut along the input's chunk grid (``wanted``: the output chunk length
    per axis): blocks of exactly one chunk when such a block fits ``budget`` by ``cost``, else
    each axis re-cut by :func:`aligned_split` (no cut changes a result: module docstring)."""
    shape = [_range_length(ranges[0]) for ranges in axis_ranges]
    for axis, length in wanted.items():
        shape[axis] = min(length, output_shape[axis])
    fits = cost(tuple(shape)) <= budget
    ranges = list(axis_ranges)
    for axis, length in wanted.items():
        ranges[axis] = (split_range(output_shape[axis], shape[axis]) if fits
                        else aligned_split(ranges[axis], length))
    return ranges


def blocks_array(label: str, tasks: dict[tuple[int, ...], tuple], ranges: list, dtype: Any,
                 inputs: list[Any], source: Any, shared: dict[str, Any] | None = None) -> Any:
    """A dask array of the tile grid ``ranges``, block ``index`` computed by ``tasks[index]``
    (``(function, arguments...)``, keys in them replaced by their values: ``shared`` W or B, the
    crops of ``source``, a :class:`ChunkGrid`).  ``inputs`` name the result."""
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    chunks = tuple(tuple(_range_length(r) for r in axis) for axis in ranges)
    name = f"padconv-{label}-{tokenize(*inputs, chunks)}"
    graph = {(name, *index): task for index, task in tasks.items()}
    graph.update({**(shared or {}), **getattr(source, "crops", {})})
    collections = [x for x in inputs if hasattr(x, "__dask_graph__")]
    layers = HighLevelGraph.from_collections(name, graph, dependencies=collections)
    return da.Array(layers, name, chunks=chunks, dtype=dtype)


def _indexed_tiles(axis_ranges: list[list[Any]]) -> Any:
    """``(grid index, tile)`` for every tile of the grid, in C order."""
    counts = [len(ranges) for ranges in axis_ranges]
    return zip(np.ndindex(*counts), itertools.product(*axis_ranges), strict=True)


def _range_length(item: Any) -> int:
    """Length of an axis range ``(start, stop)`` or a channel tile."""
    return item.m1 - item.m0 if isinstance(item, conv_tiles.ChannelTile) else item[1] - item[0]


def pad_dask(x: Any, pads: Any, constant_value: Any = None, axes: Any = None,
             mode: str = "constant", *, block_bytes: int, plan: PadPlan | None = None) -> Any:
    """ONNX Pad of ``x`` (:func:`block_source`) as dask blocks of about ``block_bytes`` at most."""
    plan, fill, out_dtype, itemsize, axis_ranges = pad_tiles.pad_tiling(
        x.shape, np.dtype(x.dtype), pads, constant_value, axes, mode, plan, block_bytes)
    source = block_source(x)
    if isinstance(source, ChunkGrid):
        wanted = {axis: max(1, c) for axis, c in enumerate(source.chunk_lengths)}
        cost = functools.partial(pad_tiles.pad_tile_cost, plan=plan, itemsize=itemsize)
        axis_ranges = aligned_ranges(axis_ranges, wanted, plan.output_shape, cost, block_bytes)
    tasks = {}
    for index, tile in _indexed_tiles(axis_ranges):
        fetches = [source.fetch_task(box) for box in pad_tiles.read_boxes(tile, plan)]
        tasks[index] = (pad_tiles.pad_tile, fetches, tile, plan, fill, out_dtype)
    return blocks_array("pad", tasks, axis_ranges, out_dtype,
                        [x, pads, constant_value, axes, mode], source)


def conv_dask(x: Any, w: np.ndarray, b: np.ndarray | None, *, block_bytes: int,
              plan: ConvPlan | None = None, **attributes: Any) -> Any:
    """ONNX Conv of ``x`` (:func:`block_source`) with ``w`` and ``b`` as dask blocks."""
    if plan is None:
        plan = plan_conv(x.shape, w.shape, None if b is None else b.shape, **attributes)
    if 0 in plan.output_shape:  # an empty result (M = 0, N = 0): no block to compute
        import dask.array as da

        return da.zeros(plan.output_shape, dtype=x.dtype)
    budget = conv_tiles.tile_budget(block_bytes, w, b, "memory_limit: a block budget")
    itemsize = np.dtype(x.dtype).itemsize
    axis_ranges = conv_tiles.plan_conv_tiles(plan, itemsize, budget, conv_tiles.fixed_bytes(w, b))
    source = block_source(x)
    if isinstance(source, ChunkGrid):  # output chunk: ceil(input chunk / stride)
        wanted = {axis: -(-source.chunk_lengths[axis] // plan.strides[axis - 2])
                  for axis in range(2, len(axis_ranges))}
        cost = functools.partial(conv_tiles.conv_tile_cost, plan=plan, itemsize=itemsize)
        axis_ranges = aligned_ranges(axis_ranges, wanted, plan.output_shape, cost, budget)
    from dask.base import tokenize

    w_key, b_key = f"padconv-w-{tokenize(w)}", f"padconv-b-{tokenize(b)}"
    tasks = {}
    for index, (images, channels, *spatial) in _indexed_tiles(axis_ranges):
        tile = conv_tiles.tile_input(plan, images, channels, tuple(spatial))
        fetch = [] if tile.box is None else [source.fetch_task(tile.box)]
        tasks[index] = (conv_tiles.conv_on_tile, fetch, w_key, b_key, plan, tile, source.dtype)
    return blocks_array("conv", tasks, axis_ranges, x.dtype, [x, w, b, plan], source,
                        {w_key: w, b_key: b})
