"""The operator pipeline as a library: one call from tensor sources to the written result.

    request -> resolve -> ONE plan -> resource gate -> engine -> execute -> write -> check

* **request** (:class:`Request`): the operator, its input sources (paths, ``-``, literals or
  arrays), the attributes the caller gave, optionally a model node, the engine, the output
  and the limits;
* **resolve**: defaults, then the model node's values, then the caller's
  (:func:`padconv_cli.models.resolve_call`);
* **plan**: the operator's planner (``plan_pad`` / ``plan_conv``) runs once per call, from the
  inputs' shapes (a ``.npy`` file or Zarr store is not read for it); the kernels, the tiled
  and dask engines, ``explain``, ``emit`` and ``check`` all receive that plan;
* **gate** (:mod:`padconv_cli.resources`): output bytes as written and the working memory of
  the path that will run, against ``max_output_bytes`` and ``memory_limit``, before any
  output is allocated;
* **engine**: ``auto`` picks ``dask`` for Zarr input or output (or a scheduler), ``tiled`` for
  a ``.npy`` input and ``.npy`` output whose in-memory run (inputs + output + working
  memory) would exceed ``memory_limit``, else ``memory``.  Calls with a model node, explain,
  check or emit run in memory.

Python users call :func:`run`::

    from padconv_cli.pipeline import Request, run
    run(Request("Pad", ("x.npy",), {"pads": [0, 1, 0, 1]}, output="y.zarr", engine="dask"))
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.errors import InputError, OutputError
from padconv_cli.operators import CONV, PAD, dtype_of, operator, shape_of

ENGINES = ("auto", "memory", "tiled", "dask")


@dataclass(frozen=True)
class Request:
    """One Pad or Conv call (module docstring).  ``attributes`` hold only what the caller gave,
    in kernel terms; ``model``/``node`` name a model node whose values come first."""

    operator: str
    inputs: tuple[Any, ...]
    attributes: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    node: str | None = None
    engine: str = "auto"
    output: str | None = None
    fmt: str | None = None
    dtype: str | None = None
    max_output_bytes: int | None = None
    memory_limit: int | None = None
    scheduler: str | None = None
    show_progress: bool | str = False
    verbose: bool = False
    emit_onnx: str | None = None
    emit_initializers: bool = False  # store the given tensors in the emitted model too
    explain: bool = False
    check: bool = False
    check_rtol: float | None = None
    check_atol: float | None = None
    given: frozenset[str] = frozenset()

    @property
    def computes_only(self) -> bool:
        """No model node, explain, check or emit: the call may run out of core."""
        return self.model is None and not (self.explain or self.check or self.emit_onnx)


@dataclass
class Outcome:
    """What a call did: the engine, the plan, and the result (in memory), the tiled result
    (out of core), the explanation or the check report."""

    engine: str
    plan: Any = None
    resolved: Any = None
    result: np.ndarray | None = None
    tiled: Any = None
    explanation: dict[str, Any] | None = None
    report: Any = None
    string_dtype: np.dtype | None = None  # the fixed width of a wide string result held as str


def run(request: Request, *, write: bool = True,
        note: Callable[[str], None] | None = None) -> Outcome:
    """Run ``request`` through the pipeline (module docstring).

    With ``write`` (default) the result goes to ``request.output`` (a path, or ``-`` for
    stdout bytes); with ``output`` None or ``write=False`` it is returned in memory.  Explain
    computes nothing; check compares the result with onnx.reference and onnxruntime.
    ``note`` receives the one-line remarks of a resolved model node (an off-spec node).
    """
    check_output_format(request.output, request.fmt)
    if not request.computes_only:
        return run_in_memory(request, write=write, note=note)
    choice = choose_engine(request)
    if choice.engine != "memory":
        return run_out_of_core(request, choice)
    return run_in_memory(request, choice.plan, write=write, note=note, chosen=choice)


# --- in memory -------------------------------------------------------------------------------


def resolve(request: Request, read: tuple[Any, ...] = ()) -> Any:
    """Read the inputs and merge the caller's attributes over the model node's values;
    ``read`` holds inputs already read (the engine choice read W and B), by position after
    the first."""
    from padconv_cli.models import find_node, resolve_call
    from padconv_cli.tensor_sources import read_tensor

    entry = operator(request.operator)
    values = (request.inputs[0], *read, *request.inputs[1 + len(read):])
    tensors = tuple(_read(value, request.dtype, read_tensor) for value in values)
    origin = None
    if request.model is not None:
        origin = find_node(request.model, request.node, entry.name)
    attributes = {k: v for k, v in request.attributes.items() if v is not None}
    return resolve_call(entry.name, tensors, attributes, origin)


def _read(value: Any, dtype: str | None, read_tensor: Any) -> Any:
    if value is None or isinstance(value, np.ndarray):
        return value
    return read_tensor(value, dtype=dtype)


def plan_resolved(resolved: Any, known: Any = None) -> Any:
    """The call's one plan: ``known`` when it was made for these shapes (out-of-core
    candidates plan before reading), else the operator's planner, with the model node named
    in its errors."""
    from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError
    from padconv_cli.models import with_node_context
    from padconv_cli.operators import plan_call

    if known is not None and _plan_fits(known, resolved.call):
        return known
    try:
        return plan_call(resolved.call)
    except (AttributeValueError, UnsupportedDtypeError) as error:
        raise with_node_context(resolved.origin, error) from None


def _plan_fits(plan: Any, call: Any) -> bool:
    """True when ``plan`` was made for the shapes of ``call``'s data inputs."""
    shapes = [shape_of(a) for a in call.arrays]
    if hasattr(plan, "input_shape"):
        return plan.input_shape == shapes[0]
    return len(shapes) > 1 and (plan.x_shape, plan.w_shape) == (shapes[0], shapes[1])


