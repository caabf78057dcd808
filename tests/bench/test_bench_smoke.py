"""Smoke test of the benchmark harness: a --quick run from the checkout verifies every result,
times the peers, judges the targets and writes the report; a wrong result is caught."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench  # noqa: E402
import bench_cases  # noqa: E402
import bench_measure  # noqa: E402

VERDICTS = {"MET", "MISSED", "NOT MEASURED"}


def test_quick_run_verifies_times_and_reports(tmp_path):
    docs = tmp_path / "benchmarks.md"
    argv = [sys.executable, str(BENCHMARKS / "bench.py"), "--quick", "--json", "--cases",
            "conv/dilated", "--cases", "pad/reflect", "--cases", "cli/",
            "--write-docs", str(docs)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    rows = {(row["case"], row["peer"]): row for row in result["kernels"]}
    assert {case for case, _ in rows} == {"conv/dilated", "pad/reflect"}
    for key in [("conv/dilated", p) for p in ("padconv", "onnxruntime", "onnx.reference")] + [
            ("pad/reflect", p) for p in ("padconv", "padconv (out=)", "numpy.pad",
                                         "strided copy", "onnxruntime")]:
        assert rows[key]["status"] == "ok", rows[key]
        assert rows[key]["runs"] >= 1 and rows[key]["median_s"] > 0
    assert 0 <= rows["conv/dilated", "padconv"]["error_ratio"] <= 1
    assert rows["conv/dilated", "torch"]["status"] in ("ok", "skipped")
    processes = [*result["startup"]["rows"].values(), *result["large"]["rows"].values()]
    assert [row["note"] for row in processes] == [""] * 7
    assert all(row["median_s"] > 0 and row["peak_bytes"] > 2**20 for row in processes)
    assert 0 <= result["large"]["agreement"] <= 1
    assert {t["status"] for t in result["targets"]} <= VERDICTS
    text = docs.read_text()
    for title in ("Conv (float32)", "Pad (float32)", "Large tensors", "Start-up", "Targets"):
        assert f"## {title}" in text
    assert text.startswith(bench.DOCS.read_text().split(bench.MARKER)[0])
    assert "partial run" in text  # (a noisy-host note appears only when the load was high)


def test_a_wrong_result_is_a_mismatch_and_is_not_timed():
    def off_by_one(case, inputs):
        right = bench_cases.PEERS[0].prepare(case, inputs)
        return lambda: right() + np.float32(1.0)

    peers = (replace(bench_cases.PEERS[0], prepare=off_by_one), *bench_cases.PEERS[2:3])
    result = bench.run(["conv/resnet3x3", "pad/edge"], bench_measure.QUICK, peers)
    by_case = {(row["case"], row["peer"]): row for row in result["kernels"]}
    conv, pad = by_case["conv/resnet3x3", "padconv"], by_case["pad/edge", "padconv"]
    assert conv["status"] == pad["status"] == "mismatch"
    assert conv["error_ratio"] > 1 and conv["median_s"] is None and conv["runs"] == 0
    assert by_case["conv/resnet3x3", "onnxruntime"]["status"] == "ok"
    verdicts = {t["target"].split(",")[0]: t["status"] for t in result["targets"]}
    assert verdicts["Conv: every padconv result within the dot-product error bound"] == "MISSED"
    assert verdicts["Conv: padconv / faster peer"] == "MISSED"  # the geometric mean
