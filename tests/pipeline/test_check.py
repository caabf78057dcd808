"""``--check``: the same node through onnx.reference and onnxruntime, known deviations, exit 1 on
disagreement, and the report where onnxruntime is not installed."""

from __future__ import annotations

import builtins
import io
import json
from pathlib import Path

import numpy as np
import pytest

from padconv_cli import crosscheck
from padconv_cli.models import resolve_call
from padconv_cli.ops import compute, plan_call

# ``--check``: the same node through onnx.reference and onnxruntime, known deviations, exit 1 on
# disagreement.


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(5)
    np.save(tmp_path / "d.npy", rng.standard_normal((3, 4)).astype(np.float32))
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 2, 6, 6)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    return tmp_path


def _peer_lines(stdout: str) -> dict[str, str]:
    lines = [line for line in stdout.splitlines() if line.startswith("check: ")]
    return {line.split()[1]: line for line in lines if len(line.split()) > 2}


@pytest.mark.parametrize(
    "args",
    [
        ["pad", "d.npy", "--pads", "1", "2", "0", "1", "--mode", "reflect"],
        ["pad", "d.npy", "--pads", "2", "3", "--axes", "0", "--mode", "wrap"],
        ["conv", "x.npy", "w.npy", "--pads", "1", "0", "1", "2", "--strides", "2", "1"],
        # onnxruntime refuses SAME with dilations; the node sent to it has explicit pads
        ["conv", "x.npy", "w.npy", "--dilations", "2", "2", "--auto-pad", "SAME_UPPER"],
    ],
)
def test_agreement_exits_0_and_reports_both_peers(run_cli, files, monkeypatch, args):
    monkeypatch.chdir(files)
    result = run_cli(*args, "--check", "-o", "y.npy")
    assert result.exit_code == 0, result.stdout + result.stderr
    peers = _peer_lines(result.stdout)
    assert "agree" in peers["onnx.reference"] and "max |diff|" in peers["onnx.reference"]
    assert "agree" in peers["onnxruntime"]
    assert result.stdout.rstrip().endswith("check: passed")
    assert (files / "y.npy").exists()


@pytest.mark.parametrize(
    ("args", "peer", "known"),
    [
        (["pad", "d.npy", "--pads", "0", "5", "0", "0", "--mode", "reflect"], "onnxruntime",
         "reflect pads longer than the axis"),
        (["pad", "d.npy", "--pads", "0", "-1", "0", "2", "--mode", "reflect"], "onnx.reference",
         "refuses negative pads"),
    ],
)
def test_known_refusals_name_padconv_as_right(run_cli, files, monkeypatch, args, peer, known):
    monkeypatch.chdir(files)
    result = run_cli(*args, "--check", "-o", "y.npy")
    assert result.exit_code == 0, result.stdout + result.stderr
    line = _peer_lines(result.stdout)[peer]
    assert "refused" in line and known in line and "believed right: padconv" in line
    others = [text for name, text in _peer_lines(result.stdout).items() if name != peer]
    assert all(" agree " in text for text in others)


def test_disagreement_exits_1_and_names_no_winner(run_cli, files, monkeypatch):
    monkeypatch.chdir(files)
    from padconv_cli import ops as operators

    pad_entry = operators.OPERATORS["Pad"]
    off = pad_entry._replace(run=lambda *args: pad_entry.run(*args) + np.float32(0.5))
    monkeypatch.setitem(operators.OPERATORS, "Pad", off)
    result = run_cli("pad", "d.npy", "--pads", "1", "1", "1", "1", "--check", "-o", "y.npy")
    assert result.exit_code == 1
    peers = _peer_lines(result.stdout)
    assert "disagree" in peers["onnx.reference"] and "disagree" in peers["onnxruntime"]
    assert "max |diff| 0.5" in peers["onnxruntime"]
    assert "believed right: unknown" in peers["onnxruntime"]
    assert result.stdout.rstrip().endswith("check: FAILED")


def test_known_numeric_deviation_still_fails_but_names_padconv(run_cli):
    result = run_cli("pad", '["a", "bb"]', "--pads", "1", "0", "--check", "--json", "-o", "-")
    assert result.exit_code == 1
    report = json.loads(result.stderr)
    (reference,) = [p for p in report["peers"] if p["peer"] == "onnx.reference"]
    assert reference["status"] == "disagree"
    assert "empty string" in reference["known_deviation"]
    assert reference["believed_right"] == "padconv"
    assert reference["mismatches"][0]["index"] == [0]
    assert report["passed"] is False