def run_in_memory(request: Request, known: Any = None, *, write: bool = True,
                  note: Callable[[str], None] | None = None,
                  chosen: EngineChoice | None = None) -> Outcome:
    """Read, resolve, plan once, gate, then emit, explain or compute, write and check.

    ``chosen``: the engine choice of an ``auto`` call, whose small inputs are not read again
    and whose gate, when it already passed on the declared shapes, is not run again."""
    from padconv_cli.needs import written_format

    resolved = resolve(request, chosen.others if chosen is not None else ())
    if note is not None and not request.explain:  # explain shows the notes itself
        for text in resolved.call.notes:
            note(text)
    plan = plan_resolved(resolved, known)
    outcome = Outcome("memory", plan, resolved)
    gated = chosen is not None and chosen.gated and plan is known
    fmt = written_format(request.output, request.fmt)
    if not (request.explain or gated):
        gate_in_memory(request, resolved, plan, fmt)
    if request.emit_onnx is not None:
        emit_model(resolved, plan, request.emit_onnx, request.emit_initializers)
    if request.explain:
        from padconv_cli.explain import explanation

        outcome.explanation = explanation(resolved, plan, request.given, fmt)
        return outcome
    entry = operator(resolved.call.op_type)
    outcome.result = entry.run(plan, resolved.call.arrays, resolved.call.attributes)
    outcome.string_dtype = _written_string_dtype(resolved.call, plan, outcome.result)
    if write and request.output is not None:
        from padconv_cli.tensorio import write_tensor

        fmt = request.fmt or ("npy" if request.output == "-" else None)
        write_tensor(outcome.result, request.output, fmt=fmt, string_dtype=outcome.string_dtype)
    if request.check:
        from padconv_cli.crosscheck import crosscheck

        outcome.report = crosscheck(resolved.call, plan, outcome.result,
                                    rtol=request.check_rtol, atol=request.check_atol)
    return outcome


def _written_string_dtype(call: Any, plan: Any, result: np.ndarray) -> np.dtype | None:
    """The fixed-width type of a string result the kernel held as python strings (wide
    strings, :func:`padconv_cli.needs.strings_as_objects`), None for any other result."""
    if result.dtype != np.object_:
        return None
    dtype = operator(call.op_type).output_dtype(dtype_of(call.arrays[0]), call.attributes, plan)
    return dtype if dtype.kind in "US" else None


def call_needs(call: Any, plan: Any, fmt: str = "npy") -> Any:
    """The :class:`~padconv_cli.resources.Needs` of a KernelCall planned as ``plan``, written
    in ``fmt`` (by the operator table's ``needs``)."""
    return operator(call.op_type).needs(call.arrays, plan, dtype_of(call.arrays[0]),
                                        call.attributes, fmt)


