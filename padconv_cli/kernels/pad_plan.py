"""ONNX ``Pad`` planning (opset 25): validation of pads, axes and mode, and the output shape.

:func:`plan_pad` works from the input shape alone (and checks the element type when ``dtype``
is given); the resulting :class:`PadPlan` is what the fill kernel (:mod:`padconv_cli.kernels.
pad`), the engines, ``--explain``, ``--emit-onnx`` and ``--check`` work from.  Rules: see
:mod:`padconv_cli.kernels.pad`.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import AttributeValueError
from padconv_cli.kernels.pad_values import coerce_constant_value, default_constant, pad_element_kind

PAD_MODES = ("constant", "reflect", "edge", "wrap")


@dataclass(frozen=True)
class AxisPad:
    """What Pad does to one input axis: crop, then pad.

    ``out_dim = dim - crop_begin - crop_end + pad_begin + pad_end`` (all four are >= 0).
    """

    dim: int
    crop_begin: int
    crop_end: int
    pad_begin: int
    pad_end: int

    @property
    def cropped_dim(self) -> int:
        """Length of the axis after cropping: ``dim - crop_begin - crop_end``."""
        return self.dim - self.crop_begin - self.crop_end

    @property
    def out_dim(self) -> int:
        """Length of the axis in the output: ``cropped_dim + pad_begin + pad_end``."""
        return self.cropped_dim + self.pad_begin + self.pad_end

    @property
    def is_padded(self) -> bool:
        """True when elements are added at either end."""
        return self.pad_begin > 0 or self.pad_end > 0

    @property
    def is_cropped(self) -> bool:
        """True when elements are removed at either end."""
        return self.crop_begin > 0 or self.crop_end > 0


@dataclass(frozen=True)
class PadPlan:
    """A validated Pad call: the mode, the normalized axes and one :class:`AxisPad` per axis."""

    input_shape: tuple[int, ...]
    mode: str
    axes: tuple[int, ...]
    per_axis: tuple[AxisPad, ...]

    @property
    def cropped_shape(self) -> tuple[int, ...]:
        """Shape of the input after the negative pads are applied."""
        return tuple(ax.cropped_dim for ax in self.per_axis)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Shape of the result: ``out_dim`` of every axis."""
        return tuple(ax.out_dim for ax in self.per_axis)

    @property
    def output_size(self) -> int:
        """Number of elements of the result (a Python int: it cannot overflow)."""
        return math.prod(self.output_shape)

    @property
    def crop_slices(self) -> tuple[slice, ...]:
        """Index selecting the cropped input: ``data[plan.crop_slices]``."""
        return tuple(slice(ax.crop_begin, ax.dim - ax.crop_end) for ax in self.per_axis)

    @property
    def adds_elements(self) -> bool:
        """True when some axis gets padded, i.e. the result has a border to fill."""
        return any(ax.is_padded for ax in self.per_axis)


def plan_pad(shape: Iterable[int], pads: Any, axes: Any = None, mode: str = "constant", *,
             dtype: Any = None) -> PadPlan:
    """Validate Pad's attributes against an input shape and give the output shape.

    ``pads`` has ``2 * len(axes)`` integers ``[b_1..b_k, e_1..e_k]``; axis ``axes[i]`` gets
    ``b_i`` elements before and ``e_i`` after (negative: removed).  Raises
    :class:`AttributeValueError` for a bad mode, axis or pad count, a repeated axis,
    pads making an axis negative (``dim + begin + end < 0``), or (reflect/edge/wrap) an
    axis with non-zero pads that is empty after cropping.  When ``dtype`` is given, it must
    be one of Pad-25's element types (:func:`pad_element_kind`), as :func:`pad` requires of its
    data.
    """
    if dtype is not None:
        pad_element_kind(dtype)
    input_shape = _as_int_tuple(shape, "shape")
    mode = _checked_mode(mode)
    rank = len(input_shape)
    axis_list = _normalized_axes(axes, rank)
    pad_list = _as_int_tuple(pads, "pads")
    _check_pad_count(pad_list, len(axis_list), axes is None, rank)
    begins = dict(zip(axis_list, pad_list[: len(axis_list)], strict=True))
    ends = dict(zip(axis_list, pad_list[len(axis_list) :], strict=True))
    per_axis = tuple(
        _axis_pad(axis, dim, begins.get(axis, 0), ends.get(axis, 0), mode)
        for axis, dim in enumerate(input_shape)
    )
    return PadPlan(input_shape, mode, axis_list, per_axis)


def _checked_mode(mode: Any) -> str:
    if isinstance(mode, bytes):  # ONNX string attributes arrive as bytes
        mode = mode.decode("utf-8", errors="replace")
    if isinstance(mode, str) and mode in PAD_MODES:
        return mode
    hint = ""
    if isinstance(mode, str) and mode.lower() in PAD_MODES:
        hint = " (mode names are lowercase)"
    raise AttributeValueError(f"mode {mode!r} is not an ONNX Pad mode; choose constant, reflect, "
                              f"edge or wrap{hint}")


