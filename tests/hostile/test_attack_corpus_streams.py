"""Reports and results whose standard output is closed (``>&-``) or a full device
(``>/dev/full``), run through the installed command: one line naming ``<stdout>``, exit 2, no
traceback and no output file left behind; a result for ``-o FILE`` still written when only
stdout is gone. Also: memory limits (``ulimit -v``) and a file-size limit (``ulimit -f``) on
commands that write reports or files.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

import numpy as np
import pytest
from hostile.attack_corpus import CONV_FILES, X_NPY, conv_model
from hostile.runner import run_padconv

X_FILES = {**CONV_FILES, "x.npy": X_NPY,
           "m.onnx": conv_model(np.ones((1, 1, 2, 2), np.float32), x_shape=(1, 1, 3, 3))}
REPORTS = {
    "show": ["show", "x.npy"],
    "show_json": ["show", "x.npy", "--json"],
    "compare": ["compare", "x.npy", "x.npy"],
    "compare_json": ["compare", "x.npy", "x.npy", "--json"],
    "verify": ["verify", "-q"],
    "explain": ["conv", "c.npy", "w.npy", "--explain"],
    "explain_json": ["pad", "x.npy", "--pads", "1", "1", "1", "1", "--explain", "--json"],
    "audit": ["audit", "m.onnx"],
    "pad_result": ["pad", "x.npy", "--pads", "1", "1", "1", "1"],
    "conv_result": ["conv", "c.npy", "w.npy", "-o", "-"],
}


def _lay_out(folder: Path) -> None:
    for name, content in X_FILES.items():
        (folder / name).write_bytes(content)
    (folder / "c.npy").write_bytes(CONV_FILES["x.npy"])


def _close_stdout() -> None:
    os.close(1)


def _assert_one_stdout_line(run) -> None:
    detail = f"{run.args} -> {run.returncode}: {run.stderr_text[:500]!r}"
    assert not run.timed_out, detail
    assert run.returncode == 2, detail
    assert "Traceback" not in run.stderr_text, detail
    assert len(run.stderr_lines) == 1, detail
    assert run.stderr_lines[0].startswith("padconv") and "<stdout>" in run.stderr_lines[0], detail


@pytest.mark.parametrize("command", list(REPORTS), ids=list(REPORTS))
def test_report_to_a_closed_stdout_is_one_line(tmp_path, command):
    _lay_out(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    run = run_padconv(REPORTS[command], cwd=tmp_path, preexec_fn=_close_stdout)
    _assert_one_stdout_line(run)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("command", list(REPORTS), ids=list(REPORTS))
def test_report_to_a_full_device_is_one_line(tmp_path, command):
    _lay_out(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with open("/dev/full", "wb") as full:
        run = run_padconv(REPORTS[command], cwd=tmp_path, stdout_target=full)
    _assert_one_stdout_line(run)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_file_result_is_written_with_stdout_closed(tmp_path):
    _lay_out(tmp_path)
    run = run_padconv(["conv", "c.npy", "w.npy", "-o", "y.npy"], cwd=tmp_path,
                      preexec_fn=_close_stdout)
    assert run.returncode == 0 and run.stderr == b"", run.stderr_text
    assert np.load(tmp_path / "y.npy").shape == (1, 1, 3, 3)


def _limits(address_space: int | None = None, file_size: int | None = None):
    def preexec() -> None:
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    return preexec


def test_emit_onnx_over_the_file_size_limit_leaves_nothing(tmp_path):
    """``ulimit -f``: the --emit-onnx model (with its initializers) cannot be written."""
    big = np.zeros((1, 1, 256, 256), np.float32)
    np.save(tmp_path / "big.npy", big)
    np.save(tmp_path / "w.npy", np.ones((1, 1, 1, 1), np.float32))
    run = run_padconv(["conv", "big.npy", "w.npy", "--emit-onnx", "m.onnx",
                       "--emit-initializers", "-o", "y.npy"], cwd=tmp_path,
                      preexec_fn=_limits(file_size=64 * 1024))
    assert run.returncode == 2, run.stderr_text
    assert "Traceback" not in run.stderr_text and len(run.stderr_lines) == 1, run.stderr_text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.npy", "w.npy"]


def test_show_under_a_small_address_space_is_one_line(tmp_path):
    """``ulimit -v`` near what a 64 MiB tensor's statistics need: a result or one line
    naming the file (the limits follow the address space left), never a traceback."""
    np.save(tmp_path / "t.npy", np.zeros(16 * 2**20, np.float32))
    run = run_padconv(["show", "t.npy"], cwd=tmp_path, preexec_fn=_limits(250 * 2**20))
    assert run.returncode in (0, 2), run.stderr_text[:600]  # 0: it fitted on this machine
    assert "Traceback" not in run.stderr_text, run.stderr_text[:600]
    if run.returncode == 2:
        assert len(run.stderr_lines) == 1 and "t.npy" in run.stderr_text, run.stderr_text
