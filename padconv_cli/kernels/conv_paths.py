"""Conv compute: the native core (:mod:`padconv_cli.kernels.native`) and its memory formulas.

For a validated :class:`~padconv_cli.kernels.conv.ConvPlan` the core computes
``Y[n, m, o] = sum_{c, t} W[m, c, t] * Xpad[n, g*C/G + c, o*s + t*d]`` in the accumulator dtype
(float32, or float64 for float64 inputs), then ``+ B[m]``, with one of two kernels:

* GEMM (``C/G > 1``): blocks of output positions; each gathers its panel of input values (one
  row per channel and kernel tap, the padding written as zeros) and multiplies it by W, packed
  in tiles of ``TILE_ROWS`` output channels, in a register tile that holds every sum whole.
  Pointwise, the panel is X itself, its column strips copied contiguous first. When the output
  rows fill the register tiles (the last output axis a multiple of the tile's width, or nearly),
  the row kernel runs instead: each task copies the input rows under a few output rows once,
  zero-padded and split by stride, and the register tile reads every kernel tap's row of the
  panel from them in place (same rows of B, same order, same bits);
* depthwise (``C/G == 1``): rows of output positions; the input rows under the kernel are
  zero-padded (2-D with stride 1 along rows: a block of them copied once per task; otherwise
  split by stride into contiguous phases, kept for the next output rows that read them), and
  the taps are summed in C order.

Either way every sum runs in one fixed order (``c``, then the kernel taps in C order), so the
result depends neither on the thread count nor on which part of the tensor is computed: any
tile of the output equals the same elements of the whole, bit for bit.

Memory besides X, W and Y (:func:`scratch_bytes`): X is never copied padded. The GEMM kernel
holds W packed (``G * ceil(M/G / TILE_ROWS) * TILE_ROWS * C/G * prod(k)`` elements) and, per
thread, one panel of about ``PANEL_BYTES`` (at least ``C/G * prod(k) * TILE_COLUMNS`` elements,
at most all of an image's output positions), the stride phases of one input row and one
column strip of the panel packed contiguously (pointwise: of X, read in place otherwise); the
depthwise kernel holds, per thread, the padded phases of about twice the input rows one
output row reads.
float16 and bfloat16 inputs are read as float32 by the kernels; they add float32 copies of W and B
and one float32 chunk of output channels (:func:`working_bytes`).
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

ROW_BYTES = 256 * 2**10
"""Target size of the padded input rows one task of the GEMM's row kernel holds (the native
core's ROW_BYTES)."""

DEPTHWISE_KEPT_TAPS = 32
"""Most outer kernel taps for which the depthwise kernel keeps padded rows for the next rows."""

DEPTHWISE_COLUMNS = 64
"""Most output positions in one depthwise register block over the instruction sets."""

DEPTHWISE_BLOCK_BYTES = 128 * 2**10
"""2-D depthwise with stride 1 along rows: padded input rows one task copies (the native core's
DW_BLOCK_BYTES; one output row's rows when they are more)."""


