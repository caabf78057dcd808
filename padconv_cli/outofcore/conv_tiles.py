"""ONNX Conv from a ``.npy`` X to a ``.npy`` Y, one tile at a time, bit-identical to the
in-memory kernel, within a memory budget (:func:`conv_tile_cost`).  A tile is a range of
images, a channel tile and a range per output spatial axis.

Spatial axes.  Output ``o`` reads input positions ``o*s - p_begin + k*d`` for ``k in [0, K)``,
so outputs ``[o0, o1)`` read ``[o0*s - p_begin, (o1-1)*s - p_begin + (K-1)*d + 1)``: the tile's
stretch of strides plus the *halo* ``(K - 1) * d``.  The part of that span inside ``[0, n)`` is
read from X; the parts outside become the tile's own explicit pads, so the kernel on the window
with those pads yields the values the whole tensor gives there (auto_pad resolved once).

Channels.  With ``G`` groups, output channel ``m`` belongs to group ``m // (M/G)`` and reads
input channels ``[g*C/G, (g+1)*C/G)``.  A channel tile is a run of whole groups (the kernel
runs with that many groups) or a part of one group (``group = 1`` on its input channels).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import OutputTooLargeError
from padconv_cli.kernels import conv as conv_kernel
from padconv_cli.kernels import native
from padconv_cli.kernels.conv import (
    ConvPlan,
    conv_planned,
    effective_kernel_size,
    explicit_pad_output_size,
    plan_conv,
)
from padconv_cli.outofcore.npy_blocks import NpyInput, open_npy_input
from padconv_cli.outofcore.progress import TiledResult
from padconv_cli.outofcore.tiling import choose_tile_shape, split_range, write_tiles


def input_span(o0: int, o1: int, stride: int, dilation: int, kernel: int,
               pad_begin: int) -> tuple[int, int]:
    """Input positions read by outputs ``[o0, o1)``: ``[o0*s - p, (o1-1)*s - p + (k-1)*d + 1)``."""
    start = o0 * stride - pad_begin
    return start, (o1 - 1) * stride - pad_begin + effective_kernel_size(kernel, dilation)


@dataclass(frozen=True)
class ChannelTile:
    """Output channels ``[m0, m1)``, the input channels ``[c0, c1)`` they read, the group count."""

    m0: int
    m1: int
    c0: int
    c1: int
    group: int


def channel_tiles(out_channels: int, in_channels: int, group: int, tile: int) -> list[ChannelTile]:
    """The output channels in tiles of at most ``tile`` channels, each a run of whole groups
    or a part of one group (module docstring)."""
    per_out, per_in = out_channels // group, in_channels // group
    if per_out == 0:  # M = 0: an empty output, nothing to compute
        return []
    if tile >= per_out:
        step = max(1, tile // per_out)
        return [ChannelTile(g * per_out, min(g + step, group) * per_out, g * per_in,
                            min(g + step, group) * per_in, min(g + step, group) - g)
                for g in range(0, group, step)]
    return [ChannelTile(g * per_out + j, g * per_out + min(j + tile, per_out), g * per_in,
                        (g + 1) * per_in, 1)
            for g in range(group) for j in range(0, per_out, tile)]


def tile_plan(plan: ConvPlan, tile_shape: tuple[int, ...]) -> ConvPlan:
    """The plan of one tile ``(images, M_t, *out_spatial)``, X the window it reads:
    ``(images, C_t, *span)``, span ``min(n, (o-1)*s + (k-1)*d + 1)`` per axis."""
    images, out_channels, *out_spatial = tile_shape
    in_channels = max((c.c1 - c.c0 for c in channel_tiles(
        plan.w_shape[0], plan.x_shape[1], plan.group, out_channels)), default=0)
    spans = [min(n, (o - 1) * s + effective_kernel_size(k, d))
             for n, o, s, d, k in zip(plan.x_shape[2:], out_spatial, plan.strides,
                                      plan.dilations, plan.kernel_shape, strict=True)]
    return plan._replace(x_shape=(images, in_channels, *spans), output_shape=tuple(tile_shape))


def conv_tile_cost(tile_shape: tuple[int, ...], *, plan: ConvPlan, itemsize: int) -> int:
    """Upper bound of the bytes one tile needs: ``2*(X_t + Y_t)*itemsize`` (the window read
    and copied, the result and its copy written out) plus the kernel's working memory on the
    tile's plan (:func:`padconv_cli.kernels.conv.working_bytes`)."""
    piece = tile_plan(plan, tile_shape)
    window, outputs = math.prod(piece.x_shape), math.prod(tile_shape)
    # only the whole output's tile knows which taps read only padding (it is the call's plan)
    whole = tuple(tile_shape) == tuple(plan.output_shape)
    # X's type by itemsize for the kernel's memory formula (bfloat16 accumulates like float16)
    dtype = np.dtype({2: np.float16, 8: np.float64}.get(itemsize, np.float32))
    working = conv_kernel.working_bytes(piece, dtype, native.thread_count(), tile_shape[1],
                                        cut=whole)
    return 2 * window * itemsize + 2 * outputs * itemsize + working


