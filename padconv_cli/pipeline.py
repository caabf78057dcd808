"""The operator pipeline as a library: open -> resolve -> plan -> gate (it chooses the
engine) -> execute -> write (``docs/architecture.md``); explain, emit and check are calls on
the planned call (:class:`Planned`)::

    from padconv_cli.pipeline import Request, run
    run(Request("Pad", ("x.npy",), {"pads": [0, 1, 0, 1]}, output="y.zarr", engine="dask"))
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from padconv_cli.errors import InputError, OutputError, OutputTooLargeError, PadconvError
from padconv_cli.ops import Operator, ResolvedCall, dtype_of, operator, plain_call, shape_of

if TYPE_CHECKING:
    import numpy as np

    from padconv_cli.tensorio.files import ReadPolicy

ENGINES = ("auto", "memory", "tiled", "dask")


class Request(NamedTuple):
    """One operator call: ``attributes`` hold only what the caller gave, in kernel terms;
    ``model``/``node`` name a model node whose values come first."""

    operator: str
    inputs: tuple[Any, ...]
    attributes: Mapping[str, Any] = MappingProxyType({})  # immutable: one default for all
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


class Outcome(NamedTuple):
    """What a call did: the engine, the plan, the result (in memory) or the tiled result."""

    engine: str
    plan: Any = None
    resolved: Any = None
    result: np.ndarray | None = None
    tiled: Any = None
    string_dtype: np.dtype | None = None  # the fixed width of a wide string result held as str


def run(request: Request, *, write: bool = True,
        note: Callable[[str], None] | None = None) -> Outcome:
    """Plan, gate, execute and (with ``write``) write ``request``'s result to its output (a
    path, or ``-`` for stdout); ``note`` receives a model node's remarks."""
    planned = plan(request, note=note)
    planned.gate()
    return planned.execute(write=write)


