"""The ONNX ``Pad`` operator (opset 25: Pad-18 semantics plus ``wrap``), in numpy: its element
types and constant value (:func:`coerce_constant_value`), the plan (:func:`plan_pad`, from the
input shape alone), the fill kernel (:func:`pad`) and the threads it runs on (:func:`run_tasks`).

* ``pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...]`` over ``axes`` (all axes when
  None; negative axes count from the back; a repeated axis is refused).
* A negative pad crops.  Each axis is cropped first, then padded (onnxruntime's order); the
  shape rule is ONNX's ``out_dim = dim + begin + end >= 0``: a crop longer than the axis
  keeps nothing of it and eats into the other side's padding.
* Modes: ``constant`` (default 0, ``""`` for strings, ``False`` for bool), ``reflect``,
  ``edge``, ``wrap``; ``reflect`` and ``wrap`` repeat periodically past the axis length (as
  ``numpy.pad``), ``reflect`` of a one-element axis repeats it; these three need an axis with
  non-zero pads to keep an element.  Values are copied bit for bit; a ``<U`` array widens
  for a longer constant string.

The kernel allocates the output once (or writes the caller's ``out``), copies the cropped
input into its centre, then fills only the border, axis by axis, from parts already final, in
cache-sized blocks of the leading unpadded axes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import operator
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from queue import SimpleQueue
from typing import Any

import numpy as np

from padconv_cli.dtypes import dtype_name, element_kind, float_info, integer_range
from padconv_cli.errors import AttributeValueError, OutputTooLargeError, UnsupportedDtypeError

__all__ = ["PAD_ELEMENT_TYPES", "PAD_ELEMENT_TYPES_TEXT", "PAD_MODES", "AxisPad", "PadPlan",
           "coerce_constant_value", "pad_element_kind", "fill_value", "output_dtype", "pad",
           "pad_planned", "plan_pad"]

_BLOCK_BYTES = 1 << 21  # output bytes a block: its border is filled while it is in cache
_PARALLEL_BYTES = 1 << 23  # outputs from this size on are filled by all the cores


# Pad-25's type constraint T, in padconv's ONNX-style names (padconv_cli.dtypes.dtype_name).
PAD_ELEMENT_TYPES = (
    "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "bfloat16", "float16", "float32", "float64", "string", "bool", "complex64", "complex128",
    "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4",
    "float4e2m1", "float8e8m0", "uint2", "int2",
)
PAD_ELEMENT_TYPES_TEXT = (
    "(u)int2/4/8/16/32/64, float16/32/64, bfloat16, float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0, "
    "float4e2m1, complex64/128, bool, string"
)


def pad_element_kind(dtype: Any) -> str:
    """The element kind of a dtype in Pad-25's type constraint T (:data:`PAD_ELEMENT_TYPES`;
    strings as numpy object or ``<U``), else :class:`UnsupportedDtypeError`."""
    dt = np.dtype(dtype)
    name = dtype_name(dt)
    if name not in PAD_ELEMENT_TYPES:
        raise UnsupportedDtypeError(f"Pad does not support the element type {name}; Pad-25 takes "
                                    f"{PAD_ELEMENT_TYPES_TEXT}", param="data")
    kind = element_kind(dt)
    if kind == "other" or dt.kind == "S":
        raise UnsupportedDtypeError(f"Pad does not support the element type {dt} (numpy dtype "
                                    f"{dt.str}); it takes ints, floats (incl. bfloat16/float8), "
                                    "bool, complex and strings", param="data")
    return kind


def coerce_constant_value(value: Any, dtype: Any, *, shown: str | None = None) -> Any:
    """A scalar (or one-element array) as a numpy scalar of ``dtype`` (a ``str`` for strings),
    else :class:`AttributeValueError`: ints need an integral value within range; floats a real
    number that does not overflow, NaN/±inf where the type has them; complex each part as a
    float; bool True/False/0/1; strings only strings.  ``shown``: the value as written."""
    dt = np.dtype(dtype)
    kind = pad_element_kind(dt)
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise AttributeValueError("constant_value must be a scalar or a one-element tensor; "
                                      f"got shape {value.shape}")
        value = value.reshape(())[()]
    same_type = isinstance(value, np.generic) and value.dtype == dt.newbyteorder("=")
    if same_type and kind != "string":
        return value  # already of the type: keep its exact bits (NaN payloads)
    if kind == "string" and isinstance(value, str):
        return str(value)
    if kind == "string" or isinstance(value, str):
        raise _not_a(value, dt, *_WANTED[kind])
    shown = _clipped(shown or str(value))
    if kind == "bool":
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer))
                                                   and value in (0, 1)):
            return np.bool_(int(value))
        raise _not_a(value, dt, *_WANTED[kind])
    if kind == "int":
        return _coerce_int(value, dt, shown)
    if kind == "float":
        return _coerce_float(value, dt, shown)
    return _coerce_complex(value, dt, shown)


# Per element kind: what a refused constant value is not, and what the tensor needs.
_WANTED = {
    "bool": ("a boolean", "True, False, 0 or 1"),
    "int": ("an integer", "an integer"),
    "float": ("a number", "a real number"),
    "complex": ("a number", "a (complex) number"),
    "string": ("a string", "a string"),
}


def _not_a(value: Any, dt: np.dtype, what: str, needs: str) -> AttributeValueError:
    name = "string" if dt.kind in "OU" else str(dt)
    article = "an" if name.startswith("i") else "a"
    shown = _clipped(repr(value) if isinstance(value, (str, bytes)) else str(value))
    return _refused(f"constant_value {shown} is not {what}; {article} {name} tensor needs {needs}")


def _clipped(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _refused(message: str) -> AttributeValueError:
    return AttributeValueError(message, param="constant_value")


def _is_real_number(value: Any) -> bool:
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        return True
    return isinstance(value, np.generic) and element_kind(value.dtype) in ("int", "float")


def _coerce_int(value: Any, dt: np.dtype, shown: str) -> np.generic:
    """The exact integer the value stands for, within the type's range."""
    number = None
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        number = int(value)
    elif _is_real_number(value) and math.isfinite(float(value)) and float(value).is_integer():
        number = int(float(value))
    if number is None:
        raise _not_a(value, dt, *_WANTED["int"])
    low, high = integer_range(dt)
    if not low <= number <= high:
        raise _refused(f"constant_value {shown} does not fit {dt} [{low}, {high}]")
    return np.array(number, dtype=dt)[()]


