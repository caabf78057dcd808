"""Smoke test of the benchmark harness on tiny cases: rows, verification, targets, docs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench  # noqa: E402
import bench_peers  # noqa: E402
import bench_process  # noqa: E402
import bench_report  # noqa: E402
import bench_roofline  # noqa: E402
import bench_targets  # noqa: E402
import bench_timing  # noqa: E402
from bench_cases import ConvCase, PadCase  # noqa: E402
from bench_kernels import ROW_KEYS, TimingSettings, measure_case  # noqa: E402
from bench_report import all_tables, markdown  # noqa: E402
from bench_targets import MET, MISSED, evaluate_targets  # noqa: E402
from bench_timing import Contender, time_round_robin  # noqa: E402

TINY_TIMING = TimingSettings(warmup=0, repeat=2, budget_s=0.05)
TINY_CONVS = [
    ConvCase("conv/tiny-strided", "tiny", (1, 3, 7, 7), (4, 3, 3, 3), pads=(1, 0, 2, 1),
             strides=(2, 1)),
    ConvCase("conv/tiny-grouped", "tiny", (2, 4, 9), (6, 2, 3), pads=(1, 1), group=2,
             dilations=(2,)),
]
TINY_PADS = [PadCase(f"pad/tiny-{mode}", "tiny", (1, 2, 5, 4), (0, 0, 2, 1, 0, 0, 1, 3), mode)
             for mode in ("constant", "wrap")]


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch):
    """The smoke tests check the harness's logic, not timings: no settling pauses."""
    monkeypatch.setattr(bench_timing, "SETTLE_S", 0.0)
    monkeypatch.setattr(bench_timing, "WARMUP_S", 0.0)


def tiny_peers(kernels=None) -> list[bench_peers.Peer]:
    peers = bench_peers.default_peers(reference_repeat=1, reference_timeout_s=5.0)
    peers[0] = bench_peers.padconv_peer(kernels)
    return peers


def rows_by_peer(rows: list[dict]) -> dict[str, dict]:
    return {row["peer"]: row for row in rows}


@pytest.mark.parametrize("case", TINY_CONVS + TINY_PADS, ids=lambda case: case.name)
def test_rows_have_expected_keys_and_padconv_agrees_with_peers(case):
    rows = measure_case(case, tiny_peers(), TINY_TIMING, np.random.default_rng(1))
    by_peer = rows_by_peer(rows)
    expected_peers = {"padconv", "onnxruntime", "onnx.reference", "torch"}
    if case.kind == "pad":
        expected_peers |= {"numpy.pad", "strided copy", "empty + copy"}
    assert set(by_peer) == expected_peers
    for row in rows:
        assert set(row) == set(ROW_KEYS)
    for name in expected_peers - {"torch"}:
        assert by_peer[name]["status"] == "ok", by_peer[name]["note"]
        assert by_peer[name]["runs"] >= 1 and by_peer[name]["median_s"] > 0
    assert by_peer["onnxruntime"]["ratio"] > 0
    assert by_peer["onnxruntime"]["throughput"] > 0


def test_a_wrong_kernel_is_reported_as_mismatch_not_timed():
    def off_by_one_pad(data, pads, constant_value=None, axes=None, mode="constant"):
        rank = data.ndim
        result = np.pad(data, [(pads[i], pads[i + rank]) for i in range(rank)], mode=mode)
        result.flat[0] += 1
        return result

    kernels = SimpleNamespace(pad=off_by_one_pad, conv=None)
    rows = measure_case(TINY_PADS[1], tiny_peers(kernels), TINY_TIMING, np.random.default_rng(2))
    by_peer = rows_by_peer(rows)
    assert by_peer["padconv"]["status"] == "mismatch"
    assert by_peer["padconv"]["median_s"] is None
    assert by_peer["numpy.pad"]["status"] == "mismatch"
    assert "max |diff| = 1" in by_peer["numpy.pad"]["note"]
    assert by_peer["strided copy"]["status"] == "ok"  # the floor is not a Pad, never compared
    verdicts = {target["target"]: target["status"] for target in evaluate_targets(rows, [], None)}
    assert verdicts["Pad: every mode faster than numpy.pad"] == MISSED