def convolve(plan: ConvPlan, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Run the plan on validated inputs; the result has X's dtype, rounded once from the sum.

    The sums run in the native core in the accumulator dtype, ``+ B[m]`` after each sum.
    float16/bfloat16 inputs: X is read as float32 by the kernel, W and B are cast to float32,
    and the float32 result is computed in chunks of output channels (:func:`narrow_chunks`),
    each rounded once to the input dtype, so that no float32 copy of X or of the whole Y
    exists.
    """
    acc = accumulator_dtype(x.dtype)
    x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))  # native byte order
    w = np.ascontiguousarray(w, dtype=acc)
    b = None if b is None else np.ascontiguousarray(b, dtype=acc)
    if x.dtype == acc:
        y = np.empty(plan.output_shape, acc)
        if y.size:
            _run(plan, x, w, b, y, plan.group)
        return y
    from padconv_cli.kernels import native

    result = np.empty(plan.output_shape, x.dtype)
    if not result.size:
        return result
    cg, mg = plan.w_shape[1], plan.w_shape[0] // plan.group
    for m0, m1 in narrow_chunks(plan):
        groups = plan.group if plan.group == 1 else (m1 - m0) // mg
        c0, c1 = (0, x.shape[1]) if plan.group == 1 else (m0 // mg * cg, m1 // mg * cg)
        y = np.empty((1, m1 - m0, *plan.output_shape[2:]), acc)
        for n in range(plan.output_shape[0]):
            _run(plan, x[n : n + 1, c0:c1], w[m0:m1], None if b is None else b[m0:m1], y,
                 groups)
            native.round_into(y, result[n : n + 1, m0:m1])  # rounded once
    return result


def _run(plan: ConvPlan, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, y: np.ndarray,
         group: int) -> None:
    from padconv_cli.kernels import native

    native.conv_into(x, w, b, y, strides=plan.strides, dilations=plan.dilations,
                     pads_begin=plan.pads_begin, group=group)


NARROW_CHUNK_BYTES = 32 * 2**20
"""float32 output computed at a time for float16/bfloat16 inputs, before rounding."""


def narrow_chunks(plan: ConvPlan) -> list[tuple[int, int]]:
    """Output-channel ranges ``[m0, m1)`` of one image computed at a time for a narrow dtype:
    whole groups (``M/G`` channels; any channels when ``G == 1``), as many as keep the float32
    chunk ``(m1 - m0) * prod(out) * 4`` within ``NARROW_CHUNK_BYTES`` (one unit at least)."""
    m = plan.w_shape[0]
    unit = 1 if plan.group == 1 else m // plan.group
    plane = max(1, math.prod(plan.output_shape[2:]))
    step = max(1, NARROW_CHUNK_BYTES // (plane * 4 * unit)) * unit
    return [(m0, min(m, m0 + step)) for m0 in range(0, m, step)]


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
    per panel, plus ``s * (out + (k - 1) * d) * a`` for one input row's stride phases (last
    axis), plus (pointwise) ``K * TILE_COLUMNS * a + 64`` for one packed strip of X; or, for the row
    kernel when that is more, ``min(prod(out[:-1]) * u, max(u, ROW_BYTES))`` for the padded
    input rows, ``u = Q * ((k - 1) * d // s + v + 16) * a`` those of one output row, with
    ``Q = C/G * prod(k[:-1]) * s`` and
    ``v = min(max(TILE_COLUMNS, ROW_BYTES // (Q * a)), out + TILE_COLUMNS)`` (last axis); and
    ``T = min(threads, N * G_t * ceil(P / MIN_TILE_COLUMNS))`` threads at work
    (one per task at most, a task having at least ``MIN_TILE_COLUMNS`` positions). Depthwise,
    with ``T = min(threads, N * M_t * prod(out[:-1]))`` and the padded row
    ``R = ((k-1)*d) // s + round_up(out, DEPTHWISE_COLUMNS)`` elements along the last axis:
    2-D with ``s == 1`` along rows, a block of padded input rows,
    ``T * min(((out0-1)*s0 + u) * R * a, max(DEPTHWISE_BLOCK_BYTES, u * R * a))`` with
    ``u = (k0-1)*d0 + 1`` the rows under one output row; otherwise ``T * S * s * R * a``, with
    ``S = 2 * prod(k[:-1]) + 1`` padded rows kept (``prod(k[:-1])`` when that is more than
    DEPTHWISE_KEPT_TAPS).
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
        if len(out_spatial) == 2 and s == 1:  # a block of padded input rows per task
            rows_under = (plan.kernel_shape[0] - 1) * plan.dilations[0] + 1
            every_row = (out_spatial[0] - 1) * plan.strides[0] + rows_under
            block = min(every_row * row * itemsize,
                        max(DEPTHWISE_BLOCK_BYTES, rows_under * row * itemsize))
            return threads * block
        outer_taps = math.prod(plan.kernel_shape[:-1])
        slots = 2 * outer_taps + 1 if outer_taps <= DEPTHWISE_KEPT_TAPS else outer_taps
        return threads * slots * s * row * itemsize
    depth = plan.w_shape[1] * math.prod(plan.kernel_shape)
    rows = -(-min(m, per_group_out) // TILE_ROWS) * TILE_ROWS
    positions = min(max(TILE_COLUMNS, PANEL_BYTES // (depth * itemsize)), math.prod(out_spatial))
    panel = depth * -(-positions // TILE_COLUMNS) * TILE_COLUMNS * itemsize
    k, s, d = plan.kernel_shape[-1], plan.strides[-1], plan.dilations[-1]
    panel += s * (plan.output_shape[-1] + (k - 1) * d) * itemsize  # one row's stride phases
    if set(plan.kernel_shape) | set(plan.strides) == {1} and not any(plan.pads):  # pointwise
        panel += depth * TILE_COLUMNS * itemsize + 64  # one packed strip of X, 64-byte aligned
    per_row = plan.w_shape[1] * math.prod(plan.kernel_shape[:-1]) * s  # the row kernel's
    width = min(max(TILE_COLUMNS, ROW_BYTES // (per_row * itemsize)),
                plan.output_shape[-1] + TILE_COLUMNS)
    row = per_row * ((k - 1) * d // s + width + 16) * itemsize
    slots = min(math.prod(out_spatial[:-1]) * row, max(row, ROW_BYTES))
    threads = min(threads, images * groups * -(-math.prod(out_spatial) // MIN_TILE_COLUMNS))
    return groups * rows * depth * itemsize + threads * max(panel, slots)


def working_bytes(plan: ConvPlan, dtype: np.dtype, threads: int | None = None,
                  out_channels: int | None = None) -> int:
    """Memory a Conv of ``dtype`` needs besides X, W and Y: :func:`scratch_bytes` on
    ``threads`` threads (default: the native core's); for a dtype that is not the accumulator
    dtype (float16, bfloat16), plus float32 copies of W and B and one float32 output chunk of
    :func:`narrow_chunks` (X is read as float32 in place).  The one formula of the kernel,
    the resource gate, ``--explain`` and the tiler (which passes a tile's plan and its
    ``out_channels``)."""
    if threads is None:
        from padconv_cli.kernels import native

        threads = native.thread_count()
    acc = accumulator_dtype(np.dtype(dtype))
    working = scratch_bytes(plan, acc.itemsize, threads, out_channels)
    if acc != np.dtype(dtype):
        m0, m1 = narrow_chunks(plan)[0] if plan.w_shape[0] else (0, 0)
        chunk = (m1 - m0) * math.prod(plan.output_shape[2:])
        working += (math.prod(plan.w_shape) + plan.w_shape[0] + chunk) * acc.itemsize
    return working