def _coerce_float(value: Any, dt: np.dtype, shown: str) -> np.generic:
    if isinstance(value, (complex, np.complexfloating)):
        raise _refused(f"constant_value {value} is complex; a {dt} tensor needs a real number")
    if not _is_real_number(value):
        raise _not_a(value, dt, *_WANTED["float"])
    try:
        number = float(value)
    except OverflowError:  # an int too large for any float
        raise _refused(
            f"constant_value {_clipped(str(value))} does not fit {dt} {float_range(dt)}"
        ) from None
    result = _cast_real(number, dt)
    _check_float_fits(number, result, shown, dt)
    return result


def _cast_real(number: float, dt: np.dtype) -> np.generic:
    with np.errstate(all="ignore"):
        return np.array(number, dtype=np.float64).astype(dt)[()]


def _check_float_fits(number: float, result: Any, shown: str, dt: np.dtype,
                      target: np.dtype | None = None) -> None:
    """NaN must stay NaN, ±inf the same infinity, finite values must not overflow ``dt``;
    ``target``: the tensor type to name when it differs (a complex part's)."""
    got = float(result)
    name = target if target is not None else dt
    if math.isnan(number):
        if not math.isnan(got):
            raise _refused(f"constant_value {shown}: {name} has no NaN")
    elif math.isinf(number):
        if got != number:
            raise _refused(f"constant_value {shown}: {name} has no infinity")
    elif not math.isfinite(got) or abs(number) >= _overflow_threshold(dt):
        parts = float_range(dt) if target is None else f"(parts in {float_range(dt)})"
        raise _refused(f"constant_value {shown} does not fit {name} {parts}")


def _overflow_threshold(dt: np.dtype) -> float:
    """Smallest magnitude that rounds past the largest finite value: max + ulp(max) / 2."""
    info = float_info(dt)
    largest = float(info.max)
    half_ulp = 2.0 ** (math.floor(math.log2(largest)) - int(info.nmant) - 1)
    return largest + half_ulp


def float_range(dt: np.dtype) -> str:
    """``[min, max]`` of a float type, as messages show it."""
    info = float_info(dt)
    return f"[{float(info.min):g}, {float(info.max):g}]"


