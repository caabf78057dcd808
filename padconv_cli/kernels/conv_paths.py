"""Conv compute paths: numpy data movement around BLAS matrix products.

Every path computes, for a validated :class:`~padconv_cli.kernels.conv_plan.ConvPlan`,
``Y[n, m, o] = sum_{c, k} W[m, c, k] * Xpad[n, g*C/G + c, o*s + k*d]`` in the accumulator dtype
(float32, or float64 for float64 inputs):

* pointwise: 1x1 kernel, stride 1, no pads -> one (batched) GEMM straight from X;
* depthwise: one input channel per group and few outputs per group -> a multiply and an add per
  kernel offset over cache-sized blocks of channels, spread over the cores, no im2col;
* shifted: stride 1 with enough channels -> one GEMM per kernel tap, read in place from the
  padded rows and accumulated by BLAS, no im2col;
* im2col: everything else -> patches of the padded input are copied into a column matrix one
  block of output positions at a time and multiplied by W with one batched GEMM per block
  (stride-1 blocks of whole rows copy contiguous windows of whole padded rows, then crop).

Memory: besides X, W and Y (accumulator dtype, plus the final cast for float16/bfloat16), the
im2col path holds the padded copy of X and, per worker, a column buffer of at most
``WORKSPACE_BYTES`` whatever the input size; the depthwise path holds, per worker, one block of
about ``DEPTHWISE_BLOCK_BYTES`` (at least one padded channel and two accumulator rows of one
channel). These are :func:`~padconv_cli.kernels.workers.scratch` buffers, kept per thread for
the next call when they are small, so that repeated calls do not pay fresh page faults.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from padconv_cli.kernels import blas, workers
from padconv_cli.kernels.conv_plan import ConvPlan
from padconv_cli.kernels.recycled import new_array
from padconv_cli.kernels.workers import run_stages, run_tasks, scratch, single_threaded_blas

WORKSPACE_BYTES = 64 * 2**20
"""Cap on the im2col column buffer; tests lower it to exercise chunking."""

MIN_GEMM_COLUMNS = 1024
"""Below this many output positions per image, several images share one GEMM; blocks of output
positions are not made smaller than this (unless WORKSPACE_BYTES says so)."""

GEMM_BLOCK_BYTES = 2 * 2**20
"""Preferred size of one im2col block: small enough to stay in cache for the GEMM."""

DEPTHWISE_MAX_MULTIPLIER = 4
"""Largest M/group for which the shifted multiply-add path beats im2col + GEMM."""

DEPTHWISE_BLOCK_BYTES = 4 * 2**20
"""Target size of the two accumulator buffers of one depthwise block (one block per task).
Measured on 2 cores: 1 MiB blocks took about twice as long, as each numpy call is then short
enough for the workers to spend their time handing the GIL to each other."""

PARALLEL_PAD_BYTES = 2**20
"""Inputs from this size on are padded by all the cores."""

SHIFTED_MIN_CHANNELS = 32
"""Fewest input channels per group for which one GEMM per kernel tap (inner dimension C/G)
beats im2col's single GEMM over C/G * prod(kernel) rows."""

SHIFTED_BLOCK_BYTES = 2**20
"""Target size of the output block that the shifted path's tap GEMMs accumulate into."""

SHIFTED_PARALLEL_PAD_BYTES = 256 * 2**10
"""Inputs from this size on are padded by all the cores on the shifted path, whose helpers
are woken for its blocks anyway (PARALLEL_PAD_BYTES is for a padding that wakes them itself)."""

SHIFTED_LOCAL_PAD_BYTES = 4 * 2**20
"""Inputs from this size on are padded block by block on the shifted path (no padded copy of
X). Below it one padded copy costs less: blocks padding their own rows at the same time spend
their time handing the GIL to each other (measured: 13% slower on the dilated benchmark)."""

WIDE_MAX_OVERHEAD = 1.5
"""Largest ratio of padded to output row size for which the stride-1 depthwise path computes
over whole padded rows (contiguous slices) and crops afterwards. (Tried for im2col too: its
column copies are bound by memory bandwidth either way, and the wider GEMM cost more.)"""

