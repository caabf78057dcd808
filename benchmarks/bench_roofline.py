"""The machine's float32 GEMM peak, measured in the run, and what it allows each Conv case.

A Conv case of F floating-point operations takes at least ``F / peak`` seconds on a machine
whose best dense matrix product runs at ``peak`` FLOP/s, whatever the implementation. So no
implementation can be more than ``t_reference * peak / F`` times faster than the ONNX reference
evaluator on it: the roofline table puts that bound beside the measured speed-ups.
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
    peak padconv and onnxruntime reach (``time at peak / their time``), the speed-ups over
    onnx.reference they reach and the most any implementation could (``t_reference / time at
    peak``). Cells that were not measured are None."""
    conv_rows = [row for row in kernel_rows if row["kind"] == "conv"]
    rows = []
    for case in dict.fromkeys(row["case"] for row in conv_rows):
        by_peer = {row["peer"]: row for row in conv_rows if row["case"] == case}
        ours = by_peer.get(PADCONV)
        if ours is None or not ours["median_s"] or not ours["throughput"]:
            continue
        gflop = ours["throughput"] * ours["median_s"]
        at_peak = gflop / peak_gflops
        reference = _time_of(by_peer.get(REFERENCE))
        rows.append({
            "case": case, "label": ours["label"], "gflop": gflop, "time_at_peak_s": at_peak,
            "padconv_share": at_peak / ours["median_s"],
            "ort_share": _share(at_peak, by_peer.get(ORT)),
            "reference_s": reference,
            "padconv_speedup": reference / ours["median_s"] if reference else None,
            "ort_speedup": _speedup(reference, by_peer.get(ORT)),
            "most_speedup": reference / at_peak if reference else None,
        })
    return rows


def unreachable_cases(rows: list[dict[str, Any]], speedup: float) -> dict[str, float]:
    """{case: most speed-up at the peak} for the cases where even that is below ``speedup``."""
    return {row["case"]: row["most_speedup"] for row in rows
            if row["most_speedup"] is not None and row["most_speedup"] < speedup}


def _time_of(row: dict[str, Any] | None) -> float | None:
    return row["median_s"] if row and row["status"] == "ok" and row["median_s"] else None


def _share(at_peak: float, row: dict[str, Any] | None) -> float | None:
    time_taken = _time_of(row)
    return at_peak / time_taken if time_taken else None


def _speedup(reference: float | None, row: dict[str, Any] | None) -> float | None:
    time_taken = _time_of(row)
    return reference / time_taken if reference and time_taken else None
