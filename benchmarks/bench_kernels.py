"""In-process kernel benchmarks: verify every peer against padconv, then time them side by side."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from bench_cases import Case, ConvCase
from bench_peers import PADCONV, PADCONV_OUT, Peer, PeerSkipped, Prepared, primary_peer
from bench_timing import CallTimeout, Contender, Timing, time_round_robin, timed_call

# Conv results are float32 sums of K = C/group * prod(kernel) products of values in [-1, 1);
# different summation orders differ by a few ulps per term at most.
CONV_RTOL = 1e-4
CONV_ATOL_PER_TERM = 2e-6

ROW_KEYS = (
    "case", "kind", "label", "describe", "peer", "status", "median_s", "best_s", "runs",
    "timed_out_after_s", "throughput", "throughput_unit", "ratio", "ratio_bound",
    "max_abs_diff", "note",
)


@dataclass(frozen=True)
class TimingSettings:
    """Repetition settings of one benchmark run."""

    warmup: int
    repeat: int
    budget_s: float


@dataclass
class PeerState:
    """What is known about one peer on one case while the case is being measured."""

    status: str = "ok"
    note: str = ""
    prepared: Prepared | None = None
    output: np.ndarray | None = None
    max_abs_diff: float | None = None
    timing: Timing | None = None


def compare_outputs(
    case: Case, expected: np.ndarray, actual: np.ndarray
) -> tuple[bool, float, str]:
    """(agree, max |difference|, reason) of two results of the same case.

    Pad moves values, so it must be bit-exact; Conv must satisfy
    |actual - expected| <= atol + rtol * |expected| with atol = 2e-6 * C/group * prod(kernel).
    """
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.shape != actual.shape:
        return False, float("nan"), f"shape {actual.shape} != {expected.shape}"
    if expected.dtype != actual.dtype:
        return False, float("nan"), f"dtype {actual.dtype} != {expected.dtype}"
    diff = float(np.max(np.abs(actual.astype(np.float64) - expected))) if expected.size else 0.0
    if isinstance(case, ConvCase):
        atol = CONV_ATOL_PER_TERM * case.reduction_size()
        agree = bool(np.allclose(actual, expected, rtol=CONV_RTOL, atol=atol))
    else:
        agree = bool(np.array_equal(actual, expected))
    return agree, diff, "" if agree else f"values differ (max |diff| = {diff:.3g})"


def measure_case(
    case: Case, peers: list[Peer], settings: TimingSettings, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """Rows (one per peer handling the case kind) of a verified side-by-side timing."""
    inputs = case.make_inputs(rng)
    relevant = [peer for peer in peers if case.kind in peer.kinds]
    states = {peer.name: _prepare(peer, case, inputs) for peer in relevant}
    limits = {peer.name: peer.limits for peer in relevant}
    for name, state in states.items():
        _run_for_verification(state, limits[name].call_timeout_s)
    _verify_against_padconv(case, states)
    contenders = {
        name: Contender(state.prepared.run, limits[name].max_repeat, limits[name].call_timeout_s)
        for name, state in states.items()
        if state.status == "ok" and state.prepared is not None
    }
    timings = time_round_robin(
        contenders, warmup=settings.warmup, repeat=settings.repeat, budget_s=settings.budget_s
    )
    for name, timing in timings.items():
        states[name].timing = timing
        if timing.timed_out_after is not None and not timing.times:
            states[name].status = "timeout"
    for state in states.values():
        state.output = None  # release the big arrays before the next case
    return _rows(case, states)


def _prepare(peer: Peer, case: Case, inputs: dict[str, np.ndarray]) -> PeerState:
    """Prepare the peer's call, turning 'cannot run this' into a skipped/error state."""
    try:
        prepared = peer.prepare(case, inputs)
    except PeerSkipped as exc:
        return PeerState(status="skipped", note=str(exc))
    except Exception as exc:
        return PeerState(status="error", note=f"prepare failed: {_one_line(exc)}")
    return PeerState(prepared=prepared, note=prepared.note)


def _run_for_verification(state: PeerState, timeout_s: float | None) -> None:
    """Run the prepared call once (it doubles as the first warm-up) and keep its output."""
    if state.prepared is None:
        return
    try:
        _, state.output = timed_call(state.prepared.run, timeout_s)
    except CallTimeout:
        state.status, state.note = "timeout", f"single call > {timeout_s:g} s"
        state.timing = Timing(timed_out_after=timeout_s)
    except Exception as exc:
        state.status, state.note = "error", f"run failed: {_one_line(exc)}"


