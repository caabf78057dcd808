"""ONNX Pad from a ``.npy`` file to a ``.npy`` file, one tile at a time (read and written with
``pread``/``pwrite``, :mod:`padconv_cli.outofcore.npy_blocks`).

Every tile is produced by padconv's own Pad kernel run on a small window of the input with
pads computed for that tile, then cropped (see :mod:`padconv_cli.outofcore.pad_geometry`), so
the result is bit-identical to ``pad()`` on the whole tensor while the working memory stays
under the budget (see :func:`pad_tile_cost`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from padconv_cli.kernels.pad import (
    AxisPad,
    PadPlan,
    coerce_constant_value,
    fill_value,
    output_dtype,
    pad_element_kind,
    pad_planned,
    plan_pad,
)
from padconv_cli.outofcore.npy_blocks import NpyInput, NpyOutput, check_disk_space, open_npy_input
from padconv_cli.outofcore.pad_geometry import TilePiece, axis_extremes, crop_begins, tile_pieces
from padconv_cli.outofcore.progress import TiledResult, TileProgress
from padconv_cli.outofcore.tiling import choose_tile_shape, grid, split_range, tile_count


@functools.lru_cache(maxsize=4096)
def _extremes(length: int, tile: int, axis: Any, mode: str) -> tuple[int, int]:
    return axis_extremes(length, tile, axis, mode)


def pad_tile_cost(tile_shape: tuple[int, ...], plan: PadPlan, itemsize: int) -> int:
    """Upper bound of the bytes one tile of ``tile_shape`` needs.

    ``itemsize * (2 * prod(windows) + prod(kernel result) + 2 * prod(tile))``: the rows read
    and the copies of the input windows of all the tile's pieces (the dask engine holds
    them together; the tiled engine one at a time), the kernel's result, and its copy
    written out, with the per-axis maxima over all tiles of that shape (``windows``: the sum of the
    pieces' window lengths, see :func:`~padconv_cli.outofcore.pad_geometry.axis_extremes`).
    """
    windows, result = 1, 1
    for length, tile, axis in zip(plan.output_shape, tile_shape, plan.per_axis, strict=True):
        window_max, result_max = _extremes(length, tile, axis, plan.mode)
        windows *= window_max
        result *= result_max
    return itemsize * (2 * windows + result + 2 * math.prod(tile_shape))


def pad_output_dtype(dtype: np.dtype, value: Any, plan: PadPlan) -> np.dtype:
    """The dtype the kernel gives the result (a ``<U`` type may widen for a long constant):
    :func:`padconv_cli.kernels.pad.output_dtype` of the plan's fill value."""
    return output_dtype(dtype, fill_value(value, dtype, plan))


def plan_pad_tiles(plan: PadPlan, itemsize: int, budget: int) -> list[list[tuple[int, int]]]:
    """Per-axis output ranges of a tile grid whose tiles each fit ``budget`` bytes."""
    shape = choose_tile_shape(
        plan.output_shape,
        lambda tile: pad_tile_cost(tile, plan, itemsize),
        budget,
        what="Pad tile",
    )
    return [
        split_range(length, step) for length, step in zip(plan.output_shape, shape, strict=True)
    ]


def tiled_pad(
    source: str | NpyInput,
    target: str,
    pads: Any,
    constant_value: Any = None,
    axes: Any = None,
    mode: str = "constant",
    *,
    memory_limit: int,
    show_progress: bool | str = False,
    plan: PadPlan | None = None,
) -> TiledResult:
    """Pad the ``.npy`` file ``source`` into the ``.npy`` file ``target`` tile by tile.

    Same semantics and errors as :func:`padconv_cli.kernels.pad.pad`; ``memory_limit`` bounds
    the bytes of the tiles in flight.  The target is replaced atomically when all tiles are
    written.  Returns the output shape and the tile count.  ``plan``: the call's plan when the
    caller made it already (:func:`plan_pad` of the same shape and attributes).
    """
    data = open_npy_input(source) if isinstance(source, str) else source
    pad_element_kind(data.dtype)
    plan = plan if plan is not None else plan_pad(data.shape, pads, axes, mode)
    value = None if constant_value is None else coerce_constant_value(constant_value, data.dtype)
    out_dtype = pad_output_dtype(data.dtype, value, plan)
    itemsize = max(data.dtype.itemsize, out_dtype.itemsize)
    axis_ranges = plan_pad_tiles(plan, itemsize, memory_limit)
    begins = crop_begins(plan)
    data.check_reads(piece.window_box(begins)
                     for tile in grid(axis_ranges) for piece in tile_pieces(tile, plan))
    check_disk_space(target, plan.output_shape, out_dtype)
    total = math.prod(plan.output_shape) * out_dtype.itemsize
    with (
        NpyOutput(target, plan.output_shape, out_dtype) as out,
        TileProgress(tile_count(axis_ranges), total, show_progress, "pad") as progress,
    ):
        for tile in grid(axis_ranges):
            origin = tuple(start for start, _ in tile)
            run_pieces(
                tile_pieces(tile, plan),
                begins,
                data.read,
                lambda box, values, origin=origin: out.write(_shifted(box, origin), values),
                value,
                plan.mode,
            )
            progress.advance(math.prod(stop - start for start, stop in tile) * out_dtype.itemsize)
        data.check_unchanged()  # after the last read, before the result is published
    return TiledResult(plan.output_shape, tile_count(axis_ranges), True)


def run_pieces(
    pieces: list[TilePiece],
    begins: tuple[int, ...],
    read: Callable[[tuple[slice, ...]], np.ndarray],
    write: Callable[[tuple[slice, ...], np.ndarray], None],
    value: Any,
    mode: str,
) -> None:
    """Make one tile: for every piece, ``write(piece box, pad(read(window), pads)[crop])``.

    ``read`` takes a box of the original input; ``write`` a box relative to the tile.
    """
    for piece in pieces:
        window = read(piece.window_box(begins))
        plan = piece_plan(tuple(window.shape), piece, mode)
        result = pad_planned(window, plan, fill_value(value, window.dtype, plan))
        write(piece.out_box, result[piece.crop_box])
        del window, result


def piece_plan(window_shape: tuple[int, ...], piece: TilePiece, mode: str) -> PadPlan:
    """The plan of the kernel's run on one piece's window, derived from the call's geometry
    (nothing resolved again): every axis keeps its window and gets the piece's pads
    ``before``/``after`` (never negative: the call's crops are in the window already)."""
    per_axis = tuple(AxisPad(dim, 0, 0, axis.before, axis.after)
                     for dim, axis in zip(window_shape, piece.axes, strict=True))
    return PadPlan(window_shape, mode, tuple(range(len(window_shape))), per_axis)


def _shifted(box: tuple[slice, ...], origin: tuple[int, ...]) -> tuple[slice, ...]:
    """``box`` moved by ``origin`` (tile-relative -> absolute coordinates)."""
    return tuple(slice(s.start + o, s.stop + o) for s, o in zip(box, origin, strict=True))
