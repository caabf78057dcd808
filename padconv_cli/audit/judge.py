"""Auditing a model: running it once, capturing every audited node, judging each node.

Capture:

* The runtimes get a copy of the model with its external data read by padconv's rules and
  stored inline.
* onnxruntime: the copy outputs every input and output of each audited main-graph node and
  runs once.  Nodes in ``If``/``Loop``/``Scan`` bodies, and all when onnxruntime refuses the
  model, take their inputs from an onnx.reference run and their output from onnxruntime
  running the node alone.
* onnx.reference: audited nodes record their first call, at any depth; one that never ran
  was not reached.
* Both run only the nodes the audited nodes depend on (:func:`dependencies_only`).

Judging: per node, from the captured inputs (stored ones where the run had no value), padconv
computes the node (:mod:`padconv_cli.onnx_nodes`) and compares with the runtime's output as
``--check`` does (``compare_with_peer``: ``atol + rtol*|ref|`` plus the error bound).  Statuses:

* ``ok``: within the bound;  ``outside``: not (exit 1);
* ``known deviation``: outside, in a way the operator explains, padconv right;
* ``not reached``: the run never executed the node (an ``If`` branch not taken);
* ``not run``: the run stopped before the node (exit 1: the node was not checked);
* ``runtime refused``: the runtime refused the node; padconv's result is still checked;
* ``padconv refused``: padconv refused a node the runtime computed (exit 1).

When the two differ (or the runtime refused), the operator's ``reference`` decides: the side
within the bound of it is named right (``padconv``, ``runtime``, ``both`` or ``neither``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.errors import InputError, PadconvError
from padconv_cli.onnx_nodes import is_supported_op
from padconv_cli.ops import compute, operator
from padconv_cli.ops.protocol import ONNXRUNTIME_PEER as ONNXRUNTIME
from padconv_cli.ops.protocol import REFERENCE_PEER as REFERENCE
from padconv_cli.runtimes import (
    first_line,
    onnxruntime_installed,
    ort_run,
    ort_session,
    quiet_reference,
    run_in_onnxruntime,
)
from padconv_cli.verification.compare import compare_with_peer


@dataclass
class NodeCapture:
    """What one node received and produced in the run (``output`` None: not computed)."""

    inputs: list[np.ndarray | None]
    output: np.ndarray | None = None
    refused: str = ""  # the runtime's message when it refused the node
    runtime: str = ""  # which runtime produced ``output``


@dataclass
class Capture:
    """Node key (first output name) -> NodeCapture; ``error`` when the model run failed."""

    runtime: str
    nodes: dict[str, NodeCapture] = field(default_factory=dict)
    error: str = ""


def node_key(node: Any) -> str:
    """A node's key: its first output name (unique in a valid model)."""
    return node.output[0] if node.output else ""


def audited(node: Any) -> bool:
    """True for a node of an operator padconv implements, of the default domain."""
    return is_supported_op(node.op_type, node.domain)


def inline_model(model: Any, path: str) -> Any:
    """A copy of ``model`` with external data read by padconv's rules and stored inline."""
    import os

    from onnx import numpy_helper

    from padconv_cli.models import all_graphs
    from padconv_cli.tensorio.protobuf import tensor_from_proto

    copy = deepcopy(model)
    base_dir = os.path.dirname(os.path.abspath(path))
    for graph in all_graphs(copy.graph):
        for tensor in graph.initializer:
            if tensor.data_location == tensor.EXTERNAL:
                label = f"{path}: initializer {tensor.name!r}"
                array = tensor_from_proto(tensor, label, base_dir)
                tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return copy


def _recording(run: Callable, key: str, nodes: dict[str, NodeCapture]) -> Callable:
    """``run`` of an op implementation, recording the first call's inputs and output."""

    def recorded(*inputs: Any, **kwargs: Any) -> Any:
        if key in nodes:
            return run(*inputs, **kwargs)
        arrays = [None if a is None else np.asarray(a) for a in inputs]
        capture = nodes[key] = NodeCapture(arrays, runtime=REFERENCE)
        try:
            outputs = run(*inputs, **kwargs)
        except Exception as error:  # the evaluator's refusal of this node
            capture.refused = first_line(error)
            raise
        capture.output = np.asarray(outputs[0] if isinstance(outputs, (tuple, list))
                                    else outputs)
        return outputs

    return recorded


