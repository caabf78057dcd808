"""ONNX ``ConvTranspose`` (opsets 1, 11 and 22): the public kernel.

``Y[n, m, o] = B[m] + sum over (c, i, k) with i*s + k*d - pads_begin == o of
X[n, c, i] * W[c, m - g*M/G, k]`` (``c`` in group ``g = m // (M/G)``), computed without a
zero-stuffed input: the output is split by *stride phases*. Along an axis, the outputs ``o``
with ``(o + pad_begin) % s == r`` receive exactly the taps ``k`` with ``(k*d) % s == r``; those
form a progression ``k0, k0 + L, ...`` (``L = s / gcd(s, d)``) and reach the inputs
``j - base - t * d/gcd(s, d)``, so each phase is an ordinary stride-1 Conv of X with the
flipped sub-kernel, run by the native Conv core (:mod:`padconv_cli.kernels.native`) into a
phase buffer and copied to its strided place in Y. Each output element is therefore summed in
one fixed order (channels, then its phase's taps) by the core, whatever the thread count.
When the kernel equals the stride (no dilation, no pads: U-Net's 2x2 stride-2 upsampling) every
phase is a 1x1 Conv of the whole X with one tap: the phases of a range of output channels are
then one 1x1 Conv with the taps stacked as output channels, and the native core interleaves
its result into Y in one pass (``interleave_phases``); each output is the same single sum of
C products in channel order. More generally, when every phase of every axis has ``out / s``
outputs (GAN's 4x4 stride-2 pads-1 layers, a decoder's kernel 2s stride s), the phases of a
range of output channels are computed into one buffer, phase after phase, and interleaved
into Y in one pass too, instead of one strided copy per phase; with one group that is one
native job (:func:`phase_convs`: the sub-kernels packed straight from W, every phase's tasks
in one entry of the thread pool, the interleave).

float16 and bfloat16 are accumulated in float32 and rounded once; float32 in float32; float64 in
float64. Weights that are not all finite take a numpy path (GEMM, then col2im adds) that forms
only the products the definition has: the phase Conv would multiply its zero padding by an
infinite weight.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from padconv_cli.errors import UnsupportedDtypeError
from padconv_cli.kernels.conv import ConvPlan
from padconv_cli.kernels.conv_transpose_plan import ConvTransposePlan, plan_conv_transpose

__all__ = ["ConvTransposePlan", "conv_transpose", "conv_transpose_planned",
           "plan_conv_transpose", "working_bytes"]

FLOAT_DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")


def conv_transpose(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX ConvTranspose-22: ``Y[n, m, o] = B[m] + sum_{c, i, k: i*s + k*d - pb = o}
    X[n, c, i] * W[c, m % (M/G), k]``, over the channels ``c`` of ``m``'s group.

    X, W and B share one float dtype (float16, bfloat16, float32, float64); the sums run in
    float32 (float64 for float64) and are rounded once to that dtype. Pads, output length and
    the rulings applied: :func:`plan_conv_transpose`.
    """
    x, w, b = _float_inputs(x, w, b)
    plan = plan_conv_transpose(
        x.shape, w.shape, None if b is None else b.shape, auto_pad=auto_pad,
        dilations=dilations, group=group, kernel_shape=kernel_shape,
        output_padding=output_padding, output_shape=output_shape, pads=pads, strides=strides)
    return _compute(plan, x, w, b)


