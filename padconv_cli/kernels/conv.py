"""ONNX ``Conv`` (opsets 1, 11 and 22): the plan, the kernel and its working memory.

:func:`plan_conv` resolves the attributes against the shapes into a :class:`ConvPlan`;
:func:`conv` and :func:`conv_planned` compute with the native core
(:mod:`padconv_cli.kernels.native`), which sums every output element in one fixed order, so a
tile equals the same elements of the whole, bit for bit, on any number of threads.  Taps and
outputs that read only padding are cut off first when that needs less memory (:func:`plan_cut`).
:func:`working_bytes` is the one formula of the memory needed besides X, W and Y (kernel, gate,
``--explain``, tiler), an upper bound over every instruction set: the native core sizes its
buffers inside each call and has no function the gate could ask first.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError
from padconv_cli.kernels import native
from padconv_cli.messages import bounded_sequence

__all__ = ["AUTO_PAD_VALUES", "FLOAT_DTYPE_NAMES", "ConvPlan", "conv", "conv_planned",
           "plan_conv", "working_bytes"]

AUTO_PAD_VALUES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
FLOAT_DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")

NATIVE_EXTENT_LIMIT = 2**31  # extents, strides, dilations, pads, reaches the native core plans
NATIVE_ELEMENTS_LIMIT = 2**40  # elements of X, W or Y the native core plans
UNPLANNED_BYTES = 2**62  # beyond any memory: what a geometry the native core cannot plan needs
NARROW_CHUNK_BYTES = 32 * 2**20  # float32 output computed at a time for float16/bfloat16
FLOAT32, FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


class ConvGeometry:
    """What a plan of the convolution family derives from the fields it shares (``x_shape``,
    ``w_shape``, ``kernel_shape``, ``strides``, ``dilations``, ``pads`` in the ONNX layout
    ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]``)."""

    __slots__ = ()

    @property
    def spatial_rank(self) -> int:
        """Number of spatial axes (rank of X minus 2)."""
        return len(self.kernel_shape)

    @property
    def pads_begin(self) -> tuple[int, ...]:
        """The pads before each spatial axis."""
        return self.pads[: self.spatial_rank]

    @property
    def pads_end(self) -> tuple[int, ...]:
        """The pads after each spatial axis."""
        return self.pads[self.spatial_rank :]


class ConvPlan(NamedTuple):
    """Resolved Conv attributes and the output shape, from shapes only: the fields of a
    :class:`ConvGeometry`, ``pads`` after ``auto_pad``, one readable ``formulas`` entry per
    spatial output axis."""

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
    spatial_rank, pads_begin, pads_end = (ConvGeometry.spatial_rank, ConvGeometry.pads_begin,
                                          ConvGeometry.pads_end)

    @property
    def flops(self) -> int:
        """``2 * N * M * prod(out_spatial) * (C/group) * prod(kernel_shape)``."""
        batch, out_channels, *out_spatial = self.output_shape
        return (2 * batch * out_channels * math.prod(out_spatial) * self.w_shape[1]
                * math.prod(self.kernel_shape))


def plan_conv(x_shape: Sequence[int], w_shape: Sequence[int], b_shape: Sequence[int] | None = None,
              *, auto_pad: str = "NOTSET", dilations: Sequence[int] | None = None, group: int = 1,
              kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
              strides: Sequence[int] | None = None) -> ConvPlan:
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
    b_shape = None if b_shape is None else input_shape("B", b_shape)
    if b_shape not in (None, (w_shape[0],)):
        raise AttributeValueError(f"Conv bias B must have shape (M,) = ({w_shape[0]},), got "
                                  f"{b_shape}")
    explicit = explicit_pads(pads, spatial_rank)
    axes = zip(x_shape[2:], kernel, strides_t, dilations_t, strict=True)
    resolved = [_resolve_axis(axis, *sizes, auto_pad, explicit[axis::spatial_rank])
                for axis, sizes in enumerate(axes)]
    outs, begins, ends, formulas = zip(*resolved, strict=True)
    return ConvPlan(
        x_shape=x_shape, w_shape=w_shape, kernel_shape=kernel, strides=strides_t,
        dilations=dilations_t, pads=begins + ends, group=group, auto_pad=auto_pad,
        output_shape=(x_shape[0], w_shape[0], *outs), formulas=formulas,
    )


def effective_kernel_size(kernel: int, dilation: int) -> int:
    """Extent of a dilated kernel: ``(kernel - 1) * dilation + 1``."""
    return (kernel - 1) * dilation + 1


def explicit_pad_output_size(size: int, pad_begin: int, pad_end: int, effective_kernel: int,
                             stride: int) -> int:
    """Output size with explicit pads: ``floor((size + pad_begin + pad_end - ek) / stride) + 1``."""
    return (size + pad_begin + pad_end - effective_kernel) // stride + 1


def same_output_size(size: int, stride: int) -> int:
    """Output size for ``SAME_UPPER``/``SAME_LOWER``: ``ceil(size / stride)``."""
    return -(-size // stride)


def same_pads(size: int, output_size: int, effective_kernel: int, stride: int,
              auto_pad: str) -> tuple[int, int]:
    """``(begin, end)`` for ``SAME_*``: the total ``max(0, (output_size - 1) * stride + ek -
    size)`` in equal halves, an odd element at the end for ``SAME_UPPER`` and at the
    beginning for ``SAME_LOWER``."""
    total = max(0, (output_size - 1) * stride + effective_kernel - size)
    small, large = total // 2, total - total // 2
    return (large, small) if auto_pad == "SAME_LOWER" else (small, large)


def _resolve_axis(axis: int, size: int, k: int, s: int, d: int, auto_pad: str,
                  explicit: tuple[int, int]) -> tuple[int, int, int, str]:
    """Output size, pads and the formula string of one spatial axis."""
    ek = effective_kernel_size(k, d)
    ek_text = f"(({k}-1)*{d}+1)"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = same_output_size(size, s)
        begin, end = same_pads(size, out, ek, s, auto_pad)
        formula = (f"out[{axis}] = ceil({size} / {s}) = {out}; {auto_pad} pads {begin}+{end} "
                   f"= max(0, ({out}-1)*{s} + {ek_text} - {size})")
    else:  # VALID: no pads (the spec's ceil((size - ek + 1) / s) is the same number)
        begin, end = (0, 0) if auto_pad == "VALID" else explicit
        out = explicit_pad_output_size(size, begin, end, ek, s)
        pads = "" if auto_pad == "VALID" else f" + {begin} + {end}"
        formula = f"out[{axis}] = floor(({size}{pads} - {ek_text}) / {s}) + 1 = {out}"
    if out < 1:
        raise AttributeValueError(f"Conv output spatial axis {axis} (tensor axis {axis + 2}) would "
                                  f"be empty: {formula} (every output dimension must be >= 1)")
    return out, begin, end, formula


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
        raise AttributeValueError("Conv input X must have rank >= 3 (N, C, D1, ...), got rank "
                                  f"{len(x_shape)} shape {list(x_shape)}")
    if len(w_shape) != len(x_shape):
        raise AttributeValueError(f"Conv input W must have the rank of X ({len(x_shape)}), got "
                                  f"rank {len(w_shape)} shape {list(w_shape)}")


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
        raise AttributeValueError(f"{op} attribute {name} must be a list of integers, got "
                                  f"{values!r}", param=name)
    items = list(values)
    if not all(is_int(v) for v in items):
        raise AttributeValueError(f"{op} attribute {name} must contain integers only, got "
                                  f"{bounded_sequence(items)}", param=name)
    ints = tuple(int(v) for v in items)
    if len(ints) != length:
        raise AttributeValueError(f"{op} attribute {name} needs {length} values ({length_rule}), "
                                  f"got {len(ints)}: {bounded_sequence(ints)}", param=name)
    return ints


def positive_list(name: str, values: object, spatial_rank: int,
                  op: str = "Conv") -> tuple[int, ...]:
    """``strides``/``dilations``: one integer >= 1 per spatial axis, default all 1."""
    if values is None:
        return (1,) * spatial_rank
    ints = int_list(name, values, spatial_rank, "one per spatial axis", op)
    if any(v < 1 for v in ints):
        raise AttributeValueError(f"{op} attribute {name} must be >= 1 on every axis, got "
                                  f"{list(ints)}", param=name)
    return ints


def explicit_pads(pads: object, spatial_rank: int, op: str = "Conv") -> tuple[int, ...]:
    """``pads``: ``2 * spatial_rank`` non-negative integers, default all 0."""
    if pads is None:
        return (0,) * (2 * spatial_rank)
    ints = int_list("pads", pads, 2 * spatial_rank, "begin and end per spatial axis", op)
    if any(v < 0 for v in ints):
        raise AttributeValueError(f"{op} attribute pads must be >= 0, got {list(ints)}",
                                  param="pads")
    return ints


def _kernel_shape(kernel_shape: object, w_shape: tuple[int, ...]) -> tuple[int, ...]:
    """``kernel_shape`` defaults to ``W.shape[2:]`` and, when given, must equal it."""
    from_w = w_shape[2:]
    if kernel_shape is not None:
        given = int_list("kernel_shape", kernel_shape, len(from_w), "one per spatial axis")
        if given != from_w:
            raise AttributeValueError(f"Conv attribute kernel_shape {list(given)} != W.shape[2:] "
                                      f"{list(from_w)}; drop kernel_shape: it comes from W",
                                      param="kernel_shape")
    if any(k < 1 for k in from_w):
        raise AttributeValueError("Conv kernel dimensions W.shape[2:] must be >= 1, got "
                                  f"{list(from_w)}")
    return from_w


def _auto_pad(auto_pad: object, pads: object) -> str:
    """``auto_pad`` is one of the four spec values and excludes explicit ``pads``."""
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode("utf-8", "replace")
    if auto_pad not in AUTO_PAD_VALUES:
        raise AttributeValueError("Conv attribute auto_pad must be one of "
                                  f"{', '.join(AUTO_PAD_VALUES)}, got {auto_pad!r}",
                                  param="auto_pad")
    if auto_pad != "NOTSET" and pads is not None:
        raise AttributeValueError(f"Conv attributes pads and auto_pad={auto_pad} cannot be used "
                                  "together; drop pads or set auto_pad=NOTSET")
    return str(auto_pad)


def _check_channels(x_shape: tuple[int, ...], w_shape: tuple[int, ...], group: int) -> None:
    """``C == W.shape[1] * group`` and ``M % group == 0``."""
    channels, out_channels, per_group = x_shape[1], w_shape[0], w_shape[1]
    if channels != per_group * group:
        raise AttributeValueError(f"Conv input channels C={channels} != W.shape[1]*group = "
                                  f"{per_group}*{group}")
    if out_channels % group != 0:
        raise AttributeValueError(f"Conv output channels M=W.shape[0]={out_channels} is not a "
                                  f"multiple of group={group}")


def conv(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
         dilations: Sequence[int] | None = None, group: int = 1,
         kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
         strides: Sequence[int] | None = None) -> np.ndarray:
    """ONNX Conv-22: ``Y[n, m, o] = B[m] + sum_{c, k} W[m, c, k] * Xpad[n, g*C/G + c, o*s + k*d]``.

    ``g = m // (M / group)``; ``Xpad`` is X zero-padded by the resolved pads. X, W and B must share
    one float dtype (float16, bfloat16, float32, float64); products are accumulated in float32
    (float64 for float64 inputs) and rounded once to the input dtype.
    """
    x, w, b = _float_inputs(X, W, B)
    shapes = (x.shape, w.shape, None if b is None else b.shape)
    attributes = (auto_pad, dilations, group, kernel_shape, pads, strides)
    key = _plan_key(shapes, attributes)
    if key is None:
        return convolve(_plan_from(shapes, attributes), x, w, b)
    threads = native.thread_count()
    return _remembered_run(key, x.dtype, threads)(x, w, b)


def _plan_from(shapes: tuple, attributes: tuple) -> ConvPlan:
    """:func:`plan_conv` of ``(x_shape, w_shape, b_shape)`` and the attributes in
    :func:`conv`'s order."""
    auto_pad, dilations, group, kernel_shape, pads, strides = attributes
    return plan_conv(*shapes, auto_pad=auto_pad, dilations=dilations, group=group,
                     kernel_shape=kernel_shape, pads=pads, strides=strides)


