"""ONNX Pad and Conv on dask arrays, block by block with padconv's own kernels.

The output is cut into blocks by the same tiling as the out-of-core engine
(:mod:`padconv_cli.outofcore`), with a per-block memory budget.  Each output block depends on
the part of the input it reads, taken by slicing the dask input array — for Pad the hull of the
block's piece windows, for Conv the block's stretch plus the halo ``(k - 1) * dilation`` —
so dask gathers the halo from neighbouring chunks; the block is then computed by one task that
runs padconv's kernel with the block's explicit pads and crops.  All of ONNX's semantics
(negative pads, reflect/wrap longer than the axis, every auto_pad, strides, dilations,
groups) are therefore the kernels' own, and results match the in-memory path bit for bit
whenever the Conv tiling is exact (see :func:`padconv_cli.outofcore.tiled_conv.plan_conv_tiles`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from padconv_cli.errors import OutputTooLargeError
from padconv_cli.kernels.conv import ConvPlan, plan_conv
from padconv_cli.kernels.pad import PadPlan, coerce_constant_value, element_kind, plan_pad
from padconv_cli.outofcore.conv_geometry import ChannelTile
from padconv_cli.outofcore.pad_geometry import TilePiece, crop_begins, hull_box, tile_pieces
from padconv_cli.outofcore.tiled_conv import (
    TileInput,
    conv_on_tile,
    fixed_bytes,
    plan_conv_tiles,
    tile_input,
)
from padconv_cli.outofcore.tiled_pad import pad_output_dtype, plan_pad_tiles, run_pieces


def _assemble(blocks: dict[tuple[int, ...], Any], grid_shape: tuple[int, ...]) -> Any:
    """``dask.array.block`` over blocks indexed by their grid position."""
    import dask.array as da

    nested = np.empty(grid_shape, dtype=object)
    for index, block in blocks.items():
        nested[index] = block
    if nested.ndim == 0:
        return nested[()]
    return da.block(nested.tolist())


def _indexed_tiles(axis_ranges: list[list[Any]]) -> Any:
    """``(grid index, tile)`` for every tile of the grid, in C order."""
    for index in np.ndindex(*(len(ranges) for ranges in axis_ranges)):
        yield index, tuple(ranges[i] for ranges, i in zip(axis_ranges, index, strict=True))


# --- Pad ---------------------------------------------------------------------------------


def pad_block(
    hull: np.ndarray,
    hull_start: tuple[int, ...],
    pieces: list[TilePiece],
    begins: tuple[int, ...],
    shape: tuple[int, ...],
    value: Any,
    mode: str,
    dtype: np.dtype,
) -> np.ndarray:
    """One output block of Pad from the input hull that starts at ``hull_start``."""
    out = np.empty(shape, dtype=dtype)

    def read(box: tuple[slice, ...]) -> np.ndarray:
        local = tuple(slice(s.start - h, s.stop - h) for s, h in zip(box, hull_start, strict=True))
        return np.ascontiguousarray(hull[local])

    def write(box: tuple[slice, ...], values: np.ndarray) -> None:
        out[box] = values

    run_pieces(pieces, begins, read, write, value, mode)
    return out


def pad_dask(
    x: Any,
    pads: Any,
    constant_value: Any = None,
    axes: Any = None,
    mode: str = "constant",
    *,
    block_bytes: int,
) -> Any:
    """ONNX Pad of the dask array ``x``: a dask array of blocks of about ``block_bytes``."""
    import dask
    import dask.array as da

    element_kind(x.dtype)
    plan: PadPlan = plan_pad(x.shape, pads, axes, mode)
    value = None if constant_value is None else coerce_constant_value(constant_value, x.dtype)
    out_dtype = pad_output_dtype(np.dtype(x.dtype), value, plan)
    itemsize = max(x.dtype.itemsize, out_dtype.itemsize)
    axis_ranges = plan_pad_tiles(plan, itemsize, block_bytes)
    begins = crop_begins(plan)
    blocks = {}
    for index, tile in _indexed_tiles(axis_ranges):
        shape = tuple(stop - start for start, stop in tile)
        pieces = tile_pieces(tile, plan)
        if pieces:
            hull = hull_box(pieces, plan)
            task = dask.delayed(pad_block, pure=True)(
                x[hull],
                tuple(s.start for s in hull),
                pieces,
                begins,
                shape,
                value,
                plan.mode,
                out_dtype,
            )
        else:
            task = dask.delayed(np.empty, pure=True)(shape, out_dtype)
        blocks[index] = da.from_delayed(task, shape, dtype=out_dtype)
    return _assemble(blocks, tuple(len(r) for r in axis_ranges))


# --- Conv --------------------------------------------------------------------------------


def conv_block(
    block: np.ndarray, w: np.ndarray, b: np.ndarray | None, plan: ConvPlan, tile: TileInput
) -> np.ndarray:
    """One output block of Conv from its input block (halo included)."""
    return conv_on_tile(np.ascontiguousarray(block), w, b, plan, tile)


def conv_dask(
    x: Any,
    w: np.ndarray,
    b: np.ndarray | None,
    *,
    block_bytes: int,
    **attributes: Any,
) -> tuple[Any, bool]:
    """ONNX Conv of the dask array ``x`` with ``w`` (and ``b``): a dask array of blocks.

    Returns the array and whether its tiling is exact (bit-identical to the in-memory kernel).
    """
    import dask
    import dask.array as da

    plan = plan_conv(x.shape, w.shape, None if b is None else b.shape, **attributes)
    budget = block_bytes - fixed_bytes(w, b)
    if budget <= 0:
        raise OutputTooLargeError(
            f"--memory-limit: a block budget of {block_bytes} bytes does not hold W and B "
            f"({fixed_bytes(w, b)} bytes); raise --memory-limit"
        )
    tiling = plan_conv_tiles(plan, x.dtype.itemsize, budget)
    weights = dask.delayed(w, pure=True)
    bias = None if b is None else dask.delayed(b, pure=True)
    blocks = {}
    for index, (images, channels, *spatial) in _indexed_tiles(tiling.axis_ranges):
        tile = tile_input(plan, images, channels, tuple(spatial))
        source = _conv_source(x, tile)
        shape = _block_shape(images, channels, spatial)
        task = dask.delayed(conv_block, pure=True)(source, weights, bias, plan, tile)
        blocks[index] = da.from_delayed(task, shape, dtype=x.dtype)
    grid_shape = tuple(len(r) for r in tiling.axis_ranges)
    return _assemble(blocks, grid_shape), tiling.exact


def _conv_source(x: Any, tile: TileInput) -> Any:
    import dask

    if tile.box is None:
        return dask.delayed(np.zeros, pure=True)(tile.zero_shape, x.dtype)
    return x[tile.box]


def _block_shape(
    images: tuple[int, int], channels: ChannelTile, spatial: list[tuple[int, int]]
) -> tuple[int, ...]:
    return (
        images[1] - images[0],
        channels.m1 - channels.m0,
        *(stop - start for start, stop in spatial),
    )


def block_bytes_for(memory_limit: int, threads: int, ceiling: int = 512 * 2**20) -> int:
    """Budget of one block: the memory limit shared by the threads, two blocks each in flight
    (one being computed, one being written), at most ``ceiling``."""
    return max(1, min(memory_limit // (2 * max(1, threads)), ceiling))


def output_nbytes(array: Any) -> int:
    """Bytes of a dask array's result."""
    return math.prod(array.shape) * array.dtype.itemsize