def _coerce_complex(value: Any, dt: np.dtype, shown: str) -> np.generic:
    number = None
    if isinstance(value, (complex, np.complexfloating)) or _is_real_number(value):
        with contextlib.suppress(OverflowError):
            number = complex(value)
    if number is None:
        raise _not_a(value, dt, "a number that fits", "a (complex) number")
    part_dtype = np.dtype(np.float32 if dt == np.complex64 else np.float64)
    for part in (number.real, number.imag):
        _check_float_fits(part, _cast_real(part, part_dtype), shown, part_dtype, dt)
    return np.array(number, dtype=dt)[()]


def default_constant(dt: np.dtype) -> Any:
    """ONNX default: 0, "" or False (for float8e8m0, which has no zero, the all-zero bits)."""
    if dt.kind in "OU":
        return ""
    return np.zeros((), dtype=dt)[()]


def output_dtype(dt: np.dtype, fill: Any) -> np.dtype:
    """The result's dtype: the input dtype, except that a ``<U`` dtype grows to hold a longer
    constant string (``fill``, from :func:`fill_value`)."""
    if dt.kind != "U" or not isinstance(fill, str) or len(fill) <= dt.itemsize // 4:
        return dt
    return np.dtype((np.str_, len(fill))).newbyteorder(dt.byteorder)


_HELPER_PREFIX = "padconv-helper"
_Job = tuple[Callable[[], None], threading.Event]
_jobs: SimpleQueue[_Job] | None = None
_jobs_pid = -1


