"""``--explain`` reports the memory the resource gate checks: a limit one byte below its total
is refused naming that total, a limit equal to it runs (in memory: literal inputs)."""

from __future__ import annotations

import json

import pytest

from padconv_cli.units import human_bytes

CALLS = {
    "strings": ["pad", '["ab", "c"]', "--pads", "1", "2"],  # python strings, 8 B pointers
    "floats": ["pad", "[[1.5, 2.5], [3.5, 4.5]]", "--pads", "1", "0", "0", "1"],
    "conv": ["conv", "[[[[1.0, 2.0, 3.0, 4.0]]]]", "[[[[1.0, -1.0]]]]",
             "--pads", "0", "0", "0", "1"],
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_gate_checks_what_explain_reports(run_cli, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    explained = run_cli(*CALLS[name], "--explain", "--json")
    assert explained.exit_code == 0, explained.stderr
    total = json.loads(explained.stdout)["memory"]["total"]
    refused = run_cli(*CALLS[name], "--memory-limit", str(total - 1), "-o", "y.npy")
    assert refused.exit_code == 2
    assert f"needs {human_bytes(total)} in memory" in refused.stderr
    assert not (tmp_path / "y.npy").exists()
    done = run_cli(*CALLS[name], "--memory-limit", str(total), "-o", "y.npy")
    assert done.exit_code == 0, done.stderr
