"""ONNX ConvTranspose from a ``.npy`` X, read box by box, to a ``.npy`` Y, one output tile at a
time.

A tile is a range of images and a range per output spatial axis (every output channel).  Along
an axis, output ``o`` receives input ``i`` through tap ``k`` when ``o = i*s + k*d - pb``, so the
outputs ``[o0, o1)`` read only the inputs ``[i0, i1)`` with
``i0 = max(0, ceil((o0 + pb - (K-1)*d) / s))`` and ``i1 = min(n, floor((o1 - 1 + pb) / s) + 1)``.
The tile is the kernel's own computation on that window, with the plan of the call shifted:
X the window, the output ``o1 - o0`` long, the begin pad ``pb + o0 - i0*s`` (negative: the
output starts before the window's first product).  Each output keeps its stride phase and its
taps, and the kernel sums each element in one fixed order (channels, then its phase's taps), so
the tiles are bit-identical to the in-memory result.  A tile no input reaches holds the bias.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any

import numpy as np

from padconv_cli.outofcore.npy_blocks import open_npy_input
from padconv_cli.outofcore.progress import TiledResult
from padconv_cli.outofcore.tiling import choose_tile_shape, split_range, write_tiles


def input_window(o0: int, o1: int, size: int, kernel: int, stride: int, dilation: int,
                 pad_begin: int) -> tuple[int, int]:
    """``[i0, i1)``: the inputs of one axis that reach the outputs ``[o0, o1)`` (module
    docstring); ``i1 <= i0`` when none does."""
    reach = (kernel - 1) * dilation
    i0 = max(0, -(-(o0 + pad_begin - reach) // stride))
    i1 = min(size, (o1 - 1 + pad_begin) // stride + 1)
    return i0, i1


def tile_plan(plan: Any, images: tuple[int, int], spatial: tuple[tuple[int, int], ...]
              ) -> tuple[tuple[slice, ...] | None, Any]:
    """The box of X a tile reads (None when no input reaches it) and the tile's plan."""
    windows, begins = [], []
    for (o0, o1), size, k, s, d, pb in zip(spatial, plan.x_shape[2:], plan.kernel_shape,
                                           plan.strides, plan.dilations, plan.pads_begin,
                                           strict=True):
        i0, i1 = input_window(o0, o1, size, k, s, d, pb)
        windows.append((i0, i1))
        begins.append(pb + o0 - i0 * s)
    out_shape = (images[1] - images[0], plan.output_shape[1],
                 *(o1 - o0 for o0, o1 in spatial))
    x_shape = (images[1] - images[0], plan.x_shape[1], *(max(0, i1 - i0) for i0, i1 in windows))
    piece = dataclasses.replace(plan, x_shape=x_shape, output_shape=out_shape,
                                pads=tuple(begins) + tuple(plan.pads_end),
                                output_padding=(0,) * plan.spatial_rank)
    if any(i1 <= i0 for i0, i1 in windows):
        return None, piece
    box = (slice(*images), slice(0, plan.x_shape[1]), *(slice(i0, i1) for i0, i1 in windows))
    return box, piece


def tile_cost(tile_shape: tuple[int, ...], *, plan: Any, itemsize: int) -> int:
    """Upper bound of the bytes one tile of ``tile_shape`` needs, wherever it lies: the most,
    over the distinct tiles (:func:`distinct_tile_windows`), of its X window (mapped and read),
    its output and mapped pages, and the kernel's working memory on the tile's own plan
    (:func:`padconv_cli.kernels.conv_transpose.working_bytes`)."""
    images, _channels, *spatial = tile_shape
    dtype = {2: np.float16, 4: np.float32, 8: np.float64}.get(itemsize, np.float32)
    outputs = math.prod(tile_shape)
    per_axis = [distinct_tile_windows(out, length, n, k, s, d, pb) for out, length, n, k, s, d, pb
                in zip(plan.output_shape[2:], spatial, plan.x_shape[2:], plan.kernel_shape,
                       plan.strides, plan.dilations, plan.pads_begin, strict=True)]
    return max((_piece_cost(tile_plan(plan, (0, images), windows)[1], outputs, itemsize,
                            np.dtype(dtype)) for windows in itertools.product(*per_axis)),
               default=2 * outputs * itemsize)


def _piece_cost(piece: Any, outputs: int, itemsize: int, dtype: np.dtype) -> int:
    from padconv_cli.kernels.conv_transpose import working_bytes

    return 2 * (math.prod(piece.x_shape) + outputs) * itemsize + working_bytes(piece, dtype)