def fixed_bytes(w: np.ndarray, b: np.ndarray | None) -> int:
    """Memory held for the whole run: W and B, and W's copy in the accumulator type."""
    acc = conv_kernel.accumulator_dtype(w.dtype).itemsize
    return w.nbytes + w.size * acc + (0 if b is None else b.nbytes)


def tile_budget(limit: int, w: np.ndarray, b: np.ndarray | None, what: str) -> int:
    """``limit - fixed_bytes(w, b)``: bytes left for tiles (or blocks) once W and B are held;
    none left is an :class:`OutputTooLargeError` naming ``what``."""
    fixed = fixed_bytes(w, b)
    if limit - fixed <= 0:
        raise OutputTooLargeError(f"{what} of {limit} bytes does not hold W and B ({fixed} bytes "
                                  "with W's accumulator copy); raise memory_limit",
                                  param="memory_limit")
    return limit - fixed


def plan_conv_tiles(plan: ConvPlan, itemsize: int, budget: int,
                    overhead: int = 0) -> list[list[Any]]:
    """:func:`tile_grid` of Conv tiles (bit-identical: one summation order per element)."""
    cost = functools.partial(conv_tile_cost, plan=plan, itemsize=itemsize)
    return tile_grid(plan, cost, budget, "Conv tile", overhead)


def tile_grid(plan: Any, cost: Any, budget: int, what: str, overhead: int) -> list[list[Any]]:
    """Image ranges, channel tiles and spatial ranges of the Conv ``plan``, tiles within
    ``budget`` bytes by ``cost``, cut along images, spatial axes, then output channels (small
    halos); ``overhead`` (W, B) only enters the message of a refused limit."""
    order = [0, *range(2, len(plan.output_shape)), 1]
    images, out_channels, *spatial = choose_tile_shape(plan.output_shape, cost, budget, order,
                                                       what, overhead)
    return [split_range(plan.output_shape[0], images),
            channel_tiles(plan.w_shape[0], plan.x_shape[1], plan.group, out_channels),
            *(split_range(n, step) for n, step in zip(plan.output_shape[2:], spatial, strict=True))]


@dataclass(frozen=True)
class TileInput:
    """What one Conv tile reads: a box of X (or, when it reads only padding, a zero block of
    ``zero_shape``), the explicit pads ``[begins..., ends...]`` and the channel tile."""

    box: tuple[slice, ...] | None
    zero_shape: tuple[int, ...] | None
    pads: list[int]
    channels: ChannelTile


