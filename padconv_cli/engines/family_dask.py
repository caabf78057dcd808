"""ConvTranspose, ConvInteger and QLinearConv on dask, block by block.

The blocks are the tiled engine's tiles (:mod:`padconv_cli.outofcore.conv_transpose_tiles`,
:mod:`padconv_cli.outofcore.integer_tiles`) with the per-block memory budget of the dask
engine; each block task reads its own box of the input and runs the same computation as the
tiled engine, so the result is bit-identical to the in-memory one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.engines.dask_ops import _indexed_tiles, block_source, blocks_array


@dataclass(frozen=True)
class Requantization:
    """QLinearConv's last step on a block: bias, the channels' exact multipliers, Y's zero
    point and type (None for ConvInteger: the int32 wrap)."""

    bias: np.ndarray | None
    multipliers: list
    y_zero_point: int
    y_dtype: np.dtype


def finish_sums(sums: np.ndarray, m0: int, m1: int, step: Requantization | None) -> np.ndarray:
    """ConvInteger: the int32 wrap; QLinearConv: bias then the exact requantization."""
    from padconv_cli.kernels.requantize import requantize

    if step is None:
        return sums.astype(np.int32)
    if step.bias is not None:
        sums = sums + step.bias[m0:m1].astype(np.int64).reshape((1, -1) + (1,) * (sums.ndim - 2))
    chosen = step.multipliers if len(step.multipliers) == 1 else step.multipliers[m0:m1]
    return requantize(sums, chosen, step.y_zero_point, step.y_dtype)


def integer_block(block: np.ndarray | None, w: np.ndarray, w_zero_points: np.ndarray,
                  geometry: Any, tile: Any, x_zero_point: int, step: Requantization | None,
                  dtype: np.dtype) -> np.ndarray:
    """One output block: the exact sums on its input block (x_zero_point where it reads only
    padding), then :func:`finish_sums`."""
    from padconv_cli.kernels.integer_conv import exact_sums
    from padconv_cli.outofcore.conv_tiles import block_plan

    if block is None:
        block = np.full(tile.zero_shape, x_zero_point, dtype=dtype)
    m0, m1 = tile.channels.m0, tile.channels.m1
    piece = block_plan(geometry, tuple(block.shape), tile)
    sums = exact_sums(piece, block, x_zero_point, w[m0:m1], w_zero_points[m0:m1])
    return finish_sums(sums, m0, m1, step)


def integer_dask(x: Any, geometry: Any, w: np.ndarray, x_zero_point: int,
                 w_zero_points: np.ndarray, step: Requantization | None, out_dtype: np.dtype,
                 held: int, block_bytes: int) -> Any:
    """The integer convolution of ``x`` as a dask array of blocks (exact)."""
    from dask.base import tokenize

    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.outofcore.conv_tiles import tile_input
    from padconv_cli.outofcore.integer_tiles import plan_integer_tiles

    if block_bytes - held <= 0:
        raise OutputTooLargeError(f"memory_limit: a block budget of {block_bytes} bytes does "
                                  f"not hold the inputs held whole ({held} bytes)",
                                  param="memory_limit")
    ranges = plan_integer_tiles(geometry, out_dtype.itemsize, block_bytes - held, held)
    source = block_source(x)
    keys = {name: f"padconv-{name}-{tokenize(value)}"
            for name, value in (("w", w), ("wz", w_zero_points), ("step", step))}
    tasks = {}
    for index, (images, channels, *spatial) in _indexed_tiles(ranges):
        tile = tile_input(geometry, images, channels, tuple(spatial))
        fetch = None if tile.box is None else source.fetch_task(tile.box)
        tasks[index] = (integer_block, fetch, keys["w"], keys["wz"], geometry, tile,
                        x_zero_point, keys["step"], source.dtype)
    shared = {keys["w"]: w, keys["wz"]: w_zero_points, keys["step"]: step}
    return blocks_array("integer-conv", tasks, ranges, out_dtype,
                        [x, w, w_zero_points, geometry, x_zero_point, step], source, shared)


def transpose_block(block: np.ndarray | None, w: np.ndarray, b: np.ndarray | None,
                    piece: Any, dtype: np.dtype) -> np.ndarray:
    """One ConvTranspose output block from its input window (None: no input reaches it)."""
    from padconv_cli.kernels.conv_transpose import conv_transpose_planned

    if block is None:
        y = np.zeros(piece.output_shape, dtype)
        if b is not None:
            y += np.asarray(b).astype(dtype).reshape((-1,) + (1,) * piece.spatial_rank)
        return y
    return conv_transpose_planned(piece, block, w, b)


def conv_transpose_dask(x: Any, w: np.ndarray, b: np.ndarray | None, plan: Any,
                        block_bytes: int) -> Any:
    """ConvTranspose of ``x`` as a dask array of blocks (bit-identical to memory)."""
    from dask.base import tokenize

    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.outofcore import conv_transpose_tiles as tiles

    held = tiles.fixed_bytes(w, b)
    if block_bytes - held <= 0:
        raise OutputTooLargeError(f"memory_limit: a block budget of {block_bytes} bytes does "
                                  f"not hold W and B ({held} bytes)", param="memory_limit")
    ranges = tiles.plan_tiles(plan, np.dtype(x.dtype).itemsize, block_bytes - held, held)
    source = block_source(x)
    w_key, b_key = f"padconv-w-{tokenize(w)}", f"padconv-b-{tokenize(b)}"
    tasks = {}
    for index, (images, _channels, *spatial) in _indexed_tiles(ranges):
        box, piece = tiles.tile_plan(plan, images, tuple(spatial))
        fetch = None if box is None else source.fetch_task(box)
        tasks[index] = (transpose_block, fetch, w_key, b_key, piece, source.dtype)
    return blocks_array("conv-transpose", tasks, ranges, x.dtype, [x, w, b, plan], source,
                        {w_key: w, b_key: b})


def run_family_dask(label: str, blocks: Any, settings: Any) -> Any:
    """Connect, size the blocks, open the input, build ``blocks(x, block_bytes)`` and store
    the result (the dask engine's one run, :func:`padconv_cli.engines.dask_engine._run_blocks`)."""
    from padconv_cli.engines.dask_engine import _run_blocks

    dask = settings["dask"]
    return _run_blocks(label, blocks, settings["source_path"], settings["output"],
                       dask["memory_limit"], dask["scheduler"], dask["show_progress"],
                       dask["verbose"], dask["fallback_limit"], dask["read_policy"])
