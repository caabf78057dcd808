"""ONNX Pad from a ``.npy`` file to a ``.npy`` file, one tile at a time, bit-identical to the
in-memory kernel, within a memory budget (:func:`pad_tile_cost`).

Coordinates.  For an axis, let ``n`` be its length after the negative pads were applied (the
*cropped* input), ``b`` its begin pad and ``v = o - b`` the *virtual* input index of output
``o``: the begin pad is ``v < 0``, the interior ``[0, n)``, the end pad ``v >= n``.  An output
tile's range ``[v0, v1)`` is split at ``0`` and ``n``, and each non-empty part is an
:class:`AxisPiece`: padconv's Pad kernel on a ``window`` of the cropped input with ``pads =
(before, after)``, cropped to ``[crop, crop + length)``, gives exactly the part's values (the
window of a pad part per mode: :func:`_begin`, :func:`_end`).  A reflect or wrap pad longer
than one period reads the whole axis and pads out to the part; the kernel's periodic rule gives
the same values as for the whole tensor, since each value depends only on its position.  The
pieces of several axes combine as a Cartesian product (Pad is separable).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.kernels import pad as kernel
from padconv_cli.outofcore.npy_blocks import NpyInput, open_npy_input
from padconv_cli.outofcore.progress import TiledResult
from padconv_cli.outofcore.tiling import choose_tile_shape, split_range, write_tiles


@dataclass(frozen=True)
class AxisPiece:
    """One part of a tile along one axis (module docstring): ``out_start`` relative to the
    tile, ``window`` in cropped-input coordinates, the kernel's pads, and ``[crop, crop +
    length)`` of its result kept."""

    out_start: int
    length: int
    window: tuple[int, int]
    before: int
    after: int
    crop: int


Piece = tuple[AxisPiece, ...]  # one kernel call of a tile: one AxisPiece per axis


def region_bounds(v0: int, v1: int, n: int) -> list[tuple[int, int]]:
    """Split the virtual range ``[v0, v1)`` at ``0`` and ``n`` into its non-empty parts."""
    cuts = sorted({v0, v1, *(c for c in (0, n) if v0 < c < v1)})
    return list(itertools.pairwise(cuts))


def _begin(a: int, c: int, n: int, mode: str) -> tuple[tuple[int, int], int, int, int]:
    """Window, before, after, crop for a begin-pad part ``[a, c)`` (``c <= 0``)."""
    if mode == "constant":
        return (0, 0), c - a, 0, 0  # only the constant (n may be 0)
    if mode == "edge":
        return (0, 1), c - a - 1, 0, 0  # every value is x[0]
    if mode == "reflect" and n > 1 and -a <= n - 1:
        return (0, -a + 1), -a, 0, 0  # the mirror about x[0]
    if mode == "wrap" and -a <= n:
        return (a + n, c + n), 0, 0, 0  # x[v + n]
    return (0, n), -a, 0, 0  # a pad longer than one period: the whole axis


def _end(a: int, c: int, n: int, mode: str) -> tuple[tuple[int, int], int, int, int]:
    """Window, before, after, crop for an end-pad part ``[a, c)`` (``a >= n``)."""
    if mode == "constant":
        return (n, n), 0, c - a, 0
    if mode == "edge":
        return (n - 1, n), 0, c - a - 1, 0  # every value is x[n - 1]
    reach = c - n
    if mode == "reflect" and n > 1 and reach <= n - 1:  # the mirror about x[n - 1]
        first = n - 1 - reach
        return (first, n), 0, reach, a - first
    if mode == "wrap" and reach <= n:
        return (a - n, c - n), 0, 0, 0  # x[v - n]
    return (0, n), 0, reach, a  # a pad longer than one period: the whole axis


def axis_pieces(t0: int, t1: int, axis: kernel.AxisPad, mode: str) -> list[AxisPiece]:
    """The pieces of output range ``[t0, t1)`` along one axis (module docstring)."""
    b, n = axis.pad_begin, axis.cropped_dim
    pieces = []
    for a, c in region_bounds(t0 - b, t1 - b, n):
        if c <= 0 and a < 0:
            window, before, after, crop = _begin(a, c, n, mode)
        elif a >= n and c > n:
            window, before, after, crop = _end(a, c, n, mode)
        else:
            window, before, after, crop = (a, c), 0, 0, 0
        pieces.append(AxisPiece(a + b - t0, c - a, window, before, after, crop))
    return pieces


def tile_pieces(tile: tuple[tuple[int, int], ...], plan: kernel.PadPlan) -> list[Piece]:
    """Every kernel call that makes up the output tile ``tile`` (one range per axis)."""
    per_axis = [axis_pieces(t0, t1, axis, plan.mode)
                for (t0, t1), axis in zip(tile, plan.per_axis, strict=True)]
    return list(itertools.product(*per_axis))


def window_box(piece: Piece, plan: kernel.PadPlan) -> tuple[slice, ...]:
    """The box of the original input (before cropping) a piece's kernel call reads."""
    return tuple(slice(p.window[0] + axis.crop_begin, p.window[1] + axis.crop_begin)
                 for p, axis in zip(piece, plan.per_axis, strict=True))


