"""ONNX ``ConvTranspose`` planning (opsets 1, 11 and 22): validation, output shape, pads.

:func:`plan_conv_transpose` checks the attributes against the input shapes without touching any
data; the :class:`ConvTransposePlan` it returns holds the effective pads (negative where the
output reaches past the un-cropped result), one human-readable formula per spatial axis and
the names of the rulings it applied (:mod:`padconv_cli.kernels.family_rulings`). This module
imports no other kernel module but the shape formulas and the rulings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from padconv_cli.errors import AttributeValueError
from padconv_cli.kernels import conv_transpose_shapes as shapes
from padconv_cli.kernels.conv import (
    ConvGeometry,
    explicit_pads,
    group_attribute,
    input_shape,
    int_list,
    positive_list,
)

AUTO_PAD_VALUES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
OP = "ConvTranspose"


@dataclass(frozen=True)
class ConvTransposePlan(ConvGeometry):
    """Resolved ConvTranspose attributes and the output shape, computed from shapes only.

    ``pads`` are the effective pads ``[x1_begin, ..., x1_end, ...]`` that crop the un-cropped
    output ``stride * (in - 1) + ek`` (plus ``output_padding`` at the end); a negative pad
    extends it with bias-only elements. ``Y[n, m, o] = B[m] + sum over (c, i, k) with
    i * s + k * d - pads_begin == o of X[n, c, i] * W[c, m - g*M/G, k]``.
    """

    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    kernel_shape: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]
    output_padding: tuple[int, ...]
    group: int
    auto_pad: str
    output_shape: tuple[int, ...]
    formulas: tuple[str, ...]
    rulings: tuple[str, ...]

    @property
    def out_channels(self) -> int:
        """``M = W.shape[1] * group``."""
        return self.w_shape[1] * self.group

    @property
    def terms_per_output(self) -> int:
        """Most products in one output sum: ``C/group * prod(kernel_shape)``."""
        return self.x_shape[1] // self.group * math.prod(self.kernel_shape)

    @property
    def flops(self) -> int:
        """Multiply-adds counted as 2 FLOPs: ``2 * N * C * prod(in) * M/group * prod(k)``
        (every input element meets every tap of its group's kernels once)."""
        return (2 * self.x_shape[0] * self.x_shape[1] * math.prod(self.x_shape[2:])
                * self.w_shape[1] * math.prod(self.kernel_shape))


def plan_conv_transpose(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    b_shape: Sequence[int] | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> ConvTransposePlan:
    """Check ConvTranspose's shapes and attributes; resolve them into a plan.

    Per spatial axis (``ek = (k - 1) * d + 1``, ``full = s * (in - 1) + ek``):
    with ``output_shape`` the total padding is ``full + output_padding - output_shape``, split
    ``begin = total - total // 2`` (``total // 2`` for ``SAME_UPPER``); with ``SAME_*`` the
    output is ``in * s`` and the total padding derived the same way; otherwise the output is
    ``full + output_padding - pad_begin - pad_end`` (``VALID``: no pads). Raises
    :class:`AttributeValueError` (with ``param``) on any violation.
    """
    x_shape = input_shape("X", x_shape, OP)
    w_shape = input_shape("W", w_shape, OP)
    _check_ranks(x_shape, w_shape)
    rank = len(x_shape) - 2
    group = group_attribute(group, OP)
    _check_channels(x_shape, w_shape, group)
    kernel = _kernel_shape(kernel_shape, w_shape)
    strides_t = positive_list("strides", strides, rank, OP)
    dilations_t = positive_list("dilations", dilations, rank, OP)
    auto_pad = _auto_pad(auto_pad, pads)
    explicit = explicit_pads(pads, rank, OP)
    rulings: list[str] = []
    padding = _output_padding(output_padding, strides_t, dilations_t, rulings)
    requested = _requested_output(output_shape, rank, x_shape[0], w_shape[1] * group)
    if b_shape is not None:
        _check_bias(input_shape("B", b_shape, OP), w_shape[1] * group)
    if requested is not None and pads is not None:
        rulings.append("output-shape-overrides-pads")
    axes = zip(x_shape[2:], kernel, strides_t, dilations_t, padding, strict=True)
    outs, begins, ends, formulas = [], [], [], []
    for axis, (size, k, s, d, op) in enumerate(axes):
        target = None if requested is None else requested[axis]
        out, begin, end, formula = _resolve_axis(
            axis, size, k, s, d, op, auto_pad, target, explicit[axis], explicit[axis + rank],
            rulings)
        outs.append(out)
        begins.append(begin)
        ends.append(end)
        formulas.append(formula)
    if any(p < 0 for p in begins + ends):
        rulings.append("negative-padding-extends")
    return ConvTransposePlan(
        x_shape=x_shape, w_shape=w_shape, kernel_shape=kernel, strides=strides_t,
        dilations=dilations_t, pads=tuple(begins + ends), output_padding=padding, group=group,
        auto_pad=auto_pad, output_shape=(x_shape[0], w_shape[1] * group, *outs),
        formulas=tuple(formulas), rulings=tuple(dict.fromkeys(rulings)))


def _resolve_axis(axis: int, size: int, k: int, s: int, d: int, op: int, auto_pad: str,
                  target: int | None, pad_begin: int, pad_end: int, rulings: list[str]
                  ) -> tuple[int, int, int, str]:
    """Output length, begin and end pads and the formula text of one spatial axis."""
    ek = (k - 1) * d + 1
    full = f"{s}*({size}-1) + {op} + (({k}-1)*{d}+1)"
    if target is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if target is None:
            target = shapes.same_output_size(size, s)
            rulings.append("same-target-in-times-stride")
            origin = f"out[{axis}] = {size}*{s} = {target} ({auto_pad})"
        else:
            origin = f"out[{axis}] = output_shape[{axis}] = {target}"
        total = shapes.total_padding(size, s, ek, op, target)
        begin, end = shapes.split_total_padding(total, auto_pad)
        if total % 2:
            rulings.append("floor-division-split")
        formula = f"{origin}; pads {begin}+{end} = {full} - {target}"
        out = target
    else:
        if auto_pad == "VALID":
            pad_begin = pad_end = 0
        begin, end = pad_begin, pad_end
        out = shapes.explicit_pad_output_size(size, s, ek, op, begin, end)
        formula = f"out[{axis}] = {full} - {begin} - {end} = {out}"
    if out < 1:
        raise AttributeValueError(
            f"{OP} output spatial axis {axis} (tensor axis {axis + 2}) would be empty: "
            f"{formula} (every output dimension must be >= 1)", param="pads")
    return out, begin, end, formula


# --- attribute validation ------------------------------------------------------------------


def _check_ranks(x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> None:
    """X needs (N, C, D1, ...) with at least one spatial axis; W needs X's rank."""
    if len(x_shape) < 3:
        raise AttributeValueError(
            f"{OP} input X must have rank >= 3 (N, C, D1, ...), got shape {list(x_shape)}",
            param="X")
    if len(w_shape) != len(x_shape):
        raise AttributeValueError(
            f"{OP} input W must have the rank of X ({len(x_shape)}), got shape "
            f"{list(w_shape)}", param="W")


def _check_channels(x_shape: tuple[int, ...], w_shape: tuple[int, ...], group: int) -> None:
    """W is ``(C, M/group, k...)``: ``W.shape[0] == C`` and ``C % group == 0``."""
    if w_shape[0] != x_shape[1]:
        raise AttributeValueError(
            f"{OP} input W must have shape (C, M/group, k...) with C = X.shape[1] = "
            f"{x_shape[1]}, got W.shape[0] = {w_shape[0]}", param="W")
    if x_shape[1] % group:
        raise AttributeValueError(
            f"{OP} input channels C={x_shape[1]} is not a multiple of group={group}",
            param="group")


def _kernel_shape(kernel_shape: object, w_shape: tuple[int, ...]) -> tuple[int, ...]:
    from_w = w_shape[2:]
    if kernel_shape is not None:
        given = int_list("kernel_shape", kernel_shape, len(from_w), "one per spatial axis", OP)
        if given != from_w:
            raise AttributeValueError(f"{OP} attribute kernel_shape {list(given)} != "
                                      f"W.shape[2:] {list(from_w)}", param="kernel_shape")
    if any(k < 1 for k in from_w):
        raise AttributeValueError(f"{OP} kernel dimensions W.shape[2:] must be >= 1, got "
                                  f"{list(from_w)}", param="W")
    return from_w


def _auto_pad(auto_pad: object, pads: object) -> str:
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode("utf-8", "replace")
    if auto_pad not in AUTO_PAD_VALUES:
        raise AttributeValueError(f"{OP} attribute auto_pad must be one of "
                                  f"{', '.join(AUTO_PAD_VALUES)}, got {auto_pad!r}",
                                  param="auto_pad")
    if auto_pad != "NOTSET" and pads is not None:
        raise AttributeValueError(f"{OP} attributes pads and auto_pad={auto_pad} cannot be used "
                                  "together; drop pads or set auto_pad=NOTSET",
                                  param=("pads", "auto_pad"))
    return str(auto_pad)


def _output_padding(values: object, strides: tuple[int, ...], dilations: tuple[int, ...],
                    rulings: list[str]) -> tuple[int, ...]:
    """``0 <= output_padding[i] < max(stride[i], dilation[i])`` (ruling
    ``output-padding-below-stride-or-dilation``)."""
    if values is None:
        return (0,) * len(strides)
    ints = int_list("output_padding", values, len(strides), "one per spatial axis", OP)
    for axis, (p, s, d) in enumerate(zip(ints, strides, dilations, strict=True)):
        if not 0 <= p < max(s, d):
            raise AttributeValueError(
                f"{OP} attribute output_padding[{axis}] = {p} must be >= 0 and below the "
                f"stride or the dilation of its axis (max({s}, {d}) = {max(s, d)})",
                param="output_padding")
        if p >= s:
            rulings.append("output-padding-below-stride-or-dilation")
    return ints


def _requested_output(values: object, rank: int, batch: int, out_channels: int
                      ) -> tuple[int, ...] | None:
    """``output_shape``: one length >= 1 per spatial axis (the operator text: N and M are not
    part of it; ONNX shape inference and onnxruntime refuse any other length)."""
    if values is None:
        return None
    items = list(values) if isinstance(values, (Sequence, np.ndarray)) else values
    if isinstance(items, list) and len(items) == rank + 2:
        raise AttributeValueError(
            f"{OP} attribute output_shape needs {rank} values, one per spatial axis, got "
            f"{rank + 2}: {items[:8]!r}; leave out N and M ({batch}, {out_channels})",
            param="output_shape")
    ints = int_list("output_shape", values, rank, "one per spatial axis", OP)
    if any(v < 1 for v in ints):
        raise AttributeValueError(f"{OP} attribute output_shape must be >= 1 on every axis, "
                                  f"got {list(ints)}", param="output_shape")
    return ints


def _check_bias(b_shape: tuple[int, ...], out_channels: int) -> None:
    if b_shape != (out_channels,):
        raise AttributeValueError(
            f"{OP} bias B must have shape (M,) = ({out_channels},), got {b_shape}", param="B")
