"""numpy's best float32 GEMM rate, measured in the run, and what it allows each Conv case.

A convolution that does the direct count of F floating-point operations takes at least
``F / peak`` seconds on a machine whose best dense matrix product runs at ``peak`` FLOP/s. So
such an implementation cannot be more than ``t_reference * peak / F`` times faster than the ONNX
reference evaluator: the roofline table puts that bound beside the measured speed-ups. (A fast
algorithm such as Winograd's does fewer operations than F on some kernels; a 1x1 convolution
is one matrix product, with nothing to save.)
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from bench_peers import ORT, PADCONV, REFERENCE

PEAK_SIZE = 2048
PEAK_RUNS = 10
PEAK_WARMUP_S = 0.3


def measure_gemm_peak(size: int = PEAK_SIZE, runs: int = PEAK_RUNS,
                      warmup_s: float = PEAK_WARMUP_S) -> dict[str, Any]:
    """Best GFLOP/s of ``a @ b`` on two float32 ``size x size`` matrices (``2 * size**3`` FLOP),
    numpy's BLAS on all its threads, over ``runs`` timed products after ``warmup_s`` of untimed
    ones. The best, not the median: it is a ceiling, and noise only ever lowers it."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    b = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    out = np.empty_like(a)
    started = time.perf_counter()
    while time.perf_counter() - started < warmup_s:
        np.matmul(a, b, out=out)
    best = float("inf")
    for _ in range(max(1, runs)):
        start = time.perf_counter()
        np.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - start)
    return {"gflops": 2 * size**3 / best / 1e9, "size": size, "runs": max(1, runs)}


def roofline_rows(kernel_rows: list[dict[str, Any]], peak_gflops: float) -> list[dict[str, Any]]:
    """Per Conv case: its GFLOP, the time it takes at the peak (``F / peak``), the share of the
    peak padconv and onnxruntime reach (``time at peak / their time``), their speed-ups over
    onnx.reference and the most a direct convolution could reach at the peak (``t_reference /
    time at peak``). When the reference timed out, its time and the speed-ups are lower bounds
    (``reference_bound``). Cells that were not measured are None."""
    conv_rows = [row for row in kernel_rows if row["kind"] == "conv"]
    rows = []
    for case in dict.fromkeys(row["case"] for row in conv_rows):
        by_peer = {row["peer"]: row for row in conv_rows if row["case"] == case}
        gflop = _case_gflop(by_peer)
        if gflop is None:
            continue
        at_peak = gflop / peak_gflops
        reference, reference_bound = _reference_time(by_peer.get(REFERENCE))
        ours, theirs = by_peer.get(PADCONV), by_peer.get(ORT)
        rows.append({
            "case": case, "label": next(iter(by_peer.values()))["label"], "gflop": gflop,
            "time_at_peak_s": at_peak,
            "padconv_share": _ratio(at_peak, _time_of(ours)),
            "ort_share": _ratio(at_peak, _time_of(theirs)),
            "reference_s": reference, "reference_bound": reference_bound,
            "padconv_speedup": _ratio(reference, _time_of(ours)),
            "ort_speedup": _ratio(reference, _time_of(theirs)),
            "most_speedup": _ratio(reference, at_peak),
        })
    return rows


def unreachable_cases(rows: list[dict[str, Any]], speedup: float) -> dict[str, float]:
    """{case: most speed-up at the peak} for the cases where even that is below ``speedup``
    (a lower bound, from a reference that timed out, proves nothing and is left out)."""
    return {row["case"]: row["most_speedup"] for row in rows
            if row["most_speedup"] is not None and not row["reference_bound"]
            and row["most_speedup"] < speedup}


def _case_gflop(by_peer: dict[str, dict[str, Any]]) -> float | None:
    """The case's GFLOP (throughput * time) from padconv's row, else from any timed peer."""
    timed = [row for row in (by_peer.get(PADCONV), *by_peer.values()) if _time_of(row)]
    for row in timed:
        if row["throughput"]:
            return row["throughput"] * row["median_s"]
    return None


def _reference_time(row: dict[str, Any] | None) -> tuple[float | None, bool]:
    """(seconds, whether a lower bound): the median, or the time-out when the reference ran
    out of time; (None, False) when it has no time."""
    if row and row["status"] == "timeout" and row.get("timed_out_after_s"):
        return row["timed_out_after_s"], True
    return _time_of(row), False


def _time_of(row: dict[str, Any] | None) -> float | None:
    """The median of a row that ran and agreed with padconv, else None."""
    return row["median_s"] if row and row["status"] == "ok" and row["median_s"] else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None