def pad_tile(windows: Iterable[np.ndarray], pieces: list[Piece], shape: tuple[int, ...],
             value: Any, mode: str, dtype: np.dtype) -> np.ndarray:
    """One output tile of ``shape`` from its pieces' windows (in the pieces' order, read one
    at a time when ``windows`` is lazy): ``tile[out box] = pad(window, pads)[crop box]``, on a
    plan made from the piece (nothing resolved again; its pads are never negative)."""
    out = np.empty(shape, dtype=dtype)
    for piece, window in zip(pieces, windows, strict=True):
        per_axis = tuple(kernel.AxisPad(dim, 0, 0, p.before, p.after)
                         for dim, p in zip(window.shape, piece, strict=True))
        plan = kernel.PadPlan(tuple(window.shape), mode, tuple(range(window.ndim)), per_axis)
        result = kernel.pad_planned(window, plan, kernel.fill_value(value, window.dtype, plan))
        kept = tuple(slice(p.crop, p.crop + p.length) for p in piece)
        out[tuple(slice(p.out_start, p.out_start + p.length) for p in piece)] = result[kept]
        del window, result
    return out


@functools.lru_cache(maxsize=4096)
def axis_extremes(length: int, tile: int, axis: kernel.AxisPad, mode: str) -> tuple[int, int]:
    """Largest total window (the sum of a tile's pieces' windows: a wrap tile reads both ends
    of the axis, not what lies between) and largest kernel result, over tiles of ``tile``."""
    window_max = kernel_max = 0
    for t0 in range(0, length, tile):
        pieces = axis_pieces(t0, min(t0 + tile, length), axis, mode)
        window_max = max(window_max, sum(p.window[1] - p.window[0] for p in pieces))
        kernel_max = max(kernel_max, max(p.window[1] - p.window[0] + p.before + p.after
                                         for p in pieces))
    return window_max, kernel_max


def pad_tile_cost(tile_shape: tuple[int, ...], plan: kernel.PadPlan, itemsize: int) -> int:
    """Upper bound of the bytes a tile of ``tile_shape`` needs: ``itemsize * (2 * prod(windows)
    + prod(kernel result) + 2 * prod(tile))`` (windows read and copied, the kernel's result, the
    tile and its copy), with the per-axis maxima of :func:`axis_extremes` over such tiles."""
    windows, result = 1, 1
    for length, tile, axis in zip(plan.output_shape, tile_shape, plan.per_axis, strict=True):
        window_max, result_max = axis_extremes(length, tile, axis, plan.mode)
        windows *= window_max
        result *= result_max
    return itemsize * (2 * windows + result + 2 * math.prod(tile_shape))


def plan_pad_tiles(plan: kernel.PadPlan, itemsize: int, budget: int) -> list[list[tuple[int, int]]]:
    """Per-axis output ranges of a tile grid whose tiles each fit ``budget`` bytes."""
    shape = choose_tile_shape(plan.output_shape, lambda tile: pad_tile_cost(tile, plan, itemsize),
                              budget, what="Pad tile")
    return [split_range(n, step) for n, step in zip(plan.output_shape, shape, strict=True)]


def pad_tiling(shape: tuple[int, ...], dtype: np.dtype, pads: Any, constant_value: Any,
               axes: Any, mode: str, plan: kernel.PadPlan | None, budget: int) -> tuple:
    """``(plan, typed constant, result type, itemsize, tile ranges)`` of a call, the tiles
    within ``budget`` bytes (``plan``: the call's, when the caller made it already); the
    result's type is the kernel's for the fill value (a ``<U`` type may widen)."""
    kernel.pad_element_kind(dtype)
    plan = plan if plan is not None else kernel.plan_pad(shape, pads, axes, mode)
    value = None if constant_value is None else kernel.coerce_constant_value(constant_value, dtype)
    out_dtype = kernel.output_dtype(np.dtype(dtype), kernel.fill_value(value, dtype, plan))
    itemsize = max(dtype.itemsize, out_dtype.itemsize)
    return plan, value, out_dtype, itemsize, plan_pad_tiles(plan, itemsize, budget)


def tiled_pad(source: str | NpyInput, target: str, pads: Any, constant_value: Any = None,
              axes: Any = None, mode: str = "constant", *, memory_limit: int,
              show_progress: bool | str = False, plan: kernel.PadPlan | None = None) -> TiledResult:
    """The kernel's ``pad`` of the ``.npy`` ``source`` into ``target``, within ``memory_limit``."""
    data = open_npy_input(source) if isinstance(source, str) else source
    plan, value, out_dtype, _, axis_ranges = pad_tiling(
        data.shape, data.dtype, pads, constant_value, axes, mode, plan, memory_limit)
    tiles = []
    for tile in itertools.product(*axis_ranges):
        pieces = tile_pieces(tile, plan)
        compute = functools.partial(pad_tile, pieces=pieces, shape=tuple(b - a for a, b in tile),
                                    value=value, mode=plan.mode, dtype=out_dtype)
        tiles.append((tuple(slice(*r) for r in tile), [window_box(p, plan) for p in pieces],
                      compute))
    return write_tiles(data, target, plan.output_shape, out_dtype, "pad", show_progress, tiles)
