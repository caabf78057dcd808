"""Conv compute paths: numpy data movement around BLAS matrix products.

Every path computes, for a validated :class:`~padconv_cli.kernels.conv.ConvPlan`,
``Y[n, m, o] = sum_{c, k} W[m, c, k] * Xpad[n, g*C/G + c, o*s + k*d]`` in the accumulator dtype
(float32, or float64 for float64 inputs):

* pointwise: 1x1 kernel, stride 1, no pads -> one (batched) GEMM straight from X;
* depthwise: one input channel per group and few outputs per group -> one multiply-add over the
  whole output per kernel offset, no im2col;
* im2col: everything else -> patches of the padded input are copied into a column matrix one
  block of output positions at a time and multiplied by W with one batched GEMM per block.

Extra memory beyond X, W and Y is the padded copy of X plus at most about ``WORKSPACE_BYTES`` of
column buffers, whatever the input size (a single output row never gets split, see
:func:`_output_blocks`).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from padconv_cli.kernels.conv import ConvPlan

WORKSPACE_BYTES = 64 * 2**20
"""Cap on the im2col column buffer; tests lower it to exercise chunking."""

MIN_GEMM_COLUMNS = 2048
"""Below this many output positions per image, several images share one GEMM; blocks of output
positions are not made smaller than this (unless WORKSPACE_BYTES says so)."""

GEMM_BLOCK_BYTES = 8 * 2**20
"""Preferred size of one im2col block: small enough to stay in cache for the GEMM."""

PARALLEL_COPY_BYTES = 512 * 2**10
"""Column blocks at least this big are filled by several threads."""

DEPTHWISE_MAX_MULTIPLIER = 4
"""Largest M/group for which the shifted multiply-add path beats im2col + GEMM."""

DEPTHWISE_BLOCK_BYTES = 256 * 2**10
"""Target size of one depthwise accumulator block (kept cache-sized, one block per task)."""

WIDE_MAX_OVERHEAD = 1.5
"""Largest ratio of padded to output row size for which stride-1 paths compute over whole
padded rows (contiguous slices) and crop afterwards."""

_pool: ThreadPoolExecutor | None = None


def convolve(plan: ConvPlan, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Run the plan on validated inputs; the result has X's dtype, rounded once from the sum."""
    acc = accumulator_dtype(x.dtype)
    y = np.empty(plan.output_shape, dtype=acc)
    if y.size:
        path = choose_path(plan)
        path(plan, x, w.astype(acc, copy=False), y)
    if b is not None:
        y += b.astype(acc).reshape((-1,) + (1,) * plan.spatial_rank)
    return y.astype(x.dtype, copy=False)


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """float64 inputs accumulate in float64, every other float type in float32."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def choose_path(plan: ConvPlan) -> Callable[[ConvPlan, np.ndarray, np.ndarray, np.ndarray], None]:
    """Pick the cheapest correct path for the plan (see the module docstring)."""
    if is_pointwise(plan):
        return pointwise_path
    channels_per_group = plan.w_shape[1]
    multiplier = plan.w_shape[0] // plan.group
    if channels_per_group == 1 and multiplier <= DEPTHWISE_MAX_MULTIPLIER:
        return depthwise_path
    return im2col_path


def is_pointwise(plan: ConvPlan) -> bool:
    """A 1x1 kernel with stride 1 and no padding: Y = W @ X per image and group."""
    return (
        all(k == 1 for k in plan.kernel_shape)
        and all(s == 1 for s in plan.strides)
        and not any(plan.pads)
    )


# --- shared helpers -----------------------------------------------------------------------


def padded_shape(plan: ConvPlan) -> tuple[int, ...]:
    """Spatial shape of X after padding: ``in + pad_begin + pad_end`` per axis."""
    return tuple(
        size + begin + end
        for size, begin, end in zip(plan.x_shape[2:], plan.pads_begin, plan.pads_end, strict=True)
    )


def padded_input(x: np.ndarray, plan: ConvPlan, acc: np.dtype, slack: int = 0) -> np.ndarray:
    """X zero-padded once into a fresh buffer of dtype ``acc``, flattened per channel.

    Shape ``(N, C, prod(padded_shape) + slack)``; the ``slack`` trailing zeros let stride-1 paths
    read whole padded rows past the last one. No copy is made when nothing needs to change.
    """
    spatial = padded_shape(plan)
    size = math.prod(spatial)
    n, c = x.shape[:2]
    if slack == 0 and not any(plan.pads) and x.dtype == acc:
        return np.ascontiguousarray(x).reshape(n, c, size)
    flat = np.zeros((n, c, size + slack), dtype=acc)
    grid = flat[:, :, :size].reshape(n, c, *spatial)
    interior = tuple(
        slice(begin, begin + length)
        for begin, length in zip(plan.pads_begin, plan.x_shape[2:], strict=True)
    )
    grid[(slice(None), slice(None), *interior)] = x
    return flat


def kernel_offsets(kernel_shape: Sequence[int]) -> list[tuple[int, ...]]:
    """Every kernel position in C order (the order of ``W.reshape(M, C/G, -1)``)."""
    return list(itertools.product(*(range(k) for k in kernel_shape)))


def tap_slices(
    plan: ConvPlan, offset: tuple[int, ...], starts: Sequence[int], lengths: Sequence[int]
) -> tuple[slice, ...]:
    """Slices of the padded input feeding output positions ``starts + range(lengths)`` through
    kernel position ``offset``: input index ``o * s + k * d`` per axis."""
    slices = []
    for k, d, s, start, length in zip(
        offset, plan.dilations, plan.strides, starts, lengths, strict=True
    ):
        first = start * s + k * d
        slices.append(slice(first, first + (length - 1) * s + 1, s))
    return tuple(slices)


def wide_row_overhead(plan: ConvPlan) -> float:
    """Extra work of computing stride-1 outputs over whole padded rows instead of output rows."""
    out_rows = math.prod(plan.output_shape[3:])
    return math.prod(padded_shape(plan)[1:]) / out_rows


def flat_strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a C-ordered array of ``shape``."""
    return [math.prod(shape[i + 1 :]) for i in range(len(shape))]


