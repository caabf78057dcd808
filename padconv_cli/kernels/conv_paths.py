"""Conv compute paths: numpy data movement around BLAS matrix products.

Every path computes, for a validated :class:`~padconv_cli.kernels.conv.ConvPlan`,
``Y[n, m, o] = sum_{c, k} W[m, c, k] * Xpad[n, g*C/G + c, o*s + k*d]`` in the accumulator dtype
(float32, or float64 for float64 inputs):

* pointwise: 1x1 kernel, stride 1, no pads -> one (batched) GEMM straight from X;
* depthwise: one input channel per group and few outputs per group -> a multiply and an add per
  kernel offset over cache-sized blocks of channels, spread over the cores, no im2col;
* im2col: everything else -> patches of the padded input are copied into a column matrix one
  block of output positions at a time and multiplied by W with one batched GEMM per block.

Memory: besides X, W and Y (accumulator dtype, plus the final cast for float16/bfloat16), the
im2col path holds the padded copy of X and a column buffer of at most ``WORKSPACE_BYTES``
whatever the input size (one of at most ``KEPT_BUFFER_BYTES`` stays allocated per calling thread
for the next call); the depthwise path holds, per worker, one block of about
``DEPTHWISE_BLOCK_BYTES`` (at least one padded channel and two accumulator rows of one channel).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from padconv_cli.kernels.conv import ConvPlan

WORKSPACE_BYTES = 64 * 2**20
"""Cap on the im2col column buffer; tests lower it to exercise chunking."""

MIN_GEMM_COLUMNS = 1024
"""Below this many output positions per image, several images share one GEMM; blocks of output
positions are not made smaller than this (unless WORKSPACE_BYTES says so)."""

GEMM_BLOCK_BYTES = 2 * 2**20
"""Preferred size of one im2col block: small enough to stay in cache for the GEMM."""

KEPT_BUFFER_BYTES = 16 * 2**20
"""Column buffers up to this size are reused from call to call (one per thread)."""

DEPTHWISE_MAX_MULTIPLIER = 4
"""Largest M/group for which the shifted multiply-add path beats im2col + GEMM."""

DEPTHWISE_BLOCK_BYTES = 1 * 2**20
"""Target size of the two accumulator buffers of one depthwise block (one block per task)."""

WIDE_MAX_OVERHEAD = 1.5
"""Largest ratio of padded to output row size for which the stride-1 depthwise path computes
over whole padded rows (contiguous slices) and crops afterwards. (Tried for im2col too: its
column copies are bound by memory bandwidth either way, and the wider GEMM cost more.)"""

_pool: ThreadPoolExecutor | None = None
_pool_pid = -1
_kept = threading.local()


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
    return np.dtype(np.float64) if dtype.name == "float64" else np.dtype(np.float32)


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


def padded_input(
    x: np.ndarray,
    plan: ConvPlan,
    acc: np.dtype,
    images: slice = slice(None),
    channels: slice = slice(None),
    slack: int = 0,
) -> np.ndarray:
    """``X[images, channels]`` zero-padded by the plan's pads into a fresh ``acc`` buffer.

    Shape ``(images, channels, prod(padded_shape) + slack)``, flattened per channel; the
    ``slack`` trailing zeros let stride-1 paths read whole padded rows past the last one. The
    input is returned as it is (reshaped) when there is nothing to pad or cast.
    """
    part = x[images, channels]
    spatial = padded_shape(plan)
    size = math.prod(spatial)
    if slack == 0 and not any(plan.pads) and part.dtype == acc:
        return np.ascontiguousarray(part).reshape(*part.shape[:2], size)
    flat = np.zeros((*part.shape[:2], size + slack), dtype=acc)
    interior = tuple(
        slice(begin, begin + length)
        for begin, length in zip(plan.pads_begin, plan.x_shape[2:], strict=True)
    )
    flat[..., :size].reshape(*part.shape[:2], *spatial)[(Ellipsis, *interior)] = part
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
    if len(tasks) <= 1 or worker_count() == 1:
        for task in tasks:
            task()
        return
    pool = _thread_pool()
    for future in [pool.submit(task) for task in tasks]:
        future.result()


def _thread_pool() -> ThreadPoolExecutor:
    """The module's worker threads, made anew in a forked child (threads do not survive fork)."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(max_workers=worker_count(), thread_name_prefix="padconv")
        _pool_pid = os.getpid()
    return _pool


def run_gemm_tasks(tasks: Sequence[Callable[[], None]]) -> None:
    """Run independent tasks that call BLAS: on padconv's workers with single-threaded BLAS
    when OpenBLAS's thread count can be set, else one after the other on BLAS's own threads.

    Own workers over many blocks keep both cores busy through the copies as well as the
    products, and a core taken by another process only slows its current block, where BLAS's
    threads wait for each other at every barrier.
    """
    with single_threaded_blas() as ours:
        if ours:
            run_tasks(tasks)
        else:
            for task in tasks:
                task()


