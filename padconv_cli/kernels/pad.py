"""The ONNX ``Pad`` operator (opset 25: Pad-18 semantics plus the ``wrap`` mode), in numpy.

Rules implemented here:

* ``pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...]`` over ``axes`` (all axes when
  ``axes`` is None); axes may be negative (``[-r, r-1]``); a repeated axis is refused.
* A negative pad removes elements.  Each axis is cropped first, then padded (onnxruntime's
  order), so ``out_dim = dim - crop_begin - crop_end + pad_begin + pad_end``.  The shape rule
  is ONNX's ``out_dim = dim + begin + end >= 0``: a crop longer than the axis keeps nothing
  of it and eats into the other side's padding (output index ``i`` reads input ``i - begin``).
* Modes: ``constant`` (default value 0, ``""`` for strings, ``False`` for bool), ``reflect``,
  ``edge`` and ``wrap``.  ``reflect`` and ``wrap`` repeat periodically when a pad is longer
  than the axis (as ``numpy.pad`` does); ``reflect`` of a one-element axis repeats it.
  In these three modes an axis with non-zero pads must not be empty after cropping.
* The output has the input's dtype; values are copied bit for bit.  A numpy ``<U`` array
  is widened when the constant string is longer than its items.

The kernel allocates the output once (or writes into the caller's ``out``), copies
the cropped input into its centre once and then fills only the border, axis by axis, from
parts of the output that are already final.  Large outputs are handled in cache-sized blocks
of the leading unpadded axes, so that a block's border is filled while its centre is still in
cache.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from padconv_cli.errors import AttributeValueError, OutputTooLargeError
from padconv_cli.kernels.pad_plan import PAD_MODES, AxisPad, PadPlan, fill_value, plan_pad
from padconv_cli.kernels.pad_values import (
    PAD_ELEMENT_TYPES,
    PAD_ELEMENT_TYPES_TEXT,
    coerce_constant_value,
    output_dtype,
    pad_element_kind,
)
from padconv_cli.kernels.workers import run_tasks, worker_count

__all__ = ["PAD_ELEMENT_TYPES", "PAD_ELEMENT_TYPES_TEXT", "PAD_MODES", "AxisPad", "PadPlan",
           "coerce_constant_value", "pad_element_kind", "fill_value", "output_dtype", "pad",
           "pad_planned", "plan_pad"]

# Output bytes handled per block: small enough to stay in cache (L2/L3) while the border
# of the block is filled right after its centre was copied, large enough that the dozen
# numpy calls per block cost little next to the copy.
_BLOCK_BYTES = 1 << 21
# Outputs from this size on are filled by all the cores.
_PARALLEL_BYTES = 1 << 23


def pad(data: Any, pads: Any, constant_value: Any = None, axes: Any = None, mode: str = "constant",
        *, out: np.ndarray | None = None) -> np.ndarray:
    """ONNX Pad-25: crop the negative pads, then pad with ``mode`` (see the module docstring).

    ``output[i] = data'[source(i)]`` where ``data'`` is the cropped input and ``source`` maps
    each output index along a padded axis with ``j = i - pad_begin`` and ``n`` the cropped
    length: constant -> the constant outside ``[0, n)``; edge -> ``clip(j, 0, n-1)``;
    wrap -> ``j mod n``; reflect -> ``m = j mod 2(n-1)``, ``m if m < n else 2(n-1) - m``
    (``0`` when ``n == 1``).  ``constant_value`` is only used in constant mode but is
    validated whenever it is given.

    Returns a new array of ``data``'s dtype, or ``out`` when it is given (numpy's convention):
    ``out`` must have exactly the output's shape and dtype, be writable and share no memory
    with ``data``, else :class:`AttributeValueError`.  Reusing one ``out`` across calls saves
    the page faults of fresh memory, which for a large output cost about as much as the copy.
    """
    array = data if isinstance(data, np.ndarray) else np.asarray(data)
    pad_element_kind(array.dtype)
    plan = plan_pad(array.shape, pads, axes, mode)
    return pad_planned(array, plan, fill_value(constant_value, array.dtype, plan), out=out)


def pad_planned(
    data: np.ndarray, plan: PadPlan, fill: Any, *, out: np.ndarray | None = None
) -> np.ndarray:
    """:func:`pad` with a plan made beforehand by :func:`plan_pad` for ``data``'s shape and the
    fill element of :func:`fill_value`: the same result, without planning again."""
    if tuple(data.shape) != plan.input_shape:
        raise ValueError(f"the plan is for shape {plan.input_shape}, not {data.shape}")
    dtype = output_dtype(data.dtype, fill)
    if out is None:
        out = _allocate(plan.output_shape, dtype)
    else:
        _check_out(out, plan.output_shape, dtype, data)
    sides = tuple((ax.pad_begin, ax.cropped_dim, ax.pad_end) for ax in plan.per_axis)
    _fill_in_blocks(out, data[plan.crop_slices], sides, plan.mode, fill)
    return out


def _allocate(shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    try:
        return np.empty(shape, dtype=dt)
    except (ValueError, MemoryError):
        nbytes = math.prod(shape) * dt.itemsize
        raise OutputTooLargeError(f"the padded output of shape {shape} ({dt}) needs {nbytes} "
                                  "bytes, more than can be allocated") from None


def _check_out(out: Any, shape: tuple[int, ...], dt: np.dtype, data: np.ndarray) -> None:
    """``out`` must be a writable array of exactly the output's shape and dtype, apart from data."""
    if not isinstance(out, np.ndarray):
        raise AttributeValueError(f"out must be a numpy array; got {type(out).__name__}")
    if out.shape != shape:
        raise AttributeValueError(f"out has shape {out.shape}; the padded output has shape {shape}")
    if out.dtype != dt:
        raise AttributeValueError(f"out has dtype {out.dtype}; the padded output has dtype {dt}")
    if not out.flags.writeable:
        raise AttributeValueError("out is read-only; the padded output needs a writable array")
    try:  # a bound on the work to prove two strided arrays apart; unproven counts as shared
        shared = np.shares_memory(out, data, max_work=100_000)
    except np.exceptions.TooHardError:
        shared = True
    if shared:
        raise AttributeValueError("out shares memory with data; the padded output needs an array "
                                  "of its own")