def worker_count() -> int:
    """Cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def run_tasks(tasks: Sequence[Callable[[], None]]) -> None:
    """Run independent numpy-heavy tasks on the cores (numpy releases the GIL in its loops)."""
    global _pool
    if len(tasks) <= 1 or worker_count() == 1:
        for task in tasks:
            task()
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=worker_count(), thread_name_prefix="padconv")
    for future in [_pool.submit(task) for task in tasks]:
        future.result()


# --- pointwise: one GEMM ------------------------------------------------------------------


def pointwise_path(plan: ConvPlan, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    """``Y[n, g] = W[g] @ X[n, g]`` with X viewed as (N, G, C/G, H*W...) — no copy of X for
    float32/float64 inputs; other inputs are cast in column chunks of at most WORKSPACE_BYTES."""
    n, c = plan.x_shape[:2]
    groups, m = plan.group, plan.w_shape[0]
    positions = math.prod(plan.output_shape[2:])
    w_groups = w.reshape(groups, m // groups, c // groups)
    y_groups = y.reshape(n, groups, m // groups, positions)
    x_groups = np.ascontiguousarray(x).reshape(n, groups, c // groups, positions)
    if x.dtype == y.dtype:
        np.matmul(w_groups, x_groups, out=y_groups)
        return
    step = max(1, WORKSPACE_BYTES // max(1, c * y.itemsize))
    for image in range(n):
        for first in range(0, positions, step):
            columns = slice(first, first + step)
            cast = x_groups[image, :, :, columns].astype(y.dtype)
            np.matmul(w_groups, cast, out=y_groups[image, :, :, columns])


# --- depthwise: shifted multiply-adds -----------------------------------------------------


def depthwise_path(plan: ConvPlan, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    """``Y[n, g, j] = sum_k W[g, j, k] * Xpad[n, g, shifted by k]`` for C/group == 1.

    One multiply and one add over a block of output channels per kernel offset; blocks are
    cache-sized and spread over the cores. Stride 1 reads whole padded rows (contiguous slices)
    and crops; other strides read strided views.
    """
    wide = all(s == 1 for s in plan.strides) and wide_row_overhead(plan) <= WIDE_MAX_OVERHEAD
    if wide:
        _depthwise_wide(plan, x, w, y)
    else:
        _depthwise_strided(plan, x, w, y)


def _channel_blocks(n: int, groups: int, row_bytes: int) -> list[tuple[slice, slice]]:
    """(image range, group range) blocks of about DEPTHWISE_BLOCK_BYTES: several whole images
    when one image is small, else part of one image's groups."""
    rows = max(1, DEPTHWISE_BLOCK_BYTES // max(1, row_bytes))
    if rows >= groups:
        images = rows // groups
        return [(slice(i, i + images), slice(0, groups)) for i in range(0, n, images)]
    return [(slice(i, i + 1), slice(g, g + rows)) for i in range(n) for g in range(0, groups, rows)]


def _depthwise_wide(plan: ConvPlan, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    n, groups, m = plan.x_shape[0], plan.group, plan.w_shape[0]
    multiplier = m // groups
    spatial = padded_shape(plan)
    out = plan.output_shape[2:]
    strides = flat_strides(spatial)
    wide_len = out[0] * strides[0]
    offsets = [
        sum(k * d * st for k, d, st in zip(offset, plan.dilations, strides, strict=True))
        for offset in kernel_offsets(plan.kernel_shape)
    ]
    slack = max(0, max(offsets) + wide_len - math.prod(spatial))
    xp = padded_input(x, plan, y.dtype, slack)[:, :, None, :]  # (N, G, 1, S)
    taps = w.reshape(groups, multiplier, len(offsets))
    y_view = y.reshape(n, groups, multiplier, *out)
    crop = (Ellipsis, *(slice(0, o) for o in out[1:]))

    def block_task(images: slice, group_range: slice) -> Callable[[], None]:
        def task() -> None:
            src = xp[images, group_range]
            shape = (src.shape[0], src.shape[1], multiplier, wide_len)
            total = np.empty(shape, dtype=y.dtype)
            term = np.empty(shape, dtype=y.dtype)
            for index, start in enumerate(offsets):
                weight = taps[group_range, :, index, None]
                window = src[..., start : start + wide_len]
                if index == 0:
                    np.multiply(window, weight, out=total)
                else:
                    np.multiply(window, weight, out=term)
                    total += term
            rows = total.reshape(*shape[:3], out[0], *spatial[1:])
            y_view[images, group_range] = rows[crop]

        return task

    row_bytes = multiplier * wide_len * y.itemsize
    run_tasks([block_task(i, g) for i, g in _channel_blocks(n, groups, row_bytes)])


def _depthwise_strided(plan: ConvPlan, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    n, groups, m = plan.x_shape[0], plan.group, plan.w_shape[0]
    multiplier = m // groups
    spatial = padded_shape(plan)
    out = plan.output_shape[2:]
    offsets = kernel_offsets(plan.kernel_shape)
    xp = padded_input(x, plan, y.dtype).reshape(n, groups, 1, *spatial)
    taps = w.reshape(groups, multiplier, len(offsets))
    weight_axes = (None,) * len(out)
    y_view = y.reshape(n, groups, multiplier, *out)
    zeros = (0,) * len(out)

    def block_task(images: slice, group_range: slice) -> Callable[[], None]:
        def task() -> None:
            total = y_view[images, group_range]
            term = np.empty_like(total)
            for index, offset in enumerate(offsets):
                taps_slices = tap_slices(plan, offset, zeros, out)
                window = xp[(images, group_range, slice(None), *taps_slices)]
                weight = taps[(group_range, slice(None), index, *weight_axes)]
                if index == 0:
                    np.multiply(window, weight, out=total)
                else:
                    np.multiply(window, weight, out=term)
                    total += term

        return task

    row_bytes = multiplier * math.prod(out) * y.itemsize
    run_tasks([block_task(i, g) for i, g in _channel_blocks(n, groups, row_bytes)])


# --- im2col + GEMM ------------------------------------------------------------------------


def _output_blocks(
    dims: Sequence[int], budget: int, first_axis: int
) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Tile the index space ``dims`` in C order into boxes of at most ``budget`` positions.

    Each box is ``(starts, lengths)``: single indices on the axes before some axis ``a``, a range
    on ``a`` and full extent after it, so it is one contiguous run of flat indices. ``a`` is the
    first axis >= ``first_axis`` whose trailing extent fits the budget (a box never holds less
    than one position, so the budget is exceeded only by one element along the last axis).
    """
    rank = len(dims)
    axis = first_axis
    while axis < rank - 1 and math.prod(dims[axis + 1 :]) > budget:
        axis += 1
    tail = list(dims[axis + 1 :])
    step = max(1, budget // max(1, math.prod(tail)))
    for prefix in itertools.product(*(range(d) for d in dims[:axis])):
        for start in range(0, dims[axis], step):
            length = min(step, dims[axis] - start)
            yield (*prefix, start, *([0] * len(tail))), (*([1] * len(prefix)), length, *tail)


def im2col_path(plan: ConvPlan, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    """``Y[n, g] = W[g] (M/G x C/G*K) @ cols[g] (C/G*K x positions)``, block by block.

    ``cols[g, c*K + k, p] = Xpad[n, g*C/G + c, p*s + k*d]``; one batched matmul over the groups per
    block of output positions. The column buffer holds at most WORKSPACE_BYTES (at least one
    position), and about GEMM_BLOCK_BYTES when that is smaller, so that BLAS reads it from cache.
    When images are small, several share a block (and one GEMM).
    """
    n, c = plan.x_shape[:2]
    groups, m = plan.group, plan.w_shape[0]
    offsets = kernel_offsets(plan.kernel_shape)
    taps = len(offsets)
    spatial = padded_shape(plan)
    out = plan.output_shape[2:]
    positions = math.prod(out)
    xp = padded_input(x, plan, y.dtype).reshape(n, groups, c // groups, *spatial)
    w_matrix = w.reshape(groups, m // groups, (c // groups) * taps)
    y_flat = y.reshape(n, groups, m // groups, positions)

    per_position = (c * taps + m) * y.itemsize
    block_bytes = min(WORKSPACE_BYTES, max(GEMM_BLOCK_BYTES, MIN_GEMM_COLUMNS * per_position))
    budget = max(1, block_bytes // per_position)
    first_axis = 1 if positions >= MIN_GEMM_COLUMNS or n == 1 else 0
    blocks = list(_output_blocks((n, *out), budget, first_axis))
    largest = max(math.prod(lengths) for _, lengths in blocks)
    buffer = np.empty(c * taps * largest, dtype=y.dtype)
    spatial_strides = flat_strides(out)

    for starts, lengths in blocks:
        count = math.prod(lengths)
        cols = buffer[: c * taps * count].reshape(groups, c // groups, taps, *lengths)
        images = slice(starts[0], starts[0] + lengths[0])
        # (G, C/G, images, *padded) view of the block's images
        source = np.moveaxis(xp[images], 0, 2)
        _fill_columns(plan, cols, source, offsets, starts[1:], lengths[1:])
        matrix = cols.reshape(groups, (c // groups) * taps, count)
        if lengths[0] == 1:
            first = sum(s * st for s, st in zip(starts[1:], spatial_strides, strict=True))
            np.matmul(w_matrix, matrix, out=y_flat[starts[0], :, :, first : first + count])
        else:
            product = np.matmul(w_matrix, matrix)
            per_image = product.reshape(groups, m // groups, lengths[0], positions)
            y_flat[images] = np.moveaxis(per_image, 2, 0)


def _fill_columns(
    plan: ConvPlan,
    cols: np.ndarray,
    source: np.ndarray,
    offsets: Sequence[tuple[int, ...]],
    starts: Sequence[int],
    lengths: Sequence[int],
) -> None:
    """``cols[:, :, k] = source[..., window of kernel offset k]``, split over the cores.

    The copies are independent, so the offsets (or, for a single offset, the input channels) are
    shared out between threads when the block is big enough to pay for the hand-off.
    """
    windows = [
        (slice(None), slice(None), slice(None), *tap_slices(plan, offset, starts, lengths))
        for offset in offsets
    ]

    def copy(channels: slice, taps: range) -> Callable[[], None]:
        def task() -> None:
            for index in taps:
                cols[:, channels, index] = source[windows[index]][:, channels]

        return task

    workers = worker_count() if cols.nbytes >= PARALLEL_COPY_BYTES else 1
    channels = cols.shape[1]
    if len(offsets) >= workers or channels < workers:
        parts = np.array_split(np.arange(len(offsets)), workers)
        tasks = [copy(slice(None), range(p[0], p[-1] + 1)) for p in parts if len(p)]
    else:
        parts = np.array_split(np.arange(channels), workers)
        tasks = [copy(slice(p[0], p[-1] + 1), range(len(offsets))) for p in parts if len(p)]
    run_tasks(tasks)
