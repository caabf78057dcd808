"""The operator pipeline as a library: one straight call from tensor sources to the result.

    open -> resolve -> plan -> gate (chooses the engine) -> execute -> write

* **open** the inputs: a ``.npy`` file or Zarr store that may run out of core is opened for
  its declared shape and dtype (nothing is read); anything else is read, as are Conv's small
  inputs W and B;
* **resolve**: the operator's defaults, then the model node's values, then the caller's
  (:func:`padconv_cli.ops.plain_call`; :func:`padconv_cli.models.resolve_call` with a model);
* **plan**: the operator's planner, once, from the inputs' shapes; the kernels, the tiled and
  dask engines, explain, emit and check all take that plan;
* **gate** (:mod:`padconv_cli.resources`): the one resource gate, which also chooses the
  engine from the plan: ``auto`` is ``dask`` for Zarr input or output (or a scheduler),
  ``tiled`` for a ``.npy`` input and ``.npy`` output whose in-memory run (inputs + output +
  working memory) exceeds ``memory_limit``, else ``memory``; the in-memory engine is gated on
  output bytes as written and working memory, the out-of-core engines on the output's bytes
  and the free disk space;
* **execute** on that engine and **write** the result.

explain, emit and check are calls on the planned call (:class:`Planned`), not part of the
request; a caller that wants them asks for ``engine="memory"`` (they need the inputs read).

Python users call :func:`run`::

    from padconv_cli.pipeline import Request, run
    run(Request("Pad", ("x.npy",), {"pads": [0, 1, 0, 1]}, output="y.zarr", engine="dask"))

or :func:`plan` for the steps one by one: ``planned = plan(request)``, ``planned.explain()``,
``planned.gate()``, ``planned.emit(path)``, ``planned.execute()``, ``planned.check(result)``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from padconv_cli.errors import InputError, OutputError, PadconvError
from padconv_cli.ops import Operator, ResolvedCall, dtype_of, operator, plain_call, shape_of

if TYPE_CHECKING:
    import numpy as np

    from padconv_cli.tensorio.files import ReadPolicy

ENGINES = ("auto", "memory", "tiled", "dask")


@dataclass(frozen=True)
class Request:
    """One operator call (module docstring).  ``attributes`` hold only what the caller gave,
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
    read_policy: ReadPolicy | None = None  # None: the default ReadPolicy()


@dataclass
class Outcome:
    """What a call did: the engine, the plan, and the result (in memory) or the tiled result
    (out of core)."""

    engine: str
    plan: Any = None
    resolved: Any = None
    result: np.ndarray | None = None
    tiled: Any = None
    string_dtype: np.dtype | None = None  # the fixed width of a wide string result held as str


def run(request: Request, *, write: bool = True,
        note: Callable[[str], None] | None = None) -> Outcome:
    """Run ``request`` through the pipeline (module docstring): open, resolve, plan, gate,
    execute and, with ``write`` (default), write the result to ``request.output`` (a path, or
    ``-`` for stdout bytes); with ``output`` None or ``write=False`` it is returned in memory.
    ``note`` receives the one-line remarks of a resolved model node (an off-spec node)."""
    planned = plan(request, note=note)
    planned.gate()
    return planned.execute(write=write)