class Planned:
    """A call opened, resolved and planned; the steps after the plan are its methods."""

    __slots__ = ("request", "entry", "resolved", "plan", "engine", "declared")

    def __init__(self, request: Request, entry: Operator, resolved: ResolvedCall, plan: Any,
                 engine: str, declared: bool = False) -> None:
        self.request, self.entry, self.resolved, self.plan = request, entry, resolved, plan
        self.engine = engine  # as known before the gate (``auto``: chosen by the gate)
        self.declared = declared  # the data input is opened for its declared shape, not read

    @property
    def call(self) -> Any:
        """The resolved :class:`~padconv_cli.ops.KernelCall`."""
        return self.resolved.call

    @property
    def written_format(self) -> str:
        """``pb`` or ``npy``: ``fmt`` as the writer reads it, else ``pb`` for a ``.pb`` suffix."""
        output, fmt = self.request.output, self.request.fmt
        if fmt is not None:
            from padconv_cli.tensorio import STDOUT_TARGET, resolve_format

            return resolve_format(STDOUT_TARGET, fmt)
        return "pb" if output not in (None, "-") and output.lower().endswith(".pb") else "npy"

    def output_dtype(self) -> np.dtype:
        """The result's element type, by the operator's rule."""
        return self.entry.output_dtype(dtype_of(self.call.arrays[0]), self.call.attributes,
                                       self.plan)

    def memory_limit(self) -> int:
        """The request's ``memory_limit``, else half of the memory available."""
        from padconv_cli.resources import default_memory_limit

        limit = self.request.memory_limit
        return default_memory_limit() if limit is None else limit

    def needs(self) -> Any:
        """The in-memory run's :class:`~padconv_cli.resources.Needs` (explain, the gate)."""
        call = self.call
        return self.entry.needs(call.arrays, self.plan, dtype_of(call.arrays[0]),
                                call.attributes, self.written_format)

    def gate(self) -> str:
        """The one resource gate; returns the engine it chose (:meth:`foreseen_engine`): in
        memory :meth:`needs` within the limits; out of core a representable result within
        max_output_bytes and the free disk space."""
        from padconv_cli.resources import Needs, check_call

        request = self.request
        self.engine = self.foreseen_engine()
        if self.engine == "memory":
            needs, limit = self.needs(), self.memory_limit()
            check_call(needs, request.max_output_bytes, limit,
                       tiled_possible=self._tiled_hint(needs, limit))
            return self.engine
        from padconv_cli.outofcore.npy_blocks import check_disk_space

        dtype = self.output_dtype()
        check_element_width(dtype, request.engine)
        shape = tuple(self.plan.output_shape)
        needs = Needs(0, math.prod(shape) * dtype.itemsize, 0, shape, dtype.name, dtype.itemsize)
        check_call(needs, request.max_output_bytes, in_memory=False)
        check_disk_space(request.output, shape, dtype)
        return self.engine

    def _tiled_hint(self, needs: Any, limit: int) -> bool:
        """True when a refusal may say the tiled engine would take the call (no model, ``.npy``
        input and output, and its smallest tile fits)."""
        request = self.request
        if self.resolved.origin is not None or "tiled" not in self.entry.engines:
            return False
        if not (is_npy_file(request.inputs[0]) and is_npy_target(request.output, request.fmt)):
            return False
        if needs.total <= limit:
            return True
        try:
            self.entry.plan_tiles(self.call, self.plan, limit)
        except OutputTooLargeError:
            return False
        return True

    def execute(self, write: bool = True) -> Outcome:
        """Run the call on the gated engine; in memory, write the result unless ``write`` is
        False."""
        request = self.request
        if self.engine in ("tiled", "dask"):
            source, *others = self.call.arrays
            settings = _engine_settings(request, self.memory_limit())
            tiled = self.entry.run_engine(self.engine, source, others, self.plan,
                                          self.call.attributes, settings)
            return Outcome(self.engine, self.plan, self.resolved, tiled=tiled)
        self._read_declared()
        result = self.entry.run(self.plan, self.call.arrays, self.call.attributes)
        dtype = self.output_dtype()
        wide_strings = result.dtype.kind == "O" and dtype.kind in "US"  # held as python strings
        outcome = Outcome("memory", self.plan, self.resolved, result,
                          string_dtype=dtype if wide_strings else None)
        if write and request.output is not None:
            from padconv_cli.tensorio import write_tensor

            fmt = request.fmt or ("npy" if request.output == "-" else None)
            write_tensor(outcome.result, request.output, fmt=fmt,
                         string_dtype=outcome.string_dtype)
        return outcome

    def _read_declared(self) -> None:
        """Read the declared data input in full, once; re-plan if its shape changed since."""
        if not self.declared:
            return
        call = self.call
        data = _read(self.request.inputs[0], self.request.dtype, self.request.read_policy)
        arrays = (data, *call.arrays[1:])
        self.resolved = self.resolved._replace(call=call._replace(arrays=arrays))
        self.declared = False
        if shape_of(data) != shape_of(call.arrays[0]):  # the file changed since it was opened
            self.plan = plan_resolved(self.resolved)

    def explain(self, flags: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
        """What the call will do (:mod:`padconv_cli.explain`); ``flags``: the attributes
        given on the command line."""
        from padconv_cli.explain import explanation

        return explanation(self.resolved, self.plan, flags, self.written_format,
                           self.foreseen_engine(), self.memory_limit())

    def foreseen_engine(self) -> str:
        """The engine the gate would choose: ``auto`` is ``memory`` within ``memory_limit``,
        else ``tiled``."""
        if self.engine != "auto":
            return self.engine
        return "memory" if self.needs().total <= self.memory_limit() else "tiled"

    def emit(self, path: str, with_data: bool = False) -> None:
        """Write the call's single-node ONNX model to ``path``; ``with_data`` stores every
        given data tensor as an initializer."""
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


def plan(request: Request, note: Callable[[str], None] | None = None) -> Planned:
    """Open the inputs (one that may run out of core for its declared shape only), resolve the
    call (defaults, the model node's values, the caller's) and plan it once; ``note`` receives
    a model node's remarks."""
    check_output_format(request.output, request.fmt)
    entry = operator(request.operator)
    data, declared, engine = _open_data(request, first_engine(request, entry.engines))
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
    """The data input, whether it was opened for its declared shape only, and the engine (an
    ``auto`` input that cannot be opened that way is read, in memory)."""
    data = request.inputs[0]
    if engine == "memory":
        return _read(data, request.dtype, request.read_policy), False, engine
    if engine != "auto":
        check_engine_files(request, engine)
    try:
        if is_zarr(data):
            from padconv_cli.engines.dask_io import open_block_input

            return open_block_input(data, request.read_policy), True, engine
        from padconv_cli.outofcore.npy_blocks import open_npy_input

        return open_npy_input(data, request.read_policy), True, engine
    except PadconvError:
        if engine != "auto":
            raise
    return _read(data, request.dtype, request.read_policy), False, "memory"


def _literal_type(declared: Any, value: Any, entry: Operator, arrays: list[Any]) -> str | None:
    """The type an inline literal for ``declared`` takes (``Input.literal_type``)."""
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
    import numpy as np

    if value is None or isinstance(value, np.ndarray):
        return value
    from padconv_cli.tensor_sources import read_tensor

    return read_tensor(value, dtype=dtype, policy=policy)


def _resolve(request: Request, entry: Operator, arrays: tuple[Any, ...]) -> ResolvedCall:
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

        raise with_node_context(resolved.origin, error, resolved.overridden) from None


def check_output_format(output: str | None, fmt: str | None) -> None:
    """Refuse an output suffix that contradicts ``fmt`` or (not a Zarr store) names no tensor
    format (``y.npz``), before anything runs."""
    if output is None:
        return
    from padconv_cli.tensorio import check_suffix_agrees, resolve_format
    from padconv_cli.tensorio.files import printable

    if "://" in output or is_zarr(output):
        if fmt is not None:
            check_suffix_agrees(printable(output), fmt)
        return
    resolve_format(output, fmt)


def is_zarr(path: Any) -> bool:
    """True for a Zarr store path (``.zarr`` or a folder with Zarr metadata)."""
    from padconv_cli.tensorio import is_zarr_path

    return isinstance(path, str) and is_zarr_path(path)


def is_npy_file(source: Any) -> bool:
    """True for an existing ``.npy`` file."""
    return isinstance(source, str) and source.lower().endswith(".npy") and os.path.isfile(source)


def is_npy_target(output: str | None, fmt: str | None) -> bool:
    """True when the output is a ``.npy`` file (by ``fmt`` or its suffix)."""
    if output in (None, "-"):
        return False
    return fmt == "npy" or (fmt is None and os.path.splitext(output)[1].lower() in (".npy", ""))


def first_engine(request: Request, engines: tuple[str, ...] = ENGINES) -> str:
    """The engine before sizes are known: ``memory`` for a model node, else the one asked for
    (of the operator's ``engines``); ``auto`` is ``dask`` for Zarr or a scheduler, ``memory``
    unless ``.npy`` in and out and a tiled engine, else ``auto`` (the gate chooses)."""
    if request.model is not None:
        return "memory"
    data, engine = request.inputs[0], request.engine
    if engine == "auto" and (is_zarr(data) or is_zarr(request.output) or request.scheduler):
        engine = "dask"
    if engine not in ("auto", *engines):
        raise InputError(f"engine {engine} does not run {request.operator}; it runs on "
                         f"{', '.join(engines)}", param="engine")
    if engine != "auto":
        return engine
    tiled_possible = is_npy_file(data) and is_npy_target(request.output, request.fmt)
    return "auto" if "tiled" in engines and tiled_possible else "memory"


def check_element_width(dtype: np.dtype, engine: str) -> None:
    """Out-of-core engines hold whole elements: a string element wider than
    ``STRING_CHUNK_BYTES`` is left to the in-memory engine."""
    from padconv_cli.tensorio.npy import STRING_CHUNK_BYTES
    from padconv_cli.units import human_bytes

    if dtype.kind in "US" and dtype.itemsize > STRING_CHUNK_BYTES:
        raise OutputTooLargeError(
            f"strings of {dtype.str} take {human_bytes(dtype.itemsize)} per element, and engine "
            f"{engine} holds at most {human_bytes(STRING_CHUNK_BYTES)} per element; engine "
            "memory writes such strings in pieces", param="engine")


def check_engine_files(request: Request, engine: str) -> None:
    """The out-of-core engines read and write a ``.npy`` file (dask: or a Zarr store)."""
    data, output, zarr = request.inputs[0], request.output, engine == "dask"
    accepted = ".npy file or a Zarr store" if zarr else ".npy file"
    if not data or not (is_npy_file(data) or (zarr and is_zarr(data))):
        raise InputError(f"{data}: not a {accepted}; engine {engine} reads its input from a "
                         f"{accepted}", param="engine")
    if (output is not None and zarr and is_zarr(output)) or is_npy_target(output, request.fmt):
        return
    example = "output FILE.npy or output STORE.zarr" if zarr else "output FILE.npy"
    raise OutputError(f"{output or 'stdout'}: not a {accepted}; engine {engine} writes a "
                      f"{accepted}, give {example}", param=("engine", "output"))


def _engine_settings(request: Request, limit: int) -> dict[str, Any]:
    return {"output": request.output, "source_path": request.inputs[0], "memory_limit": limit,
            "show_progress": request.show_progress,
            "dask": {"memory_limit": request.memory_limit, "fallback_limit": limit,
                     "scheduler": request.scheduler, "show_progress": request.show_progress,
                     "verbose": request.verbose, "read_policy": request.read_policy}}