# One border step: ``(target, source)`` indices, source None for the constant.
Step = tuple[tuple[Any, ...], tuple[Any, ...] | None]


def _fill_in_blocks(out: np.ndarray, src: np.ndarray, sides: tuple[tuple[int, int, int], ...],
                    mode: str, fill: Any) -> None:
    """Copy ``src`` into the centre of ``out`` and fill the border, one block at a time.

    Blocks split the leading axes that are not padded; a block of about ``_BLOCK_BYTES`` is
    still in cache when its border is filled right after its centre was copied.  The border
    steps are worked out once and replayed on every block (the centre and region slices of
    an unpadded axis cover a block's shorter range too).  Large outputs share the blocks out in
    contiguous runs among the cores (numpy copies release the GIL).
    """
    depth, count = _block_layout(out.shape, out.itemsize, sides)
    inner = sides[depth:]
    centre = tuple(slice(b, b + n) for b, n, _ in inner)
    slab_steps, row_steps = _border_steps(inner, mode)

    def fill_blocks(pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        for out_block, src_block in pairs:
            out_block[centre] = src_block
            _replay(out_block, slab_steps, fill)
            if row_steps:
                _replay(_rows(out_block), row_steps, fill)

    pairs = list(_blocks(out, src, depth, count))
    runs = _parallel_runs(len(pairs), out)
    run_tasks([functools.partial(fill_blocks, pairs[run]) for run in runs])


def _parallel_runs(block_count: int, out: np.ndarray) -> list[slice]:
    """Contiguous runs of blocks, one per core, for outputs of at least ``_PARALLEL_BYTES``
    whose copies release the GIL (not object arrays); else one run of all the blocks."""
    parts = 1
    if out.nbytes >= _PARALLEL_BYTES and not out.dtype.hasobject:
        parts = max(1, min(worker_count(), block_count))
    step = max(1, -(-block_count // parts))
    return [slice(first, first + step) for first in range(0, max(block_count, 1), step)]


def _replay(array: np.ndarray, steps: list[Step], fill: Any) -> None:
    """``array[target] = array[source]`` for each step, or the constant when source is None."""
    for target, source in steps:
        array[target] = fill if source is None else array[source]


def _rows(block: np.ndarray) -> np.ndarray:
    """The block as rows of its innermost axis: one 2-D view when the block is C-contiguous
    (a column is then one strided loop), else the block itself."""
    if block.ndim > 1 and block.flags.c_contiguous:
        return block.reshape(-1, block.shape[-1])
    return block


def _is_padded(side: tuple[int, int, int]) -> bool:
    return side[0] > 0 or side[2] > 0


def _block_layout(
    shape: tuple[int, ...], itemsize: int, sides: tuple[tuple[int, int, int], ...]
) -> tuple[int, int]:
    """``(depth, count)``: a block takes one index of each of the first ``depth`` axes and
    ``count`` indices of axis ``depth``; one block for a small output or a padded first axis.

    Deeper axes are split only while one index is still larger than a block; the indices of
    the split axis are shared out evenly among the fewest blocks of at most ``_BLOCK_BYTES``.
    """
    if not sides or math.prod(shape) * itemsize <= _BLOCK_BYTES or _is_padded(sides[0]):
        return 0, max(shape[:1] + (1,))
    depth = 0
    while True:
        bytes_per_index = math.prod(shape[depth + 1 :]) * itemsize
        deeper = depth + 1 < len(sides) and not _is_padded(sides[depth + 1])
        if bytes_per_index <= _BLOCK_BYTES or not deeper:
            break
        depth += 1
    per_block = max(1, _BLOCK_BYTES // max(bytes_per_index, 1))
    block_count = -(-shape[depth] // per_block)
    return depth, max(1, -(-shape[depth] // block_count))


def _blocks(
    out: np.ndarray, src: np.ndarray, depth: int, count: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The ``(out, src)`` block pairs of a :func:`_block_layout`, in memory order."""
    if out.ndim == 0:
        yield out, src
        return
    for lead in np.ndindex(*out.shape[:depth]):
        for start in range(0, out.shape[depth], count):
            index = (*lead, slice(start, start + count))
            yield out[index], src[index]


def _border_steps(
    sides: tuple[tuple[int, int, int], ...], mode: str
) -> tuple[list[Step], list[Step]]:
    """The ``(target, source)`` index pairs that fill the border once the centre is copied:
    first those of the outer axes (indexing the block), then those of the innermost axis
    (indexing :func:`_rows`).

    ``array[target] = array[source]``, or the constant where ``source`` is None.  Axes go
    from first to last.  Axis ``k`` fills its border over the full range of the axes before
    it and the centre range of the axes after it: those are final by then, so corners come
    out right, and each border element is written once.  The innermost axis comes last and
    so spans every row, whose lines the outer axes' slabs have just brought into cache.
    """
    slab_steps: list[Step] = []
    row_steps: list[Step] = []
    last = len(sides) - 1
    for axis, (before, length, after) in enumerate(sides):
        if not (before or after):
            continue
        if axis == last:
            line = _AxisSteps((Ellipsis,), (), last > 0, row_steps)
        else:
            after_axes = tuple(slice(b, b + n) for b, n, _ in sides[axis + 1 :])
            line = _AxisSteps((slice(None),) * axis, after_axes, False, slab_steps)
        _FILLERS[mode](line, before, length, after)
    return slab_steps, row_steps


@dataclasses.dataclass(slots=True)
class _AxisSteps:
    """Records fills and copies along one axis, positions counted along that axis.

    ``prefix`` and ``suffix`` index the axes before and after it.  On the innermost axis
    (``by_column``) a narrow stretch is handled one position (one column) at a time: a numpy
    assignment of a few elements per row pays its per-row overhead for every row, while a
    column is one long strided loop.
    """

    prefix: tuple[Any, ...]
    suffix: tuple[Any, ...]
    by_column: bool
    steps: list[Step]

    def fill(self, start: int, stop: int) -> None:
        """Positions ``start .. stop-1`` get the constant."""
        if self._columnwise(stop - start, _FILL_COLUMNS):
            self.steps += [(self._at(position), None) for position in range(start, stop)]
        else:
            self.steps.append((self._at(slice(start, stop)), None))

    def copy(self, start: int, stop: int, source: int, step: int) -> None:
        """Position ``start + i`` gets position ``source + i * step`` (step 1, -1 or 0)."""
        count = stop - start
        if self._columnwise(count, _COPY_COLUMNS):
            self.steps += [(self._at(start + i), self._at(source + i * step)) for i in range(count)]
            return
        if step == 0:
            chosen = slice(source, source + 1)
        elif step == 1:
            chosen = slice(source, source + count)
        else:
            last = source - count
            chosen = slice(source, last if last >= 0 else None, -1)
        self.steps.append((self._at(slice(start, stop)), self._at(chosen)))

    def _at(self, position: int | slice) -> tuple[Any, ...]:
        return (*self.prefix, position, *self.suffix)

    def _columnwise(self, count: int, limit: int) -> bool:
        return self.by_column and count <= limit


# Widest stretches of the innermost axis copied / filled column by column.  Measured on
# 3520 rows of 160 float32 in cache: an assignment of a short stretch of each row costs
# about 19 ns per row (8 ns for a fill) up to 8 elements wide, one column 1.3-1.8 ns per row.
_COPY_COLUMNS = 8
_FILL_COLUMNS = 6


def _fill_constant(line: _AxisSteps, before: int, length: int, after: int) -> None:
    """Positions outside ``[before, before + length)`` get the constant."""
    if before:
        line.fill(0, before)
    if after:
        line.fill(before + length, before + length + after)


def _fill_edge(line: _AxisSteps, before: int, length: int, after: int) -> None:
    """Position ``j`` (relative to the centre) gets ``clip(j, 0, n-1)``."""
    if before:
        line.copy(0, before, before, 0)
    last = before + length - 1
    if after:
        line.copy(last + 1, last + 1 + after, last, 0)


def _fill_wrap(line: _AxisSteps, before: int, length: int, after: int) -> None:
    """Position ``j`` gets ``j mod n``: copy already-filled whole periods outwards.

    The filled stretch ``[low, high)`` is ``n``-periodic, so a chunk next to it equals the
    part of it a multiple of ``n`` away; the chunk may be as long as the whole periods in it,
    which doubles the filled stretch at each step when the pad is much longer than ``n``.
    """
    low, high, total = before, before + length, before + length + after
    while low > 0:
        size = min(low, (high - low) // length * length)
        shift = -(-size // length) * length
        line.copy(low - size, low, low - size + shift, 1)
        low -= size
    while high < total:
        size = min(total - high, (high - low) // length * length)
        shift = -(-size // length) * length
        line.copy(high, high + size, high - shift, 1)
        high += size


def _fill_reflect(line: _AxisSteps, before: int, length: int, after: int) -> None:
    """Position ``j`` mirrors about the first and last centre elements (period ``2(n-1)``).

    The filled stretch ``[low, high)`` is mirrored about its end element; a mirrored chunk
    spans whole half-periods ``n-1`` (so its end is again a mirror point) except the last.
    A one-element axis has period 0: every position repeats it, like numpy.pad.
    """
    if length == 1:
        _fill_edge(line, before, length, after)
        return
    half = length - 1
    low, high, total = before, before + length, before + length + after
    while low > 0:
        size = min(low, (high - low - 1) // half * half)
        line.copy(low - size, low, low + size, -1)
        low -= size
    while high < total:
        size = min(total - high, (high - low - 1) // half * half)
        line.copy(high, high + size, high - 2, -1)
        high += size


_FILLERS: dict[str, Callable[[_AxisSteps, int, int, int], None]] = {
    "constant": _fill_constant,
    "edge": _fill_edge,
    "wrap": _fill_wrap,
    "reflect": _fill_reflect,
}
