"""A few real runs of the installed ``padconv`` command: pipelines, exit codes, quiet pipes."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

PADCONV = shutil.which("padconv")
needs_padconv_script = pytest.mark.skipif(PADCONV is None, reason="the padconv script is not installed")


def sh(command: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        capture_output=True,
        timeout=120,
    )


@needs_padconv_script
def test_pad_into_conv_pipeline(tmp_path):
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((3, 2, 3, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    piped = sh("padconv pad x.npy --pads 0 0 1 1 0 0 1 1 | padconv conv - w.npy -o y.npy", tmp_path)
    assert piped.returncode == 0, piped.stderr
    direct = sh("padconv conv x.npy w.npy --pads 1 1 1 1 -o z.npy", tmp_path)
    assert direct.returncode == 0, direct.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.load(tmp_path / "z.npy"))


@needs_padconv_script
def test_python_dash_m_runs_the_same_command(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "padconv_cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.startswith("padconv, version")


@needs_padconv_script
def test_closed_pipe_is_quiet(tmp_path):
    """The reader leaves after 10 of 2 MiB: padconv exits 141 (the shell convention for
    SIGPIPE) and prints nothing.  Some head builds drain more than they print, so the write can
    also complete (exit 0).  The statuses of both sides of the pipe are reported separately, so
    head's status cannot stand in for padconv's."""
    np.save(tmp_path / "big.npy", np.zeros((512, 512), dtype=np.float64))
    pipeline = "padconv pad big.npy --pads 1 1 1 1 | head -c 10 >/dev/null"
    result = sh(f'{pipeline}; echo "${{PIPESTATUS[0]}} ${{PIPESTATUS[1]}}"', tmp_path)
    padconv_status, head_status = result.stdout.split()
    assert padconv_status in (b"141", b"0"), result.stderr
    assert head_status == b"0"
    assert result.stderr == b""


@needs_padconv_script
def test_bad_input_exit_code_and_single_line(tmp_path):
    (tmp_path / "bad.npy").write_bytes(b"not a numpy file at all")
    result = sh("padconv pad bad.npy --pads 1 1 -o out.npy", tmp_path)
    assert result.returncode == 2
    assert result.stderr.count(b"\n") == 1
    assert b"bad.npy" in result.stderr
    assert not (tmp_path / "out.npy").exists()
