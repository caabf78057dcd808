"""Splitting an output into tiles whose working memory stays under a budget.

A tile is one ``(start, stop)`` range per output axis.  Its shape is chosen greedily along the
axes given (C order: a tile is a few whole rows, slabs or volumes, long runs of the file): the
first axis is shortened until the tile fits; if one index of it does not fit, it is set to one
and the next axis is shortened, and so on.  Every tile has a fixed cost (reading, calling the
kernel, scheduling a task), so a tile holds at least ``min(16384, ceil(outputs / 1024))``
output elements; a budget that cannot hold that tile is refused up front.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

from padconv_cli.errors import OutputTooLargeError
from padconv_cli.outofcore.npy_blocks import NpyInput, NpyOutput, check_disk_space
from padconv_cli.outofcore.progress import TiledResult, TileProgress
from padconv_cli.units import human_bytes

MIN_TILE_ELEMENTS = 16384
MAX_SMALL_TILES = 1024


def split_range(length: int, step: int) -> list[tuple[int, int]]:
    """``[0, length)`` cut into consecutive ranges of ``step`` (the last may be shorter)."""
    if length == 0:
        return [(0, 0)]
    return [(start, min(start + step, length)) for start in range(0, length, step)]


def choose_tile_shape(shape: Sequence[int], cost: Callable[[tuple[int, ...]], int], budget: int,
                      order: Sequence[int] | None = None, what: str = "tile",
                      overhead: int = 0) -> tuple[int, ...]:
    """The tile shape of the greedy rule (module docstring) on the axes in ``order`` (default:
    all, in order), grown back, last shortened axis first, to the least tile; ``cost(shape)``
    bounds the bytes of any tile of that shape and grows with each length.  A least tile over
    ``budget`` is an :class:`OutputTooLargeError` giving the limit needed, ``overhead`` (bytes
    held besides the tiles, e.g. W) included."""
    dims = [max(1, int(d)) for d in shape]
    order = list(range(len(dims))) if order is None else list(order)
    tile = list(dims)
    for axis in order:
        if cost(tuple(tile)) <= budget:
            break
        tile[axis] = _longest_fitting(tile, axis, cost, budget)
    least = max(1, min(MIN_TILE_ELEMENTS, -(-math.prod(dims) // MAX_SMALL_TILES)))
    for axis in reversed(order):
        if math.prod(tile) >= least:
            break
        tile[axis] = min(dims[axis], -(-least // (math.prod(tile) // tile[axis])))
    needed = cost(tuple(tile))
    if needed <= budget:
        return tuple(tile)
    raise OutputTooLargeError(
        f"memory_limit {human_bytes(budget + overhead)} is too small: the smallest {what} "
        f"({math.prod(tile)} output elements) needs at least {human_bytes(needed + overhead)}; "
        f"give memory_limit {human_bytes(needed + overhead)} or more", param="memory_limit")


def _longest_fitting(tile: list[int], axis: int, cost: Callable, budget: int) -> int:
    """The longest length of ``axis`` (at least 1) with which ``tile`` fits ``budget``."""
    def too_big(length: int) -> bool:
        return cost((*tile[:axis], length, *tile[axis + 1:])) > budget

    return max(1, bisect.bisect_left(range(1, tile[axis] + 1), True, key=too_big))


def write_tiles(source: NpyInput, target: str, shape: tuple[int, ...], dtype: Any, label: str,
                show_progress: bool | str, tiles: list[tuple]) -> TiledResult:
    """Write the ``.npy`` result ``target`` tile by tile: each tile ``(output box, input
    boxes, compute)`` is ``compute(its input boxes, read one at a time)``.  Before anything
    is read every box is checked against the input limit and the result against the free
    disk; after the last read, before the result is published, the input must be unchanged."""
    source.check_reads(box for _, boxes, _ in tiles for box in boxes)
    check_disk_space(target, shape, dtype)
    total = math.prod(shape) * dtype.itemsize
    with (NpyOutput(target, shape, dtype) as out,
          TileProgress(len(tiles), total, show_progress, label) as progress):
        for box, boxes, compute in tiles:
            y = compute(source.read(input_box) for input_box in boxes)
            out.write(box, y)
            progress.advance(y.nbytes)
            del y  # not held while the next tile is computed
        source.check_unchanged()
    return TiledResult(shape, len(tiles))
