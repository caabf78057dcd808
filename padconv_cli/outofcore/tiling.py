"""Splitting an output into tiles whose working memory stays under a budget.

A tile is one ``(start, stop)`` range per output axis.  The shape is chosen greedily in the
order of the axes given (C order for Pad, so that a tile is a few whole rows, slabs or
volumes and reads long contiguous runs of the file): the first axis is shortened until the
tile fits; if even one index of it does not fit, it is set to one and the next axis is
shortened, and so on.  ``cost(tile_shape)`` must be an upper bound of the bytes any tile of
that shape needs, and grow with each length.

Minimum tile: every tile costs a fixed overhead (mapping the files, calling the kernel,
scheduling a task), so a tile holds at least ``min(16384, ceil(outputs / 1024))`` output
elements (:func:`minimum_tile_elements`): a big tensor is never cut into millions of slivers,
and a small one may still be cut into up to about a thousand tiles.  When the budget cannot
hold that minimum tile, the limit is refused up front, saying how much it needs at least.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence

from padconv_cli.errors import OutputTooLargeError
from padconv_cli.units import human_bytes

Ranges = tuple[tuple[int, int], ...]

MIN_TILE_ELEMENTS = 16384
MAX_SMALL_TILES = 1024


def minimum_tile_elements(total: int) -> int:
    """Fewest output elements of a tile: ``min(MIN_TILE_ELEMENTS, ceil(total /
    MAX_SMALL_TILES))``, at least 1 (module docstring)."""
    return max(1, min(MIN_TILE_ELEMENTS, -(-total // MAX_SMALL_TILES)))


def split_range(length: int, step: int) -> list[tuple[int, int]]:
    """``[0, length)`` cut into consecutive ranges of ``step`` (the last may be shorter)."""
    if length == 0:
        return [(0, 0)]
    return [(start, min(start + step, length)) for start in range(0, length, step)]


def grid(axis_ranges: Sequence[Sequence[tuple[int, int]]]) -> Iterator[Ranges]:
    """Every tile: one range per axis, in C order of the tile grid."""
    return (tuple(combo) for combo in itertools.product(*axis_ranges))


def tile_count(axis_ranges: Sequence[Sequence[tuple[int, int]]]) -> int:
    """Number of tiles in the grid: the product of the per-axis counts."""
    return math.prod(len(ranges) for ranges in axis_ranges)


def largest_fitting(low: int, high: int, fits: Callable[[int], bool]) -> int | None:
    """Largest ``L`` in ``[low, high]`` with ``fits(L)`` for a monotone ``fits``; None if none."""
    if high < low or not fits(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def choose_tile_shape(
    shape: Sequence[int],
    cost: Callable[[tuple[int, ...]], int],
    budget: int,
    order: Sequence[int] | None = None,
    what: str = "tile",
    quanta: dict[int, int] | None = None,
    overhead: int = 0,
) -> tuple[int, ...]:
    """The tile shape found by the greedy rule of the module docstring.

    Only the axes in ``order`` are shortened (default: all, first to last).  ``quanta[axis]``
    makes the tile length along ``axis`` a multiple of it (or the whole axis).  Raises
    :class:`OutputTooLargeError` when even the minimum tile (module docstring) needs more than
    ``budget`` bytes; the message gives the limit needed, ``overhead`` (bytes held outside
    the tiles, e.g. W) included.
    """
    dims = [max(1, int(d)) for d in shape]
    order = list(range(len(dims))) if order is None else list(order)
    quanta = quanta or {}
    tile = _greedy_tile(dims, cost, budget, order, quanta)
    least = minimum_tile_elements(math.prod(dims))
    if tile is not None and math.prod(tile) >= least:
        return tile
    smallest = _grown_to(tile or _floor_tile(dims, order, quanta), least, dims, order, quanta)
    if cost(smallest) <= budget:
        return smallest
    needed = cost(smallest) + overhead
    raise OutputTooLargeError(
        f"memory_limit {human_bytes(budget + overhead)} is too small: the smallest {what} "
        f"({math.prod(smallest)} output elements) needs at least {human_bytes(needed)}; give "
        f"memory_limit {human_bytes(needed)} or more",
        param="memory_limit",
    )


def _greedy_tile(
    dims: list[int],
    cost: Callable[[tuple[int, ...]], int],
    budget: int,
    order: list[int],
    quanta: dict[int, int],
) -> tuple[int, ...] | None:
    """The greedy tile of the module docstring, None when even its floor does not fit."""
    tile = list(dims)
    if cost(tuple(tile)) <= budget:
        return tuple(tile)
    for axis in order:
        quantum = quanta.get(axis, 1)

        def length_of(count: int, axis: int = axis, quantum: int = quantum) -> int:
            return min(count * quantum, dims[axis])

        def fits(count: int, axis: int = axis) -> bool:
            trial = list(tile)
            trial[axis] = length_of(count)
            return cost(tuple(trial)) <= budget

        best = largest_fitting(1, -(-dims[axis] // quantum), fits)
        tile[axis] = length_of(1 if best is None else best)
        if best is not None:
            return tuple(tile)
    return None


def _floor_tile(dims: list[int], order: list[int], quanta: dict[int, int]) -> tuple[int, ...]:
    """Every shortened axis at its least length (one quantum)."""
    tile = list(dims)
    for axis in order:
        tile[axis] = min(quanta.get(axis, 1), dims[axis])
    return tuple(tile)


def _grown_to(
    tile: tuple[int, ...], least: int, dims: list[int], order: list[int], quanta: dict[int, int]
) -> tuple[int, ...]:
    """``tile`` lengthened, last shortened axis first, until it holds ``least`` elements."""
    grown = list(tile)
    for axis in reversed(order):
        if math.prod(grown) >= least:
            break
        others = math.prod(grown) // grown[axis]
        quantum = quanta.get(axis, 1)
        wanted = -(-least // others)
        grown[axis] = min(dims[axis], -(-wanted // quantum) * quantum)
    return tuple(grown)