_blas_lock = threading.Lock()
_blas_users = 0
_blas_saved_threads = 0


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[bool]:
    """Set OpenBLAS to one thread for the block (restored when the last concurrent user leaves);
    yields whether it could (False when numpy's BLAS is not a known OpenBLAS, or with one core).

    The thread count only changes how OpenBLAS splits the output between its threads, never a
    sum's order, so results are the same either way.
    """
    global _blas_users, _blas_saved_threads
    controls = _openblas_thread_controls()
    if controls is None or worker_count() == 1:
        yield False
        return
    get_threads, set_threads = controls
    with _blas_lock:
        if _blas_users == 0:
            _blas_saved_threads = get_threads()
            set_threads(1)
        _blas_users += 1
    try:
        yield True
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                set_threads(_blas_saved_threads)


@functools.cache
def _openblas_thread_controls() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the thread count of the OpenBLAS numpy links, found among the loaded shared
    libraries (Linux); None when there is none or it lacks the functions."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(p for p in paths if p.startswith("/")):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "64_"), ("openblas", "")):
            getter = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
            setter = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
            if getter is not None and setter is not None:
                getter.restype, getter.argtypes = ctypes.c_int, []
                setter.restype, setter.argtypes = None, [ctypes.c_int]
                return getter, setter
    return None


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

    Works on cache-sized blocks of channels spread over the cores; each block pads its own
    channels (every input element is still copied once) and accumulates the kernel taps with
    whole-block numpy operations, no im2col. Stride 1 reads whole padded rows (contiguous
    windows) and crops at the end; other strides read strided windows.
    """
    wide = all(s == 1 for s in plan.strides) and wide_row_overhead(plan) <= WIDE_MAX_OVERHEAD
    n, groups = plan.x_shape[0], plan.group
    multiplier = plan.w_shape[0] // groups
    taps = w.reshape(groups, multiplier, *plan.kernel_shape)
    y_view = y.reshape(n, groups, multiplier, *plan.output_shape[2:])
    if wide:
        geometry = _WideRows(plan)
        row_bytes = 2 * multiplier * geometry.length * y.itemsize

        def block(images: slice, group_range: slice) -> None:
            _depthwise_wide_block(plan, geometry, x, taps, y_view, images, group_range)

    else:
        row_bytes = 2 * multiplier * math.prod(plan.output_shape[2:]) * y.itemsize

        def block(images: slice, group_range: slice) -> None:
            _depthwise_strided_block(plan, x, taps, y_view, images, group_range)

    blocks = _channel_blocks(n, groups, row_bytes)
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
    workers = worker_count()
    count = max(1, -(-total_bytes // max(1, DEPTHWISE_BLOCK_BYTES)))
    return -(-count // workers) * workers


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
        out = plan.output_shape[2:]
        self.grid = (out[0], *spatial[1:])
        self.crop = (Ellipsis, *(slice(0, o) for o in out[1:]))


def _depthwise_wide_block(
    plan: ConvPlan,
    geometry: _WideRows,
    x: np.ndarray,
    taps: np.ndarray,
    y_view: np.ndarray,
    images: slice,
    group_range: slice,
) -> None:
    """Stride-1 depthwise block: multiply-accumulate contiguous windows, then crop."""
    xp = padded_input(x, plan, y_view.dtype, images, group_range, geometry.slack)
    kernel = plan.kernel_shape
    weights = taps[group_range][..., None]  # (g, multiplier, *kernel, 1)
    item = xp.itemsize
    windows = np.lib.stride_tricks.as_strided(
        xp,
        shape=(*xp.shape[:2], 1, *kernel, geometry.length),
        strides=(*xp.strides[:2], 0, *(t * item for t in geometry.tap_steps), item),
        writeable=False,
    )
    total = np.empty((*xp.shape[:2], weights.shape[1], geometry.length), dtype=xp.dtype)
    term = np.empty_like(total)
    for index, offset in enumerate(kernel_offsets(kernel)):
        position = (Ellipsis, *offset, slice(None))
        if index == 0:
            np.multiply(windows[position], weights[position], out=total)
        else:
            np.multiply(windows[position], weights[position], out=term)
            total += term
    rows = total.reshape(*total.shape[:3], *geometry.grid)
    y_view[images, group_range] = rows[geometry.crop]


def _depthwise_strided_block(
    plan: ConvPlan,
    x: np.ndarray,
    taps: np.ndarray,
    y_view: np.ndarray,
    images: slice,
    group_range: slice,
) -> None:
    """Depthwise block for any stride: multiply-accumulate strided windows into Y."""
    xp = padded_input(x, plan, y_view.dtype, images, group_range)
    xp = xp.reshape(*xp.shape[:2], 1, *padded_shape(plan))
    out = plan.output_shape[2:]
    weights = taps[group_range][(Ellipsis, *((None,) * len(out)))]
    total = y_view[images, group_range]
    term = np.empty_like(total)
    zeros = (0,) * len(out)
    for index, offset in enumerate(kernel_offsets(plan.kernel_shape)):
        window = xp[(Ellipsis, *tap_slices(plan, offset, zeros, out))]
        weight = weights[(slice(None), slice(None), *offset)]
        if index == 0:
            np.multiply(window, weight, out=total)
        else:
            np.multiply(window, weight, out=term)
            total += term


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
    per_position = (plan.x_shape[1] * math.prod(plan.kernel_shape) + m) * itemsize
    block_bytes = min(WORKSPACE_BYTES, max(GEMM_BLOCK_BYTES, MIN_GEMM_COLUMNS * per_position))
    first_axis = 1 if math.prod(out) >= MIN_GEMM_COLUMNS or n == 1 else 0
    return max(1, block_bytes // per_position), first_axis


def im2col_block_grid(plan: ConvPlan, itemsize: int) -> tuple[int, int, int]:
    """How :func:`im2col_path` cuts the index space ``(N, *out_spatial)`` into GEMM blocks.

    Returns ``(first_axis, axis, step)``: blocks are runs of ``step`` indices along ``axis``
    with single indices before it and full extent after it (:func:`block_axis_and_step` with
    the budget of :func:`_block_budget`). ``itemsize`` is the accumulator's (4, or 8).
    """
    n, _, *out = plan.output_shape
    budget, first_axis = _block_budget(plan, itemsize)
    axis, step = block_axis_and_step((n, *out), budget, first_axis)
    return first_axis, axis, step


def im2col_path(plan: ConvPlan, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    """``Y[n, g] = W[g] (M/G x C/G*K) @ cols[g] (C/G*K x positions)``, block by block.

    ``cols[g, c*K + k, p] = Xpad[n, g*C/G + c, p*s + k*d]``; one batched matmul over the groups per
    block of output positions (:func:`im2col_block_grid`). The column buffer holds at most
    WORKSPACE_BYTES (at least one position), and about GEMM_BLOCK_BYTES when that is smaller,
    so that BLAS reads it from cache. When images are small, several share a block (one GEMM).
    """
    n, c = plan.x_shape[:2]
    groups, m = plan.group, plan.w_shape[0]
    taps = math.prod(plan.kernel_shape)
    spatial = padded_shape(plan)
    out = plan.output_shape[2:]
    xp = padded_input(x, plan, y.dtype).reshape(n, groups, c // groups, *spatial)
    w_matrix = w.reshape(groups, m // groups, (c // groups) * taps)
    y_flat = y.reshape(n, groups, m // groups, math.prod(out))

    _, axis, step = im2col_block_grid(plan, y.itemsize)
    block = functools.partial(_im2col_block, plan, xp, w_matrix, y_flat)
    run_gemm_tasks(
        [functools.partial(block, starts, lengths)
         for starts, lengths in output_blocks((n, *out), axis, step)]
    )


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
    buffer = column_buffer(groups * rows * count, y_flat.dtype)
    images = slice(starts[0], starts[0] + lengths[0])
    cols = buffer.reshape(groups, per_group_channels, *plan.kernel_shape, *lengths)
    np.copyto(cols, patch_view(plan, xp, starts, lengths))
    matrix = buffer.reshape(groups, rows, count)
    if groups == 1:
        # np.dot runs concurrently on the workers at full speed; np.matmul was measured to burn
        # about twice the CPU time when two threads call it at once
        product = np.dot(w_matrix[0], matrix[0])[None]
    else:
        product = np.matmul(w_matrix, matrix)
    if lengths[0] == 1:
        first = sum(
            s * st for s, st in zip(starts[1:], flat_strides(plan.output_shape[2:]), strict=True)
        )
        y_flat[starts[0], :, :, first : first + count] = product
    else:
        per_image = product.reshape(groups, per_group, lengths[0], y_flat.shape[-1])
        y_flat[images] = np.moveaxis(per_image, 2, 0)


def column_buffer(size: int, dtype: np.dtype) -> np.ndarray:
    """A 1-D scratch array of ``size`` elements, kept per thread between calls when it is at most
    KEPT_BUFFER_BYTES (a fresh large allocation costs one page fault per 4 KiB on first use)."""
    nbytes = size * np.dtype(dtype).itemsize
    if nbytes > KEPT_BUFFER_BYTES:
        return np.empty(size, dtype=dtype)
    kept = getattr(_kept, "buffer", None)
    if kept is None or kept.nbytes < nbytes:
        kept = _kept.buffer = np.empty(nbytes, dtype=np.uint8)
    return kept[:nbytes].view(dtype)


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