def conv_transpose_planned(plan: ConvTransposePlan, x: np.ndarray, w: np.ndarray,
                           b: np.ndarray | None = None) -> np.ndarray:
    """:func:`conv_transpose` with a plan made beforehand by :func:`plan_conv_transpose` for
    these shapes: the same element-type rules and result, without planning again."""
    x, w, b = _float_inputs(x, w, b)
    if (x.shape, w.shape) != (plan.x_shape, plan.w_shape):
        raise ValueError(f"the plan is for X {plan.x_shape} and W {plan.w_shape}, not "
                         f"{x.shape} and {w.shape}")
    return _compute(plan, x, w, b)


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """float64 accumulates in float64, every other float type in float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


# --- stride phases ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AxisPhase:
    """One stride phase of one axis: the outputs ``first, first + s, ...`` (``count`` of them)
    are a stride-1 Conv of X (cropped by ``crop`` elements at its start) with the kernel taps
    ``taps`` (already in the flipped order the Conv reads them), dilation ``dilation`` and
    begin pad ``pad``. ``taps`` is empty when no tap reaches these outputs."""

    first: int
    count: int
    taps: tuple[int, ...]
    dilation: int
    pad: int
    crop: int


def axis_phases(size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                out: int) -> list[AxisPhase]:
    """The ``stride`` phases of one axis (module docstring), those with outputs only."""
    step = stride // math.gcd(stride, dilation)
    reach = dilation // math.gcd(stride, dilation)
    phases = []
    for r in range(stride):
        first = (r - pad_begin) % stride
        count = max(0, -(-(out - first) // stride))
        if count == 0:
            continue
        taps = [k for k in range(kernel) if (k * dilation) % stride == r]
        if not taps:
            phases.append(AxisPhase(first, count, (), 1, 0, 0))
            continue
        base = (taps[0] * dilation - r) // stride
        j0 = (first + pad_begin - r) // stride
        pad = base + (len(taps) - 1) * reach - j0
        crop = max(0, -pad)
        if crop >= size:
            phases.append(AxisPhase(first, count, (), 1, 0, 0))
            continue
        flipped = tuple(taps[0] + t * step for t in reversed(range(len(taps))))
        phases.append(AxisPhase(first, count, flipped, reach, max(0, pad), crop))
    return phases


def _compute(plan: ConvTransposePlan, x: np.ndarray, w: np.ndarray,
             b: np.ndarray | None) -> np.ndarray:
    y = np.empty(plan.output_shape, x.dtype)
    if y.size == 0:
        return y
    acc = accumulator_dtype(x.dtype)
    if x.dtype == acc and native_phases_apply(plan):
        x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
        bias = None if b is None else np.ascontiguousarray(b, dtype=acc)
        if _native_phases(plan, x, w.astype(acc, copy=False), bias, y) is None:
            return scatter_add(plan, x, w, b).astype(x.dtype)  # W not all finite
        return y
    if not np.isfinite(w).all():
        return scatter_add(plan, x, w, b).astype(x.dtype)
    x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
    bias = None if b is None else np.ascontiguousarray(b, dtype=acc)
    if kernel_is_stride(plan) and x.dtype == acc:
        return _stacked_phases(plan, x, w.astype(acc, copy=False), bias, y)
    per_axis = [list(axis) for axis in plan_phases(plan)]
    if any(not p.taps for axis in per_axis for p in axis) or plan.x_shape[1] == 0:
        y[...] = 0 if b is None else b.reshape((-1,) + (1,) * plan.spatial_rank)
        per_axis = [[p for p in axis if p.taps] for axis in per_axis]  # the rest: bias only
        if plan.x_shape[1] == 0:
            return y
    conv_w = conv_layout(w, plan.group).astype(acc, copy=False)
    if uniform_phases(plan, per_axis) and x.dtype == acc:
        runs = _slot_runs(list(product(*per_axis)), tuple(plan.strides),
                          stack=plan.group == 1)
        kernels = [[_run_kernel(run, conv_w, m0, m1, acc) for _, run in runs]
                   for m0, m1 in channel_chunks(plan, math.prod(plan.output_shape[2:])
                                                * acc.itemsize)]
        return _interleaved_phases(plan, runs, x, kernels, bias, y)
    largest = max((math.prod(p.count for p in phase) for phase in product(*per_axis)),
                  default=0)
    chunks = channel_chunks(plan, largest * acc.itemsize)
    buffer = np.empty(max((m1 - m0) * largest for m0, m1 in chunks), acc)  # reused
    for phase in product(*per_axis):
        _run_phase(plan, phase, x, conv_w, bias, chunks, buffer, y)
    return y


@functools.lru_cache(maxsize=64)
def plan_phases(plan: ConvTransposePlan) -> tuple[tuple[AxisPhase, ...], ...]:
    """:func:`axis_phases` of every spatial axis of the plan (kept for the plan's next run)."""
    return tuple(tuple(axis_phases(*args)) for args in zip(
        plan.x_shape[2:], plan.kernel_shape, plan.strides, plan.dilations, plan.pads_begin,
        plan.output_shape[2:], strict=True))


@dataclass(frozen=True)
class PhaseRun:
    """Consecutive phase slots from ``first`` whose phases share one stride-1 Conv geometry
    (:func:`_slot_runs`): ``taps`` ``(phases, taps)`` index W's flattened kernel (each
    phase's flipped sub-kernel in C order, read-only); ``tap_shape``, ``pads``,
    ``dilations`` and ``crops`` per axis."""

    first: int
    phases: tuple[tuple[AxisPhase, ...], ...]
    taps: np.ndarray
    tap_shape: tuple[int, ...]
    pads: tuple[int, ...]
    dilations: tuple[int, ...]
    crops: tuple[int, ...]


MAX_NATIVE_RUNS = 64
"""Most runs ``phase_convs`` takes in one call (the native module's limit)."""


@functools.lru_cache(maxsize=64)
def interleaved_runs(plan: ConvTransposePlan) -> tuple[PhaseRun, ...]:
    """For one group whose phases are :func:`uniform_phases` (every tap of W in exactly one
    phase) and not :func:`kernel_is_stride`: the runs of :func:`_slot_runs`, stacked; empty
    otherwise (kept for the plan's next run)."""
    per_axis = [list(axis) for axis in plan_phases(plan)]
    if plan.group != 1 or not kernel_phases_exist(per_axis) or kernel_is_stride(plan) \
            or not uniform_phases(plan, per_axis):
        return ()
    runs = []
    for first, run in _slot_runs(list(product(*per_axis)), tuple(plan.strides), stack=True):
        flat = np.array([np.ravel_multi_index(np.ix_(*(p.taps for p in phase)),
                                              plan.kernel_shape).ravel() for phase in run],
                        dtype=np.int64)
        flat.flags.writeable = False
        runs.append(PhaseRun(first, tuple(run), flat, tuple(len(p.taps) for p in run[0]),
                             tuple(p.pad for p in run[0]), tuple(p.dilation for p in run[0]),
                             tuple(p.crop for p in run[0])))
    return tuple(runs)


def native_phases_apply(plan: ConvTransposePlan) -> bool:
    """Whether :func:`_native_phases` runs the plan (given X in the accumulator dtype): one
    group of at least 2 input channels (the core's GEMM kernels), phases of equal length in
    at most :data:`MAX_NATIVE_RUNS` runs, at most 8 spatial axes and a last stride of at
    most 64 (the native interleave's limits)."""
    return plan.group == 1 and plan.x_shape[1] >= 2 and plan.spatial_rank <= 8 \
        and plan.strides[-1] <= 64 and 0 < len(interleaved_runs(plan)) <= MAX_NATIVE_RUNS


def phase_convs(w: np.ndarray, b: np.ndarray | None, y: np.ndarray, m0: int,
                runs: list[tuple], strides: tuple[int, ...], threads: int, isa: str) -> bool:
    """``y[m, i*s + a] = P[a, m, i]`` where ``P[first + p, m, o] = B[m0 + m] + sum_{c, t}
    W[c, m0 + m, taps[p, t]] * Xpad[c, o + t*d]`` for every run ``(X, taps, tap_shape,
    pads_begin, dilations, first)``: the native core's one job (``phase_convs``); False,
    writing nothing, when a weight read is not finite."""
    from padconv_cli.kernels import native

    return native.extension().phase_convs(w, b, y, m0, runs, strides, threads, isa)


def _native_phases(plan: ConvTransposePlan, x: np.ndarray, w: np.ndarray,
                   bias: np.ndarray | None, y: np.ndarray) -> np.ndarray | None:
    """:func:`native_phases_apply`'s case: per image and range of output channels
    (:func:`channel_chunks`), every phase by one native job (:func:`phase_convs`: the
    sub-kernels packed straight from W, checked finite on the way, every run's tasks in one
    entry of the thread pool, the phases interleaved into Y). None when W is not all
    finite."""
    from padconv_cli.kernels import native

    strides = tuple(plan.strides)
    chunks = channel_chunks(plan, math.prod(plan.output_shape[2:]) * y.itemsize)
    source = np.ascontiguousarray(w).reshape(w.shape[:2] + (-1,))
    threads, isa = native.thread_count(), native.selected_isa()
    runs = interleaved_runs(plan)
    for n in range(plan.output_shape[0]):
        image, cropped = x[n:n + 1], {}
        for run in runs:
            if any(run.crops) and run.crops not in cropped:
                cropped[run.crops] = np.ascontiguousarray(
                    image[(slice(None), slice(None), *(slice(c, None) for c in run.crops))])
        specs = [(cropped.get(run.crops, image), run.taps, run.tap_shape, run.pads,
                  run.dilations, run.first) for run in runs]
        for m0, m1 in chunks:
            if not phase_convs(source, bias, y[n, m0:m1], m0, specs, strides, threads, isa):
                return None
    return y


def kernel_phases_exist(per_axis: list[list[AxisPhase]]) -> bool:
    """Every phase of every axis has taps."""
    return all(p.taps for axis in per_axis for p in axis)


def kernel_is_stride(plan: ConvTransposePlan) -> bool:
    """Every axis has ``kernel == stride``, dilation 1 and no pads, one group: each output
    ``i * s + a`` takes the one tap ``a`` of input ``i`` (output length ``in * s``)."""
    return (plan.group == 1 and plan.kernel_shape == plan.strides
            and set(plan.dilations) == {1} and not any(plan.pads_begin)
            and tuple(plan.output_shape[2:]) == tuple(
                i * s for i, s in zip(plan.x_shape[2:], plan.strides, strict=True)))


def _stacked_phases(plan: ConvTransposePlan, x: np.ndarray, w: np.ndarray,
                    bias: np.ndarray | None, y: np.ndarray) -> np.ndarray:
    """:func:`kernel_is_stride`'s case: ``P[n, m, a, i] = B[m] + sum_c X[n, c, i] * W[c, m, a]``
    as one 1x1 Conv whose output channels are the ``(m, a)`` pairs (per image and range of
    output channels), then ``Y[n, m, i*s + a] = P[n, m, a, i]`` by the native core."""
    from padconv_cli.kernels import native

    taps, rank = math.prod(plan.kernel_shape), plan.spatial_rank
    c, m = plan.w_shape[:2]
    stacked = np.ascontiguousarray(np.moveaxis(w, 0, -1).reshape((m * taps, c) + (1,) * rank))
    stacked_bias = None if bias is None else np.repeat(bias, taps)
    plane = math.prod(plan.output_shape[2:])
    chunks = channel_chunks(plan, plane * y.itemsize)
    buffer = np.empty(max(m1 - m0 for m0, m1 in chunks) * plane, y.dtype)
    for n, (m0, m1) in product(range(plan.output_shape[0]), chunks):
        values = buffer[:(m1 - m0) * plane]
        native.conv_into(x[n:n + 1], stacked[m0 * taps:m1 * taps],
                         None if bias is None else stacked_bias[m0 * taps:m1 * taps],
                         values.reshape((1, (m1 - m0) * taps, *plan.x_shape[2:])),
                         strides=(1,) * rank, dilations=(1,) * rank, pads_begin=(0,) * rank,
                         group=1)
        native.extension().interleave_phases(
            values.reshape((m1 - m0, *plan.kernel_shape, *plan.x_shape[2:])), y[n, m0:m1],
            tuple(plan.strides), native.thread_count())
    return y


def uniform_phases(plan: ConvTransposePlan, per_axis: list[list[AxisPhase]]) -> bool:
    """Every axis has ``s`` phases with taps and ``out / s`` outputs each (``out`` a multiple
    of ``s``): together they tile Y as ``Y[..., i*s + first]``."""
    return all(
        out % s == 0 and len(phases) == s and all(p.taps and p.count == out // s
                                                  for p in phases)
        for phases, out, s in zip(per_axis, plan.output_shape[2:], plan.strides, strict=True))


def _interleaved_phases(plan: ConvTransposePlan, runs: list, x: np.ndarray,
                        kernels: list[list[np.ndarray]], bias: np.ndarray | None,
                        y: np.ndarray) -> np.ndarray:
    """:func:`uniform_phases`' case: per image and range of output channels, the stride-1
    Convs of the phases into a phase-major buffer (slot ``first`` of each axis), then
    ``Y[n, m, i*s + first] = buffer[first, m, i]`` by the native core in one pass. With one
    group, consecutive slots whose phases share a
    Conv geometry (tap counts, dilations, pads, crops: a decoder's kernel 2s stride s has two
    such runs) are one Conv with their sub-kernels stacked as output channels (each output is
    the same sum as alone). ``runs``: ``(first slot, phases)``; ``kernels[chunk][run]``: the
    run's sub-kernels for the chunk of output channels (:func:`channel_chunks`)."""
    from padconv_cli.kernels import native

    strides = tuple(plan.strides)
    counts = tuple(o // s for o, s in zip(plan.output_shape[2:], strides, strict=True))
    plane = math.prod(plan.output_shape[2:])
    chunks = channel_chunks(plan, plane * y.itemsize)
    buffer = np.empty(max(m1 - m0 for m0, m1 in chunks) * plane, y.dtype)
    mg, cg = plan.w_shape[1], plan.x_shape[1] // plan.group
    threads = native.thread_count()
    for (m0, m1), chunk_kernels in zip(chunks, kernels, strict=True):
        groups = 1 if plan.group == 1 else (m1 - m0) // mg
        c0, c1 = (0, plan.x_shape[1]) if plan.group == 1 else (m0 // mg * cg, m1 // mg * cg)
        run_bias = [None if bias is None else np.tile(bias[m0:m1], len(phases))
                    for _, phases in runs]
        slots = buffer[:(m1 - m0) * plane].reshape((math.prod(strides), m1 - m0, *counts))
        for n in range(plan.output_shape[0]):
            for (first, run), sub_w, sub_b in zip(runs, chunk_kernels, run_bias, strict=True):
                phase = run[0]
                source = x[n:n + 1, c0:c1]  # C-contiguous
                if any(p.crop for p in phase):
                    source = np.ascontiguousarray(source[(slice(None), slice(None),
                                                          *(slice(p.crop, None) for p in phase))])
                target = slots[first:first + len(run)].reshape((1, -1, *counts))
                native.conv_into(source, sub_w, sub_b, target,
                                 strides=(1,) * len(phase),
                                 dilations=tuple(p.dilation for p in phase),
                                 pads_begin=tuple(p.pad for p in phase), group=groups,
                                 threads=threads)
            native.extension().interleave_phases(
                slots.reshape((*strides, m1 - m0, *counts)), y[n, m0:m1], strides, threads, True)
    return y


def _slot_runs(phases: list[tuple[AxisPhase, ...]], strides: tuple[int, ...], stack: bool
               ) -> list[tuple[int, list[tuple[AxisPhase, ...]]]]:
    """The phases in slot order (the flat index of their ``first`` offsets), as runs of
    consecutive slots ``(first slot, phases)`` sharing a Conv geometry (one phase per run
    when not ``stack``)."""
    def slot(phase: tuple[AxisPhase, ...]) -> int:
        index = 0
        for p, s in zip(phase, strides, strict=True):
            index = index * s + p.first
        return index

    def geometry(phase: tuple[AxisPhase, ...]) -> tuple:
        return tuple((len(p.taps), p.dilation, p.pad, p.crop) for p in phase)

    runs: list[tuple[int, list[tuple[AxisPhase, ...]]]] = []
    for phase in sorted(phases, key=slot):
        if stack and runs and geometry(runs[-1][1][0]) == geometry(phase):
            runs[-1][1].append(phase)
        else:
            runs.append((slot(phase), [phase]))
    return runs


def _run_kernel(run: list[tuple[AxisPhase, ...]], conv_w: np.ndarray, m0: int, m1: int,
                dtype: np.dtype) -> np.ndarray:
    """The flipped sub-kernels of a run's phases for output channels ``[m0, m1)``, taken
    from ``conv_w`` (W in Conv's layout) and stacked phase after phase as output channels."""
    return np.ascontiguousarray(np.concatenate(
        [conv_w[(slice(m0, m1), slice(None), *np.ix_(*(p.taps for p in phase)))]
         for phase in run]), dtype=dtype)


PHASE_BYTES = 32 * 2**20
"""Most bytes of phase output computed at a time (one image, a range of output channels)."""


def channel_chunks(plan: ConvTransposePlan, plane_bytes: int) -> list[tuple[int, int]]:
    """Output-channel ranges ``[m0, m1)`` of one image computed at a time: whole groups
    (any channels when ``group == 1``), as many as keep ``(m1 - m0) * plane_bytes`` within
    :data:`PHASE_BYTES` (one unit at least)."""
    m, unit = plan.out_channels, 1 if plan.group == 1 else plan.w_shape[1]
    step = max(1, PHASE_BYTES // max(1, plane_bytes * unit)) * unit
    return [(m0, min(m, m0 + step)) for m0 in range(0, m, step)]


def _run_phase(plan: ConvTransposePlan, phase: tuple[AxisPhase, ...], x: np.ndarray,
               conv_w: np.ndarray, bias: np.ndarray | None, chunks: list[tuple[int, int]],
               buffer: np.ndarray, y: np.ndarray) -> None:
    """One phase (all axes): per image and chunk of output channels, the stride-1 Conv of X
    with the phase's flipped sub-kernel into ``buffer``, then copied to its strided place."""
    from padconv_cli.kernels import native

    counts = tuple(p.count for p in phase)
    sub_w = np.ascontiguousarray(conv_w[(slice(None), slice(None),
                                         *np.ix_(*(p.taps for p in phase)))])
    if any(p.crop for p in phase):
        x = np.ascontiguousarray(x[(slice(None), slice(None),
                                    *(slice(p.crop, None) for p in phase))])
    spatial = tuple(slice(p.first, None, s) for p, s in zip(phase, plan.strides, strict=True))
    mg, cg = plan.w_shape[1], plan.x_shape[1] // plan.group
    for n, (m0, m1) in product(range(plan.output_shape[0]), chunks):
        groups = 1 if plan.group == 1 else (m1 - m0) // mg
        c0, c1 = (0, plan.x_shape[1]) if plan.group == 1 else (m0 // mg * cg, m1 // mg * cg)
        values = buffer[:(m1 - m0) * math.prod(counts)].reshape((1, m1 - m0, *counts))
        native.conv_into(x[n:n + 1, c0:c1], sub_w[m0:m1],
                         None if bias is None else bias[m0:m1], values,
                         strides=(1,) * len(phase), dilations=tuple(p.dilation for p in phase),
                         pads_begin=tuple(p.pad for p in phase), group=groups)
        y[(slice(n, n + 1), slice(m0, m1), *spatial)] = values


def conv_layout(w: np.ndarray, group: int) -> np.ndarray:
    """ConvTranspose's ``W (C, M/G, k...)`` in Conv's layout ``(M, C/G, k...)``: group by
    group, the two channel axes swapped."""
    c, mg = w.shape[:2]
    grouped = w.reshape(group, c // group, mg, *w.shape[2:])
    return np.ascontiguousarray(np.swapaxes(grouped, 1, 2).reshape(group * mg, c // group,
                                                                   *w.shape[2:]))


# --- the definition, for weights that are not all finite ------------------------------------


def scatter_add(plan: ConvTransposePlan, x: np.ndarray, w: np.ndarray,
                b: np.ndarray | None) -> np.ndarray:
    """The definition as GEMM then col2im, in the accumulator dtype: per group,
    ``cols = W_g^T @ X_g`` holds every product summed over the group's channels; tap ``k``'s
    values are added at ``i * s + k * d - pads_begin`` (taps in C order)."""
    acc = accumulator_dtype(x.dtype)
    n, c = plan.x_shape[:2]
    group, mg, rank = plan.group, plan.w_shape[1], plan.spatial_rank
    cg, taps = c // group, math.prod(plan.kernel_shape)
    y = np.zeros(plan.output_shape, acc)
    xs = x.astype(acc).reshape(n, group, cg, -1)
    ws = w.astype(acc).reshape(group, cg, mg * taps)
    with np.errstate(invalid="ignore", over="ignore"):
        for image, g in product(range(n), range(group)):
            cols = (ws[g].T @ xs[image, g]).reshape(mg, taps, *plan.x_shape[2:])
            target = y[image, g * mg:(g + 1) * mg]
            for t, offset in enumerate(np.ndindex(*plan.kernel_shape)):
                _add_tap(target, cols[:, t], offset, plan)
        if b is not None:
            y += b.astype(acc).reshape((-1,) + (1,) * rank)
    return y


def _add_tap(target: np.ndarray, values: np.ndarray, offset: tuple[int, ...],
             plan: ConvTransposePlan) -> None:
    """``target[:, i*s + k*d - pb] += values[:, i]`` for the ``i`` that land inside."""
    src, dst = [slice(None)], [slice(None)]
    for size, k, s, d, pb, out in zip(plan.x_shape[2:], offset, plan.strides, plan.dilations,
                                      plan.pads_begin, plan.output_shape[2:], strict=True):
        start = k * d - pb  # output of input 0
        first = max(0, -(start // s))  # first i with start + i*s >= 0
        last = min(size - 1, (out - 1 - start) // s)
        if last < first:
            return
        src.append(slice(first, last + 1))
        dst.append(slice(start + first * s, start + last * s + 1, s))
    target[tuple(dst)] += values[tuple(src)]


# --- memory ---------------------------------------------------------------------------------


def working_bytes(plan: ConvTransposePlan, dtype: np.dtype) -> int:
    """Memory besides X, W and Y: W in Conv's layout and its sub-kernels (accumulator dtype;
    not on :func:`native_phases_apply`'s path, which packs them inside the core's figure),
    one buffer for a chunk of the largest phase's output (of every phase when they are
    interleaved in one pass) (one image, the output channels of :func:`channel_chunks`: at
    most about :data:`PHASE_BYTES`) reused by every phase, the copies of X when phases start
    inside it (pads beyond the kernel), and the native core's own buffers
    (:func:`core_bytes`) on its thread count."""
    from padconv_cli.kernels import native

    acc = accumulator_dtype(np.dtype(dtype)).itemsize
    plane = math.prod(-(-o // s) for o, s in zip(plan.output_shape[2:], plan.strides,
                                                  strict=True))
    per_axis = [list(axis) for axis in plan_phases(plan)]
    if kernel_is_stride(plan) or uniform_phases(plan, per_axis):  # all phases of a range
        plane = math.prod(plan.output_shape[2:])
    phase_out = plane * max((m1 - m0 for m0, m1 in channel_chunks(plan, plane * acc)),
                            default=0)
    native_path = np.dtype(dtype).itemsize == acc and native_phases_apply(plan)
    if native_path:  # the phase outputs are in the native job's own figure
        phase_out = 0
    weights = 0 if native_path else 2 * math.prod(plan.w_shape) * acc
    image = math.prod(plan.x_shape[1:]) * np.dtype(dtype).itemsize
    if native_path:  # one copy per distinct crop, of one image, all held during the job
        crop = image * len({run.crops for run in interleaved_runs(plan) if any(run.crops)})
    else:
        crop = image * plan.x_shape[0] if any(
            pb > (k - 1) * d for pb, k, d in zip(plan.pads_begin, plan.kernel_shape,
                                                 plan.dilations, strict=True)) else 0
    return phase_out * acc + weights + crop + core_bytes(plan, dtype, native.thread_count())


def core_bytes(plan: ConvTransposePlan, dtype: np.dtype, threads: int) -> int:
    """The most the native core allocates in one call of the run on ``threads`` threads
    (packed weights, every working thread's buffer), as its own sizing works it out: the
    one job of :func:`native_phases_apply`'s path (``phase_convs_bytes``), else the largest
    :func:`padconv_cli.kernels.conv.scratch_bytes` over :func:`phase_conv_plans`."""
    from padconv_cli.kernels import conv as conv_kernel
    from padconv_cli.kernels import native

    acc = accumulator_dtype(np.dtype(dtype))
    if math.prod(plan.output_shape) == 0:
        return 0
    if np.dtype(dtype) == acc and native_phases_apply(plan):
        counts = tuple(o // s for o, s in zip(plan.output_shape[2:], plan.strides,
                                              strict=True))
        runs = [(tuple(n - c for n, c in zip(plan.x_shape[2:], run.crops, strict=True)),
                 run.tap_shape, run.pads, run.dilations, len(run.phases))
                for run in interleaved_runs(plan)]
        return max(native.extension().phase_convs_bytes(
            plan.x_shape[1], width, counts, runs, tuple(plan.strides), threads,
            native.selected_isa(), acc.itemsize)
            for width in _chunk_widths(plan, math.prod(plan.output_shape[2:]) * acc.itemsize))
    return max((conv_kernel.scratch_bytes(conv_plan, acc.itemsize, threads, None,
                                          np.dtype(dtype))
                for conv_plan in phase_conv_plans(plan, dtype)), default=0)


def phase_conv_plans(plan: ConvTransposePlan, dtype: np.dtype) -> set[ConvPlan]:
    """The distinct Conv geometries (as Conv plans) the native core's ``conv`` is called
    with when ConvTranspose runs with finite weights of ``dtype``: the stacked 1x1 Conv of
    :func:`kernel_is_stride`, the runs of :func:`uniform_phases`, or one Conv per phase, each
    per image and chunk of output channels (:func:`channel_chunks`); none on
    :func:`native_phases_apply`'s path."""
    if math.prod(plan.output_shape) == 0 or plan.x_shape[1] == 0:
        return set()
    acc = accumulator_dtype(np.dtype(dtype))
    same = np.dtype(dtype) == acc
    if same and native_phases_apply(plan):
        return set()
    if kernel_is_stride(plan) and same:
        return _stacked_conv_plans(plan, acc.itemsize)
    per_axis = [[p for p in axis if p.taps] for axis in plan_phases(plan)]
    if uniform_phases(plan, per_axis) and same:
        return _interleaved_conv_plans(plan, per_axis, acc.itemsize)
    return _separate_conv_plans(plan, per_axis, acc.itemsize)


def _chunk_widths(plan: ConvTransposePlan, plane_bytes: int) -> set[int]:
    return {m1 - m0 for m0, m1 in channel_chunks(plan, plane_bytes)}


def _conv_plan(plan: ConvTransposePlan, channels: int, w_shape: tuple[int, ...], group: int,
               phase: tuple[AxisPhase, ...], counts: tuple[int, ...]) -> ConvPlan:
    """The stride-1 Conv of one image of X (``channels`` of them, cropped by the phase) with
    a sub-kernel of shape ``w_shape`` into ``counts`` outputs; the end pads follow."""
    sizes = tuple(n - p.crop for n, p in zip(plan.x_shape[2:], phase, strict=True))
    begins = tuple(p.pad for p in phase)
    ends = tuple(o + (k - 1) * p.dilation - n - b for o, k, p, n, b in zip(
        counts, w_shape[2:], phase, sizes, begins, strict=True))
    return ConvPlan(x_shape=(1, channels, *sizes), w_shape=w_shape, kernel_shape=w_shape[2:],
                    strides=(1,) * len(phase), dilations=tuple(p.dilation for p in phase),
                    pads=begins + ends, group=group, auto_pad="NOTSET",
                    output_shape=(1, w_shape[0], *counts), formulas=())


def _stacked_conv_plans(plan: ConvTransposePlan, itemsize: int) -> set[ConvPlan]:
    taps, rank = math.prod(plan.kernel_shape), plan.spatial_rank
    whole = tuple(AxisPhase(0, 0, (0,), 1, 0, 0) for _ in range(rank))
    c = plan.x_shape[1]
    return {_conv_plan(plan, c, (width * taps, c) + (1,) * rank, 1, whole, plan.x_shape[2:])
            for width in _chunk_widths(plan, math.prod(plan.output_shape[2:]) * itemsize)}


def _interleaved_conv_plans(plan: ConvTransposePlan, per_axis: list[list[AxisPhase]],
                            itemsize: int) -> set[ConvPlan]:
    counts = tuple(o // s for o, s in zip(plan.output_shape[2:], plan.strides, strict=True))
    runs = _slot_runs(list(product(*per_axis)), tuple(plan.strides), stack=plan.group == 1)
    plans = set()
    for width, (_, run) in product(
            _chunk_widths(plan, math.prod(plan.output_shape[2:]) * itemsize), runs):
        phase, taps = run[0], tuple(len(p.taps) for p in run[0])
        if plan.group == 1:
            shape, group, channels = (len(run) * width, plan.x_shape[1], *taps), 1, plan.x_shape[1]
        else:
            group = width // plan.w_shape[1]
            shape = (width, plan.x_shape[1] // plan.group, *taps)
            channels = group * shape[1]
        plans.add(_conv_plan(plan, channels, shape, group, phase, counts))
    return plans


def _separate_conv_plans(plan: ConvTransposePlan, per_axis: list[list[AxisPhase]],
                         itemsize: int) -> set[ConvPlan]:
    geometries = [{(p.count, len(p.taps), p.dilation, p.pad, p.crop): p for p in axis}.values()
                  for axis in per_axis]  # phases of one geometry make the same Conv
    largest = max((math.prod(p.count for p in phase) for phase in product(*per_axis)),
                  default=0)
    plans = set()
    for width, phase in product(_chunk_widths(plan, largest * itemsize), product(*geometries)):
        group = 1 if plan.group == 1 else width // plan.w_shape[1]
        cg = plan.x_shape[1] // plan.group
        channels = plan.x_shape[1] if plan.group == 1 else group * cg
        shape = (width, cg, *(len(p.taps) for p in phase))
        plans.add(_conv_plan(plan, channels, shape, group, phase,
                             tuple(p.count for p in phase)))
    return plans


# --- element types -------------------------------------------------------------------------


def _float_inputs(x: np.ndarray, w: np.ndarray, b: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """X, W, B as arrays after checking they share one of ConvTranspose's float dtypes."""
    named = [("X", np.asarray(x)), ("W", np.asarray(w))]
    if b is not None:
        named.append(("B", np.asarray(b)))
    for name, array in named:
        if array.dtype.name not in FLOAT_DTYPE_NAMES:
            raise UnsupportedDtypeError(
                f"ConvTranspose takes float tensors ({', '.join(FLOAT_DTYPE_NAMES)}); got "
                f"{array.dtype.name if array.dtype.kind not in 'USO' else 'string'} {name}",
                param=name)
    if len({array.dtype.name for _, array in named}) > 1:
        listing = ", ".join(f"{name} {array.dtype.name}" for name, array in named)
        raise UnsupportedDtypeError(f"ConvTranspose inputs must share one dtype; got {listing}",
                                    param="W")
    return named[0][1], named[1][1], named[2][1] if b is not None else None
