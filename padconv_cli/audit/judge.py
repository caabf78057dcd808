"""Judging each audited node: padconv's recomputation against the runtime's output.

Per node, from the captured inputs (stored ones where the run had no value), padconv computes
the node (:mod:`padconv_cli.onnx_nodes`) and compares with the runtime's output as ``--check``
does (``compare_with_peer``: ``atol + rtol*|ref|`` plus the error bound).  Statuses:

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.audit.capture import REFERENCE, Capture, NodeCapture, node_key
from padconv_cli.errors import PadconvError
from padconv_cli.ops import compute, operator
from padconv_cli.verification.compare import compare_with_peer

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
    from padconv_cli.runtimes import run_in_onnxruntime
    from padconv_cli.verification.case_folder import single_node_model

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
    from padconv_cli.audit.capture import ONNXRUNTIME, capture_model, inline_model
    from padconv_cli.audit.inputs import model_feeds
    from padconv_cli.models import load_model, model_nodes, model_opset
    from padconv_cli.runtimes import onnxruntime_installed

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