def gate_in_memory(request: Request, resolved: Any, plan: Any, fmt: str) -> None:
    """The resource gate of an in-memory run, before the output is allocated: the needs of
    the call written in ``fmt`` (the figures ``explain`` reports)."""
    from padconv_cli.resources import Limits, check_call

    needs = call_needs(resolved.call, plan, fmt)
    limits = Limits(request.max_output_bytes, request.memory_limit)
    tiled = resolved.origin is None and tiled_possible(
        request.inputs[0], request.output, request.fmt
    )
    if tiled and needs.total > limits.memory():  # the hint must be true: its smallest tile fits
        tiled = tiled_fits(resolved.call, plan, limits.memory())
    check_call(needs, limits, tiled_possible=tiled)


def tiled_fits(call: Any, plan: Any, limit: int) -> bool:
    """True when the tiled engine can cut the call into tiles that fit ``limit`` bytes."""
    from padconv_cli.errors import OutputTooLargeError

    try:
        TILE_PLANNERS[operator(call.op_type).name](call, plan, limit)
    except OutputTooLargeError:
        return False
    return True


def _pad_tiles(call: Any, plan: Any, limit: int) -> Any:
    from padconv_cli.outofcore.pad_tiles import plan_pad_tiles

    return plan_pad_tiles(plan, dtype_of(call.arrays[0]).itemsize, limit)


def _conv_tiles(call: Any, plan: Any, limit: int) -> Any:
    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.outofcore.conv_tiles import fixed_bytes, plan_conv_tiles

    x, w, b = call.arrays
    budget = limit - fixed_bytes(np.asarray(w), None if b is None else np.asarray(b))
    if budget <= 0:
        raise OutputTooLargeError("W and B alone exceed the limit", param="memory_limit")
    return plan_conv_tiles(plan, dtype_of(x).itemsize, budget)





DATA_INPUTS = frozenset({"data", "X", "W", "B"})  # the data inputs of the emitted nodes


def emit_model(resolved: Any, plan: Any, path: str, with_data: bool = False) -> None:
    """Write the equivalent single-node ONNX model of the call to ``path``; ``with_data``
    stores every given data tensor as an initializer (the model then needs no inputs)."""
    from padconv_cli.emit import save_model, single_node_model

    node_name = resolved.origin.node.name if resolved.origin is not None else None
    embedded = set(resolved.embedded) | (DATA_INPUTS if with_data else set())
    model = single_node_model(resolved.call, plan, embedded=embedded, node_name=node_name or None)
    save_model(model, path)


def check_output_format(output: str | None, fmt: str | None) -> None:
    """Refuse, before anything runs, an output suffix that contradicts ``fmt`` and, for a
    file that is not a Zarr store, a suffix that names no tensor format (``y.npz``)."""
    if output is None:
        return
    from padconv_cli.tensorio.files import printable
    from padconv_cli.tensorio.writing import check_suffix_agrees, resolve_format

    if "://" in output or is_zarr(output):
        if fmt is not None:
            check_suffix_agrees(printable(output), fmt)
        return
    resolve_format(output, fmt)


# --- out of core -----------------------------------------------------------------------------


def is_zarr(path: Any) -> bool:
    """True for a Zarr store path (``.zarr`` or a folder with Zarr metadata)."""
    if not isinstance(path, str):
        return False
    from padconv_cli.tensorio.zarr_paths import is_zarr_path

    return is_zarr_path(path)


def is_npy_file(source: Any) -> bool:
    """True for an existing ``.npy`` file."""
    return isinstance(source, str) and source.lower().endswith(".npy") and os.path.isfile(source)


def is_npy_target(output: str | None, fmt: str | None) -> bool:
    """True when the output is a ``.npy`` file (by ``fmt`` or its suffix)."""
    if output in (None, "-"):
        return False
    suffix = os.path.splitext(output)[1].lower()
    return fmt == "npy" or (fmt is None and suffix in (".npy", ""))


def tiled_possible(data: Any, output: str | None, fmt: str | None) -> bool:
    """True when the tiled engine could take the call: a ``.npy`` input and ``.npy`` output."""
    return is_npy_file(data) and is_npy_target(output, fmt)


def first_engine(request: Request) -> str:
    """The engine before sizes are known: the choice, or for ``auto`` ``dask`` (Zarr, a
    scheduler), ``memory`` (not a ``.npy`` input and output), else ``auto`` (by the plan)."""
    if request.engine != "auto":
        return request.engine
    data = request.inputs[0]
    if is_zarr(data) or (request.output is not None and is_zarr(request.output)):
        return "dask"
    if request.scheduler:
        return "dask"
    if not tiled_possible(data, request.output, request.fmt):
        return "memory"
    return "auto"


