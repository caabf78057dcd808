"""ONNX ``Conv`` planning (opsets 1, 11 and 22): validation and resolved attributes.

:func:`plan_conv` resolves and checks the attributes against the input shapes without touching
any data; the resulting :class:`ConvPlan` is what the compute paths
(:mod:`padconv_cli.kernels.conv_paths`), the engines, ``--explain``, ``--emit-onnx`` and
``--check`` work from.  This module imports no other kernel module.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from padconv_cli.errors import AttributeValueError
from padconv_cli.kernels import conv_shapes
from padconv_cli.messages import bounded_sequence

AUTO_PAD_VALUES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True)
class ConvPlan:
    """Resolved Conv attributes and the output shape, computed from shapes only.

    ``pads`` are the effective pads after ``auto_pad`` in the ONNX layout
    ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]``; ``formulas`` holds one human-readable
    derivation per spatial output dimension.
    """

    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    kernel_shape: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]
    group: int
    auto_pad: str
    output_shape: tuple[int, ...]
    formulas: tuple[str, ...]

    @property
    def spatial_rank(self) -> int:
        """Number of spatial axes (rank of X minus 2)."""
        return len(self.kernel_shape)

    @property
    def pads_begin(self) -> tuple[int, ...]:
        """Padding added before each spatial axis."""
        return self.pads[: self.spatial_rank]

    @property
    def pads_end(self) -> tuple[int, ...]:
        """Padding added after each spatial axis."""
        return self.pads[self.spatial_rank :]

    @property
    def effective_kernel_shape(self) -> tuple[int, ...]:
        """Dilated kernel extent per axis: ``(k - 1) * d + 1``."""
        return tuple(
            conv_shapes.effective_kernel_size(k, d)
            for k, d in zip(self.kernel_shape, self.dilations, strict=True)
        )

    @property
    def flops(self) -> int:
        """Multiply-adds counted as 2 FLOPs.

        ``2 * N * M * prod(out_spatial) * (C/group) * prod(kernel_shape)``
        """
        batch, out_channels, *out_spatial = self.output_shape
        channels_per_group = self.w_shape[1]
        return (
            2
            * batch
            * out_channels
            * math.prod(out_spatial)
            * channels_per_group
            * math.prod(self.kernel_shape)
        )


def plan_conv(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    b_shape: Sequence[int] | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> ConvPlan:
    """Check Conv's shapes and attributes against the spec; resolve them into a :class:`ConvPlan`.

    Output size per spatial axis (``ek = (k - 1) * d + 1``): explicit pads give
    ``floor((in + pad_begin + pad_end - ek) / s) + 1``; ``SAME_UPPER``/``SAME_LOWER`` give
    ``ceil(in / s)`` with total pad ``max(0, (out - 1) * s + ek - in)``; ``VALID`` gives
    ``floor((in - ek) / s) + 1``. Raises :class:`AttributeValueError` on any violation.
    """
    x_shape = input_shape("X", x_shape)
    w_shape = input_shape("W", w_shape)
    _check_ranks(x_shape, w_shape)
    spatial_rank = len(x_shape) - 2
    group = group_attribute(group)
    kernel = _kernel_shape(kernel_shape, w_shape)
    strides_t = positive_list("strides", strides, spatial_rank)
    dilations_t = positive_list("dilations", dilations, spatial_rank)
    auto_pad = _auto_pad(auto_pad, pads)
    _check_channels(x_shape, w_shape, group)
    if b_shape is not None:
        _check_bias(input_shape("B", b_shape), w_shape[0])
    resolved = _resolve_spatial(x_shape[2:], kernel, strides_t, dilations_t, auto_pad, pads)
    out_spatial, pads_t, formulas = resolved
    return ConvPlan(
        x_shape=x_shape,
        w_shape=w_shape,
        kernel_shape=kernel,
        strides=strides_t,
        dilations=dilations_t,
        pads=pads_t,
        group=group,
        auto_pad=auto_pad,
        output_shape=(x_shape[0], w_shape[0], *out_spatial),
        formulas=formulas,
    )



# --- attribute validation ------------------------------------------------------------------


def input_shape(name: str, shape: Sequence[int], op: str = "Conv") -> tuple[int, ...]:
    """A shape as a tuple of non-negative ints (``op``: the operator the message names)."""
    values = tuple(int(v) for v in shape)
    if any(v < 0 for v in values):
        raise AttributeValueError(f"{op} input {name} has a negative dimension: {list(values)}",
                                  param=name)
    return values


def _check_ranks(x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> None:
    """X needs (N, C, D1, ...) with at least one spatial axis; W needs X's rank."""
    if len(x_shape) < 3:
        raise AttributeValueError(
            f"Conv input X must have rank >= 3 (N, C, D1, ...), got rank {len(x_shape)} "
            f"shape {list(x_shape)}"
        )
    if len(w_shape) != len(x_shape):
        raise AttributeValueError(
            f"Conv input W must have the rank of X ({len(x_shape)}), got rank {len(w_shape)} "
            f"shape {list(w_shape)}"
        )


def is_int(value: object) -> bool:
    """An integer that is not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def group_attribute(group: object, op: str = "Conv") -> int:
    """``group`` is an integer >= 1."""
    if not is_int(group) or int(group) < 1:
        raise AttributeValueError(f"{op} attribute group must be an integer >= 1, got {group!r}",
                                  param="group")
    return int(group)


def int_list(name: str, values: object, length: int, length_rule: str,
             op: str = "Conv") -> tuple[int, ...]:
    """An attribute list of exactly ``length`` integers."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise AttributeValueError(
            f"{op} attribute {name} must be a list of integers, got {values!r}", param=name
        )
    items = list(values)
    if not all(is_int(v) for v in items):
        raise AttributeValueError(f"{op} attribute {name} must contain integers only, got "
                                  f"{bounded_sequence(items)}", param=name)
    ints = tuple(int(v) for v in items)
    if len(ints) != length:
        raise AttributeValueError(
            f"{op} attribute {name} needs {length} values ({length_rule}), "
            f"got {len(ints)}: {bounded_sequence(ints)}", param=name
        )
    return ints