@dataclass
class Planned:
    """A call opened, resolved and planned: the steps after the plan are its methods."""

    request: Request
    entry: Operator
    resolved: ResolvedCall
    plan: Any
    engine: str  # the engine as known before the gate (``auto``: chosen by the gate)
    declared: bool = False  # the data input is opened for its declared shape, not read

    @property
    def call(self) -> Any:
        """The resolved :class:`~padconv_cli.ops.protocol.KernelCall`."""
        return self.resolved.call

    @property
    def written_format(self) -> str:
        """``npy`` or ``pb``: the format the output is written in."""
        from padconv_cli.needs import written_format

        return written_format(self.request.output, self.request.fmt)

    def needs(self) -> Any:
        """The in-memory run's :class:`~padconv_cli.resources.Needs`: output bytes as written,
        inputs and working memory (the figures explain reports and the gate checks)."""
        call = self.call
        return self.entry.needs(call.arrays, self.plan, dtype_of(call.arrays[0]),
                                call.attributes, self.written_format)

    def gate(self) -> str:
        """The one resource gate; it chooses the engine (module docstring) and returns it."""
        from padconv_cli.resources import Limits, check_call

        request = self.request
        limits = Limits(request.max_output_bytes, request.memory_limit)
        self.engine = self.foreseen_engine()
        if self.engine == "memory":
            needs = self.needs()
            check_call(needs, limits, tiled_possible=self._tiled_hint(needs, limits))
            return self.engine
        self._gate_out_of_core()
        return self.engine

    def _tiled_hint(self, needs: Any, limits: Any) -> bool:
        """True when a refusal may say the tiled engine would take the call: no model, a
        ``.npy`` input and output, and (over the memory limit) its smallest tile fits."""
        request = self.request
        if self.resolved.origin is not None or "tiled" not in self.entry.engines:
            return False
        if not tiled_possible(request.inputs[0], request.output, request.fmt):
            return False
        return needs.total <= limits.memory() or tiled_fits(self.call, self.plan,
                                                             limits.memory())

    def _gate_out_of_core(self) -> None:
        """Representable result, explicit max_output_bytes, then the free disk space."""
        from padconv_cli.outofcore.npy_blocks import check_disk_space
        from padconv_cli.resources import Limits, Needs, check_call

        call, request = self.call, self.request
        dtype = self.entry.output_dtype(dtype_of(call.arrays[0]), call.attributes, self.plan)
        check_element_width(dtype, request.engine)
        shape = tuple(self.plan.output_shape)
        nbytes = math.prod(shape) * dtype.itemsize
        needs = Needs(0, nbytes, 0, shape, dtype.name, dtype.itemsize)
        check_call(needs, Limits(request.max_output_bytes), in_memory=False)
        check_disk_space(request.output, shape, dtype)

    def execute(self, write: bool = True) -> Outcome:
        """Run the call on the gated engine; in memory, write the result to the request's
        output unless ``write`` is False."""
        if self.engine in ("tiled", "dask"):
            call = self.call
            source, *others = call.arrays
            tiled = self.entry.run_engine(self.engine, source, others, self.plan,
                                          call.attributes, _engine_settings(self.request))
            return Outcome(self.engine, self.plan, self.resolved, tiled=tiled)
        self._read_declared()
        call = self.call
        outcome = Outcome("memory", self.plan, self.resolved)
        outcome.result = self.entry.run(self.plan, call.arrays, call.attributes)
        outcome.string_dtype = self._written_string_dtype(outcome.result)
        request = self.request
        if write and request.output is not None:
            from padconv_cli.tensorio import write_tensor

            fmt = request.fmt or ("npy" if request.output == "-" else None)
            write_tensor(outcome.result, request.output, fmt=fmt,
                         string_dtype=outcome.string_dtype)
        return outcome

    def _read_declared(self) -> None:
        """Read in full the data input that was opened for its declared shape (once); the
        plan stays, unless the file no longer has that shape."""
        if not self.declared:
            return
        from padconv_cli.tensor_sources import read_tensor

        call = self.call
        data = read_tensor(self.request.inputs[0], dtype=self.request.dtype,
                           policy=self.request.read_policy)
        arrays = (data, *call.arrays[1:])
        self.resolved = dataclasses.replace(
            self.resolved, call=dataclasses.replace(call, arrays=arrays))
        self.declared = False
        if not self.entry.plan_fits(self.plan, [shape_of(a) for a in arrays]):
            self.plan = plan_resolved(self.resolved)

    def _written_string_dtype(self, result: np.ndarray) -> np.dtype | None:
        """The fixed-width type of a string result the kernel held as python strings (wide
        strings, :func:`padconv_cli.needs.strings_as_objects`), None for any other result."""
        if result.dtype.kind != "O":
            return None
        call = self.call
        dtype = self.entry.output_dtype(dtype_of(call.arrays[0]), call.attributes, self.plan)
        return dtype if dtype.kind in "US" else None

    def explain(self, flags: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
        """What the call will do on the engine it would run on, from the plan
        (:mod:`padconv_cli.explain`); ``flags`` names the attributes given on the command
        line."""
        from padconv_cli.explain import explanation
        from padconv_cli.resources import Limits

        limit = Limits(self.request.max_output_bytes, self.request.memory_limit).memory()
        return explanation(self.resolved, self.plan, flags, self.written_format,
                           self.foreseen_engine(), limit)

    def foreseen_engine(self) -> str:
        """The engine the gate would choose, without gating: ``auto`` is ``memory`` when the
        in-memory run fits ``memory_limit``, else ``tiled``."""
        if self.engine != "auto":
            return self.engine
        from padconv_cli.resources import Limits

        limits = Limits(self.request.max_output_bytes, self.request.memory_limit)
        return "memory" if self.needs().total <= limits.memory() else "tiled"

    def emit(self, path: str, with_data: bool = False) -> None:
        """Write the equivalent single-node ONNX model of the call to ``path``; ``with_data``
        stores every given data tensor as an initializer (the model then needs no inputs)."""
        from padconv_cli.emit import save_model, single_node_model

        resolved = self.resolved
        node_name = resolved.origin.node.name if resolved.origin is not None else None
        data_inputs = set(self.entry.input_names) if with_data else set()
        model = single_node_model(resolved.call, self.plan,
                                  embedded=resolved.embedded | data_inputs,
                                  node_name=node_name or None)
        save_model(model, path)

    def check(self, result: np.ndarray, rtol: float | None = None,
              atol: float | None = None) -> Any:
        """Compare ``result`` with onnx.reference and onnxruntime running the same node
        (:func:`padconv_cli.crosscheck.crosscheck`)."""
        from padconv_cli.crosscheck import crosscheck

        return crosscheck(self.call, self.plan, result, rtol=rtol, atol=atol)


# --- open, resolve, plan -----------------------------------------------------------------------


def plan(request: Request, note: Callable[[str], None] | None = None) -> Planned:
    """Open the inputs, resolve the call and plan it once (module docstring); ``note``
    receives the remarks of a resolved model node."""
    check_output_format(request.output, request.fmt)
    entry = operator(request.operator)
    engine = first_engine(request, entry.engines)
    data, declared, engine = _open_data(request, engine)
    arrays = [data]
    for declared_input, value in zip(entry.data_inputs[1:], request.inputs[1:], strict=False):
        dtype = request.dtype or _literal_type(declared_input, value, entry, arrays)
        arrays.append(_read(value, dtype, request.read_policy))
    resolved = _resolve(request, entry, tuple(arrays))
    if note is not None:
        for text in resolved.call.notes:
            note(text)
    return Planned(request, entry, resolved, plan_resolved(resolved), engine, declared)


def _open_data(request: Request, engine: str) -> tuple[Any, bool, str]:
    """The data input, whether it was opened for its declared shape only, and the engine:
    an ``auto`` input that cannot be opened that way is read (the in-memory path reports a
    bad file in its own words)."""
    data = request.inputs[0]
    if engine == "memory":
        return _read(data, request.dtype, request.read_policy), False, engine
    if engine != "auto":
        check_file_input(data, engine)
        check_file_output(request.output, request.fmt, engine)
    try:
        return _declared_input(data, request.read_policy), True, engine
    except PadconvError:
        if engine != "auto":
            raise
    return _read(data, request.dtype, request.read_policy), False, "memory"


def _literal_type(declared: Any, value: Any, entry: Operator, arrays: list[Any]) -> str | None:
    """The element type an inline literal given for the input ``declared`` takes, from the
    operator's declaration (``Input.literal_type``: a type, or an earlier input whose type it
    takes: a zero point ``128`` is read as X's uint8); None for anything that is not a literal
    (a file's stored type is its own)."""
    if declared.literal_type is None or not isinstance(value, str):
        return None
    from padconv_cli.tensorio import classify_source

    if classify_source(value).kind != "literal":
        return None
    names = [i.name for i in entry.data_inputs]
    if declared.literal_type in names:
        earlier = arrays[names.index(declared.literal_type)]
        return None if earlier is None else dtype_of(earlier).name
    return declared.literal_type


def _read(value: Any, dtype: str | None, policy: ReadPolicy | None) -> Any:
    """An input as an array: arrays as given, sources read (:func:`read_tensor`)."""
    import numpy as np

    if value is None or isinstance(value, np.ndarray):
        return value
    from padconv_cli.tensor_sources import read_tensor

    return read_tensor(value, dtype=dtype, policy=policy)


def _resolve(request: Request, entry: Operator, arrays: tuple[Any, ...]) -> ResolvedCall:
    """Defaults, then the model node's values, then the caller's attributes."""
    given = {k: v for k, v in request.attributes.items() if v is not None}
    if request.model is None:
        return plain_call(entry.name, arrays, given)
    from padconv_cli.models import find_node, resolve_call

    origin = find_node(request.model, request.node, entry.name, request.read_policy)
    return resolve_call(entry.name, arrays, given, origin)


def plan_resolved(resolved: ResolvedCall) -> Any:
    """The call's one plan by its operator's planner, with the model node named in errors."""
    from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError
    from padconv_cli.ops import plan_call

    try:
        return plan_call(resolved.call)
    except (AttributeValueError, UnsupportedDtypeError) as error:
        if resolved.origin is None:
            raise
        from padconv_cli.models import with_node_context

        raise with_node_context(resolved.origin, error) from None


def _declared_input(data: str, policy: ReadPolicy | None) -> Any:
    """The ``.npy`` file or Zarr store opened for its declared shape and dtype (not read)."""
    if is_zarr(data):
        from padconv_cli.engines.dask_io import open_block_input

        return open_block_input(data, policy)
    from padconv_cli.outofcore.npy_blocks import open_npy_input

    return open_npy_input(data, policy)


def tiled_fits(call: Any, plan: Any, limit: int) -> bool:
    """True when the tiled engine can cut the call into tiles that fit ``limit`` bytes."""
    from padconv_cli.errors import OutputTooLargeError

    try:
        operator(call.op_type).plan_tiles(call, plan, limit)
    except OutputTooLargeError:
        return False
    return True


def check_output_format(output: str | None, fmt: str | None) -> None:
    """Refuse, before anything runs, an output suffix that contradicts ``fmt`` and, for a
    file that is not a Zarr store, a suffix that names no tensor format (``y.npz``)."""
    if output is None:
        return
    from padconv_cli.tensorio import check_suffix_agrees, resolve_format
    from padconv_cli.tensorio.files import printable

    if "://" in output or is_zarr(output):
        if fmt is not None:
            check_suffix_agrees(printable(output), fmt)
        return
    resolve_format(output, fmt)


# --- engines -----------------------------------------------------------------------------------


def is_zarr(path: Any) -> bool:
    """True for a Zarr store path (``.zarr`` or a folder with Zarr metadata)."""
    if not isinstance(path, str):
        return False
    from padconv_cli.tensorio import is_zarr_path

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


def first_engine(request: Request, engines: tuple[str, ...] = ENGINES) -> str:
    """The engine before sizes are known: ``memory`` for a model node, else the choice (one
    of the operator's ``engines``), or for ``auto`` ``dask`` (Zarr, a scheduler),
    ``memory`` (not a ``.npy`` input and output, or no tiled engine), else ``auto`` (the gate
    chooses by the plan)."""
    if request.model is not None:
        return "memory"
    data = request.inputs[0]
    engine = request.engine
    if engine == "auto" and (is_zarr(data) or is_zarr(request.output) or request.scheduler):
        engine = "dask"
    if engine not in ("auto", *engines):
        raise InputError(f"engine {engine} does not run {request.operator}; it runs on "
                         f"{', '.join(engines)}", param="engine")
    if engine != "auto":
        return engine
    if "tiled" not in engines or not tiled_possible(data, request.output, request.fmt):
        return "memory"
    return "auto"


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
            "read_policy": request.read_policy,
        },
    }