@functools.lru_cache(maxsize=64)
def _remembered_run(key: tuple, dtype: np.dtype, threads: int) -> Callable[..., np.ndarray]:
    """How :func:`conv` computes a call of these shapes and attributes (``key``), X's dtype and
    thread count, decided once for the latest calls: planning costs about 20 us in Python, and a
    Conv pushes the interpreter's data out of the caches, so that each step the next call
    repeats costs microseconds (8-13 us of a 0.7 ms pointwise Conv).  The whole plan on the
    native core (:func:`_convolve_whole`), or its cut (:func:`convolve`) when that needs less
    memory.  Only a valid call is remembered."""
    plan = _plan_from(*key)
    if _cut_if_smaller(plan, dtype, threads) is not None:
        return functools.partial(convolve, plan)
    return functools.partial(_convolve_whole, plan, threads=threads)


def _plan_key(shapes: tuple, attributes: tuple) -> tuple | None:
    """The hashable form of a call's shapes and attributes (lists of Python ints as tuples),
    or None when some attribute is of another kind: plan_conv then judges it afresh."""
    parts = []
    for value in attributes:
        kind = type(value)
        if kind is list or kind is tuple:
            value = tuple(value)
            if not all(type(v) is int for v in value):
                return None
        elif value is not None and kind is not int and kind is not str:
            return None
        parts.append(value)
    return shapes, tuple(parts)