def positive_list(name: str, values: object, spatial_rank: int,
                  op: str = "Conv") -> tuple[int, ...]:
    """``strides``/``dilations``: one integer >= 1 per spatial axis, default all 1."""
    if values is None:
        return (1,) * spatial_rank
    ints = int_list(name, values, spatial_rank, "one per spatial axis", op)
    if any(v < 1 for v in ints):
        raise AttributeValueError(
            f"{op} attribute {name} must be >= 1 on every axis, got {list(ints)}", param=name
        )
    return ints


def _kernel_shape(kernel_shape: object, w_shape: tuple[int, ...]) -> tuple[int, ...]:
    """``kernel_shape`` defaults to ``W.shape[2:]`` and, when given, must equal it."""
    from_w = w_shape[2:]
    if kernel_shape is not None:
        given = int_list("kernel_shape", kernel_shape, len(from_w), "one per spatial axis")
        if given != from_w:
            raise AttributeValueError(
                f"Conv attribute kernel_shape {list(given)} != W.shape[2:] {list(from_w)}; "
                "drop kernel_shape: it comes from W", param="kernel_shape")
    if any(k < 1 for k in from_w):
        raise AttributeValueError(
            f"Conv kernel dimensions W.shape[2:] must be >= 1, got {list(from_w)}"
        )
    return from_w


def _auto_pad(auto_pad: object, pads: object) -> str:
    """``auto_pad`` is one of the four spec values and excludes explicit ``pads``."""
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode("utf-8", "replace")
    if auto_pad not in AUTO_PAD_VALUES:
        raise AttributeValueError(
            f"Conv attribute auto_pad must be one of {', '.join(AUTO_PAD_VALUES)}, got {auto_pad!r}"
        )
    if auto_pad != "NOTSET" and pads is not None:
        raise AttributeValueError(
            f"Conv attributes pads and auto_pad={auto_pad} cannot be used together; "
            "drop pads or set auto_pad=NOTSET"
        )
    return str(auto_pad)


def _check_channels(x_shape: tuple[int, ...], w_shape: tuple[int, ...], group: int) -> None:
    """``C == W.shape[1] * group`` and ``M % group == 0``."""
    channels, out_channels, per_group = x_shape[1], w_shape[0], w_shape[1]
    if channels != per_group * group:
        raise AttributeValueError(
            f"Conv input channels C={channels} != W.shape[1]*group = {per_group}*{group}"
        )
    if out_channels % group != 0:
        raise AttributeValueError(
            f"Conv output channels M=W.shape[0]={out_channels} is not a multiple of group={group}"
        )


def _check_bias(b_shape: tuple[int, ...], out_channels: int) -> None:
    """The optional bias is one value per output channel: shape ``(M,)``."""
    if b_shape != (out_channels,):
        raise AttributeValueError(
            f"Conv bias B must have shape (M,) = ({out_channels},), got {b_shape}"
        )


def explicit_pads(pads: object, spatial_rank: int, op: str = "Conv") -> tuple[int, ...]:
    """``pads``: ``2 * spatial_rank`` non-negative integers, default all 0."""
    if pads is None:
        return (0,) * (2 * spatial_rank)
    ints = int_list("pads", pads, 2 * spatial_rank, "begin and end per spatial axis", op)
    if any(v < 0 for v in ints):
        raise AttributeValueError(f"{op} attribute pads must be >= 0, got {list(ints)}",
                                  param="pads")
    return ints


def _resolve_spatial(
    in_spatial: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    auto_pad: str,
    pads: object,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...]]:
    """Output sizes, effective pads and formula strings for every spatial axis."""
    spatial_rank = len(in_spatial)
    explicit = explicit_pads(pads, spatial_rank)
    outs, begins, ends, formulas = [], [], [], []
    axes = zip(in_spatial, kernel, strides, dilations, strict=True)
    for axis, (size, k, s, d) in enumerate(axes):
        ek = conv_shapes.effective_kernel_size(k, d)
        ek_text = f"(({k}-1)*{d}+1)"
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = conv_shapes.same_output_size(size, s)
            total = conv_shapes.same_total_pad(size, out, ek, s)
            begin, end = conv_shapes.split_same_pad(total, auto_pad)
            formula = (
                f"out[{axis}] = ceil({size} / {s}) = {out}; {auto_pad} pads {begin}+{end} "
                f"= max(0, ({out}-1)*{s} + {ek_text} - {size})"
            )
        elif auto_pad == "VALID":
            begin = end = 0
            out = conv_shapes.valid_output_size(size, ek, s)
            formula = f"out[{axis}] = floor(({size} - {ek_text}) / {s}) + 1 = {out}"
        else:
            begin, end = explicit[axis], explicit[axis + spatial_rank]
            out = conv_shapes.explicit_pad_output_size(size, begin, end, ek, s)
            formula = (
                f"out[{axis}] = floor(({size} + {begin} + {end} - {ek_text}) / {s}) + 1 = {out}"
            )
        if out < 1:
            raise AttributeValueError(
                f"Conv output spatial axis {axis} (tensor axis {axis + 2}) would be empty: "
                f"{formula} (every output dimension must be >= 1)"
            )
        outs.append(out)
        begins.append(begin)
        ends.append(end)
        formulas.append(formula)
    return tuple(outs), tuple(begins + ends), tuple(formulas)
