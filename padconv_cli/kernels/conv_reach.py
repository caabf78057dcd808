"""The part of a Conv that reads X: kernel taps and output positions that read only padding.

Along one spatial axis (length ``L``, kernel ``K``, stride ``s``, dilation ``d``, pad before
``p``, output length ``O``), output ``o`` and tap ``k`` read ``X[o*s + k*d - p]`` when
``0 <= o*s + k*d - p < L``, and a zero of the padding otherwise.  With pads, strides or
dilations far larger than X (a 5x5 input, a dilation of 3e7 and ``SAME_UPPER``), most taps and
outputs read padding only, and a kernel that holds padded rows would hold gigabytes of zeros.

:func:`plan_cut` finds, per axis, the first and last tap that reads X for some output
(``taps``), the first and last output that reads X with one of those taps (``outputs``) and
the slice of X they read; the Conv of that part is a plan of its own (``cut.plan``), with the
pads that remain.  The rest of Y is known without reading X:

* an output outside the ``outputs`` box sums ``0 * W[m, c, t]`` over every tap:
  ``0 + B[m]``, or NaN when one of ``W[m]``'s weights is not finite (``0 * inf``);
* a tap outside the ``taps`` box adds ``0 * W[m, c, t]`` to every output of channel ``m``:
  nothing, or NaN when that weight is not finite.

A sum with those taps and one without them are equal bit for bit (the kernels start every sum
from +0, and adding a zero product leaves it as it is), so the cut changes no result: it is
taken when it needs less memory (:func:`padconv_cli.kernels.conv_paths.working_bytes`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from padconv_cli.kernels.conv_plan import ConvPlan


@dataclasses.dataclass(frozen=True)
class AxisCut:
    """What of one axis the cut keeps: taps ``[taps[0], taps[1]]``, outputs
    ``[outputs[0], outputs[1]]``, ``X[inputs[0]:inputs[1]]`` and the pads around it."""

    taps: tuple[int, int]
    outputs: tuple[int, int]
    inputs: tuple[int, int]
    pads: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Cut:
    """The part of a Conv that reads X: one :class:`AxisCut` per spatial axis and the plan of
    that part, or ``axes is None`` when no output reads X at all."""

    axes: tuple[AxisCut, ...] | None
    plan: ConvPlan | None

    def x_box(self) -> tuple[slice, ...]:
        """The part of X read (batch and channels whole)."""
        return (slice(None), slice(None), *(slice(*a.inputs) for a in self.axes))

    def w_box(self) -> tuple[slice, ...]:
        """The taps kept (output and input channels whole)."""
        return (slice(None), slice(None), *(slice(a.taps[0], a.taps[1] + 1) for a in self.axes))

    def y_box(self) -> tuple[slice, ...]:
        """The outputs computed from X."""
        return (slice(None), slice(None),
                *(slice(a.outputs[0], a.outputs[1] + 1) for a in self.axes))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tap_outputs(k: int, length: int, s: int, d: int, p: int, out: int) -> tuple[int, int] | None:
    """Outputs ``[first, last]`` whose tap ``k`` reads X: ``0 <= o*s + k*d - p <= L - 1`` with
    ``0 <= o < O``; None when there is none."""
    first = max(0, _ceil_div(p - k * d, s))
    last = min(out - 1, (p - k * d + length - 1) // s)
    return (first, last) if first <= last else None


def _reaching_tap(taps: range, length: int, s: int, d: int, p: int, out: int) -> int | None:
    return next((k for k in taps if tap_outputs(k, length, s, d, p, out) is not None), None)


def axis_cut(length: int, kernel: int, s: int, d: int, p: int, out: int) -> AxisCut | None:
    """The cut of one axis (module docstring); None when no output reads X along it.

    A tap can reach X only for ``ceil((p - (O-1)*s) / d) <= k <= floor((p + L - 1) / d)``;
    the first and last taps that do are searched from those bounds inward.  ``first(k)`` and
    ``last(k)`` of :func:`tap_outputs` fall as ``k`` grows, so the outputs reached run from the
    last tap's first output to the first tap's last output.
    """
    if length <= 0 or out <= 0:
        return None
    low = max(0, _ceil_div(p - (out - 1) * s, d))
    high = min(kernel - 1, (p + length - 1) // d)
    k_lo = _reaching_tap(range(low, high + 1), length, s, d, p, out)
    if k_lo is None:
        return None
    k_hi = _reaching_tap(range(high, k_lo - 1, -1), length, s, d, p, out)
    o_lo = tap_outputs(k_hi, length, s, d, p, out)[0]
    o_hi = tap_outputs(k_lo, length, s, d, p, out)[1]
    start = o_lo * s + k_lo * d - p  # X index of the first output's first tap kept
    end = o_hi * s + k_hi * d - p  # and of the last output's last tap kept
    return AxisCut(
        taps=(k_lo, k_hi),
        outputs=(o_lo, o_hi),
        inputs=(max(0, start), min(length, end + 1)),
        pads=(max(0, -start), max(0, end - (length - 1))),
    )


def _cuts_something(plan: ConvPlan, axes: tuple[AxisCut, ...]) -> bool:
    whole = [
        a.taps == (0, k - 1) and a.outputs == (0, o - 1) and a.inputs == (0, n)
        for a, k, o, n in zip(axes, plan.kernel_shape, plan.output_shape[2:], plan.x_shape[2:],
                              strict=True)
    ]
    return not all(whole)


def _part_plan(plan: ConvPlan, axes: tuple[AxisCut, ...]) -> ConvPlan:
    """The plan of the part that reads X: one output or one tap along an axis needs no stride
    or dilation there (a stride of 3e7 would size the kernels' rows)."""
    kernel = tuple(a.taps[1] - a.taps[0] + 1 for a in axes)
    out = tuple(a.outputs[1] - a.outputs[0] + 1 for a in axes)
    strides = tuple(s if o > 1 else 1 for s, o in zip(plan.strides, out, strict=True))
    dilations = tuple(d if k > 1 else 1 for d, k in zip(plan.dilations, kernel, strict=True))
    n, c = plan.x_shape[:2]
    return dataclasses.replace(
        plan,
        x_shape=(n, c, *(a.inputs[1] - a.inputs[0] for a in axes)),
        w_shape=(*plan.w_shape[:2], *kernel),
        kernel_shape=kernel, strides=strides, dilations=dilations,
        pads=tuple(a.pads[0] for a in axes) + tuple(a.pads[1] for a in axes),
        auto_pad="NOTSET", output_shape=(*plan.output_shape[:2], *out), formulas=(),
    )


def plan_cut(plan: ConvPlan) -> Cut | None:
    """The part of the Conv that reads X (module docstring); None when that is all of it."""
    if 0 in plan.output_shape or 0 in plan.w_shape[:2]:
        return None
    axes = []
    for n, k, s, d, p, o in zip(plan.x_shape[2:], plan.kernel_shape, plan.strides,
                                plan.dilations, plan.pads_begin, plan.output_shape[2:],
                                strict=True):
        cut = axis_cut(n, k, s, d, p, o)
        if cut is None:
            return Cut(axes=None, plan=None)
        axes.append(cut)
    axes = tuple(axes)
    if not _cuts_something(plan, axes):
        return None
    return Cut(axes=axes, plan=_part_plan(plan, axes))


def cut_copy_bytes(plan: ConvPlan, cut: Cut, itemsize: int,
                   out_channels: int | None = None) -> int:
    """What the cut holds besides the kernels' buffers: which weights are not finite (a byte
    per weight of W) and its part of X, its taps of W and its part of Y, copied contiguous
    (``itemsize`` of the input dtype)."""
    flags = math.prod(plan.w_shape)
    if cut.plan is None:
        return flags
    part = cut.plan
    m = part.w_shape[0] if out_channels is None else out_channels
    y = part.output_shape[0] * m * math.prod(part.output_shape[2:])
    return flags + (math.prod(part.x_shape) + math.prod(part.w_shape) + y) * itemsize


def convolve_cut(
    plan: ConvPlan, cut: Cut, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
    acc: np.dtype, compute: Callable[[ConvPlan, np.ndarray, np.ndarray, np.ndarray | None],
                                     np.ndarray],
) -> np.ndarray:
    """Y of the whole plan from ``compute`` run on the cut's part (module docstring): outputs
    that read only padding are ``0 + B[m]`` (NaN where a weight of ``W[m]`` is not finite), and
    channels with a non-finite weight on a tap cut off are NaN everywhere."""
    m = plan.w_shape[0]
    spread = (1, m) + (1,) * plan.spatial_rank
    nonfinite = ~np.isfinite(w)
    y = np.empty(plan.output_shape, x.dtype)
    y[...] = _padding_only_values(nonfinite, b, acc, m).astype(x.dtype).reshape(spread)
    if cut.plan is None:
        return y
    part = compute(cut.plan, np.ascontiguousarray(x[cut.x_box()]),
                   np.ascontiguousarray(w[cut.w_box()]), b)
    nonfinite[cut.w_box()] = False  # what is left: weights on the taps cut off
    dropped = nonfinite.reshape(m, -1).any(axis=1)
    if dropped.any():
        part[:, dropped] = np.nan
    y[cut.y_box()] = part
    return y


def _padding_only_values(nonfinite: np.ndarray, b: np.ndarray | None, acc: np.dtype,
                         m: int) -> np.ndarray:
    """Per output channel: the sum of zeros (+0) plus ``B[m]``, NaN for a non-finite weight."""
    values = np.zeros(m, acc) if b is None else np.zeros(m, acc) + b.astype(acc)
    values[nonfinite.reshape(m, -1).any(axis=1)] = np.nan
    return values
