"""ConvInteger and QLinearConv from a ``.npy`` x, read box by box, to a ``.npy`` y, tile by tile.

The tiles are Conv's (:mod:`padconv_cli.outofcore.conv_tiles`: ranges of images, channel
tiles, ranges per output spatial axis, each reading its window of x with its own explicit
pads).  On each tile the exact integer sums run on the window
(:func:`padconv_cli.kernels.integer_conv.exact_sums`, which pads with ``x_zero_point``); a
tile that reads only padding reads a block of ``x_zero_point``.  Every output element is an
exact integer sum, then (ConvInteger) reduced modulo 2**32 or (QLinearConv) requantized
element by element with its channel's exact multiplier, so the result is bit-identical to the
in-memory kernel's whatever the tiles.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from padconv_cli.outofcore.conv_tiles import (
    ConvTiling,
    channel_tiles,
    tile_input,
    tile_order,
    tile_plan,
)
from padconv_cli.outofcore.npy_blocks import NpyOutput, check_disk_space, open_npy_input
from padconv_cli.outofcore.progress import TiledResult, TileProgress
from padconv_cli.outofcore.tiling import choose_tile_shape, grid, split_range, tile_count


def integer_tile_cost(tile_shape: tuple[int, ...], *, geometry: Any, itemsize: int) -> int:
    """Upper bound of the bytes one tile needs: its x window (mapped and read), the result
    and its mapped pages, and the exact sums' working memory on the tile's plan
    (:func:`padconv_cli.kernels.integer_conv.working_bytes`: float64 copies, int64 sums)."""
    from padconv_cli.kernels.integer_conv import working_bytes

    piece = tile_plan(geometry, tile_shape)
    window, outputs = math.prod(piece.x_shape), math.prod(tile_shape)
    return 2 * window + 2 * outputs * itemsize + working_bytes(piece, window)


def fixed_bytes(arrays: Sequence[Any]) -> int:
    """The inputs held whole for the run (w, scales, zero points, bias) and w's float64 copy."""
    held = [np.asarray(a) for a in arrays if a is not None]
    return sum(a.nbytes for a in held) + 8 * max((a.size for a in held), default=0)


def plan_integer_tiles(geometry: Any, out_itemsize: int, budget: int,
                       overhead: int = 0) -> ConvTiling:
    """A tile grid of the Conv geometry whose tiles each fit ``budget`` bytes."""
    cost = functools.partial(integer_tile_cost, geometry=geometry, itemsize=out_itemsize)
    shape = choose_tile_shape(geometry.output_shape, cost, budget, tile_order(geometry),
                              "integer Conv tile", overhead)
    images, out_channels, *spatial = shape
    ranges = [
        split_range(geometry.output_shape[0], images),
        channel_tiles(geometry.w_shape[0], geometry.x_shape[1], geometry.group, out_channels),
        *(split_range(length, step)
          for length, step in zip(geometry.output_shape[2:], spatial, strict=True)),
    ]
    return ConvTiling(ranges, True)


def _block(x: Any, tile: Any, x_zero_point: int) -> np.ndarray:
    """The tile's window of x, or for a tile reading only padding a block of x_zero_point."""
    if tile.box is None:
        return np.full(tile.zero_shape, x_zero_point, dtype=x.dtype)
    return x.read(tile.box)


def tiled_integer_conv(source: Any, geometry: Any, finish: Any, out_dtype: np.dtype,
                       w: np.ndarray, x_zero_point: int, w_zero_points: np.ndarray,
                       target: str, *, memory_limit: int, held: int,
                       show_progress: bool | str = False) -> TiledResult:
    """Write the integer convolution of the ``.npy`` ``source`` into ``target`` tile by tile
    (module docstring); ``finish(sums, m0, m1)`` turns a tile's exact int64 sums of output
    channels ``m0:m1`` into the result's elements; ``held``: the bytes of the inputs held
    whole, counted against ``memory_limit``."""
    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.kernels.integer_conv import exact_sums
    from padconv_cli.outofcore.conv_tiles import block_plan

    x = open_npy_input(source) if isinstance(source, str) else source
    budget = memory_limit - held
    if budget <= 0:
        raise OutputTooLargeError(f"memory_limit of {memory_limit} bytes does not hold w and "
                                  f"the quantization inputs ({held} bytes)",
                                  param="memory_limit")
    tiling = plan_integer_tiles(geometry, out_dtype.itemsize, budget, held)
    ranges = tiling.axis_ranges
    tiles = [tile_input(geometry, images, channels, tuple(spatial))
             for images, channels, *spatial in grid(ranges)]
    x.check_reads(tile.box for tile in tiles if tile.box is not None)
    check_disk_space(target, geometry.output_shape, out_dtype)
    total = math.prod(geometry.output_shape) * out_dtype.itemsize
    with (
        NpyOutput(target, geometry.output_shape, out_dtype) as out,
        TileProgress(tile_count(ranges), total, show_progress, "conv") as progress,
    ):
        for (images, channels, *spatial), tile in zip(grid(ranges), tiles, strict=True):
            block = _block(x, tile, x_zero_point)
            piece = block_plan(geometry, tuple(block.shape), tile)
            m0, m1 = channels.m0, channels.m1
            sums = exact_sums(piece, block, x_zero_point, w[m0:m1], w_zero_points[m0:m1])
            y = finish(sums, m0, m1)
            box = (slice(*images), slice(m0, m1), *(slice(*r) for r in spatial))
            out.write(box, y)
            progress.advance(y.nbytes)
        x.check_unchanged()
    return TiledResult(geometry.output_shape, tile_count(ranges), True)
