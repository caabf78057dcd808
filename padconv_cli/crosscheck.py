"""Judging padconv's result against onnx.reference and onnxruntime (``--check`` and audit).

``--check`` runs the single-node model of :mod:`padconv_cli.emit` in each peer, which ends in
``agree``/``disagree`` (it ran; compared by ``verification.compare.compare_arrays``, the
peer's output the expected side, plus the operator's error bound: Conv's
``c*n*eps*sum(|x|*|w|)``, none for Pad and integer results), ``known deviation`` (a
difference the operator's ``classify_difference`` explains), ``refused`` (it rejected the
inputs), ``unsupported`` (it cannot load the model) or ``unavailable`` (not installed).
The check fails on ``disagree`` and ``refused``, except where the peer is known to deviate
from the specification (:func:`known_deviation`): then padconv is believed right.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.emit import single_node_model
from padconv_cli.ops import operator
from padconv_cli.ops.protocol import ONNXRUNTIME_PEER as ONNXRUNTIME
from padconv_cli.ops.protocol import REFERENCE_PEER as REFERENCE
from padconv_cli.runtimes import onnx_array, run_in_onnxruntime, run_in_reference
from padconv_cli.verification.compare import compare_with_peer, format_error

FAILING = ("disagree", "refused")


@dataclass
class PeerResult:
    """What one peer said about the call."""

    peer: str
    status: str
    detail: str = ""
    known: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    comparison: Any = None

    @property
    def failed(self) -> bool:
        """A disagreement, or a refusal the known deviations do not explain."""
        return self.status == "disagree" or (self.status == "refused" and self.known is None)

    @property
    def believed_right(self) -> str | None:
        """Which side is believed right when the outcome is not agreement."""
        if self.status == "known deviation" or (self.status in FAILING and self.known):
            return "padconv"
        return "unknown (check against the specification)" if self.status in FAILING else None


@dataclass
class CheckReport:
    """Every peer's result; ``passed`` unless one of them failed."""

    peers: list[PeerResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no peer disagrees or refuses without a known reason."""
        return not any(peer.failed for peer in self.peers)


def known_deviation(peer: str, call: Any, plan: Any) -> str | None:
    """Why ``peer`` is expected to refuse or differ on this call (the operator's
    ``known_deviation``), or None."""
    return operator(call.op_type).known_deviation(peer, call, plan)


PEERS = {REFERENCE: run_in_reference, ONNXRUNTIME: run_in_onnxruntime}


def _judge(peer: str, status: str, output: Any, call: Any, result: np.ndarray,
           known: str | None, bound: np.ndarray | None, rtol: float | None,
           atol: float | None) -> PeerResult:
    """The peer's status and comparison (module rules)."""
    if status != "ran":
        # a deviation is a note about what the peer did: none for a peer that never ran
        return PeerResult(peer, status, str(output), known if status == "refused" else None)
    comparison = compare_with_peer(output, result, bound, rtol, atol)
    verdict = "agree" if comparison.passed else "disagree"
    classify = operator(call.op_type).classify_difference
    if verdict == "disagree" and classify is not None:
        known = classify(call, result, np.asarray(output))
        verdict = "disagree" if known is None else "known deviation"
    return PeerResult(peer, verdict, comparison.reason, known, comparison.max_abs,
                      comparison.max_rel, comparison)


def crosscheck(call: Any, plan: Any, result: np.ndarray, *, rtol: float | None = None,
               atol: float | None = None) -> CheckReport:
    """Run ``call`` (a KernelCall validated as ``plan``) through each peer and compare with
    padconv's ``result`` (module rules)."""
    model = single_node_model(call, plan)
    names = [value.name for value in model.graph.input]
    arrays = [onnx_array(a) for a in call.arrays if a is not None]
    feeds = dict(zip(names, arrays, strict=False))
    bound = operator(call.op_type).error_bound(call, plan)
    return CheckReport([_judge(peer, *run(model, feeds), call, result,
                               known_deviation(peer, call, plan), bound, rtol, atol)
                        for peer, run in PEERS.items()])


# --- rendering -------------------------------------------------------------------------------


def format_report(report: CheckReport) -> str:
    """One line per peer, then ``check: passed`` or ``check: FAILED``."""
    lines = []
    for peer in report.peers:
        line = f"check: {peer.peer:<15} {peer.status:<11}"
        if peer.status in ("agree", "disagree"):
            line += (f" max |diff| {format_error(peer.max_abs)}, "
                     f"max rel {format_error(peer.max_rel)}")
        if peer.detail and peer.status != "agree":
            line += f" {peer.detail}"
        if peer.known and peer.status != "agree":
            line += f" [known deviation: {peer.known}]"
        if peer.believed_right:
            line += f" [believed right: {peer.believed_right}]"
        lines.append(line.rstrip())
    lines.append("check: passed" if report.passed else "check: FAILED")
    return "\n".join(lines)


def report_dict(report: CheckReport) -> dict[str, Any]:
    """The report as a dict for :func:`padconv_cli.json_output.dumps`."""
    peers = []
    for peer in report.peers:
        comparison = peer.comparison
        entry: dict[str, Any] = {
            "peer": peer.peer, "status": peer.status, "detail": peer.detail,
            "known_deviation": peer.known, "believed_right": peer.believed_right,
            "max_abs": peer.max_abs, "max_rel": peer.max_rel,
            "conv_bound": bool(comparison is not None and comparison.bounded)}
        if comparison is not None and comparison.mismatches:
            entry["mismatches"] = comparison.mismatch_records()
        peers.append(entry)
    return {"passed": report.passed, "peers": peers}
