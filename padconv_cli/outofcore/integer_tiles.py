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
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from padconv_cli.outofcore.conv_tiles import tile_grid, tile_input, tile_plan
from padconv_cli.outofcore.npy_blocks import open_npy_input
from padconv_cli.outofcore.progress import TiledResult
from padconv_cli.outofcore.tiling import write_tiles


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
                       overhead: int = 0) -> list[list[Any]]:
    """A tile grid of the Conv geometry whose tiles each fit ``budget`` bytes."""
    cost = functools.partial(integer_tile_cost, geometry=geometry, itemsize=out_itemsize)
    return tile_grid(geometry, cost, budget, "integer Conv tile", overhead)


def tiled_integer_conv(source: Any, geometry: Any, finish: Any, out_dtype: np.dtype,
                       w: np.ndarray, x_zero_point: int, w_zero_points: np.ndarray,
                       target: str, *, memory_limit: int, held: int,
                       show_progress: bool | str = False) -> TiledResult:
    """Write the integer convolution of the ``.npy`` ``source`` into ``target`` tile by tile
    (module docstring); ``finish(sums, m0, m1)`` turns a tile's exact int64 sums of output
    channels ``m0:m1`` into the result's elements; ``held``: the bytes of the inputs held
    whole, counted against ``memory_limit``."""
    from padconv_cli.errors import OutputTooLargeError

    x = open_npy_input(source) if isinstance(source, str) else source
    budget = memory_limit - held
    if budget <= 0:
        raise OutputTooLargeError(f"memory_limit of {memory_limit} bytes does not hold w and "
                                  f"the quantization inputs ({held} bytes)",
                                  param="memory_limit")
    tiles = []
    ranges = plan_integer_tiles(geometry, out_dtype.itemsize, budget, held)
    for images, channels, *spatial in itertools.product(*ranges):
        tile = tile_input(geometry, images, channels, tuple(spatial))
        box = (slice(*images), slice(channels.m0, channels.m1), *(slice(*r) for r in spatial))
        compute = functools.partial(_integer_tile, tile=tile, geometry=geometry, finish=finish,
                                    w=w, x_zero_point=x_zero_point, w_zero_points=w_zero_points,
                                    dtype=x.dtype)
        tiles.append((box, [] if tile.box is None else [tile.box], compute))
    return write_tiles(x, target, geometry.output_shape, out_dtype, "conv", show_progress, tiles)


def _integer_tile(blocks: Any, tile: Any, geometry: Any, finish: Any, w: np.ndarray,
                  x_zero_point: int, w_zero_points: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The exact sums on the tile's window of x (a tile reading only padding: a block of
    x_zero_point), then ``finish``."""
    from padconv_cli.kernels.integer_conv import exact_sums
    from padconv_cli.outofcore.conv_tiles import block_plan

    block = next(blocks, None)
    if block is None:
        block = np.full(tile.zero_shape, x_zero_point, dtype=dtype)
    m0, m1 = tile.channels.m0, tile.channels.m1
    sums = exact_sums(block_plan(geometry, tuple(block.shape), tile), block, x_zero_point,
                      w[m0:m1], w_zero_points[m0:m1])
    return finish(sums, m0, m1)