def test_json_report_goes_to_stderr_when_the_tensor_is_on_stdout(run_cli, files):
    result = run_cli("pad", str(files / "d.npy"), "--pads", "0,1,0,1", "--check", "--json")
    assert result.exit_code == 0
    padded = np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    assert padded.shape == (3, 6)
    report = json.loads(result.stderr)
    assert report["passed"] is True
    assert {p["peer"]: p["status"] for p in report["peers"]} == {
        "onnx.reference": "agree", "onnxruntime": "agree"
    }


def test_unsupported_type_is_not_a_failure(run_cli):
    result = run_cli("pad", "[1.5, 2.5]", "--dtype", "bfloat16", "--pads", "1", "1", "--check",
                     "--format", "pb")
    assert result.exit_code == 0
    ort_line = _peer_lines(result.stderr)["onnxruntime"]
    assert "unsupported" in ort_line and "believed right" not in ort_line


def test_missing_onnxruntime_is_reported_as_unavailable(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without_onnxruntime(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_onnxruntime)
    call = resolve_call("Pad", (np.ones((2, 2), np.float32),), {"pads": (1, 1, 1, 1)}).call
    plan = plan_call(call)
    report = crosscheck.crosscheck(call, plan, compute(call))
    statuses = {p.peer: p.status for p in report.peers}
    assert statuses == {"onnx.reference": "agree", "onnxruntime": "unavailable"}
    assert report.passed


def test_unexplained_refusal_fails(monkeypatch):
    monkeypatch.setattr(crosscheck, "PEERS", {
        crosscheck.REFERENCE: lambda model, feeds: ("refused", "ValueError: nope"),
        crosscheck.ONNXRUNTIME: lambda model, feeds: ("unavailable", "not installed"),
    })
    call = resolve_call("Pad", (np.ones((2, 2), np.float32),), {"pads": (1, 1, 1, 1)}).call
    report = crosscheck.crosscheck(call, plan_call(call), compute(call))
    assert not report.passed
    assert "believed right: unknown" in crosscheck.format_report(report)


@pytest.mark.parametrize(
    ("flags", "peer", "expected"),
    [
        ({"pads": (0, 3), "mode": "reflect"}, crosscheck.ONNXRUNTIME, True),
        ({"pads": (0, 2), "mode": "reflect"}, crosscheck.ONNXRUNTIME, False),
        ({"pads": (-1, 2), "mode": "reflect"}, crosscheck.ONNXRUNTIME, True),
        ({"pads": (0, 3), "mode": "wrap"}, crosscheck.ONNXRUNTIME, False),
        ({"pads": (-1, 0), "mode": "constant"}, crosscheck.REFERENCE, True),
        ({"pads": (1, 0), "mode": "constant"}, crosscheck.REFERENCE, False),
    ],
)
def test_known_deviation_rules(flags, peer, expected):
    call = resolve_call("Pad", (np.arange(3, dtype=np.float32),), flags).call
    assert (crosscheck.known_deviation(peer, call, plan_call(call)) is not None) == expected


def test_rank_zero_pad_is_a_known_refusal_of_both_peers(run_cli, tmp_path):
    result = run_cli("pad", "2.5", "--pads", "", "--check", "-o", str(tmp_path / "s.npy"))
    assert result.exit_code == 0, result.stdout
    peers = _peer_lines(result.stdout)
    assert all("refused" in line and "rank-0" in line for line in peers.values())
    assert np.load(tmp_path / "s.npy") == np.float32(2.5)


# ``--check`` where onnxruntime is not installed: the report says how to get it (the
# ``padconv[check]`` extra) and prints no known-deviation note for the peer that never ran.


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_onnxruntime(monkeypatch):
    real_import = builtins.__import__

    def without_onnxruntime(name, *args, **kwargs):
        if name == "onnxruntime" or name.startswith("onnxruntime."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_onnxruntime)


def test_unavailable_peer_names_the_extra_and_no_deviation(run_cli, tmp_path, no_onnxruntime):
    # reflect pads longer than the axis: a known onnxruntime deviation, if it had run
    result = run_cli("pad", "[[1.0, 2.0], [3.0, 4.0]]", "--pads", "0", "3", "0", "0",
                     "--mode", "reflect", "--check", "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if "onnxruntime" in x]
    assert "unavailable" in line
    assert "pip install 'padconv[check]'" in line
    assert "known deviation" not in line and "believed right" not in line
    assert result.stdout.splitlines()[-1] == "check: passed"


def test_the_check_extra_provides_onnxruntime():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert any(req.startswith("onnxruntime") for req in extras["check"])