def _as_int_tuple(values: Any, name: str) -> tuple[int, ...]:
    """Read a 1-D sequence or array of integers; bools, floats and strings are refused."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise AttributeValueError(f"{name} must be a 1-D list of integers; got an array of "
                                      f"shape {values.shape}")
        if values.dtype.kind not in "iu":
            raise AttributeValueError(f"{name} must hold integers; got an array of {values.dtype} "
                                      "values")
        return tuple(int(v) for v in values.tolist())
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise AttributeValueError(f"{name} must be a sequence of integers; got "
                                  f"{type(values).__name__} {values!r}")
    return tuple(_as_int(v, f"{name}[{i}]") for i, v in enumerate(values))


def _as_int(value: Any, label: str) -> int:
    if not isinstance(value, (bool, np.bool_)):
        with contextlib.suppress(TypeError):
            return operator.index(value)
    raise AttributeValueError(f"{label}={value!r} is not an integer")


def _normalized_axes(axes: Any, rank: int) -> tuple[int, ...]:
    """Axes in ``[0, rank)``: ``axis + rank`` for a negative axis; all axes when None."""
    if axes is None:
        return tuple(range(rank))
    given = _as_int_tuple(axes, "axes")
    first_seen: dict[int, int] = {}
    for i, axis in enumerate(given):
        if not -rank <= axis < rank:
            span = f"[{-rank}, {rank - 1}]" if rank else "(it has no axes)"
            raise AttributeValueError(f"axes[{i}]={axis} is out of range {span} for a rank-{rank} "
                                      "input")
        normalized = axis % rank
        if normalized in first_seen:
            raise AttributeValueError(f"axes repeats axis {normalized} (given as "
                                      f"{first_seen[normalized]} and {axis})")
        first_seen[normalized] = axis
    return tuple(axis % rank for axis in given)


def _check_pad_count(pads: tuple[int, ...], n_axes: int, all_axes: bool, rank: int) -> None:
    if len(pads) != 2 * n_axes:
        need = (f"2 * rank = {2 * n_axes} for a rank-{rank} input" if all_axes
                else f"2 * len(axes) = {2 * n_axes}")
        fix = "; give axes to pad only some of them" if all_axes else ""
        raise AttributeValueError(f"pads has {len(pads)} values; it needs {need}{fix}",
                                  param=("pads", "axes"))


def _axis_pad(axis: int, dim: int, begin: int, end: int, mode: str) -> AxisPad:
    """Split the signed pads of one axis into crops and pads, and check the result.

    Shape rule (ONNX shape inference and onnxruntime): ``out_dim = dim + begin + end`` must be
    >= 0.  Output index ``i`` holds input index ``i - begin`` when that lies in ``[0, dim)``,
    else padding.  So a crop larger than the axis (net length still >= 0) keeps no input
    element: in constant mode the whole output axis is the constant; the other modes need an
    element to reflect, repeat or wrap and refuse it.
    """
    if dim < 0:
        raise AttributeValueError(f"shape[{axis}]={dim} is negative")
    out_dim = dim + begin + end
    if out_dim < 0:
        raise AttributeValueError(f"axis {axis} (dim {dim}, pads {begin}/{end}) would have dim + "
                                  f"begin + end = {out_dim} elements; Pad needs >= 0")
    crop_begin = min(max(-begin, 0), dim)
    crop_end = min(max(-end, 0), dim - crop_begin)
    if crop_begin + crop_end < dim:
        ax = AxisPad(dim, crop_begin, crop_end, max(begin, 0), max(end, 0))
    else:  # nothing of the input is kept: the output axis is all padding
        pad_begin = min(max(begin, 0), out_dim)
        ax = AxisPad(dim, crop_begin, crop_end, pad_begin, out_dim - pad_begin)
    # An axis the pads touch must keep an element to reflect, repeat or wrap; an axis that
    # is empty and has zero pads is left alone.
    if mode != "constant" and ax.cropped_dim == 0 and (begin or end):
        where = "empty after cropping" if ax.is_cropped else "empty"
        raise AttributeValueError(f"axis {axis} is {where} (dim {dim}, pads {begin}/{end}); {mode} "
                                  "needs at least one element")
    return ax


def fill_value(constant_value: Any, dt: np.dtype, plan: PadPlan) -> Any:
    """The element written into new border cells: ``constant_value`` coerced to ``dt``
    (validated whenever given), else the ONNX default (0, "" or False); None when the plan
    adds no constant border (other modes, or nothing padded)."""
    value = None if constant_value is None else coerce_constant_value(constant_value, dt)
    if plan.mode != "constant" or not plan.adds_elements:
        return None
    return default_constant(dt) if value is None else value