def run_reference(model: Any, feeds: Mapping[str, np.ndarray]) -> Capture:
    """Run ``model`` with onnx.reference, recording every audited node's first call."""
    from onnx.reference import ReferenceEvaluator

    capture = Capture(REFERENCE)

    class CapturingEvaluator(ReferenceEvaluator):
        def _init(self) -> None:
            super()._init()
            for implementation in self.rt_nodes_:
                node = implementation.onnx_node
                if audited(node):
                    implementation.run = _recording(implementation.run, node_key(node),
                                                    capture.nodes)

    try:
        quiet_reference(model, CapturingEvaluator).run(None, dict(feeds))
    except Exception as error:  # the evaluator raises many types
        capture.error = first_line(error)
    return capture


def run_onnxruntime(model: Any, feeds: Mapping[str, np.ndarray]) -> Capture:
    """Run ``model`` once with onnxruntime, the main graph's audited values as outputs."""
    from onnx import helper, numpy_helper

    capture = Capture(ONNXRUNTIME)
    nodes = [node for node in model.graph.node if audited(node)]
    stored = {t.name: t for t in model.graph.initializer}
    present = {o.name for o in model.graph.output}
    wanted = dict.fromkeys(n for node in nodes for n in [*node.input, node_key(node)]
                           if n and n not in stored and n not in feeds and n not in present)
    copy = deepcopy(model)
    copy.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in wanted)
    try:
        session = ort_session(copy)
        values = ort_run(session, feeds)
    except Exception as error:  # onnxruntime raises its own exception types
        capture.error = first_line(error)
        return capture
    known: dict[str, Any] = dict(feeds)
    known.update(zip([o.name for o in session.get_outputs()], values, strict=True))
    for node in nodes:
        inputs = [None if not n else np.asarray(known[n]) if n in known
                  else numpy_helper.to_array(stored[n]) for n in node.input]
        capture.nodes[node_key(node)] = NodeCapture(inputs, np.asarray(known[node_key(node)]),
                                                    runtime=ONNXRUNTIME)
    return capture


def _nested(node: Any) -> list[Any]:
    """``node`` and every node of its subgraphs, at any depth."""
    from padconv_cli.models import named_subgraphs

    return [node, *(inner for _, graph in named_subgraphs(node) for child in graph.node
                    for inner in _nested(child))]


def dependencies_only(model: Any) -> Any:
    """``model`` reduced to the main-graph nodes its audited nodes depend on.  Targets (the
    new graph outputs): the outputs of every main-graph node that is or holds an audited node;
    a node is kept when a kept node (or its subgraphs, over-approximated) reads one of its
    outputs, or one is a target."""
    from onnx import helper

    graph = model.graph
    targets = [name for node in graph.node if any(audited(n) for n in _nested(node))
               for name in node.output if name]
    if not targets:
        return model
    needed, kept = set(targets), []
    for node in reversed(graph.node):  # nodes are in topological order in a valid model
        if any(name in needed for name in node.output):
            kept.append(node)
            needed.update(name for inner in _nested(node) for name in inner.input if name)
    if len(kept) == len(graph.node) and [o.name for o in graph.output] == targets:
        return model
    copy = deepcopy(model)
    del copy.graph.node[:]
    copy.graph.node.extend(reversed(kept))
    del copy.graph.output[:]
    copy.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in targets)
    return copy


def capture_model(model: Any, feeds: Mapping[str, np.ndarray], runtime: str,
                  needs_reference: bool) -> tuple[Capture, Capture | None]:
    """(runtime capture, reference capture or None) by the module rules."""
    model = dependencies_only(model)
    if runtime == REFERENCE:
        capture = run_reference(model, feeds)
        return capture, capture
    if not onnxruntime_installed():
        raise InputError("onnxruntime is not installed; use runtime onnx.reference",
                         param="runtime")
    capture = run_onnxruntime(model, feeds)
    reference = run_reference(model, feeds) if needs_reference or capture.error else None
    return capture, reference


OK, OUTSIDE, NOT_REACHED, NOT_RUN = "ok", "outside", "not reached", "not run"
KNOWN = "known deviation"
RUNTIME_REFUSED, PADCONV_REFUSED = "runtime refused", "padconv refused"
FAILING = (OUTSIDE, PADCONV_REFUSED, NOT_RUN)
CHECKED = (OK, OUTSIDE, RUNTIME_REFUSED, KNOWN)  # padconv's result was judged


@dataclass
class NodeAudit:
    """The verdict on one node."""

    label: str
    operator: str
    status: str
    graph: str = "main"
    input_shapes: list[list[int]] = field(default_factory=list)
    output_shape: list[int] | None = None
    dtype: str = ""
    attributes: str = ""
    runtime: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    bound_use: float | None = None  # largest |diff| / allowed difference (<= 1: within)
    mismatches: int = 0
    right: str = ""
    detail: str = ""
    notes: list[str] = field(default_factory=list)
    # (node, opset, inputs, padconv's output) when the audit keeps them (audit --save)
    arrays: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def failed(self) -> bool:
        """True for ``outside``, ``padconv refused`` and ``not run``."""
        return self.status in FAILING


