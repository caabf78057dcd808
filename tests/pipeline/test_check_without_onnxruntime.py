"""``--check`` where onnxruntime is not installed: the report says how to get it (the
``padconv[check]`` extra) and prints no known-deviation note for the peer that never ran."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

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