@dataclass(frozen=True)
class EngineChoice:
    """The engine a call runs on, and what choosing it needed: the plan from the declared
    shapes, the declared input and the small inputs (None where not made)."""

    engine: str
    plan: Any = None
    source: Any = None
    others: tuple[Any, ...] = ()
    gated: bool = False  # the in-memory gate passed on the declared shapes


def choose_engine(request: Request) -> EngineChoice:
    """The engine of a call that only computes (module docstring): ``auto`` becomes ``tiled``
    for a ``.npy`` input and output whose in-memory run would exceed memory_limit (which,
    when it fits, passes the in-memory gate here, before the input is read in full)."""
    from padconv_cli.errors import PadconvError

    engine = first_engine(request)
    if engine == "memory":
        return EngineChoice("memory")
    data = request.inputs[0]
    if engine != "auto":
        check_file_input(data, engine)
        check_file_output(request.output, request.fmt, engine)
    try:
        source, others = _declared_input(data), _small_inputs(request)
        plan = _plan_declared(request, source, others)
    except PadconvError:
        if engine != "auto":
            raise
        return EngineChoice("memory")  # the in-memory path reports it in its own words
    gated = False
    if engine == "auto":
        gated = _fits_in_memory(request, source, others, plan)
        engine = "memory" if gated else "tiled"
    return EngineChoice(engine, plan, source, tuple(others), gated)


def run_out_of_core(request: Request, choice: EngineChoice | None = None) -> Outcome:
    """The tiled or dask engine on the call's one plan (``choice``: made already), or
    ``Outcome("memory", plan)`` when the in-memory engine applies."""
    choice = choice or choose_engine(request)
    if choice.engine == "memory":
        return Outcome("memory", choice.plan)
    _gate_out_of_core(request, choice.source, choice.plan)
    run_engine = ENGINE_RUNS[operator(request.operator).name]
    tiled = run_engine(choice.engine, choice.source, list(choice.others), choice.plan,
                       _attributes(request, choice.source), _engine_settings(request))
    return Outcome(choice.engine, choice.plan, tiled=tiled)


def _fits_in_memory(request: Request, source: Any, others: list[Any], plan: Any) -> bool:
    """True when the in-memory run (inputs + output + working) fits memory_limit; it then
    passes the whole in-memory gate here, before the input is read."""
    from padconv_cli.needs import written_format
    from padconv_cli.resources import Limits, check_call

    entry = operator(request.operator)
    needs = entry.needs((source, *others), plan, dtype_of(source), _attributes(request, source),
                        written_format(request.output, request.fmt))
    limits = Limits(request.max_output_bytes, request.memory_limit)
    if needs.total > limits.memory():
        return False
    check_call(needs, limits)
    return True


def _attributes(request: Request, source: Any) -> dict[str, Any]:
    """The caller's attributes over the operator's defaults (a call without a model), a text
    constant_value read as an element of the input's type."""
    from padconv_cli.constant_text import typed_attributes

    entry = operator(request.operator)
    given = {k: v for k, v in request.attributes.items() if v is not None}
    return typed_attributes({**entry.defaults, **given}, dtype_of(source))


def _declared_input(data: str) -> Any:
    """The ``.npy`` file or Zarr store opened for its declared shape and dtype (not read)."""
    if is_zarr(data):
        from padconv_cli.engines.dask_io import open_block_input

        return open_block_input(data)
    from padconv_cli.outofcore.npy_blocks import open_npy_input

    return open_npy_input(data)


def _small_inputs(request: Request) -> list[Any]:
    """W and B of a Conv (read whole: they are small), nothing for Pad."""
    from padconv_cli.tensor_sources import read_tensor

    return [_read(value, request.dtype, read_tensor) for value in request.inputs[1:]]


def _plan_declared(request: Request, source: Any, others: list[Any]) -> Any:
    """The call's one plan from the declared shapes."""
    entry = operator(request.operator)
    shapes = [shape_of(source), *(shape_of(o) for o in others)]
    return entry.plan(shapes, dtype_of(source), _attributes(request, source))


def _gate_out_of_core(request: Request, source: Any, plan: Any) -> None:
    """Representable result, explicit max_output_bytes, then the free disk space."""
    import math

    from padconv_cli.outofcore.npy_blocks import check_disk_space
    from padconv_cli.resources import Limits, Needs, check_call

    entry = operator(request.operator)
    dtype = entry.output_dtype(dtype_of(source), _attributes(request, source), plan)
    check_element_width(dtype, request.engine)
    shape = tuple(plan.output_shape)
    nbytes = math.prod(shape) * dtype.itemsize
    needs = Needs(0, nbytes, 0, shape, dtype.name, dtype.itemsize)
    check_call(needs, Limits(request.max_output_bytes), in_memory=False)
    check_disk_space(request.output, shape, dtype)


