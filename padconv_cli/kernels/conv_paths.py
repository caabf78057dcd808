"""Conv compute: the native core (:mod:`padconv_cli.kernels.native`) and its memory formulas.

For a validated :class:`~padconv_cli.kernels.conv.ConvPlan` the core computes
``Y[n, m, o] = sum_{c, t} W[m, c, t] * Xpad[n, g*C/G + c, o*s + t*d]`` in the accumulator dtype
(float32, or float64 for float64 inputs), then ``+ B[m]``, with one of two kernels:

* GEMM (``C/G > 1``): blocks of output positions; each gathers its panel of input values (one
  row per channel and kernel tap, the padding written as zeros) and multiplies it by W, packed
  in tiles of ``TILE_ROWS`` output channels, in a register tile that holds every sum whole;
* depthwise (``C/G == 1``): rows of output positions; the input rows under the kernel are
  zero-padded and split by stride into contiguous phases (kept for the next output rows that
  read them), and the taps are summed in C order.

Either way every sum runs in one fixed order (``c``, then the kernel taps in C order), so the
result depends neither on the thread count nor on which part of the tensor is computed: any
tile of the output equals the same elements of the whole, bit for bit.

Memory besides X, W and Y (:func:`scratch_bytes`): X is never copied padded. The GEMM kernel
holds W packed (``G * ceil(M/G / TILE_ROWS) * TILE_ROWS * C/G * prod(k)`` elements) and, per
thread, one panel of about ``PANEL_BYTES`` (at least ``C/G * prod(k) * TILE_COLUMNS`` elements,
at most all of an image's output positions); the
depthwise kernel holds, per thread, the padded phases of about twice the input rows one
output row reads.
float16 and bfloat16 inputs add float32 copies of X, W and Y (:func:`working_bytes`).
"""

from __future__ import annotations

import math

import numpy as np

from padconv_cli.kernels.conv_plan import ConvPlan

PANEL_BYTES = 512 * 2**10
"""Target size of one GEMM panel (the native core's PANEL_BYTES)."""

TILE_ROWS = 8
"""Most output channels in one register tile over the instruction sets (W is packed in these)."""

TILE_COLUMNS = 32
"""Most output positions in one register tile over the instruction sets."""

MIN_TILE_COLUMNS = 8
"""Fewest output positions in one register tile over the instruction sets."""

DEPTHWISE_KEPT_TAPS = 32
"""Most outer kernel taps for which the depthwise kernel keeps padded rows for the next rows."""

DEPTHWISE_COLUMNS = 64
"""Most output positions in one depthwise register block over the instruction sets."""


def convolve(plan: ConvPlan, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Run the plan on validated inputs; the result has X's dtype, rounded once from the sum.

    The sums run in the native core in the accumulator dtype, ``+ B[m]`` after each sum;
    float16/bfloat16 inputs are cast to float32 first and the float32 result is rounded once
    to the input dtype.
    """
    from padconv_cli.kernels import native

    acc = accumulator_dtype(x.dtype)
    y = np.empty(plan.output_shape, acc)
    if y.size:
        native.conv_into(
            np.ascontiguousarray(x, dtype=acc),
            np.ascontiguousarray(w, dtype=acc),
            None if b is None else np.ascontiguousarray(b, dtype=acc),
            y,
            strides=plan.strides,
            dilations=plan.dilations,
            pads_begin=plan.pads_begin,
            group=plan.group,
        )
    if y.dtype == x.dtype:
        return y
    result = np.empty(y.shape, x.dtype)
    np.copyto(result, y, casting="unsafe")  # rounded once, as astype would
    return result


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """float64 inputs accumulate in float64, every other float type in float32."""
    is_double = dtype.kind == "f" and dtype.itemsize == 8
    return np.dtype(np.float64) if is_double else np.dtype(np.float32)


def is_depthwise(plan: ConvPlan) -> bool:
    """One input channel per group (``C/G == 1``): the depthwise kernel runs."""
    return plan.w_shape[1] == 1


def scratch_bytes(
    plan: ConvPlan, itemsize: int, threads: int, out_channels: int | None = None
) -> int:
    """Upper bound of the native core's own buffers for the plan (module docstring), with
    ``itemsize`` the accumulator's (4 or 8) and ``out_channels`` the output channels of a
    tile (default M).

    GEMM: ``G_t * ceil(M_t/G_t / R) * R * K * a`` for packed W (``K = C/G * prod(k)``,
    ``R = TILE_ROWS``) plus ``T * K * round_up(min(nb, P), TILE_COLUMNS) * a`` for the panels,
    with ``P = prod(out_spatial)``, ``nb = max(TILE_COLUMNS, PANEL_BYTES // (K * a))`` positions
    per panel and ``T = min(threads, N * G_t * ceil(P / MIN_TILE_COLUMNS))`` threads at work
    (one per task at most, a task having at least ``MIN_TILE_COLUMNS`` positions). Depthwise,
    with ``T = min(threads, N * M_t * prod(out[:-1]))``:
    ``T * S * s * (((k-1)*d) // s + round_up(out, DEPTHWISE_COLUMNS)) * a`` along the last
    axis, with ``S = 2 * prod(k[:-1]) + 1`` padded rows kept (``prod(k[:-1])`` when that is
    more than DEPTHWISE_KEPT_TAPS).
    """
    m = plan.w_shape[0] if out_channels is None else out_channels
    if m == 0 or 0 in plan.w_shape[:2]:  # no output channel, or no input to sum: no buffers
        return 0
    per_group_out = plan.w_shape[0] // plan.group
    groups = max(1, -(-m // per_group_out))
    images, out_spatial = plan.output_shape[0], plan.output_shape[2:]
    if is_depthwise(plan):
        threads = min(threads, images * m * math.prod(out_spatial[:-1]))
        k, s, d, out = (plan.kernel_shape[-1], plan.strides[-1], plan.dilations[-1],
                        plan.output_shape[-1])
        row = (k - 1) * d // s + -(-out // DEPTHWISE_COLUMNS) * DEPTHWISE_COLUMNS
        outer_taps = math.prod(plan.kernel_shape[:-1])
        slots = 2 * outer_taps + 1 if outer_taps <= DEPTHWISE_KEPT_TAPS else outer_taps
        return threads * slots * s * row * itemsize
    depth = plan.w_shape[1] * math.prod(plan.kernel_shape)
    rows = -(-min(m, per_group_out) // TILE_ROWS) * TILE_ROWS
    positions = min(max(TILE_COLUMNS, PANEL_BYTES // (depth * itemsize)), math.prod(out_spatial))
    panel = depth * -(-positions // TILE_COLUMNS) * TILE_COLUMNS * itemsize
    threads = min(threads, images * groups * -(-math.prod(out_spatial) // MIN_TILE_COLUMNS))
    return groups * rows * depth * itemsize + threads * panel


def working_bytes(plan: ConvPlan, dtype: np.dtype, threads: int | None = None) -> int:
    """Memory a Conv of ``dtype`` needs besides X, W and Y: :func:`scratch_bytes` on
    ``threads`` threads (default: the native core's), plus the accumulator copies of X, W and
    Y when ``dtype`` is not the accumulator dtype."""
    if threads is None:
        from padconv_cli.kernels import native

        threads = native.thread_count()
    acc = accumulator_dtype(np.dtype(dtype))
    working = scratch_bytes(plan, acc.itemsize, threads)
    if acc != np.dtype(dtype):
        elements = math.prod(plan.x_shape) + math.prod(plan.w_shape) + math.prod(plan.output_shape)
        working += elements * acc.itemsize
    return working