def test_targets_and_docs_from_rows():
    rng = np.random.default_rng(3)
    rows = []
    for case in (TINY_CONVS[0], TINY_PADS[0]):
        rows += measure_case(case, tiny_peers(), TINY_TIMING, rng)
    rss_row = {"over_baseline_bytes": 300 * 2**20, "allowed_over_baseline_bytes": 228 * 2**20,
               "note": ""}
    targets = evaluate_targets(rows, [], rss_row)
    verdicts = {target["target"]: target["status"] for target in targets}
    assert verdicts["Peak RSS <= input+output+weights+100 MiB over the baseline"] == MISSED
    assert set(verdicts.values()) <= {MET, MISSED, "NOT MEASURED"}
    result = {"kernels": rows, "startup": [], "peak_rss": None, "targets": targets}
    text = "\n".join(markdown(table) for table in all_tables(result))
    assert "## Conv (float32)" in text and "## Pad (float32)" in text and "## Targets" in text


@pytest.mark.parametrize(("pattern", "expected"), [
    ("pad/", ["pad/constant", "pad/reflect", "pad/edge", "pad/wrap"]),
    ("conv/?d", ["conv/1d", "conv/3d"]),
    ("resnet", ["conv/resnet3x3"]),
])
def test_case_selection_by_substring_or_glob(pattern, expected):
    assert [case.name for case in bench.select_cases([pattern])] == expected


def test_round_robin_honours_timeout_and_repeat_cap():
    def spin_forever():
        while True:
            pass

    contenders = {
        "slow": Contender(spin_forever, call_timeout_s=0.05),
        "capped": Contender(lambda: None, max_repeat=2),
        "free": Contender(lambda: None),
    }
    timings = time_round_robin(contenders, warmup=1, repeat=4, budget_s=10.0)
    assert timings["slow"].timed_out_after == 0.05 and timings["slow"].times == []
    assert len(timings["capped"].times) == 2
    assert len(timings["free"].times) == 4


def test_warm_up_runs_last_at_least_warmup_s(monkeypatch):
    monkeypatch.setattr(bench_timing, "WARMUP_S", 0.02)
    calls = []
    timings = time_round_robin(
        {"counted": Contender(lambda: calls.append(1))}, warmup=1, repeat=1, budget_s=10.0
    )
    assert len(timings["counted"].times) == 1
    assert len(calls) > 2  # the warm-up went on past its one required run


def test_settling_pause_follows_only_blocks_that_ran(monkeypatch):
    pauses = []
    monkeypatch.setattr(bench_timing.time, "sleep", pauses.append)
    contenders = {"capped": Contender(lambda: None, max_repeat=1), "free": Contender(lambda: None)}
    timings = time_round_robin(contenders, warmup=0, repeat=3, budget_s=10.0)
    assert len(timings["capped"].times) == 1 and len(timings["free"].times) == 3
    assert len(pauses) == 4  # round 1: both contenders; rounds 2 and 3: "free" only


def _conv_row(case: str, peer: str, median_s: float | None, status: str = "ok",
              gflop: float = 2.0, timed_out_after_s: float | None = None) -> dict:
    """A measured row of a Conv case of ``gflop`` GFLOP; padconv's own median is 20 ms."""
    return {"case": case, "kind": "conv", "label": case, "peer": peer, "status": status,
            "median_s": median_s, "throughput": gflop / median_s if median_s else None,
            "ratio": 0.02 / median_s if median_s else None, "ratio_bound": "", "note": "",
            "timed_out_after_s": timed_out_after_s}


def test_roofline_bounds_the_speed_up_over_the_reference():
    rows = [_conv_row("conv/a", "padconv", 0.02), _conv_row("conv/a", "onnxruntime", 0.008),
            _conv_row("conv/a", "onnx.reference", 0.5),
            _conv_row("conv/b", "padconv", 0.02), _conv_row("conv/b", "onnx.reference", 40.0),
            _conv_row("conv/b", "onnxruntime", None, status="error")]
    lines = bench_roofline.roofline_rows(rows, peak_gflops=200.0)  # 2 GFLOP each: 10 ms
    by_case = {line["case"]: line for line in lines}
    a, b = by_case["conv/a"], by_case["conv/b"]
    assert a["gflop"] == pytest.approx(2.0) and a["time_at_peak_s"] == pytest.approx(0.01)
    assert a["padconv_share"] == pytest.approx(0.5) and a["ort_share"] == pytest.approx(1.25)
    assert a["padconv_speedup"] == pytest.approx(25.0)
    assert a["ort_speedup"] == pytest.approx(62.5)
    assert a["most_speedup"] == pytest.approx(50.0) and not a["reference_bound"]
    assert b["ort_share"] is None and b["ort_speedup"] is None
    assert b["most_speedup"] == pytest.approx(4000.0)
    assert b["padconv_speedup"] == pytest.approx(2000.0)
    assert bench_roofline.unreachable_cases(lines, 50.0) == {}
    assert bench_roofline.unreachable_cases(lines, 51.0) == {"conv/a": pytest.approx(50.0)}
    roofline = {"gflops": 200.0, "size": 8, "runs": 1, "rows": lines}
    target = bench_targets.conv_vs_reference_target(rows, roofline)
    assert target["status"] == MISSED
    assert "slowest 25.0x (conv/a)" in target["measured"]
    assert "peak" not in target["measured"]  # 50x is within reach of conv/a at that peak
    text = markdown(bench_report.roofline_table(roofline))
    assert "## Roofline (Conv)" in text
    assert "| conv/a | 2.000 | 10.0 ms | 50% | 125% | 500 ms | 25.0x / 62.5x / 50.0x |" in text


