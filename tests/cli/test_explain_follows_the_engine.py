"""``--explain`` describes the run on the engine it would take: in memory, inputs + output +
working memory; out of core (``tiled``), at most the memory limit held at once, the in-memory
figures given beside it.  Nothing is computed or written either way."""

from __future__ import annotations

import json

import numpy as np
import pytest

LIMIT = "8M"
LIMIT_BYTES = 8 * 2**20


@pytest.fixture
def large_conv(tmp_path):
    """A Conv whose in-memory run (about 17 MiB) is over the 8 MiB limit: X, W, the output."""
    x, w = tmp_path / "x.npy", tmp_path / "w.npy"
    np.save(x, np.zeros((1, 8, 512, 512), np.float32))
    np.save(w, np.ones((8, 8, 3, 3), np.float32))
    return str(x), str(w), tmp_path / "y.npy"


@pytest.mark.parametrize("engine", ["auto", "tiled"])
def test_a_run_over_the_limit_is_explained_out_of_core(run_cli, large_conv, engine):
    x, w, y = large_conv
    result = run_cli("conv", x, w, "-o", str(y), "--memory-limit", LIMIT, "--engine", engine,
                     "--explain")
    assert result.exit_code == 0, result.stderr
    assert "engine: tiled" in result.stdout
    assert "at most 8.0 MiB held at once (the memory limit)" in result.stdout
    assert "in memory it would take 16.9 MiB" in result.stdout
    assert not y.exists()


def test_the_memory_engine_is_explained_with_its_own_figures(run_cli, large_conv):
    x, w, y = large_conv
    result = run_cli("conv", x, w, "-o", str(y), "--memory-limit", LIMIT, "--engine", "memory",
                     "--explain")
    assert result.exit_code == 0, result.stderr
    assert "engine: memory; memory: 16.9 MiB = inputs 8.0 MiB" in result.stdout
    assert "held at once" not in result.stdout
    assert not y.exists()


def test_json_names_the_engine_and_its_limit(run_cli, large_conv):
    x, w, y = large_conv
    result = run_cli("conv", x, w, "-o", str(y), "--memory-limit", LIMIT, "--explain", "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["engine"] == {"name": "tiled", "memory_limit": LIMIT_BYTES}
    assert info["memory"]["total"] > LIMIT_BYTES


def test_pad_over_the_limit_is_explained_out_of_core(run_cli, large_conv):
    x, _, y = large_conv
    result = run_cli("pad", x, "--pads", "0", "0", "1", "1", "0", "0", "1", "1", "-o", str(y),
                     "--memory-limit", LIMIT, "--explain")
    assert result.exit_code == 0, result.stderr
    assert "engine: tiled" in result.stdout
    assert not y.exists()