@dataclass
class AuditReport:
    """Every node's verdict, the runtime used and where the inputs came from."""

    model: str
    runtime: str
    opset: int
    inputs: dict[str, str]
    nodes: list[NodeAudit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def checked(self) -> int:
        """How many nodes had padconv's result judged (ok, outside, runtime refused...)."""
        return sum(1 for node in self.nodes if node.status in CHECKED)

    @property
    def passed(self) -> bool:
        """At least one node checked; none outside the bound, none refused by padconv, none
        left unrun (a run that checked nothing did not pass)."""
        return self.checked > 0 and not any(node.failed for node in self.nodes)

    def counts(self) -> dict[str, int]:
        """Number of nodes per status, in order of first appearance."""
        return dict(Counter(node.status for node in self.nodes))


def _shape(array: Any) -> list[int]:
    return [int(d) for d in np.shape(array)]


def _inputs(origin: Any, captured: NodeCapture) -> list[np.ndarray | None]:
    """The node's inputs: captured values, else the model's stored ones, None if omitted."""
    values = []
    for index, name in enumerate(origin.node.input):
        value = captured.inputs[index] if index < len(captured.inputs) else None
        values.append(origin.constant(index) if value is None and name else value)
    return values


def _within(reference: np.ndarray, side: np.ndarray, bound: Any) -> bool:
    """``side`` within ``bound`` and its type's default tolerances of the reference (exactly
    when there is no bound)."""
    from padconv_cli.verification.compare import default_tolerances

    if bound is None:
        return compare_with_peer(reference.astype(side.dtype), side, None).passed
    rtol, atol = default_tolerances(side.dtype)
    return compare_with_peer(reference, side.astype(np.float64), bound, rtol, atol).passed


def _who_is_right(call: Any, ours: np.ndarray, theirs: np.ndarray | None, bound: Any) -> str:
    """``padconv``, ``runtime``, ``both`` or ``neither``: who is within the bound of the
    operator's ``reference`` (Conv in float64, Pad by its index definition)."""
    reference = operator(call.op_type).reference(call)
    ours_ok = _within(reference, ours, bound)
    if theirs is None:
        return "padconv" if ours_ok else "neither"
    theirs_ok = _within(reference, np.asarray(theirs), bound)
    return ("neither", "runtime", "padconv", "both")[2 * ours_ok + theirs_ok]


def _bound_use(comparison: Any, theirs: np.ndarray, ours: np.ndarray, bound: Any) -> float:
    """Largest |diff| / (atol + rtol*|ref| + bound) over the finite elements."""
    ref = np.asarray(theirs).astype(np.float64)
    diff = np.abs(np.asarray(ours).astype(np.float64) - ref)
    allowed = comparison.atol + comparison.rtol * np.abs(ref)
    if bound is not None and np.shape(bound) == ref.shape:
        allowed = allowed + bound
    finite = np.isfinite(diff) & (diff > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.max(diff[finite] / allowed[finite], initial=0.0))


def judge_node(origin: Any, captured: NodeCapture | None, where: str,
               keep: bool = False) -> NodeAudit:
    """The verdict on one node (module rules)."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.onnx_nodes import call_for_node

    audit = NodeAudit(origin.label, origin.operator, NOT_REACHED, where)
    if captured is None:
        return audit
    inputs = _inputs(origin, captured)
    audit.input_shapes = [_shape(a) for a in inputs if a is not None]
    audit.runtime = captured.runtime
    theirs = captured.output
    try:
        call = call_for_node(origin.node, inputs, opset=origin.opset, source=origin.path,
                             label=origin.label)
        audit.attributes, audit.notes = call.describe(), list(call.notes)
        ours = np.asarray(compute(call))
    except PadconvError as error:
        audit.status, audit.detail = (PADCONV_REFUSED, str(error)) if theirs is not None \
            else (RUNTIME_REFUSED, f"both refused: {error}")
        return audit
    except (ArithmeticError, ValueError, TypeError, IndexError, RuntimeError) as error:
        # a kernel bug: reported as this node's failure, the audit of the others goes on
        audit.status = PADCONV_REFUSED
        audit.detail = f"padconv crashed: {type(error).__name__}: {error}"
        return audit
    audit.output_shape, audit.dtype = _shape(ours), dtype_name(ours.dtype)
    if keep:
        audit.arrays = (origin.node, origin.opset, inputs, ours)
    bound = operator(call.op_type).error_bound(call, None)
    if theirs is None:
        audit.status, audit.detail = RUNTIME_REFUSED, captured.refused
        audit.right = _who_is_right(call, ours, None, bound)
        return audit
    comparison = compare_with_peer(theirs, ours, bound)
    audit.max_abs, audit.max_rel = comparison.max_abs, comparison.max_rel
    audit.mismatches = comparison.mismatch_count
    if comparison.passed:
        audit.status = OK
        if comparison.max_abs is not None:
            audit.bound_use = _bound_use(comparison, theirs, ours, bound)
        return audit
    audit.status, audit.detail = OUTSIDE, comparison.reason
    audit.right = _who_is_right(call, ours, theirs, bound)
    classify = operator(call.op_type).classify_difference
    known = classify(call, ours, np.asarray(theirs)) if audit.right == "padconv" and classify \
        else None
    if known is not None:
        audit.status, audit.detail = KNOWN, known
    return audit


def _fill_single_nodes(capture: Capture, reference: Capture | None, origins: list) -> None:
    """Nodes the onnxruntime run did not capture: inputs from the reference run, output from
    onnxruntime running the node alone (or its refusal)."""
    from padconv_cli.verification.onnx_suite import single_node_model

    if capture.runtime == REFERENCE or reference is None:
        return
    for origin in origins:
        key = node_key(origin.node)
        if key in capture.nodes or key not in reference.nodes:
            continue
        inputs = _inputs(origin, reference.nodes[key])
        feeds = {name: array for name, array in zip(origin.node.input, inputs, strict=False)
                 if name and array is not None}
        model = single_node_model(origin.node, inputs, None, origin.opset)
        status, output = run_in_onnxruntime(model, feeds)
        ran = status == "ran"
        capture.nodes[key] = NodeCapture(inputs, np.asarray(output) if ran else None,
                                         "" if ran else output, capture.runtime)


def audit_model(path: str, given: Sequence[str] = (), *, runtime: str | None = None,
                seed: int = 0, dims: dict[str, int] | None = None,
                progress: Callable[[int, int, str], None] | None = None,
                keep_arrays: bool = False) -> AuditReport:
    """Audit every node of an operator padconv implements in the model at ``path``: ``given``
    INPUT words (``NAME=SOURCE`` or positional), ``runtime`` onnxruntime (when installed) or
    onnx.reference, ``progress(done, total, label)`` after each node, ``keep_arrays`` keeps
    each node's inputs and padconv's output on its verdict (``arrays``)."""
    from padconv_cli.audit.inputs import model_feeds
    from padconv_cli.models import load_model, model_nodes, model_opset

    model = load_model(path)
    opset = model_opset(model, path)
    if runtime is None:
        runtime = ONNXRUNTIME if onnxruntime_installed() else REFERENCE
    feeds, origins_text = model_feeds(model, given, dims or {}, seed, path)
    origins = model_nodes(path)
    in_bodies = any(origin.graph != "main" for origin in origins)
    capture, reference = capture_model(inline_model(model, path), feeds, runtime, in_bodies)
    report = AuditReport(path, runtime, opset, origins_text)
    _model_level_notes(report, capture, reference)
    _fill_single_nodes(capture, reference, origins)
    error = reference.error if reference is not None else ""  # the reference run's own stop
    stopped = f"onnx.reference stopped before this node ({error})" if error else ""
    for done, origin in enumerate(origins, 1):
        captured = capture.nodes.get(node_key(origin.node))
        audit = judge_node(origin, captured, origin.graph, keep_arrays)
        if captured is None and stopped:
            audit.status, audit.detail = NOT_RUN, stopped
        report.nodes.append(audit)
        if progress is not None:
            progress(done, len(origins), origin.label)
    return report


def _model_level_notes(report: AuditReport, capture: Capture, reference: Capture | None) -> None:
    """Notes on a runtime that refused or stopped the whole model."""
    if capture.error and capture.runtime != REFERENCE:
        report.notes.append(
            f"{capture.runtime} refused the model ({capture.error}); node inputs come from "
            f"onnx.reference and each node ran alone in {capture.runtime}"
        )
    elif capture.error:
        report.notes.append(f"{capture.runtime} stopped ({capture.error}); nodes after that "
                            "point are not run")
    if reference is not None and reference is not capture and reference.error:
        report.notes.append(f"onnx.reference stopped ({reference.error})")