def worker_count() -> int:
    """Cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def run_tasks(tasks: Sequence[Callable[[], None]]) -> None:
    """Run independent tasks on the calling thread and ``worker_count() - 1`` pool threads,
    in order from one shared queue; the first exception (a Ctrl-C first) is raised here once
    every thread has stopped (a failure skips the tasks not yet started)."""
    if len(tasks) <= 1 or worker_count() == 1 or _on_helper_thread():
        for task in tasks:
            task()
        return
    pending = iter(tasks)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def stop(exc: BaseException) -> None:
        with lock:
            errors.append(exc)

    def drain() -> None:
        while True:
            with lock:
                task = None if errors else next(pending, None)
            if task is None:
                return
            try:
                task()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                stop(exc)

    jobs = _helper_jobs()
    helpers: list[threading.Event] = []
    try:
        for _ in range(min(worker_count(), len(tasks)) - 1):
            done = threading.Event()
            jobs.put((drain, done))
            helpers.append(done)
        drain()
    except BaseException as exc:  # e.g. Ctrl-C between two tasks: the helpers stop too
        stop(exc)
    _wait_for_helpers(helpers, stop)
    if errors:  # Ctrl-C first, then the first failure
        raise next((e for e in errors if not isinstance(e, Exception)), errors[0])


def _wait_for_helpers(
    helpers: list[threading.Event], stop: Callable[[BaseException], None]
) -> None:
    """Wait until every helper has returned, even through Ctrl-C (recorded with ``stop``): the
    caller must not reuse a buffer while a helper is still inside a task."""
    for done in helpers:
        while True:
            try:
                done.wait()
                break
            except BaseException as exc:  # noqa: BLE001 - recorded, raised by run_tasks
                stop(exc)


def _on_helper_thread() -> bool:
    """True on a pool thread: its own tasks run there, as waiting for the pool from inside the
    pool could wait for ever."""
    return threading.current_thread().name.startswith(_HELPER_PREFIX)


def _helper_jobs() -> SimpleQueue[_Job]:
    """The queue of the helper threads (one fewer than the cores), started on first use and
    anew in a forked child; daemon threads, so that an exit on Ctrl-C never waits for them."""
    global _jobs, _jobs_pid
    if _jobs is None or _jobs_pid != os.getpid():
        jobs: SimpleQueue[_Job] = SimpleQueue()
        for index in range(max(1, worker_count() - 1)):
            threading.Thread(
                target=_serve, args=(jobs,), name=f"{_HELPER_PREFIX}-{index}", daemon=True
            ).start()
        _jobs, _jobs_pid = jobs, os.getpid()
    return _jobs


def _serve(jobs: SimpleQueue[_Job]) -> None:
    """A helper thread: run each job, then set its event."""
    while True:
        job, done = jobs.get()
        try:
            job()
        finally:
            done.set()


PAD_MODES = ("constant", "reflect", "edge", "wrap")


@dataclasses.dataclass(frozen=True)
class AxisPad:
    """What Pad does to one input axis: crop, then pad (all four >= 0)."""

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


@dataclasses.dataclass(frozen=True)
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
    def crop_slices(self) -> tuple[slice, ...]:
        """Index selecting the cropped input: ``data[plan.crop_slices]``."""
        return tuple(slice(ax.crop_begin, ax.dim - ax.crop_end) for ax in self.per_axis)

    @property
    def adds_elements(self) -> bool:
        """True when some axis gets padded, i.e. the result has a border to fill."""
        return any(ax.pad_begin or ax.pad_end for ax in self.per_axis)


def plan_pad(shape: Iterable[int], pads: Any, axes: Any = None, mode: str = "constant", *,
             dtype: Any = None) -> PadPlan:
    """Validate Pad's attributes against an input shape (and ``dtype``, when given) and give
    the output shape: axis ``axes[i]`` gets ``pads[i]`` elements before and ``pads[k + i]``
    after (negative: removed), ``dim + begin + end >= 0`` (module docstring)."""
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
    """A 1-D sequence or array of integers (bools, floats and strings refused)."""
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
    """Split the signed pads of one axis into crops and pads.  Output index ``i`` holds input
    index ``i - begin`` when that lies in ``[0, dim)``: a crop larger than the axis keeps no
    input element (constant mode fills the axis, the other modes refuse it)."""
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
    if mode != "constant" and ax.cropped_dim == 0 and (begin or end):
        where = "empty after cropping" if crop_begin or crop_end else "empty"
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


def pad(data: Any, pads: Any, constant_value: Any = None, axes: Any = None, mode: str = "constant",
        *, out: np.ndarray | None = None) -> np.ndarray:
    """ONNX Pad-25: crop the negative pads, then pad with ``mode`` (module docstring).

    ``output[i] = data'[source(i)]``, ``data'`` the cropped input, with ``j = i - pad_begin``
    and ``n`` the cropped length: constant -> the constant outside ``[0, n)``; edge ->
    ``clip(j, 0, n-1)``; wrap -> ``j mod n``; reflect -> ``m = j mod 2(n-1)``, ``m if m < n
    else 2(n-1) - m`` (``0`` when ``n == 1``).  ``constant_value`` is validated whenever given.
    Returns a new array, or ``out`` (exactly the output's shape and dtype, writable, sharing no
    memory with ``data``): reusing it saves the page faults of fresh memory.
    """
    array = data if isinstance(data, np.ndarray) else np.asarray(data)
    plan = plan_pad(array.shape, pads, axes, mode, dtype=array.dtype)
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
    """Copy ``src`` into the centre of ``out`` and fill the border, one block (of the leading
    unpadded axes) at a time, by border steps worked out once; large outputs share the blocks
    out in contiguous runs among the cores (numpy copies release the GIL)."""
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
    ``count`` indices of axis ``depth`` (one block for a small output or a padded first axis);
    deeper axes are split while one index is larger than ``_BLOCK_BYTES``."""
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
    """The ``(target, source)`` steps that fill the border once the centre is copied: those
    of the outer axes (indexing the block), then of the innermost axis (indexing
    :func:`_rows`).  Axis ``k`` fills its border over the full range of the axes before it and
    the centre range of the axes after it, which are final by then: each border element is
    written once, corners included."""
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
    """Records fills and copies along one axis (``prefix``/``suffix`` index the axes around
    it).  On the innermost axis (``by_column``) a narrow stretch goes one column at a time:
    one long strided loop instead of a per-row overhead."""

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
        else:  # a reversed stretch that ends at index 0 stops at None, not at -1
            end = source + count * step
            chosen = slice(source, end if end >= 0 else None, step)
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
    """Position ``j`` gets ``j mod n``: the filled stretch ``[low, high)`` is ``n``-periodic,
    so whole periods of it are copied outwards (doubling it at each step)."""
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
    """Position ``j`` mirrors about the first and last centre elements (period ``2(n-1)``):
    the filled stretch is mirrored about its end element in whole half-periods ``n-1``; a
    one-element axis repeats it, like numpy.pad."""
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