def convolve(plan: ConvPlan, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Run the plan on validated inputs; the result has X's dtype, rounded once from the sum."""
    acc = accumulator_dtype(x.dtype)
    y = new_array(plan.output_shape, acc)
    if y.size:
        path = choose_path(plan)
        path(plan, x, w.astype(acc, copy=False), y)
    if b is not None:
        y += b.astype(acc).reshape((-1,) + (1,) * plan.spatial_rank)
    if y.dtype == x.dtype:
        return y
    result = new_array(y.shape, x.dtype)
    np.copyto(result, y, casting="unsafe")  # rounded once, as astype would
    return result


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """float64 inputs accumulate in float64, every other float type in float32."""
    is_double = dtype.kind == "f" and dtype.itemsize == 8
    return np.dtype(np.float64) if is_double else np.dtype(np.float32)


def choose_path(plan: ConvPlan) -> Callable[[ConvPlan, np.ndarray, np.ndarray, np.ndarray], None]:
    """Pick the cheapest correct path for the plan (see the module docstring)."""
    if is_pointwise(plan):
        return pointwise_path
    channels_per_group = plan.w_shape[1]
    multiplier = plan.w_shape[0] // plan.group
    if channels_per_group == 1 and multiplier <= DEPTHWISE_MAX_MULTIPLIER:
        return depthwise_path
    if is_shifted(plan):
        return shifted_path
    return im2col_path


def is_pointwise(plan: ConvPlan) -> bool:
    """A 1x1 kernel with stride 1 and no padding: Y = W @ X per image and group."""
    return (
        all(k == 1 for k in plan.kernel_shape)
        and all(s == 1 for s in plan.strides)
        and not any(plan.pads)
    )


# --- working memory -----------------------------------------------------------------------


def working_bytes(plan: ConvPlan, dtype: np.dtype) -> int:
    """Upper estimate of the bytes :func:`convolve` holds besides X, W, B and the result.

    ``acc_copies + padded + path``: when ``dtype`` is not the accumulator type (float16,
    bfloat16), the accumulator result and W's accumulator copy,
    ``(prod(Y) + prod(W)) * a``; every path but pointwise, the zero-padded copy of X,
    ``N * C * prod(in + pad_begin + pad_end) * a``; then the path's own buffers:
    :func:`im2col_working_bytes` or :func:`shifted_scratch_bytes` (depthwise and pointwise
    add nothing). ``a`` is the accumulator's itemsize. Python integers: no overflow.
    """
    acc = accumulator_dtype(np.dtype(dtype))
    itemsize = acc.itemsize
    working = 0
    if acc != np.dtype(dtype):
        working += (math.prod(plan.output_shape) + math.prod(plan.w_shape)) * itemsize
    if is_pointwise(plan):
        return working
    working += math.prod(plan.x_shape[:2]) * math.prod(padded_shape(plan)) * itemsize
    if math.prod(plan.output_shape) == 0:
        return working
    path = choose_path(plan)
    if path is im2col_path:
        working += im2col_working_bytes(plan, itemsize)
    elif path is shifted_path:
        working += shifted_scratch_bytes(plan, itemsize)
    return working


# --- shared helpers -----------------------------------------------------------------------


def padded_shape(plan: ConvPlan) -> tuple[int, ...]:
    """Spatial shape of X after padding: ``in + pad_begin + pad_end`` per axis."""
    return tuple(
        size + begin + end
        for size, begin, end in zip(plan.x_shape[2:], plan.pads_begin, plan.pads_end, strict=True)
    )


def padded_input(
    x: np.ndarray,
    plan: ConvPlan,
    acc: np.dtype,
    slack: int = 0,
    parts: Sequence[tuple[slice, slice]] = ((slice(None), slice(None)),),
) -> np.ndarray:
    """X (the plan's input, or some of its images and channels) zero-padded by the plan's pads
    into an ``acc`` buffer of shape ``(N, C, prod(padded_shape) + slack)``, flattened per channel.

    The ``slack`` trailing zeros let stride-1 paths read whole padded rows past the last one.
    ``parts`` (image range, channel range) cover X and are filled as tasks on the cores. X is
    returned as it is (reshaped) when there is nothing to pad or cast. The buffer is this
    thread's "padded" :func:`~padconv_cli.kernels.workers.scratch`: valid until its next call.
    """
    flat = padded_buffer(x, plan, acc, slack)
    if flat is not None:
        run_tasks(padding_tasks(plan, x, flat, parts))
        return flat
    return unpadded_rows(x, plan)


def unpadded_rows(x: np.ndarray, plan: ConvPlan) -> np.ndarray:
    """X flattened per channel, ``(N, C, prod(spatial))``, for a plan with nothing to pad."""
    return np.ascontiguousarray(x).reshape(*x.shape[:2], math.prod(padded_shape(plan)))


def padded_buffer(
    x: np.ndarray, plan: ConvPlan, acc: np.dtype, slack: int = 0
) -> np.ndarray | None:
    """This thread's "padded" scratch of shape ``(N, C, prod(padded_shape) + slack)`` for
    :func:`padded_input`, not yet filled; None when X needs no padding, slack or cast."""
    if slack == 0 and not any(plan.pads) and x.dtype == acc:
        return None
    n, c = x.shape[:2]
    size = math.prod(padded_shape(plan)) + slack
    return scratch(n * c * size, acc, "padded").reshape(n, c, size)


def padding_tasks(
    plan: ConvPlan, x: np.ndarray, flat: np.ndarray, parts: Sequence[tuple[slice, slice]]
) -> list[Callable[[], None]]:
    """One task per (image range, channel range) part, each filling its part of
    :func:`padded_buffer` ``flat`` with X inside zeros."""
    return [functools.partial(_fill_padded, plan, x, flat, images, channels)
            for images, channels in parts]


def padding_parts(x: np.ndarray, min_bytes: int | None = None) -> list[tuple[slice, slice]]:
    """(image range, channel range) parts for :func:`padded_input`: one per image, or two halves
    of the channels of a single image, when X has at least ``min_bytes`` (PARALLEL_PAD_BYTES
    unless given: below that, handing work to another thread costs more than it saves); else
    all of X as one part."""
    n, c = x.shape[:2]
    if x.nbytes < (PARALLEL_PAD_BYTES if min_bytes is None else min_bytes) or n * c < 2:
        return [(slice(None), slice(None))]
    if n > 1:
        return [(slice(i, i + 1), slice(None)) for i in range(n)]
    half = -(-c // 2)
    return [(slice(None), slice(0, half)), (slice(None), slice(half, None))]


def _fill_padded(
    plan: ConvPlan, x: np.ndarray, flat: np.ndarray, images: slice, channels: slice
) -> None:
    """``flat[images, channels]`` = those channels of X inside zeros (the pads and the slack)."""
    spatial = padded_shape(plan)
    size = math.prod(spatial)
    part = flat[images, channels]
    grid = part[..., :size].reshape(*part.shape[:2], *spatial)
    interior = tuple(
        slice(begin, begin + length)
        for begin, length in zip(plan.pads_begin, plan.x_shape[2:], strict=True)
    )
    _zero_border(grid, interior)
    part[..., size:] = 0
    grid[(Ellipsis, *interior)] = x[images, channels]


def _zero_border(grid: np.ndarray, interior: tuple[slice, ...]) -> None:
    """Zero every element of ``grid`` (leading axes, then the spatial axes) outside ``interior``:
    per spatial axis, the slabs before and after the interior range, inside the interior of the
    axes before it."""
    lead = grid.ndim - len(interior)
    for axis, inside in enumerate(interior):
        before = (slice(None),) * lead + interior[:axis]
        grid[(*before, slice(0, inside.start))] = 0
        grid[(*before, slice(inside.stop, None))] = 0


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


def run_gemm_tasks(tasks: Sequence[Callable[[], None]]) -> None:
    """Run independent tasks that call BLAS on padconv's workers, with BLAS single-threaded.

    Own workers over many blocks keep both cores busy through the copies as well as the
    products, and a core taken by another process only slows its current block, where BLAS's
    threads wait for each other at every barrier. BLAS stays single-threaded even for a single
    task: its result depends on its thread count, and a tile of the tiled engine must repeat
    the whole tensor's sums bit for bit.
    """
    with single_threaded_blas():
        run_tasks(tasks)


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

    Works on blocks of channels spread over the cores; each block pads its own channels into
    its thread's scratch buffer (every input element is still copied once) and accumulates the
    kernel taps with whole-block numpy operations, no im2col. Stride 1 reads whole padded rows
    (contiguous windows) and crops at the end; other strides read strided windows.
    """
    wide = all(s == 1 for s in plan.strides) and wide_row_overhead(plan) <= WIDE_MAX_OVERHEAD
    n, groups = plan.x_shape[0], plan.group
    multiplier = plan.w_shape[0] // groups
    taps = w.reshape(groups, multiplier, *plan.kernel_shape)
    y_view = y.reshape(n, groups, multiplier, *plan.output_shape[2:])
    if wide:
        geometry = wide_rows(plan)
        blocks = _channel_blocks(n, groups, 2 * multiplier * geometry.length * y.itemsize)

        def block(images: slice, group_range: slice) -> None:
            xp = padded_input(x[images, group_range], plan, y.dtype, geometry.slack)
            _depthwise_wide_block(geometry, xp, taps, y_view, images, group_range)

    else:
        row_bytes = 2 * multiplier * math.prod(plan.output_shape[2:]) * y.itemsize
        blocks = _channel_blocks(n, groups, row_bytes)

        def block(images: slice, group_range: slice) -> None:
            xp = padded_input(x[images, group_range], plan, y.dtype)
            _depthwise_strided_block(plan, xp, taps, y_view, images, group_range)

    run_tasks([functools.partial(block, images, group_range) for images, group_range in blocks])


def _channel_blocks(n: int, groups: int, row_bytes: int) -> list[tuple[slice, slice]]:
    """(image range, group range) blocks of at most about DEPTHWISE_BLOCK_BYTES, in a number
    that shares evenly between the cores: several whole images per block when images are small,
    else parts of one image's groups."""
    per_image = groups * max(1, row_bytes)
    if per_image <= DEPTHWISE_BLOCK_BYTES:
        count = _balanced_count(n * per_image)
        images = max(1, min(n, DEPTHWISE_BLOCK_BYTES // per_image, -(-n // count)))
        return [(slice(i, i + images), slice(0, groups)) for i in range(0, n, images)]
    count = _balanced_count(per_image)
    rows = max(1, -(-groups // count))
    return [(slice(i, i + 1), slice(g, g + rows)) for i in range(n) for g in range(0, groups, rows)]


def _balanced_count(total_bytes: int) -> int:
    """Number of blocks for ``total_bytes`` of work: enough to respect DEPTHWISE_BLOCK_BYTES,
    rounded up to a multiple of the worker count."""
    cores = workers.worker_count()
    count = max(1, -(-total_bytes // max(1, DEPTHWISE_BLOCK_BYTES)))
    return -(-count // cores) * cores


class _WideRows:
    """Stride-1 geometry over whole padded rows.

    With the padded input flattened per channel, output position ``o`` and kernel offset ``k``
    read flat index ``sum_i (o_i + k_i * d_i) * row_stride_i``: every offset is one contiguous
    window of ``length = out[0] * row_stride_0`` elements, whose results land on a padded-row
    grid that is cropped to the output afterwards.
    """

    def __init__(self, plan: ConvPlan) -> None:
        spatial = padded_shape(plan)
        self.spatial = spatial
        self.row_strides = flat_strides(spatial)
        self.tap_steps = [d * st for d, st in zip(plan.dilations, self.row_strides, strict=True)]
        self.length = plan.output_shape[2] * self.row_strides[0]
        last = sum((k - 1) * t for k, t in zip(plan.kernel_shape, self.tap_steps, strict=True))
        self.slack = max(0, last + self.length - math.prod(spatial))
        self.tap_starts = [
            sum(k * t for k, t in zip(offset, self.tap_steps, strict=True))
            for offset in kernel_offsets(plan.kernel_shape)
        ]
        # a block of rows reads its padded rows plus the reach of the taps of the other axes
        self.row_slack = sum(
            (k - 1) * t for k, t in zip(plan.kernel_shape[1:], self.tap_steps[1:], strict=True)
        )
        out = plan.output_shape[2:]
        self.out = out
        self.grid = (out[0], *spatial[1:])
        self.crop = (Ellipsis, *(slice(0, o) for o in out[1:]))
        self.crop_free = tuple(out[1:]) == tuple(spatial[1:])


def _depthwise_wide_block(
    geometry: _WideRows,
    padded: np.ndarray,
    taps: np.ndarray,
    y_view: np.ndarray,
    images: slice,
    group_range: slice,
) -> None:
    """Stride-1 depthwise block: multiply-accumulate contiguous windows, then crop.

    With the block's padded channels as rows, kernel offset ``k`` reads the plain slice
    ``rows[:, start_k : start_k + length]`` (``start_k = sum_i k_i * tap_step_i``).
    """
    channels = padded.shape[0] * padded.shape[1]
    rows = padded.reshape(channels, 1, padded.shape[2])
    weights = taps[group_range]
    multiplier = weights.shape[1]
    # (channels, multiplier, taps): every tap's weight per row, made once per block (the tap
    # loop runs while the other cores' blocks wait for the GIL between their numpy calls)
    weights = np.tile(weights.reshape(*weights.shape[:2], -1), (padded.shape[0], 1, 1))
    shape = (channels, multiplier, geometry.length)
    total = scratch(math.prod(shape), padded.dtype, "total").reshape(shape)
    term = scratch(total.size, padded.dtype, "term").reshape(shape)
    for index, start in enumerate(geometry.tap_starts):
        window = rows[:, :, start : start + geometry.length]
        weight = weights[:, :, index, None]
        if index == 0:
            np.multiply(window, weight, out=total)
        else:
            np.multiply(window, weight, out=term)
            total += term
    grid = total.reshape(*padded.shape[:2], multiplier, *geometry.grid)
    y_view[images, group_range] = grid[geometry.crop]


def _depthwise_strided_block(
    plan: ConvPlan,
    padded: np.ndarray,
    taps: np.ndarray,
    y_view: np.ndarray,
    images: slice,
    group_range: slice,
) -> None:
    """Depthwise block for any stride: multiply-accumulate strided windows into Y."""
    part = padded.reshape(*padded.shape[:2], 1, *padded_shape(plan))
    out = plan.output_shape[2:]
    weights = taps[group_range][(Ellipsis, *((None,) * len(out)))]
    total = y_view[images, group_range]
    term = scratch(total.size, total.dtype, "term").reshape(total.shape)
    zeros = (0,) * len(out)
    for index, offset in enumerate(kernel_offsets(plan.kernel_shape)):
        window = part[(Ellipsis, *tap_slices(plan, offset, zeros, out))]
        weight = weights[(slice(None), slice(None), *offset)]
        if index == 0:
            np.multiply(window, weight, out=total)
        else:
            np.multiply(window, weight, out=term)
            total += term


# --- shifted: one GEMM per kernel tap, read in place from the padded rows ----------------


def is_shifted(plan: ConvPlan) -> bool:
    """Stride 1; at least SHIFTED_MIN_CHANNELS input channels per group (half that for 1-D
    convs, whose windows are whole rows with nothing to crop); at least MIN_GEMM_COLUMNS output
    positions per image on the padded-row grid; and a BLAS that can accumulate products in
    place (:func:`padconv_cli.kernels.blas.has_direct_gemm`)."""
    minimum = SHIFTED_MIN_CHANNELS // 2 if plan.spatial_rank == 1 else SHIFTED_MIN_CHANNELS
    return (
        all(s == 1 for s in plan.strides)
        and plan.w_shape[1] >= minimum
        and plan.output_shape[2] * math.prod(padded_shape(plan)[1:]) >= MIN_GEMM_COLUMNS
        and blas.has_direct_gemm(np.dtype(np.float32))
    )


def shifted_path(plan: ConvPlan, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    """``Ywide[n, g] = sum_k W[g, :, :, k] (M/G x C/G) @ rows[n, g, :, start_k : start_k + L]``.

    With stride 1 and the padded input flattened per channel (:class:`_WideRows`), kernel tap
    ``k`` reads one contiguous window of every channel, so each tap is a GEMM whose right-hand
    matrix is a strided view of the padded input, accumulated into the output by BLAS: no
    im2col copy. The sums run over the taps in C order, each tap's product over the C/G
    channels. Outputs are computed over whole padded rows in blocks of rows
    (:func:`shifted_block_rows`) and cropped into Y (written in place when there is nothing to
    crop). Smaller inputs are padded as a whole first, in parts on all the cores when they have
    SHIFTED_PARALLEL_PAD_BYTES or more (one :func:`~padconv_cli.kernels.workers.run_stages`
    call: the helpers wake once for the padding and the blocks); the geometry and the blocks
    are worked out once per plan. Inputs of SHIFTED_LOCAL_PAD_BYTES and more are not padded
    as a whole: each block
    pads the input rows it reads into its thread's scratch buffer, on all the cores, right
    before their use, and no padded copy of X is held. The blocks run on padconv's workers
    with single-threaded BLAS whatever their number: BLAS's result for an element depends on
    how its threads split the matrix.
    """
    n, c = plan.x_shape[:2]
    groups, m = plan.group, plan.w_shape[0]
    geometry, blocks = _shifted_schedule(
        plan, y.itemsize, workers.worker_count(), SHIFTED_BLOCK_BYTES
    )
    w_taps = np.ascontiguousarray(
        w.reshape(groups, m // groups, c // groups, len(geometry.tap_starts)).transpose(3, 0, 1, 2)
    )
    xp, padding = None, []
    if x.nbytes < SHIFTED_LOCAL_PAD_BYTES:
        xp = padded_buffer(x, plan, y.dtype, geometry.slack)
        if xp is None:
            xp = unpadded_rows(x, plan)
        else:
            padding = padding_tasks(plan, x, xp, padding_parts(x, SHIFTED_PARALLEL_PAD_BYTES))
    block = functools.partial(_shifted_block, plan, geometry, x, xp, w_taps, y)
    with single_threaded_blas():  # see run_gemm_tasks
        run_stages([padding, [functools.partial(block, *where) for where in blocks]])


@functools.lru_cache(maxsize=64)
def _shifted_schedule(
    plan: ConvPlan, itemsize: int, cores: int, block_bytes: int
) -> tuple[_WideRows, tuple[tuple[int, int, int, int], ...]]:
    """The shifted path's geometry and its blocks ``(image, group, first row, stop row)``,
    worked out once per plan: ``cores`` and ``block_bytes`` (the current worker_count() and
    SHIFTED_BLOCK_BYTES, which :func:`shifted_block_rows` reads) are part of the key."""
    n, out0 = plan.output_shape[0], plan.output_shape[2]
    rows = shifted_block_rows(plan, itemsize)
    blocks = tuple(
        (image, group, first, min(out0, first + rows))
        for image in range(n) for group in range(plan.group) for first in range(0, out0, rows)
    )
    return wide_rows(plan), blocks


def shifted_block_rows(plan: ConvPlan, itemsize: int) -> int:
    """Output rows (first spatial axis) per block of :func:`shifted_path`.

    A block's ``M/G * rows * prod(padded[1:])`` accumulators stay near SHIFTED_BLOCK_BYTES, and
    each image and group is cut into a multiple of ``cores / G`` blocks (at least one such
    multiple), so that the cores share even a single image evenly. The rows depend on neither
    the batch size nor the data, so that a run on some of the images repeats the same matrix
    products.
    """
    m, out0 = plan.output_shape[1:3]
    row_bytes = (m // plan.group) * math.prod(padded_shape(plan)[1:]) * itemsize
    share = max(1, workers.worker_count() // plan.group)
    count = -(-out0 // max(1, SHIFTED_BLOCK_BYTES // row_bytes))
    count = -(-count // share) * share
    return max(1, -(-out0 // count))


def shifted_scratch_bytes(
    plan: ConvPlan,
    itemsize: int,
    out_channels: int | None = None,
    extents: Sequence[int] | None = None,
) -> int:
    """Upper bound of the shifted path's block buffers, one block per core:
    ``cores * M_b * rows * prod(extents[1:]) * itemsize``, with ``M_b = M/G`` (or the
    ``out_channels`` of a tile), ``extents`` the padded input's (or a tile's) and ``rows`` the
    block rows of :func:`shifted_block_rows`, at most ``extents``' output rows."""
    m = plan.output_shape[1] // plan.group if out_channels is None else out_channels
    extents = padded_shape(plan) if extents is None else extents
    reach = (plan.kernel_shape[0] - 1) * plan.dilations[0]
    rows = min(extents[0] - reach, shifted_block_rows(plan, itemsize))
    return workers.worker_count() * m * max(1, rows) * math.prod(extents[1:]) * itemsize


def _shifted_block(
    plan: ConvPlan,
    geometry: _WideRows,
    x: np.ndarray,
    xp: np.ndarray | None,
    w_taps: np.ndarray,
    y: np.ndarray,
    image: int,
    group: int,
    first: int,
    stop: int,
) -> None:
    """Output rows ``first:stop`` of one image and group: the input rows they read (from the
    padded input ``xp``, or padded here when it is None), the sum over the taps of one GEMM
    each (:func:`~padconv_cli.kernels.blas.sum_of_products`), then the crop into Y."""
    per_group_out, per_group_in = w_taps.shape[2:]
    row = geometry.row_strides[0]
    count = (stop - first) * row
    channels = slice(group * per_group_in, (group + 1) * per_group_in)
    if xp is None:
        source = _padded_rows(plan, geometry, x[image, channels], first, stop, y.dtype)
    else:
        source = xp[image, channels, first * row :]
    y_rows = y.reshape(y.shape[0], plan.group, per_group_out, -1)[image, group]
    if geometry.crop_free:
        target = y_rows[:, first * row : stop * row]
    else:
        target = scratch(per_group_out * count, y.dtype, "product")
        target = target.reshape(per_group_out, count)
    blas.sum_of_products(w_taps[:, group], source, geometry.tap_starts, target)
    if not geometry.crop_free:
        grid = target.reshape(per_group_out, stop - first, *geometry.spatial[1:])
        out = y_rows.reshape(per_group_out, -1, *geometry.out[1:])
        out[:, first:stop] = grid[geometry.crop]


def _padded_rows(
    plan: ConvPlan, geometry: _WideRows, x_image: np.ndarray, first: int, stop: int,
    acc: np.dtype,
) -> np.ndarray:
    """The padded rows ``first : stop + (k0-1)*d0`` (first spatial axis) of one image's
    channels ``x_image`` (C, *spatial), flattened per channel with the slack that the last
    taps' windows read past them: :func:`padded_input` of the input rows they hold, with the
    pads that fall inside them."""
    reach = (plan.kernel_shape[0] - 1) * plan.dilations[0]
    begin, size = plan.pads_begin[0], plan.x_shape[2]
    top, bottom = first - begin, stop + reach - begin  # input rows, padding outside [0, size)
    low, high = max(0, top), max(0, min(size, bottom))
    low = min(low, high)
    part = x_image[None, :, low:high]
    pads = (low - top, *plan.pads_begin[1:], bottom - high, *plan.pads_end[1:])
    rows_plan = dataclasses.replace(plan, x_shape=part.shape, pads=pads)
    return padded_input(part, rows_plan, acc, geometry.row_slack)[0]


# --- im2col + GEMM ------------------------------------------------------------------------


def block_axis_and_step(dims: Sequence[int], budget: int, first_axis: int) -> tuple[int, int]:
    """Where to cut the index space ``dims`` into runs of at most ``budget`` positions.

    The block axis ``a`` is the first axis >= ``first_axis`` whose trailing extent fits the
    budget (the last axis always does, as ``budget >= 1``); ``step`` is the run length along
    ``a``: ``budget // prod(dims[a+1:])``, then evened out so the runs have (nearly) equal size.
    """
    axis = first_axis
    while axis < len(dims) - 1 and math.prod(dims[axis + 1 :]) > budget:
        axis += 1
    step = max(1, budget // max(1, math.prod(dims[axis + 1 :])))
    step = -(-dims[axis] // -(-dims[axis] // step))  # same number of runs, evened out
    return axis, step


def output_blocks(
    dims: Sequence[int], axis: int, step: int
) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Tile the index space ``dims`` in C order into boxes ``(starts, lengths)``.

    Each box has single indices on the axes before ``axis``, a run of at most ``step`` indices
    on ``axis`` and full extent after it, so it is one contiguous run of flat indices.
    """
    tail = list(dims[axis + 1 :])
    for prefix in itertools.product(*(range(d) for d in dims[:axis])):
        for start in range(0, dims[axis], step):
            length = min(step, dims[axis] - start)
            yield (*prefix, start, *([0] * len(tail))), (*([1] * len(prefix)), length, *tail)


def _block_budget(plan: ConvPlan, itemsize: int) -> tuple[int, int]:
    """``(budget, first_axis)``: output positions per im2col block and whether images may share
    a block (``first_axis = 0``, only when one has fewer than MIN_GEMM_COLUMNS positions).

    ``budget = block_bytes // ((C * prod(k) + M) * itemsize)`` with ``block_bytes =
    min(WORKSPACE_BYTES, max(GEMM_BLOCK_BYTES, MIN_GEMM_COLUMNS * per_position))``.
    """
    n, m, *out = plan.output_shape
    per_position = _position_bytes(plan, itemsize)
    block_bytes = min(WORKSPACE_BYTES, max(GEMM_BLOCK_BYTES, MIN_GEMM_COLUMNS * per_position))
    first_axis = 1 if math.prod(out) >= MIN_GEMM_COLUMNS or n == 1 else 0
    return max(1, block_bytes // per_position), first_axis


def _position_bytes(plan: ConvPlan, itemsize: int) -> int:
    """Bytes an im2col block holds per output position: its column and its output,
    ``(C * prod(k) + M) * itemsize``."""
    return (plan.x_shape[1] * math.prod(plan.kernel_shape) + plan.output_shape[1]) * itemsize


def im2col_block_grid(plan: ConvPlan, itemsize: int) -> tuple[int, int, int]:
    """How :func:`im2col_path` cuts the index space ``(N, *out_spatial)`` into GEMM blocks.

    Returns ``(first_axis, axis, step)``: blocks are runs of ``step`` indices along ``axis``
    with single indices before it and full extent after it (:func:`block_axis_and_step` with
    the budget of :func:`_block_budget`). ``itemsize`` is the accumulator's (4, or 8).
    """
    return _im2col_grid(plan, itemsize)[:3]


def _im2col_grid(plan: ConvPlan, itemsize: int) -> tuple[int, int, int, bool]:
    """:func:`im2col_block_grid` and whether the blocks are copied over whole padded rows
    (:func:`_wide_im2col_block`): stride 1, at least 2 spatial axes, padded rows at most
    WIDE_MAX_OVERHEAD times the output rows, blocks of whole rows of one image (block axis 1),
    and the same blocks still within WORKSPACE_BYTES with each row counted at its padded size
    (GEMM_BLOCK_BYTES, a preference for cache, may be passed by that overhead)."""
    n, _, *out = plan.output_shape
    budget, first_axis = _block_budget(plan, itemsize)
    axis, step = block_axis_and_step((n, *out), budget, first_axis)
    wide = (
        axis == 1
        and plan.spatial_rank >= 2
        and all(s == 1 for s in plan.strides)
        and wide_row_overhead(plan) <= WIDE_MAX_OVERHEAD
        and step * math.prod(padded_shape(plan)[1:]) * _position_bytes(plan, itemsize)
        <= WORKSPACE_BYTES
    )
    return first_axis, axis, step, wide


def im2col_working_bytes(plan: ConvPlan, itemsize: int) -> int:
    """The im2col column buffer: ``C * prod(kernel)`` rows by the output positions of one
    block, a block being capped near WORKSPACE_BYTES but never smaller than one output row."""
    channels, taps = plan.x_shape[1], math.prod(plan.kernel_shape)
    per_position = (channels * taps + plan.w_shape[0]) * itemsize
    budget = max(1, WORKSPACE_BYTES // per_position)
    out = plan.output_shape[2:]
    positions = plan.output_shape[0] * math.prod(out)
    block = max(min(positions, budget), out[-1] if out else 1)
    return channels * taps * block * itemsize


def im2col_path(plan: ConvPlan, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    """``Y[n, g] = W[g] (M/G x C/G*K) @ cols[g] (C/G*K x positions)``, block by block.

    ``cols[g, c*K + k, p] = Xpad[n, g*C/G + c, p*s + k*d]``; one batched matmul over the groups per
    block of output positions (:func:`im2col_block_grid`). The column buffer holds at most
    WORKSPACE_BYTES (at least one position), and about GEMM_BLOCK_BYTES when that is smaller,
    so that BLAS reads it from cache. When images are small, several share a block (one GEMM).
    Stride-1 blocks of whole rows are copied along whole padded rows (:func:`_im2col_grid`).
    """
    n, c = plan.x_shape[:2]
    groups, m = plan.group, plan.w_shape[0]
    taps = math.prod(plan.kernel_shape)
    out = plan.output_shape[2:]
    w_matrix = w.reshape(groups, m // groups, (c // groups) * taps)
    _, axis, step, wide = _im2col_grid(plan, y.itemsize)
    if wide:
        geometry = wide_rows(plan)
        xp = padded_input(x, plan, y.dtype, geometry.slack, padding_parts(x))
        block = functools.partial(_wide_im2col_block, plan, geometry, xp, w_matrix, y)
    else:
        xp = padded_input(x, plan, y.dtype, 0, padding_parts(x)).reshape(
            n, groups, c // groups, *padded_shape(plan)
        )
        y_flat = y.reshape(n, groups, m // groups, math.prod(out))
        block = functools.partial(_im2col_block, plan, xp, w_matrix, y_flat)
    run_gemm_tasks(
        [functools.partial(block, starts, lengths)
         for starts, lengths in output_blocks((n, *out), axis, step)]
    )


@functools.lru_cache(maxsize=64)
def wide_rows(plan: ConvPlan) -> _WideRows:
    """:class:`_WideRows` of the plan, worked out once."""
    return _WideRows(plan)


def _wide_im2col_block(
    plan: ConvPlan,
    geometry: _WideRows,
    xp: np.ndarray,
    w_matrix: np.ndarray,
    y: np.ndarray,
    starts: tuple[int, ...],
    lengths: tuple[int, ...],
) -> None:
    """One im2col block over whole padded rows: kernel tap ``k`` of channel ``c`` is the
    contiguous window ``xp[n, c, first*row + start_k :][:count]`` (:class:`_WideRows`), so the
    column copy runs along whole rows; the product lands on the padded-row grid and is cropped
    into Y."""
    image, first, rows = starts[0], starts[1], lengths[1]
    groups, per_group, k_rows = w_matrix.shape
    count = rows * geometry.row_strides[0]
    buffer = scratch(groups * k_rows * count, y.dtype, "columns")
    channels = xp.shape[1] // groups
    cols = buffer.reshape(groups, channels, *plan.kernel_shape, count)
    source = xp[image].reshape(-1)[first * geometry.row_strides[0] :]
    item = xp.itemsize
    view = np.lib.stride_tricks.as_strided(
        source,
        shape=cols.shape,
        strides=(channels * xp.strides[1], xp.strides[1], *(t * item for t in geometry.tap_steps),
                 item),
        writeable=False,
    )
    np.copyto(cols, view)
    product = scratch(groups * per_group * count, y.dtype, "product")
    product = product.reshape(groups, per_group, count)
    np.matmul(w_matrix, buffer.reshape(groups, k_rows, count), out=product)
    grid = product.reshape(groups, per_group, rows, *geometry.spatial[1:])
    out = y.reshape(y.shape[0], groups, per_group, *y.shape[2:])[image, :, :, first : first + rows]
    out[...] = grid[geometry.crop]


def _im2col_block(
    plan: ConvPlan,
    xp: np.ndarray,
    w_matrix: np.ndarray,
    y_flat: np.ndarray,
    starts: tuple[int, ...],
    lengths: tuple[int, ...],
) -> None:
    """One im2col block: copy its patches into this thread's column buffer, then one batched
    GEMM over the groups into the block's (contiguous) output positions."""
    groups, per_group, rows = w_matrix.shape
    per_group_channels = rows // math.prod(plan.kernel_shape)
    count = math.prod(lengths)
    buffer = scratch(groups * rows * count, y_flat.dtype, "columns")
    images = slice(starts[0], starts[0] + lengths[0])
    cols = buffer.reshape(groups, per_group_channels, *plan.kernel_shape, *lengths)
    np.copyto(cols, patch_view(plan, xp, starts, lengths))
    matrix = buffer.reshape(groups, rows, count)
    if lengths[0] == 1:
        first = sum(
            s * st for s, st in zip(starts[1:], flat_strides(plan.output_shape[2:]), strict=True)
        )
        np.matmul(w_matrix, matrix, out=y_flat[starts[0], :, :, first : first + count])
    else:
        product = scratch(groups * per_group * count, y_flat.dtype, "product")
        product = product.reshape(groups, per_group, count)
        np.matmul(w_matrix, matrix, out=product)
        per_image = product.reshape(groups, per_group, lengths[0], y_flat.shape[-1])
        y_flat[images] = np.moveaxis(per_image, 2, 0)


def patch_view(
    plan: ConvPlan, xp: np.ndarray, starts: Sequence[int], lengths: Sequence[int]
) -> np.ndarray:
    """Read-only view ``V[g, c, *k, n, *o] = xp[starts[0] + n, g, c, *((starts_i + o_i) * s_i
    + k_i * d_i)]`` of the padded input ``xp`` (N, G, C/G, *padded, C-contiguous): the block's
    column matrix as one strided view, so that filling it is a single copy."""
    item = xp.itemsize
    image_stride, group_stride, channel_stride, *row_strides = (st // item for st in xp.strides)
    first = starts[0] * image_stride + sum(
        start * s * row
        for start, s, row in zip(starts[1:], plan.strides, row_strides, strict=True)
    )
    taps = [d * row for d, row in zip(plan.dilations, row_strides, strict=True)]
    steps = [s * row for s, row in zip(plan.strides, row_strides, strict=True)]
    return np.lib.stride_tricks.as_strided(
        xp.reshape(-1)[first:],
        shape=(*xp.shape[1:3], *plan.kernel_shape, *lengths),
        strides=tuple(
            e * item for e in (group_stride, channel_stride, *taps, image_stride, *steps)
        ),
        writeable=False,
    )