def _verify_against_padconv(case: Case, states: dict[str, PeerState]) -> None:
    """Mark peers disagreeing with padconv as mismatches; padconv too if it disagrees with the
    primary peer (onnxruntime for Conv, numpy.pad for Pad)."""
    ours = states.get(PADCONV)
    if ours is None or ours.status != "ok":
        for name, state in states.items():
            if name != PADCONV and state.status == "ok" and not state.note:
                state.note = "not compared: padconv unavailable"
        return
    for name, state in states.items():
        if name == PADCONV or state.status != "ok" or state.prepared is None:
            continue
        if not state.prepared.comparable:
            continue
        agree, diff, reason = compare_outputs(case, state.output, ours.output)
        state.max_abs_diff = diff
        if not agree:
            state.status, state.note = "mismatch", f"padconv vs {name}: {reason}"
            _shout(case, state.note)
    primary = states.get(primary_peer(case))
    if primary is not None and primary.status == "mismatch":
        # padconv (out=) agreed with padconv, so it disagrees with the primary peer too.
        for state in (ours, states.get(PADCONV_OUT)):
            if state is not None and state.status == "ok":
                state.status, state.note = "mismatch", primary.note
                state.max_abs_diff = primary.max_abs_diff


def _rows(case: Case, states: dict[str, PeerState]) -> list[dict[str, Any]]:
    """The case's rows, then those of its `(out=)` variant when padconv (out=) was timed.

    The variant shares every peer's timing with the case; its own padconv row is
    padconv (out=), so its ratios compare the reused-output call with the same peers.
    """
    base = {name: state for name, state in states.items() if name != PADCONV_OUT}
    rows = _case_rows(case, base)
    if PADCONV_OUT in states:
        variant = replace(case, name=f"{case.name}(out=)", label=f"{case.label} (out=)")
        rows += _case_rows(variant, base | {PADCONV: states[PADCONV_OUT]})
    return rows


def _case_rows(case: Case, states: dict[str, PeerState]) -> list[dict[str, Any]]:
    """One row per peer: status, times, throughput and padconv/peer ratio."""
    ours = states.get(PADCONV)
    our_median = ours.timing.median if ours is not None and ours.timing is not None else None
    rows = []
    for name, state in states.items():
        timing = state.timing or Timing()
        median = timing.median
        row = {
            "case": case.name, "kind": case.kind, "label": case.label,
            "describe": case.describe(), "peer": name, "status": state.status,
            "median_s": median, "best_s": timing.best, "runs": len(timing.times),
            "timed_out_after_s": timing.timed_out_after,
            "max_abs_diff": state.max_abs_diff, "note": state.note,
        }
        row.update(_throughput(case, median))
        row.update(_ratio(our_median, median, timing.timed_out_after, state.status))
        rows.append(row)
    return rows


def _throughput(case: Case, median: float | None) -> dict[str, Any]:
    """GFLOP/s for Conv (2*N*M*C/g*prod(k)*prod(out)), GB/s for Pad ((in + out bytes) / time)."""
    if isinstance(case, ConvCase):
        unit, work = "GFLOP/s", case.flops()
    else:
        unit, work = "GB/s", case.bytes_moved()
    value = work / median / 1e9 if median else None
    return {"throughput": value, "throughput_unit": unit}


def _ratio(
    our_median: float | None, median: float | None, timed_out_after: float | None, status: str
) -> dict[str, Any]:
    """padconv time / peer time; an upper bound ('<') when the peer timed out."""
    if our_median is None or status not in ("ok", "timeout"):
        return {"ratio": None, "ratio_bound": ""}
    if median:
        return {"ratio": our_median / median, "ratio_bound": ""}
    if timed_out_after:
        return {"ratio": our_median / timed_out_after, "ratio_bound": "<"}
    return {"ratio": None, "ratio_bound": ""}


def _shout(case: Case, message: str) -> None:
    print(f"!!! MISMATCH in {case.name}: {message}", file=sys.stderr, flush=True)


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    first = lines[0][:200] if lines else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