def check_element_width(dtype: np.dtype, engine: str) -> None:
    """Out-of-core engines hold whole elements: a string element wider than the pieces wide
    strings are written in (``STRING_CHUNK_BYTES``) is left to the in-memory engine."""
    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.tensorio.npy import STRING_CHUNK_BYTES
    from padconv_cli.units import human_bytes

    if dtype.kind in "US" and dtype.itemsize > STRING_CHUNK_BYTES:
        raise OutputTooLargeError(
            f"strings of {dtype.str} take {human_bytes(dtype.itemsize)} per element, and engine "
            f"{engine} holds at most {human_bytes(STRING_CHUNK_BYTES)} per element; engine "
            "memory writes such strings in pieces", param="engine")


def check_file_input(data: Any, engine: str) -> None:
    """The tiled engine reads a ``.npy`` file; dask a ``.npy`` file or a Zarr store."""
    if data and (is_npy_file(data) or (engine == "dask" and is_zarr(data))):
        return
    accepted = ".npy file or a Zarr store" if engine == "dask" else ".npy file"
    raise InputError(f"{data}: not a {accepted}; engine {engine} reads its input from a "
                     f"{accepted}", param="engine")


def check_file_output(output: str | None, fmt: str | None, engine: str) -> None:
    """Out-of-core engines write a ``.npy`` file (dask: or a Zarr store)."""
    if output is not None and engine == "dask" and is_zarr(output):
        return
    if is_npy_target(output, fmt):
        return
    accepted = "a .npy file or a Zarr store" if engine == "dask" else "a .npy file"
    example = "output FILE.npy or output STORE.zarr" if engine == "dask" else "output FILE.npy"
    raise OutputError(f"{output or 'stdout'}: not {accepted}; engine {engine} writes {accepted}, "
                      f"give {example}", param=("engine", "output"))


def _engine_settings(request: Request) -> dict[str, Any]:
    """What the out-of-core engines need besides the call: output, limit, progress, dask."""
    from padconv_cli.resources import default_memory_limit

    limit = request.memory_limit if request.memory_limit is not None else default_memory_limit()
    return {
        "output": request.output,
        "source_path": request.inputs[0],
        "memory_limit": limit,
        "show_progress": request.show_progress,
        "dask": {
            "memory_limit": request.memory_limit,
            "fallback_limit": limit,
            "scheduler": request.scheduler,
            "show_progress": request.show_progress,
            "verbose": request.verbose,
        },
    }


# --- the engines of each operator ------------------------------------------------------


def _pad_engine(engine: str, source: Any, others: Sequence[Any], plan: Any,
                attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    arguments = (attributes["pads"], attributes.get("constant_value"), attributes.get("axes"),
                 attributes.get("mode", "constant"))
    if engine == "tiled":
        from padconv_cli.outofcore.pad_tiles import tiled_pad

        return tiled_pad(source, settings["output"], *arguments, plan=plan,
                         memory_limit=settings["memory_limit"],
                         show_progress=settings["show_progress"])
    from padconv_cli.engines.dask_engine import dask_pad

    return dask_pad(settings["source_path"], settings["output"], *arguments, plan=plan,
                    **settings["dask"])


def _conv_engine(engine: str, source: Any, others: Sequence[Any], plan: Any,
                 attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    from padconv_cli.errors import InputError

    w, b = (list(others) + [None, None])[:2]
    if w is None:
        raise InputError("conv: W is required", param="W")
    if engine == "tiled":
        from padconv_cli.outofcore.conv_tiles import tiled_conv

        return tiled_conv(source, w, b, settings["output"], plan=plan,
                          memory_limit=settings["memory_limit"],
                          show_progress=settings["show_progress"], **attributes)
    from padconv_cli.engines.dask_engine import dask_conv

    return dask_conv(settings["source_path"], w, b, settings["output"], plan=plan,
                     **settings["dask"], **attributes)


ENGINE_RUNS: dict[str, Callable[..., Any]] = {PAD.name: _pad_engine, CONV.name: _conv_engine}
TILE_PLANNERS: dict[str, Callable[[Any, Any, int], Any]] = {PAD.name: _pad_tiles,
                                                         CONV.name: _conv_tiles}