def tile_input(plan: ConvPlan, images: tuple[int, int], channels: ChannelTile,
               spatial: tuple[tuple[int, int], ...]) -> TileInput:
    """The part of X a tile reads and the tile's explicit pads (module docstring): per axis the
    part of :func:`input_span` inside ``[0, n)``; a tile that reads only padding on some axis
    reads only zeros."""
    spans = [input_span(o0, o1, s, d, k, p) for (o0, o1), s, d, k, p in zip(
        spatial, plan.strides, plan.dilations, plan.kernel_shape, plan.pads_begin, strict=True)]
    inside = [(min(max(start, 0), n), min(stop, n))
              for (start, stop), n in zip(spans, plan.x_shape[2:], strict=True)]
    if any(first >= last for first, last in inside):
        # One zero per axis and the rest as end pads: the same products (zeros times W) as the
        # full span of zeros, without holding it (a stride of 3e7 would make it gigabytes).
        shape = (images[1] - images[0], channels.c1 - channels.c0, *(1,) * len(spans))
        return TileInput(None, shape, [0] * len(spans) + [stop - start - 1
                                                           for start, stop in spans], channels)
    box = (slice(*images), slice(channels.c0, channels.c1), *(slice(*w) for w in inside))
    pads = ([first - start for (start, _), (first, _) in zip(spans, inside, strict=True)]
            + [stop - last for (_, stop), (_, last) in zip(spans, inside, strict=True)])
    return TileInput(box, None, pads, channels)


def block_plan(plan: ConvPlan, block_shape: tuple[int, ...], tile: TileInput) -> ConvPlan:
    """The plan of the kernel's run on one tile's input block, derived from the call's plan
    (nothing resolved again): X the block, W the tile's output channels, the tile's pads and
    group; output length per axis ``floor((n + pad_begin + pad_end - ek) / s) + 1``."""
    rank = len(block_shape) - 2
    out_spatial = tuple(explicit_pad_output_size(n, begin, end, effective_kernel_size(k, d), s)
                        for n, begin, end, k, d, s in zip(
                            block_shape[2:], tile.pads[:rank], tile.pads[rank:], plan.kernel_shape,
                            plan.dilations, plan.strides, strict=True))
    w_shape = (tile.channels.m1 - tile.channels.m0, *plan.w_shape[1:])
    return plan._replace(
        x_shape=tuple(block_shape), w_shape=w_shape, pads=tuple(tile.pads),
        group=tile.channels.group, auto_pad="NOTSET",
        output_shape=(block_shape[0], w_shape[0], *out_spatial))


def conv_on_tile(blocks: Iterable[np.ndarray], w: np.ndarray, b: np.ndarray | None,
                 plan: ConvPlan, tile: TileInput, dtype: Any = None) -> np.ndarray:
    """padconv's Conv kernel on a tile's input block (``blocks``: it, or none for a tile
    reading only padding, on zeros of ``dtype``) by :func:`block_plan`."""
    block = next(iter(blocks), None)
    if block is None:
        block = np.zeros(tile.zero_shape, dtype=dtype)
    m0, m1 = tile.channels.m0, tile.channels.m1
    return conv_planned(block_plan(plan, tuple(block.shape), tile), block, w[m0:m1],
                        None if b is None else b[m0:m1])


def tiled_conv(source: str | NpyInput, w: np.ndarray, b: np.ndarray | None, target: str, *,
               memory_limit: int, show_progress: bool | str = False,
               plan: ConvPlan | None = None, **attributes: Any) -> TiledResult:
    """Conv (``attributes``, or the caller's ``plan``) of the ``.npy`` file ``source`` with
    ``w`` and ``b`` into ``target``, as :func:`padconv_cli.kernels.conv.conv`, tile by tile
    within ``memory_limit`` bytes (W and B included)."""
    x = open_npy_input(source) if isinstance(source, str) else source
    if plan is None:
        plan = plan_conv(x.shape, w.shape, None if b is None else b.shape, **attributes)
    budget = tile_budget(memory_limit, w, b, "memory_limit")
    tiles = []
    ranges = plan_conv_tiles(plan, x.dtype.itemsize, budget, fixed_bytes(w, b))
    for images, channels, *spatial in itertools.product(*ranges):
        tile = tile_input(plan, images, channels, tuple(spatial))
        box = (slice(*images), slice(channels.m0, channels.m1), *(slice(*r) for r in spatial))
        compute = functools.partial(conv_on_tile, w=w, b=b, plan=plan, tile=tile, dtype=x.dtype)
        tiles.append((box, [] if tile.box is None else [tile.box], compute))
    return write_tiles(x, target, plan.output_shape, x.dtype, "conv", show_progress, tiles)
