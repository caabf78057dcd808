"""The performance targets, each judged from the measured rows as MET, MISSED or NOT MEASURED."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from bench_peers import NUMPY_PAD, ORT, PADCONV, REFERENCE, STRIDED_COPY
from bench_roofline import unreachable_cases

MET, MISSED, NOT_MEASURED = "MET", "MISSED", "NOT MEASURED"

CONV_GEOMEAN_MAX = 1.0
CONV_WORST_MAX = 2.0
REFERENCE_MIN_SPEEDUP = 50.0
COPY_FLOOR_MAX = 1.3
STARTUP_MAX = 1.5
MIB = 1024 * 1024


def _target(name: str, status: str, measured: str) -> dict[str, str]:
    return {"target": name, "status": status, "measured": measured}


def ratios_against(rows: Iterable[dict], kind: str, peer: str) -> tuple[dict, dict]:
    """({case: (padconv/peer ratio, bound)}, {case: why there is no ratio}) for one peer."""
    rows = list(rows)
    ours = {row["case"]: row for row in rows if row["kind"] == kind and row["peer"] == PADCONV}
    ratios, missing = {}, {}
    for row in rows:
        if row["kind"] != kind or row["peer"] != peer:
            continue
        if row["ratio"] is not None:
            ratios[row["case"]] = (row["ratio"], row["ratio_bound"])
            continue
        own = ours.get(row["case"])
        reason_row = row if own is None or own["status"] == "ok" else own
        who = reason_row["peer"]
        missing[row["case"]] = f"{who} {reason_row['status']}: {reason_row['note']}".rstrip(": ")
    for case in ours:
        if case not in ratios and case not in missing:
            missing[case] = f"{peer} not run"
    return ratios, missing


def geometric_mean(values: Iterable[float]) -> float:
    """exp(mean(log v))."""
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _unmeasured_status(missing: dict[str, str]) -> str:
    """MISSED when padconv itself failed (wrong result or error), else NOT MEASURED."""
    padconv_failed = any(
        reason.startswith((f"{PADCONV} mismatch", f"{PADCONV} error"))
        for reason in missing.values()
    )
    return MISSED if padconv_failed else NOT_MEASURED


def _missing_text(missing: dict[str, str]) -> str:
    return "; ".join(f"{case}: {reason}" for case, reason in missing.items())


def conv_vs_ort_targets(rows: list[dict]) -> list[dict[str, str]]:
    """Geo-mean of padconv/onnxruntime over the Conv cases <= 1.0, and no case above 2.0."""
    ratios, missing = ratios_against(rows, "conv", ORT)
    names = ("Conv: geo-mean padconv/onnxruntime <= 1.0",
             "Conv: no case padconv/onnxruntime > 2.0")
    if not ratios and not missing:
        return [_target(name, NOT_MEASURED, "no Conv case run") for name in names]
    if missing:
        status = _unmeasured_status(missing)
        return [_target(name, status, _missing_text(missing)) for name in names]
    geo = geometric_mean(ratio for ratio, _ in ratios.values())
    worst_case, (worst, _) = max(ratios.items(), key=lambda item: item[1][0])
    return [
        _target(names[0], MET if geo <= CONV_GEOMEAN_MAX else MISSED,
                f"{geo:.2f} over {len(ratios)} case{'' if len(ratios) == 1 else 's'}"),
        _target(names[1], MET if worst <= CONV_WORST_MAX else MISSED,
                f"worst {worst:.2f} ({worst_case})"),
    ]


def conv_vs_reference_target(
    rows: list[dict], roofline: dict[str, Any] | None = None
) -> dict[str, str]:
    """Every Conv case at least 50x faster than onnx.reference (reference time / padconv time).

    ``roofline`` (``{"gflops": peak, "rows": roofline rows}``, see bench_roofline) adds the cases
    where a direct convolution could not reach the target at the measured GEMM peak."""
    name = f"Conv: each case >= {REFERENCE_MIN_SPEEDUP:g}x faster than onnx.reference"
    ratios, missing = ratios_against(rows, "conv", REFERENCE)
    if missing or not ratios:
        return _target(name, _unmeasured_status(missing) if missing else NOT_MEASURED,
                       _missing_text(missing) or "no Conv case run")
    speedups = {case: (1.0 / ratio, bound) for case, (ratio, bound) in ratios.items()}
    slowest_case, (slowest, bound) = min(speedups.items(), key=lambda item: item[1][0])
    shown = f"slowest {'>' if bound else ''}{slowest:.1f}x ({slowest_case})"
    shown += _beyond_peak_text(roofline, len(speedups))
    if slowest >= REFERENCE_MIN_SPEEDUP:
        return _target(name, MET, shown)
    # A lower bound (the reference timed out) below the target proves nothing either way.
    return _target(name, NOT_MEASURED if bound else MISSED, shown)


def _beyond_peak_text(roofline: dict[str, Any] | None, case_count: int) -> str:
    """'; beyond a direct convolution at the measured GEMM peak ... on k of n cases (...)', or
    '' when no case is."""
    if not roofline:
        return ""
    beyond = unreachable_cases(roofline["rows"], REFERENCE_MIN_SPEEDUP)
    if not beyond:
        return ""
    listed = ", ".join(f"{case} at most {most:.1f}x" for case, most in beyond.items())
    return (f"; beyond a direct convolution at the measured GEMM peak of "
            f"{roofline['gflops']:.0f} GFLOP/s on {len(beyond)} of {case_count} cases ({listed})")


def pad_targets(rows: list[dict]) -> list[dict[str, str]]:
    """Every Pad mode faster than numpy.pad and onnxruntime, and within 1.3x of the copy floor."""
    checks = (
        (NUMPY_PAD, "Pad: every mode faster than numpy.pad", 1.0, False),
        (ORT, "Pad: every mode faster than onnxruntime", 1.0, False),
        (STRIDED_COPY, f"Pad: every mode within {COPY_FLOOR_MAX}x of the strided copy",
         COPY_FLOOR_MAX, True),
    )
    targets = []
    for peer, name, limit, inclusive in checks:
        ratios, missing = ratios_against(rows, "pad", peer)
        if missing or not ratios:
            targets.append(_target(name, _unmeasured_status(missing) if missing else NOT_MEASURED,
                                   _missing_text(missing) or "no Pad case run"))
            continue
        worst_case, (worst, _) = max(ratios.items(), key=lambda item: item[1][0])
        met = worst <= limit if inclusive else worst < limit
        shown = ", ".join(f"{case.split('/')[-1]} {ratio:.2f}" for case, (ratio, _) in
                          ratios.items())
        targets.append(_target(name, MET if met else MISSED, f"padconv/{peer}: {shown}"))
    return targets


def startup_target(startup_rows: list[dict]) -> dict[str, str]:
    """Each small CLI run within 1.5x of `python -c "import numpy"`."""
    name = f'CLI start-up within {STARTUP_MAX}x of python -c "import numpy"'
    cli_rows = [row for row in startup_rows if row["label"].startswith("padconv")]
    if not cli_rows:
        return _target(name, NOT_MEASURED, "not run")
    failed = [row for row in cli_rows if row["ratio"] is None]
    if failed:
        return _target(name, MISSED, "; ".join(f"{row['label']}: {row['note']}" for row in failed))
    shown = ", ".join(f"{row['label']} {row['ratio']:.2f}x" for row in cli_rows)
    met = all(row["ratio"] <= STARTUP_MAX for row in cli_rows)
    return _target(name, MET if met else MISSED, shown)


def memory_target(rss_row: dict[str, Any] | None) -> dict[str, str]:
    """Peak RSS of `padconv conv` minus the interpreter baseline <= tensors + 100 MiB."""
    name = "Peak RSS <= input+output+weights+100 MiB over the baseline"
    if rss_row is None:
        return _target(name, NOT_MEASURED, "not run")
    if rss_row["over_baseline_bytes"] is None:
        return _target(name, MISSED, rss_row["note"])
    over, allowed = rss_row["over_baseline_bytes"], rss_row["allowed_over_baseline_bytes"]
    shown = f"{over / MIB:.0f} MiB over baseline, allowed {allowed / MIB:.0f} MiB"
    return _target(name, MET if over <= allowed else MISSED, shown)


def evaluate_targets(rows: list[dict], startup_rows: list[dict],
                     rss_row: dict[str, Any] | None,
                     roofline: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """All targets, in the order they are listed in the documentation."""
    return [
        *conv_vs_ort_targets(rows),
        conv_vs_reference_target(rows, roofline),
        *pad_targets(rows),
        startup_target(startup_rows),
        memory_target(rss_row),
    ]
