"""``--check``: run the same node through onnx.reference and onnxruntime and compare.

The node is the single-node model of :mod:`padconv_cli.emit` (every data tensor fed as an
input).  Each peer ends in one status:

* ``agree`` / ``disagree``: it ran; its output compared with padconv's by the rule of
  :func:`padconv_cli.verification.compare.compare_arrays` (the peer's output is the expected
  side, so relative errors are relative to it); each element may also differ by the
  operator's error bound (Conv: the dot-product bound ``c * n * eps * sum(|x| * |w|)`` of
  :mod:`padconv_cli.verification.conv_bound`; Pad: none, compared exactly);
* ``refused``: it rejected the inputs while running (padconv accepted them);
* ``unsupported``: it cannot load the model (no kernel for the type, opset too new);
* ``unavailable``: not installed.

The check fails on ``disagree`` and on ``refused``, except where the peer is known to deviate
from the specification (:func:`known_deviation`): then padconv is believed right and a refusal
is only reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.ops import operator
from padconv_cli.ops.protocol import ONNXRUNTIME_PEER, REFERENCE_PEER

REFERENCE = REFERENCE_PEER
ONNXRUNTIME = ONNXRUNTIME_PEER
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
        if self.status == "disagree":
            return True
        return self.status == "refused" and self.known is None

    @property
    def believed_right(self) -> str | None:
        """Which side is believed right when the outcome is not agreement."""
        if self.status == "known deviation":
            return "padconv"
        if self.status not in FAILING:
            return None
        return "padconv" if self.known else "unknown (check against the specification)"


@dataclass
class CheckReport:
    """Every peer's result; ``passed`` unless one of them failed."""

    peers: list[PeerResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no peer disagrees or refuses without a known reason."""
        return not any(peer.failed for peer in self.peers)


def known_deviation(peer: str, call: Any, plan: Any) -> str | None:
    """Why ``peer`` is expected to refuse or differ on this call, or None: the operator's
    ``known_deviation`` (Pad's are listed in :func:`padconv_cli.ops.pad.known_deviation`;
    none is known on Conv: onnxruntime has no ``SAME_*`` auto_pad with dilations above 1, but
    the emitted model writes resolved pads there)."""
    return operator(call.op_type).known_deviation(peer, call, plan)


# --- running the peers -----------------------------------------------------------------------


def _feeds(model: Any, call: Any) -> dict[str, np.ndarray]:
    """Graph input name -> array; strings as object arrays (ONNX strings have no width)."""
    names = [value.name for value in model.graph.input]
    arrays = [np.asarray(a) for a in call.arrays if a is not None]
    return {name: _as_onnx_array(array) for name, array in zip(names, arrays, strict=False)}


def _as_onnx_array(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "U":
        return array.astype(object)
    return array


def _first_line(error: BaseException) -> str:
    """The peer's message on one line; onnxruntime's status prefix is dropped."""
    from padconv_cli.tensorio.files import one_line

    text = str(error)
    _, marker, status = text.partition("Status Message: ")
    return one_line(status if marker else f"{type(error).__name__}: {text}", 160)


def _run_reference(model: Any, feeds: dict[str, np.ndarray]) -> tuple[str, Any]:
    """("ran", output) / ("unsupported" | "refused", message) for onnx.reference."""
    import warnings

    from onnx.reference import ReferenceEvaluator

    try:
        evaluator = ReferenceEvaluator(model)
    except Exception as error:  # the evaluator raises many types for unknown ops or types
        return "unsupported", _first_line(error)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ran", evaluator.run(None, feeds)[0]
    except Exception as error:  # any failure of the peer on these inputs
        return "refused", _first_line(error)


def _run_onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> tuple[str, Any]:
    """("ran", output) / ("unavailable" | "unsupported" | "refused", message)."""
    try:
        import onnxruntime
    except ImportError:
        return "unavailable", "onnxruntime is not installed (pip install 'padconv[check]')"
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # its own error log would duplicate our report on stderr
    try:
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as error:  # onnxruntime raises its own exception types
        return "unsupported", _first_line(error)
    run_options = onnxruntime.RunOptions()
    run_options.log_severity_level = 4
    try:
        return "ran", session.run(None, feeds, run_options)[0]
    except Exception as error:  # onnxruntime raises its own exception types
        return "refused", _first_line(error)


PEERS = {REFERENCE: _run_reference, ONNXRUNTIME: _run_onnxruntime}


def _comparable(array: np.ndarray) -> np.ndarray:
    """Strings compared as object arrays of str, whatever width numpy gave them."""
    array = np.asarray(array)
    return array.astype(object) if array.dtype.kind in "US" else array


def _judge(peer: str, status: str, output: Any, result: np.ndarray, known: str | None,
           rtol: float | None, atol: float | None, bound: np.ndarray | None = None,
           classified: Any = None) -> PeerResult:
    """The peer's status and comparison; ``classified(output)`` names a difference the
    operator explains (then ``known deviation``, not a failure), or None."""
    if status != "ran":
        # a deviation is a note about what the peer did: none for a peer that never ran
        ran = status == "refused"
        return PeerResult(peer, status, str(output), known if ran else None)
    from padconv_cli.verification.compare import compare_arrays

    output = _comparable(output)
    usable = bound if bound is not None and np.shape(output) == np.shape(bound) else None
    comparison = compare_arrays(output, _comparable(result), rtol=rtol, atol=atol, bound=usable)
    verdict = "agree" if comparison.passed else "disagree"
    if verdict == "disagree" and classified is not None:
        verdict, known = "known deviation", classified(output)
        if known is None:
            verdict = "disagree"
    return PeerResult(
        peer, verdict, comparison.reason, known, comparison.max_abs, comparison.max_rel,
        comparison,
    )


def crosscheck(
    call: Any,
    plan: Any,
    result: np.ndarray,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    peers: tuple[str, ...] = (REFERENCE, ONNXRUNTIME),
) -> CheckReport:
    """Run ``call`` (a KernelCall validated as ``plan``) through each peer and compare with
    padconv's ``result`` (module docstring)."""
    from padconv_cli.emit import single_node_model

    model = single_node_model(call, plan)
    feeds = _feeds(model, call)
    entry = operator(call.op_type)
    bound = entry.error_bound(call, plan)
    classified = None
    if entry.classify_difference is not None:
        def classified(output: Any) -> str | None:
            return entry.classify_difference(call, result, np.asarray(output))
    report = CheckReport()
    for peer in peers:
        status, output = PEERS[peer](model, feeds)
        known = known_deviation(peer, call, plan)
        report.peers.append(_judge(peer, status, output, result, known, rtol, atol, bound,
                                   classified))
    return report


# --- rendering -------------------------------------------------------------------------------


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def format_report(report: CheckReport) -> str:
    """One line per peer, then ``check: passed`` or ``check: FAILED``."""
    lines = []
    for peer in report.peers:
        line = f"check: {peer.peer:<15} {peer.status:<11}"
        if peer.status in ("agree", "disagree"):
            line += f" max |diff| {_number(peer.max_abs)}, max rel {_number(peer.max_rel)}"
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
        entry: dict[str, Any] = {
            "peer": peer.peer,
            "status": peer.status,
            "detail": peer.detail,
            "known_deviation": peer.known,
            "believed_right": peer.believed_right,
            "max_abs": peer.max_abs,
            "max_rel": peer.max_rel,
            "conv_bound": bool(peer.comparison is not None and peer.comparison.bounded),
        }
        if peer.comparison is not None and peer.comparison.mismatches:
            entry["mismatches"] = [
                {"index": list(index), "expected": exp, "actual": act}
                for index, exp, act in peer.comparison.mismatches
            ]
        peers.append(entry)
    return {"passed": report.passed, "peers": peers}