def test_roofline_of_cases_padconv_or_the_reference_did_not_time():
    rows = [
        # padconv disagreed: the case's 3 GFLOP come from onnxruntime's row
        _conv_row("conv/c", "padconv", None, status="mismatch"),
        _conv_row("conv/c", "onnxruntime", 0.01, gflop=3.0),
        _conv_row("conv/c", "onnx.reference", 0.6, gflop=3.0),
        # the reference ran out of time: its time and the speed-ups are lower bounds
        _conv_row("conv/d", "padconv", 0.02),
        _conv_row("conv/d", "onnx.reference", None, status="timeout", timed_out_after_s=0.3),
        # no reference at all
        _conv_row("conv/e", "padconv", 0.02),
    ]
    lines = {line["case"]: line for line in bench_roofline.roofline_rows(rows, 100.0)}
    c, d, e = lines["conv/c"], lines["conv/d"], lines["conv/e"]
    assert c["gflop"] == pytest.approx(3.0) and c["time_at_peak_s"] == pytest.approx(0.03)
    assert c["padconv_share"] is None and c["padconv_speedup"] is None
    assert c["ort_share"] == pytest.approx(3.0) and c["most_speedup"] == pytest.approx(20.0)
    assert d["reference_bound"] and d["reference_s"] == pytest.approx(0.3)
    assert d["padconv_speedup"] == pytest.approx(15.0) and d["most_speedup"] == pytest.approx(15)
    assert e["reference_s"] is None and e["most_speedup"] is None
    # a bound proves nothing and a missing reference bounds nothing: only conv/c is listed
    assert bench_roofline.unreachable_cases(list(lines.values()), 50.0) == {
        "conv/c": pytest.approx(20.0)}
    text = markdown(bench_report.roofline_table({"gflops": 100.0, "size": 8, "runs": 1,
                                                 "rows": list(lines.values())}))
    assert "| conv/d | 2.000 | 20.0 ms | 100% | - | >300 ms | >15.0x / - / >15.0x |" in text
    assert "| conv/e | 2.000 | 20.0 ms | 100% | - | - | - / - / - |" in text


def test_roofline_names_the_cases_no_direct_convolution_can_speed_up_enough():
    rows = [_conv_row("conv/a", "padconv", 0.02), _conv_row("conv/a", "onnx.reference", 0.3)]
    roofline = {"gflops": 200.0, "rows": bench_roofline.roofline_rows(rows, 200.0)}
    measured = bench_targets.conv_vs_reference_target(rows, roofline)["measured"]
    assert measured.endswith("peak of 200 GFLOP/s on 1 of 1 cases (conv/a at most 30.0x)")


def test_gemm_peak_is_the_best_run_of_two_n_cubed_operations(monkeypatch):
    # clock readings: warm-up start and check, then (start, end) of each of three products
    readings = iter([0.0, 0.0, 1.0, 1.5, 2.0, 2.25, 3.0, 4.0])
    monkeypatch.setattr(bench_roofline.time, "perf_counter", lambda: next(readings))
    peak = bench_roofline.measure_gemm_peak(size=64, runs=3, warmup_s=0.0)
    assert peak["gflops"] == pytest.approx(2 * 64**3 / 0.25 / 1e9)
    assert peak["size"] == 64 and peak["runs"] == 3


def test_start_up_warm_up_round_may_write_bytecode_caches(monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    environments = []

    def fake_run(argv, env=None):
        environments.append(env)
        return 0.01, subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(bench_process, "run_command", fake_run)
    bench_process.measure_startup(2, np.random.default_rng(0))
    warm_up, timed = environments[:3], environments[3:]
    assert all("PYTHONDONTWRITEBYTECODE" not in env and "PATH" in env for env in warm_up)
    assert timed and all(env is None for env in timed)
