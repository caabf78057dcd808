"""Out of memory is one line, exit 2; the memory estimate takes the smallest known bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from padconv_cli import resources

OOM_LINE = (
    "padconv pad: error: out of memory while computing the result "
    "(try --engine tiled with --memory-limit, or a smaller input)\n"
)


@pytest.fixture
def data_file(tmp_path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    return path


def _raise_numpy_memory_error(*args, **kwargs):
    np.empty((2**25, 2**25), dtype=np.uint8)  # numpy's _ArrayMemoryError, a MemoryError


def _raise_memory_error(*args, **kwargs):
    raise MemoryError()


@pytest.mark.parametrize("raiser", [_raise_numpy_memory_error, _raise_memory_error])
def test_memory_error_is_one_line_exit_2(run_cli, data_file, tmp_path, monkeypatch, raiser):
    monkeypatch.setattr("padconv_cli.cli.options.emit_result", raiser)
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o",
                     str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert result.stderr == OOM_LINE
    assert not (tmp_path / "y.npy").exists()


def test_available_memory_is_the_smallest_known_bound(monkeypatch):
    monkeypatch.setattr(resources, "_meminfo_available", lambda: 10 * 2**30)
    monkeypatch.setattr(resources, "_cgroup_headroom", lambda: 3 * 2**30)
    monkeypatch.setattr(resources, "_address_space_headroom", lambda: 2 * 2**30)
    assert resources.available_memory_bytes() == 2 * 2**30
    monkeypatch.setattr(resources, "_address_space_headroom", lambda: None)
    assert resources.available_memory_bytes() == 3 * 2**30
    monkeypatch.setattr(resources, "_cgroup_headroom", lambda: None)
    monkeypatch.setattr(resources, "_meminfo_available", lambda: None)
    assert resources.available_memory_bytes() == resources.FALLBACK_MEMORY_BYTES


@pytest.mark.parametrize(
    ("limit", "current", "expected"),
    [("max", "100", None), ("1000", "400", 600), ("1000", "5000", 0), ("1000", None, 1000)],
)
def test_cgroup_headroom(tmp_path, limit, current, expected):
    (tmp_path / "memory.max").write_text(limit + "\n")
    if current is not None:
        (tmp_path / "memory.current").write_text(current + "\n")
    assert resources._cgroup_headroom(str(tmp_path)) == expected


def test_address_space_limit_bounds_the_estimate():
    """Under ``ulimit -v`` (RLIMIT_AS = 1.5 GiB) the estimate stays below the limit."""
    limit = 1536 * 2**20
    code = (
        "import resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n"
        "from padconv_cli.resources import available_memory_bytes\n"
        "print(available_memory_bytes())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert 0 < int(done.stdout) < limit