def distinct_tile_windows(out: int, length: int, size: int, kernel: int, stride: int,
                          dilation: int, pad_begin: int) -> list[tuple[int, int]]:
    """One output range ``[o0, o1)`` per distinct tile plan along an axis cut in ``length``
    long tiles: a tile's plan follows from its window length, its begin pad and its output
    length (:func:`tile_plan`).  Away from both ends (no window clipped to X) these repeat
    with ``o0`` modulo ``stride``, so the first tiles up to one period past the start's
    clipping and the last ones from one period before the end's clipping hold them all."""
    count = max(1, -(-out // length))
    period = stride // math.gcd(stride, length)
    head = -(-max(0, (kernel - 1) * dilation - pad_begin + stride) // length) + 1 + period
    tail = -(-max(0, out - (size - 1) * stride + pad_begin) // length) + 1 + period
    seen: dict[tuple[int, int, int], tuple[int, int]] = {}
    for j in sorted(set(range(min(count, head))) | set(range(max(0, count - tail), count))):
        o0, o1 = j * length, min(out, (j + 1) * length)
        i0, i1 = input_window(o0, o1, size, kernel, stride, dilation, pad_begin)
        seen.setdefault((max(0, i1 - i0), pad_begin + o0 - i0 * stride, o1 - o0), (o0, o1))
    return list(seen.values())


def fixed_bytes(w: Any, b: Any) -> int:
    """W and B held for the run, and W's two copies in Conv's layout (accumulator type)."""
    w = np.asarray(w)
    return w.nbytes + 2 * 8 * w.size + (0 if b is None else np.asarray(b).nbytes)


def plan_tiles(plan: Any, itemsize: int, budget: int, overhead: int = 0) -> list[list[Any]]:
    """The ranges per output axis (images, all channels, spatial axes) of tiles that each fit
    ``budget`` bytes."""
    cost = functools.partial(tile_cost, plan=plan, itemsize=itemsize)
    order = [0, *range(2, len(plan.output_shape))]
    shape = choose_tile_shape(plan.output_shape, cost, budget, order, "ConvTranspose tile",
                              overhead)
    return [split_range(length, step) for length, step in zip(plan.output_shape, shape,
                                                              strict=True)]


def _bias_only(piece: Any, b: Any, dtype: np.dtype) -> np.ndarray:
    """The output of a tile no input reaches: the bias (zero without one)."""
    y = np.zeros(piece.output_shape, dtype)
    if b is not None:
        y += np.asarray(b).astype(dtype).reshape((-1,) + (1,) * piece.spatial_rank)
    return y


def tiled_conv_transpose(source: Any, w: Any, b: Any, target: str, *, plan: Any,
                         memory_limit: int, show_progress: bool | str = False) -> TiledResult:
    """Write ConvTranspose of the ``.npy`` ``source`` into ``target`` tile by tile (module
    docstring); ``memory_limit`` bounds the bytes in flight, W and B included."""
    from padconv_cli.errors import OutputTooLargeError

    x = open_npy_input(source) if isinstance(source, str) else source
    held = fixed_bytes(w, b)
    if memory_limit - held <= 0:
        raise OutputTooLargeError(f"memory_limit of {memory_limit} bytes does not hold W and B "
                                  f"({held} bytes with W's copies)", param="memory_limit")
    ranges = plan_tiles(plan, x.dtype.itemsize, memory_limit - held, held)
    w, b = np.asarray(w), None if b is None else np.asarray(b)
    tiles = []
    for images, *spatial in itertools.product(ranges[0], *ranges[2:]):
        box, piece = tile_plan(plan, images, tuple(spatial))
        compute = functools.partial(_transpose_tile, w=w, b=b, piece=piece, dtype=x.dtype)
        tiles.append(((slice(*images), slice(None), *(slice(*r) for r in spatial)),
                      [] if box is None else [box], compute))
    return write_tiles(x, target, plan.output_shape, x.dtype, "conv-transpose", show_progress,
                       tiles)


def _transpose_tile(blocks: Any, w: Any, b: Any, piece: Any, dtype: np.dtype) -> np.ndarray:
    """The kernel on the tile's window, or the bias where no input reaches the tile."""
    from padconv_cli.kernels.conv_transpose import conv_transpose_planned

    block = next(blocks, None)
    return _bias_only(piece, b, dtype) if block is None else conv_transpose_planned(
        piece, block, w, b)