def conv_planned(
    plan: ConvPlan, X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None
) -> np.ndarray:
    """:func:`conv` with a plan made beforehand by :func:`plan_conv` for these shapes: the same
    element-type rules and result, without planning again."""
    x, w, b = _float_inputs(X, W, B)
    if (x.shape, w.shape) != (plan.x_shape, plan.w_shape):
        shapes = (x.shape, w.shape, None if b is None else b.shape)
        raise ValueError(f"the plan is for X {plan.x_shape} and W {plan.w_shape}, not {shapes}")
    return convolve(plan, x, w, b)


def _float_inputs(
    X: np.ndarray, W: np.ndarray, B: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Return X, W, B as arrays after checking they share one of Conv's float dtypes."""
    x = X if type(X) is np.ndarray else np.asarray(X)
    w = W if type(W) is np.ndarray else np.asarray(W)
    b = B if B is None or type(B) is np.ndarray else np.asarray(B)
    _check_float_dtypes(x.dtype, w.dtype, None if b is None else b.dtype)
    return x, w, b


@functools.lru_cache(maxsize=64)
def _check_float_dtypes(x: np.dtype, w: np.dtype, b: np.dtype | None) -> None:
    """X, W and B (when given) share one of Conv's float dtypes; remembered per dtypes, as
    the checks cost several microseconds of a call whose data pushed them out of the caches."""
    named = [("X", x), ("W", w)] + ([("B", b)] if b is not None else [])
    for name, dtype in named:
        if dtype.name not in FLOAT_DTYPE_NAMES:
            label = {"U": "string", "S": "string", "O": "object"}.get(dtype.kind, dtype.name)
            raise UnsupportedDtypeError("Conv takes float tensors "
                                        f"({', '.join(FLOAT_DTYPE_NAMES)}); got {label} {name}; "
                                        "convert the tensor to a float type first")
    if len({dtype.name for _, dtype in named}) > 1:  # byte order may differ
        listing = ", ".join(f"{name} {dtype.name}" for name, dtype in named)
        raise UnsupportedDtypeError(f"Conv inputs must share one dtype; got {listing}; "
                                    "convert the inputs to one dtype")


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """float64 inputs accumulate in float64, every other float type in float32."""
    is_double = dtype.kind == "f" and dtype.itemsize == 8
    return FLOAT64 if is_double else FLOAT32


def convolve(plan: ConvPlan, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """Run the plan on validated inputs; the result has X's dtype, rounded once from the sum.
    The part that reads X only is computed when that needs less memory (:func:`plan_cut`:
    the same result, bit for bit)."""
    threads = native.thread_count()
    cut = _cut_if_smaller(plan, x.dtype, threads)
    if cut is None:
        return _convolve_whole(plan, x, w, b, threads)
    acc = accumulator_dtype(x.dtype)
    return convolve_cut(plan, cut, x, np.ascontiguousarray(w, dtype=acc),
                        None if b is None else np.ascontiguousarray(b, dtype=acc))


@functools.lru_cache(maxsize=64)
def _cut_if_smaller(plan: ConvPlan, dtype: np.dtype, threads: int) -> Cut | None:
    """:func:`plan_cut` when computing the cut needs less memory than the whole on ``threads``
    threads, else None; remembered per plan like :func:`_remembered_run`."""
    cut = plan_cut(plan)
    if cut is None or (_cut_working_bytes(plan, cut, dtype, threads, None)
                       >= _whole_working_bytes(plan, dtype, threads, None)):
        return None
    return cut


def _convolve_whole(plan: ConvPlan, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                    threads: int | None = None) -> np.ndarray:
    """The native core on the whole plan, ``+ B[m]`` after each sum.  float16/bfloat16: W and B
    are cast to float32 and Y is computed in chunks of output channels (:func:`narrow_chunks`),
    each rounded once to the input dtype: no float32 copy of X or of the whole Y exists."""
    acc = accumulator_dtype(x.dtype)
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    if x.dtype == acc:  # float32 or float64: one call
        y = np.empty(plan.output_shape, acc)
        if y.size:
            native.conv_into(native_layout(x, acc), native_layout(w, acc),
                             None if b is None else native_layout(b, acc), y,
                             strides=plan.strides, dilations=plan.dilations,
                             pads_begin=plan.pads_begin, group=plan.group, threads=threads)
        return y
    x = native_layout(x, x.dtype)
    w = native_layout(w, acc)
    b = None if b is None else native_layout(b, acc)

    def run(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, y: np.ndarray,
            group: int) -> None:
        native.conv_into(x, w, b, y, strides=plan.strides, dilations=plan.dilations,
                         pads_begin=plan.pads_begin, group=group, threads=threads)

    result = np.empty(plan.output_shape, x.dtype)
    if not result.size:
        return result
    cg, mg = plan.w_shape[1], plan.w_shape[0] // plan.group
    for m0, m1 in narrow_chunks(plan):
        groups = plan.group if plan.group == 1 else (m1 - m0) // mg
        c0, c1 = (0, x.shape[1]) if plan.group == 1 else (m0 // mg * cg, m1 // mg * cg)
        y = np.empty((1, m1 - m0, *plan.output_shape[2:]), acc)
        for n in range(plan.output_shape[0]):
            run(x[n : n + 1, c0:c1], w[m0:m1], None if b is None else b[m0:m1], y, groups)
            native.round_into(y, result[n : n + 1, m0:m1])  # rounded once
    return result


def _is_laid_out(a: np.ndarray, dtype: np.dtype) -> bool:
    """``a`` is a C-contiguous array of ``dtype``, as the native core reads it."""
    return a.dtype is dtype and a.flags.c_contiguous


def native_layout(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``a`` as a C-contiguous array of ``dtype``: itself when it is one (the usual case, tested
    first: numpy's conversion machinery costs microseconds of a call that pushed it out of the
    caches), else a copy."""
    return a if _is_laid_out(a, dtype) else np.ascontiguousarray(a, dtype=dtype)


def narrow_chunks(plan: ConvPlan) -> list[tuple[int, int]]:
    """Output-channel ranges ``[m0, m1)`` of one image computed at a time for a narrow dtype:
    whole groups (``M/G`` channels; any channels when ``G == 1``), as many as keep the float32
    chunk ``(m1 - m0) * prod(out) * 4`` within ``NARROW_CHUNK_BYTES`` (one unit at least)."""
    m = plan.w_shape[0]
    unit = 1 if plan.group == 1 else m // plan.group
    plane = max(1, math.prod(plan.output_shape[2:]))
    step = max(1, NARROW_CHUNK_BYTES // (plane * 4 * unit)) * unit
    return [(m0, min(m, m0 + step)) for m0 in range(0, m, step)]


# The part that reads X.  Along one axis (length L, stride s, dilation d, pad before p, O
# outputs) output o and tap k read X[o*s + k*d - p] when that lies in [0, L), else padding.
# The rest of Y is known without X: an output outside the part is 0 + B[m] (NaN when a weight
# of W[m] is not finite); a tap outside it adds 0 * W (nothing, or NaN when that weight is not
# finite).  The kernels start every sum from +0, so the cut changes no bit.


class AxisCut(NamedTuple):
    """What of one axis the cut keeps: taps ``[taps[0], taps[1]]``, outputs
    ``[outputs[0], outputs[1]]``, ``X[inputs[0]:inputs[1]]`` and the pads around it."""

    taps: tuple[int, int]
    outputs: tuple[int, int]
    inputs: tuple[int, int]
    pads: tuple[int, int]


class Cut(NamedTuple):
    """The part of a Conv that reads X: one :class:`AxisCut` per spatial axis and the plan of
    that part, or ``axes is None`` when no output reads X at all."""

    axes: tuple[AxisCut, ...] | None
    plan: ConvPlan | None

    def box(self, field: str, inclusive: bool) -> tuple[slice, ...]:
        """The index of the kept ``inputs`` of X, ``taps`` of W or ``outputs`` of Y (the first
        two axes whole); ``inclusive``: the range's end is its last index."""
        ranges = (getattr(a, field) for a in self.axes)
        return (slice(None), slice(None), *(slice(lo, hi + inclusive) for lo, hi in ranges))


def tap_outputs(k: int, length: int, s: int, d: int, p: int, out: int) -> tuple[int, int] | None:
    """Outputs ``[first, last]`` whose tap ``k`` reads X: ``0 <= o*s + k*d - p <= L - 1`` with
    ``0 <= o < O``; None when there is none."""
    first = max(0, -((k * d - p) // s))
    last = min(out - 1, (p - k * d + length - 1) // s)
    return (first, last) if first <= last else None


def axis_cut(length: int, kernel: int, s: int, d: int, p: int, out: int) -> AxisCut | None:
    """The cut of one axis; None when no output reads X along it.  Only taps
    ``ceil((p - (O-1)*s) / d) <= k <= floor((p + L - 1) / d)`` can reach X; the first and last
    that do are searched inward from those bounds.  ``first(k)`` and ``last(k)`` of
    :func:`tap_outputs` fall as ``k`` grows, so the outputs reached run from the last tap's
    first output to the first tap's last output."""
    if length <= 0 or out <= 0:
        return None
    low = max(0, -(((out - 1) * s - p) // d))
    high = min(kernel - 1, (p + length - 1) // d)

    def reaches(k: int) -> bool:
        return tap_outputs(k, length, s, d, p, out) is not None

    k_lo = next((k for k in range(low, high + 1) if reaches(k)), None)
    if k_lo is None:
        return None
    k_hi = next(k for k in range(high, k_lo - 1, -1) if reaches(k))
    o_lo = tap_outputs(k_hi, length, s, d, p, out)[0]
    o_hi = tap_outputs(k_lo, length, s, d, p, out)[1]
    start = o_lo * s + k_lo * d - p  # X index of the first output's first tap kept
    end = o_hi * s + k_hi * d - p  # and of the last output's last tap kept
    return AxisCut(taps=(k_lo, k_hi), outputs=(o_lo, o_hi),
                   inputs=(max(0, start), min(length, end + 1)),
                   pads=(max(0, -start), max(0, end - (length - 1))))


def plan_cut(plan: ConvPlan) -> Cut | None:
    """The part of the Conv that reads X; None when that is all of it.  Its plan needs no
    stride or dilation along an axis of one output or one tap (a stride of 3e7 would size the
    kernels' rows)."""
    if 0 in plan.output_shape or 0 in plan.w_shape[:2]:
        return None
    axes = tuple(map(axis_cut, plan.x_shape[2:], plan.kernel_shape, plan.strides,
                     plan.dilations, plan.pads_begin, plan.output_shape[2:]))
    if None in axes:
        return Cut(axes=None, plan=None)
    if all(a.taps == (0, k - 1) and a.outputs == (0, o - 1) and a.inputs == (0, n)
           for a, k, o, n in zip(axes, plan.kernel_shape, plan.output_shape[2:],
                                 plan.x_shape[2:], strict=True)):
        return None
    kernel = tuple(a.taps[1] - a.taps[0] + 1 for a in axes)
    out = tuple(a.outputs[1] - a.outputs[0] + 1 for a in axes)
    part = plan._replace(
        x_shape=(*plan.x_shape[:2], *(a.inputs[1] - a.inputs[0] for a in axes)),
        w_shape=(*plan.w_shape[:2], *kernel), kernel_shape=kernel,
        strides=tuple(s if o > 1 else 1 for s, o in zip(plan.strides, out, strict=True)),
        dilations=tuple(d if k > 1 else 1 for d, k in zip(plan.dilations, kernel, strict=True)),
        pads=tuple(a.pads[0] for a in axes) + tuple(a.pads[1] for a in axes),
        auto_pad="NOTSET", output_shape=(*plan.output_shape[:2], *out), formulas=(),
    )
    return Cut(axes=axes, plan=part)


def convolve_cut(plan: ConvPlan, cut: Cut, x: np.ndarray, w: np.ndarray,
                 b: np.ndarray | None) -> np.ndarray:
    """Y of the whole plan from the native core run on the cut's part (W and B in the
    accumulator type): outputs that read only padding are ``0 + B[m]`` (NaN where a weight of
    ``W[m]`` is not finite), and channels with a non-finite weight on a tap cut off are NaN."""
    m, acc = plan.w_shape[0], accumulator_dtype(x.dtype)
    nonfinite = ~np.isfinite(w)
    padding_only = np.zeros(m, acc) if b is None else np.zeros(m, acc) + b.astype(acc)
    padding_only[nonfinite.reshape(m, -1).any(axis=1)] = np.nan
    y = np.empty(plan.output_shape, x.dtype)
    y[...] = padding_only.astype(x.dtype).reshape((1, m) + (1,) * plan.spatial_rank)
    if cut.plan is None:
        return y
    w_box = cut.box("taps", True)
    part = _convolve_whole(cut.plan, np.ascontiguousarray(x[cut.box("inputs", False)]),
                           np.ascontiguousarray(w[w_box]), b)
    nonfinite[w_box] = False  # what is left: weights on the taps cut off
    dropped = nonfinite.reshape(m, -1).any(axis=1)
    if dropped.any():
        part[:, dropped] = np.nan
    y[cut.box("outputs", True)] = part
    return y


NARROW_X = ("float16", "bfloat16")  # X types the native core widens as it reads them


def scratch_bytes(
    plan: ConvPlan, itemsize: int, threads: int, out_channels: int | None = None,
    x_dtype: np.dtype | None = None,
) -> int:
    """The native core's own buffers for the plan (``itemsize``: the accumulator's; ``x_dtype``:
    X's, default the accumulator's; ``out_channels``: a tile's, default M) on ``threads``
    threads: packed W (not for a pointwise X of the accumulator's type) and every working
    thread's buffer, as worked out by the sizing its run uses (``conv_scratch_bytes``).  A tile
    of ``M_t`` channels runs as ``G_t = ceil(M_t / (M/G))`` whole groups, or one group of
    ``M_t`` channels when ``M_t < M/G``.  A padded 1x1 kernel of stride 1 counts the larger
    of its run and the pointwise run of a tile inside the padding (X read in place)."""
    m = plan.w_shape[0] if out_channels is None else out_channels
    if m == 0 or 0 in plan.w_shape[:2]:  # no output channel, or no input to sum: no buffers
        return 0
    if not _natively_planned(plan):
        return UNPLANNED_BYTES
    per_group_out = plan.w_shape[0] // plan.group
    groups = max(1, -(-m // per_group_out))
    channels = m if groups == 1 else groups * per_group_out
    images, in_per_group, out_spatial = plan.x_shape[0], plan.w_shape[1], plan.output_shape[2:]
    narrow = (x_dtype.name,) if x_dtype is not None and x_dtype.name in NARROW_X else ()
    runs = [(plan.x_shape[2:], plan.pads_begin)]
    if set(plan.w_shape[2:]) | set(plan.strides) == {1} and any(plan.pads):
        runs.append((out_spatial, (0,) * len(out_spatial)))
    return max(native.extension().conv_scratch_bytes(
        (images, groups * in_per_group, *in_spatial), (channels, in_per_group, *plan.w_shape[2:]),
        (images, channels, *out_spatial), tuple(plan.strides), tuple(plan.dilations),
        tuple(pads_begin), groups, threads, native.selected_isa(), itemsize, *narrow)
        for in_spatial, pads_begin in runs)


def _natively_planned(plan: ConvPlan) -> bool:
    """Whether the native core's sizing arithmetic (64-bit) holds the plan: every extent,
    stride, dilation, pad and kernel reach ``(k-1)*d`` below ``NATIVE_EXTENT_LIMIT``, and X, W
    and Y below ``NATIVE_ELEMENTS_LIMIT`` elements each.  Beyond that only a cut part runs
    (:func:`plan_cut`), or the resource gate refuses."""
    shapes = (plan.x_shape, plan.w_shape, plan.output_shape)
    reaches = [(k - 1) * d for k, d in zip(plan.kernel_shape, plan.dilations, strict=True)]
    scalars = [*plan.x_shape, *plan.w_shape, *plan.output_shape, *plan.strides,
               *plan.dilations, *plan.pads, *reaches]
    return (max(scalars) < NATIVE_EXTENT_LIMIT
            and all(math.prod(shape) < NATIVE_ELEMENTS_LIMIT for shape in shapes))


def working_bytes(plan: ConvPlan, dtype: np.dtype, threads: int | None = None,
                  out_channels: int | None = None, *, cut: bool = True) -> int:
    """Memory a Conv of ``dtype`` needs besides X, W and Y: :func:`scratch_bytes` on
    ``threads`` threads (default: the native core's), for float16/bfloat16 plus float32 copies
    of W and B and one float32 chunk of :func:`narrow_chunks`; or, when less, the same for the
    cut's part plus the cut's copies (:func:`plan_cut`).  The tiler passes a tile's plan and
    ``out_channels``; ``cut=False``: the whole, an upper bound wherever the tile lies."""
    if threads is None:
        threads = native.thread_count()
    dtype = np.dtype(dtype)
    whole = _whole_working_bytes(plan, dtype, threads, out_channels)
    part = plan_cut(plan) if cut else None
    if part is None:
        return whole
    return min(whole, _cut_working_bytes(plan, part, dtype, threads, out_channels))


def _cut_working_bytes(plan: ConvPlan, cut: Cut, dtype: np.dtype, threads: int,
                       out_channels: int | None) -> int:
    """The part's working memory, a byte per weight of W (which are not finite) and the
    part's X, taps of W and Y, copied contiguous."""
    flags = math.prod(plan.w_shape)
    if cut.plan is None:
        return flags
    part = cut.plan
    m = part.w_shape[0] if out_channels is None else out_channels
    y = part.output_shape[0] * m * math.prod(part.output_shape[2:])
    copies = (math.prod(part.x_shape) + math.prod(part.w_shape) + y) * dtype.itemsize
    return _whole_working_bytes(part, dtype, threads, out_channels) + flags + copies


def _whole_working_bytes(plan: ConvPlan, dtype: np.dtype, threads: int,
                         out_channels: int | None) -> int:
    acc = accumulator_dtype(dtype)
    working = scratch_bytes(plan, acc.itemsize, threads, out_channels, np.dtype(dtype))
    if acc != dtype:
        m0, m1 = narrow_chunks(plan)[0] if plan.w_shape[0] else (0, 0)
        chunk = (m1 - m0) * math.prod(plan.output_shape[2:])
        working += (math.prod(plan.w_shape) + plan.w_shape[0] + chunk) * acc.itemsize
    return working
