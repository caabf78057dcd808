"""ONNX Conv from a ``.npy`` X to a ``.npy`` Y, one tile at a time (read and written with
``pread``/``pwrite``, :mod:`padconv_cli.outofcore.npy_blocks`).

A tile is a range of images, a channel tile (see
:func:`padconv_cli.outofcore.conv_geometry.channel_tiles`) and a range per output spatial
axis.  It is computed by padconv's own Conv kernel on the part of X it reads (the tile's
stretch plus the halo ``(k - 1) * dilation``), with the padding that falls inside the tile
passed as the tile's explicit pads; auto_pad is resolved once for the whole tensor first.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import OutputTooLargeError
from padconv_cli.kernels import conv_paths, native
from padconv_cli.kernels.conv import ConvPlan, conv_planned, plan_conv
from padconv_cli.kernels.conv_paths import accumulator_dtype
from padconv_cli.outofcore.conv_geometry import (
    ChannelTile,
    channel_tiles,
    span_length,
    spatial_window,
    tile_in_channels,
)
from padconv_cli.outofcore.npy_blocks import NpyInput, NpyOutput, check_disk_space, open_npy_input
from padconv_cli.outofcore.progress import TiledResult, TileProgress
from padconv_cli.outofcore.tiling import choose_tile_shape, grid, split_range, tile_count

TILE_DTYPES = {2: np.dtype(np.float16), 4: np.dtype(np.float32), 8: np.dtype(np.float64)}
"""The X dtype of an itemsize, for the kernel's formula (float16 and bfloat16 both accumulate
in float32, so they need the same)."""


def tile_plan(plan: ConvPlan, tile_shape: tuple[int, ...]) -> ConvPlan:
    """The plan of one tile ``(images, M_t, *out_spatial)``: its output shape, and as X the
    window it reads (``images, C_t, *span``, span per axis ``(o-1)*s + (k-1)*d + 1``, at most
    X's length)."""
    images, out_channels, *out_spatial = tile_shape
    in_channels = tile_in_channels(plan.w_shape[0], plan.x_shape[1], plan.group, out_channels)
    spans = [  # at most all of X along the axis: the rest of the span is padding
        min(n, span_length(o, s, d, k))
        for n, o, s, d, k in zip(
            plan.x_shape[2:], out_spatial, plan.strides, plan.dilations, plan.kernel_shape,
            strict=True,
        )
    ]
    return dataclasses.replace(plan, x_shape=(images, in_channels, *spans),
                               output_shape=tuple(tile_shape))


def conv_tile_cost(tile_shape: tuple[int, ...], *, plan: ConvPlan, itemsize: int) -> int:
    """Upper bound of the bytes one tile ``(images, out channels, *out spatial)`` needs.

    With ``X_t`` the elements of the tile's input window and ``Y_t`` its outputs:
    ``2*X_t*itemsize`` (the rows read + the window's copy) ``+ 2*Y_t*itemsize`` (the result
    and its copy written out) ``+`` the kernel's working memory for the tile's plan
    (:func:`padconv_cli.kernels.conv_paths.working_bytes`, the one formula, on the native
    core's threads).
    """
    piece = tile_plan(plan, tile_shape)
    window, outputs = math.prod(piece.x_shape), math.prod(tile_shape)
    # The taps and outputs a tile cuts off as reading only padding depend on where it lies; only
    # the tile of the whole output is known exactly (it is the call's plan).
    whole = tuple(tile_shape) == tuple(plan.output_shape)
    working = conv_paths.working_bytes(piece, TILE_DTYPES.get(itemsize, np.dtype(np.float32)),
                                       native.thread_count(), tile_shape[1], cut=whole)
    return 2 * window * itemsize + 2 * outputs * itemsize + working


def fixed_bytes(w: np.ndarray, b: np.ndarray | None) -> int:
    """Memory held for the whole run: W and B, and W's copy in the accumulator type."""
    acc = accumulator_dtype(w.dtype).itemsize
    bias = 0 if b is None else b.nbytes
    return w.nbytes + w.size * acc + bias


def tile_budget(limit: int, w: np.ndarray, b: np.ndarray | None, what: str) -> int:
    """Bytes left for tiles (or blocks) once W and B are held: ``limit - fixed_bytes(w, b)``;
    :class:`OutputTooLargeError` naming memory_limit when nothing is left.  ``what`` names
    the limit in the message (``memory_limit``, or the dask engine's block budget)."""
    fixed = fixed_bytes(w, b)
    if limit - fixed <= 0:
        raise OutputTooLargeError(
            f"{what} of {limit} bytes does not hold W and B ({fixed} bytes with W's "
            "accumulator copy); raise memory_limit",
            param="memory_limit",
        )
    return limit - fixed


@dataclass(frozen=True)
class ConvTiling:
    """The tile grid: ranges of images, channel tiles, one range list per spatial axis.

    ``exact`` tells whether the tiles' results are bit-identical to the whole tensor's: always,
    as the native core sums every output element in one order wherever it is computed.
    """

    axis_ranges: list[list[Any]]
    exact: bool


def tile_order(plan: ConvPlan) -> list[int]:
    """The output axes a tiling shortens, in order: images, the spatial axes, then output
    channels. Any tile shape is bit-identical to the whole tensor (module docstring of
    :mod:`padconv_cli.kernels.conv_paths`), so the order only follows memory: whole images
    and rows first keep the tiles' halos small."""
    return [0, *range(2, len(plan.output_shape)), 1]


def plan_conv_tiles(plan: ConvPlan, itemsize: int, budget: int, overhead: int = 0) -> ConvTiling:
    """A tile grid whose tiles each fit ``budget`` bytes (axes in :func:`tile_order`).

    ``overhead`` (bytes held besides the tiles: W, B) only enters the message of a refused
    limit.
    """
    cost = functools.partial(conv_tile_cost, plan=plan, itemsize=itemsize)
    shape = choose_tile_shape(
        plan.output_shape, cost, budget, tile_order(plan), "Conv tile", None, overhead
    )
    images, out_channels, *spatial = shape
    ranges = [
        split_range(plan.output_shape[0], images),
        channel_tiles(plan.w_shape[0], plan.x_shape[1], plan.group, out_channels),
        *(
            split_range(length, step)
            for length, step in zip(plan.output_shape[2:], spatial, strict=True)
        ),
    ]
    return ConvTiling(ranges, True)


@dataclass(frozen=True)
class TileInput:
    """What one Conv tile reads: a box of X (or, when it reads only padding, a zero block of
    ``zero_shape``), the explicit pads ``[begins..., ends...]`` and the channel tile."""

    box: tuple[slice, ...] | None
    zero_shape: tuple[int, ...] | None
    pads: list[int]
    channels: ChannelTile


def tile_input(
    plan: ConvPlan,
    images: tuple[int, int],
    channels: ChannelTile,
    spatial: tuple[tuple[int, int], ...],
) -> TileInput:
    """The part of X a tile reads and the tile's explicit pads (module docstring).

    A tile that reads only padding on some axis reads only padding (zeros) everywhere, so it
    gets a zero block of its full span and no pads.
    """
    windows = [
        spatial_window(o0, o1, n, s, d, k, p)
        for (o0, o1), n, s, d, k, p in zip(
            spatial,
            plan.x_shape[2:],
            plan.strides,
            plan.dilations,
            plan.kernel_shape,
            plan.pads_begin,
            strict=True,
        )
    ]
    if any(w.all_padding for w in windows):
        # One zero per axis and the rest as end pads: the same products (zeros times W) as the
        # full span of zeros, without holding it (a stride of 3e7 would make it gigabytes).
        shape = (images[1] - images[0], channels.c1 - channels.c0, *(1,) * len(windows))
        ends = [w.stop - w.start - 1 for w in windows]
        return TileInput(None, shape, [0] * len(windows) + ends, channels)
    box = (slice(*images), slice(channels.c0, channels.c1), *(slice(*w.window) for w in windows))
    pads = [w.before for w in windows] + [w.after for w in windows]
    return TileInput(box, None, pads, channels)


def block_plan(plan: ConvPlan, block_shape: tuple[int, ...], tile: TileInput) -> ConvPlan:
    """The plan of the kernel's run on one tile's input block, derived from the call's plan
    (no attribute is resolved again): X is the block, W the tile's output channels, the pads
    and group the tile's; kernel, strides and dilations the call's; output length per axis
    ``floor((n + pad_begin + pad_end - ek) / s) + 1`` (:mod:`padconv_cli.kernels.conv_shapes`)."""
    from padconv_cli.kernels.conv_shapes import effective_kernel_size, explicit_pad_output_size

    rank = len(block_shape) - 2
    out_spatial = tuple(
        explicit_pad_output_size(n, tile.pads[axis], tile.pads[rank + axis],
                                 effective_kernel_size(k, d), s)
        for axis, (n, k, d, s) in enumerate(
            zip(block_shape[2:], plan.kernel_shape, plan.dilations, plan.strides, strict=True))
    )
    channels = tile.channels
    w_shape = (channels.m1 - channels.m0, *plan.w_shape[1:])
    return dataclasses.replace(
        plan, x_shape=tuple(block_shape), w_shape=w_shape, pads=tuple(tile.pads),
        group=channels.group, auto_pad="NOTSET",
        output_shape=(block_shape[0], w_shape[0], *out_spatial),
    )


def conv_on_tile(
    block: np.ndarray, w: np.ndarray, b: np.ndarray | None, plan: ConvPlan, tile: TileInput
) -> np.ndarray:
    """padconv's Conv kernel on a tile's input block, on the block's plan (:func:`block_plan`)."""
    channels = tile.channels
    return conv_planned(
        block_plan(plan, tuple(block.shape), tile),
        block,
        w[channels.m0 : channels.m1],
        None if b is None else b[channels.m0 : channels.m1],
    )


def tiled_conv(
    source: str | NpyInput,
    w: np.ndarray,
    b: np.ndarray | None,
    target: str,
    *,
    memory_limit: int,
    show_progress: bool | str = False,
    plan: ConvPlan | None = None,
    **attributes: Any,
) -> TiledResult:
    """Convolve the ``.npy`` file ``source`` with ``w`` (and bias ``b``) into ``target``.

    ``attributes`` are Conv's (auto_pad, dilations, group, kernel_shape, pads, strides).
    Same semantics and errors as :func:`padconv_cli.kernels.conv.conv`; ``memory_limit`` bounds
    the bytes in flight (W and B included).  Returns the output shape, the tile count and
    whether the tiling was bit-identical (see :func:`plan_conv_tiles`).  ``plan``: the call's
    plan when the caller made it already (:func:`plan_conv` of the same shapes and attributes).
    """
    x = open_npy_input(source) if isinstance(source, str) else source
    if plan is None:
        plan = plan_conv(x.shape, w.shape, None if b is None else b.shape, **attributes)
    budget = tile_budget(memory_limit, w, b, "memory_limit")
    tiling = plan_conv_tiles(plan, x.dtype.itemsize, budget, fixed_bytes(w, b))
    axis_ranges = tiling.axis_ranges
    tiles = (tile_input(plan, images, channels, tuple(spatial))
             for images, channels, *spatial in grid(axis_ranges))
    x.check_reads(tile.box for tile in tiles if tile.box is not None)
    check_disk_space(target, plan.output_shape, x.dtype)
    total = math.prod(plan.output_shape) * x.dtype.itemsize
    with (
        NpyOutput(target, plan.output_shape, x.dtype) as out,
        TileProgress(tile_count(axis_ranges), total, show_progress, "conv") as progress,
    ):
        for images, channels, *spatial in grid(axis_ranges):
            y = conv_tile(x, w, b, plan, images, channels, tuple(spatial))
            box = (slice(*images), slice(channels.m0, channels.m1), *(slice(*r) for r in spatial))
            out.write(box, y)
            progress.advance(y.nbytes)
            del y
        x.check_unchanged()  # after the last read, before the result is published
    return TiledResult(plan.output_shape, tile_count(axis_ranges), tiling.exact)


def conv_tile(
    x: NpyInput,
    w: np.ndarray,
    b: np.ndarray | None,
    plan: ConvPlan,
    images: tuple[int, int],
    channels: ChannelTile,
    spatial: tuple[tuple[int, int], ...],
) -> np.ndarray:
    """One output tile: read its part of X, run the kernel on it (module docstring)."""
    tile = tile_input(plan, images, channels, spatial)
    if tile.box is None:
        block = np.zeros(tile.zero_shape, dtype=x.dtype)
    else:
        block = x.read(tile.box)
    return conv_on_tile(block, w, b, plan, tile)
