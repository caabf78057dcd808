"""The installed ``padconv`` command: a Ctrl-C during the interpreter's own start-up waits for
padconv's handler (one line, exit 130), and what the caller set up passes through: arguments,
environment, standard streams, ignored and blocked signals, and a normal signal mask for the
run (so for the processes it starts)."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hostile.runner import PADCONV, sigint_as_from_a_terminal

WAIT_SECONDS = 60
pytestmark = [
    pytest.mark.skipif(PADCONV is None, reason="the installed padconv command is what is tested"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/status"),
]

# Imported by ``site`` during the interpreter's start-up (PYTHONPATH comes before
# site-packages): it reports on a descriptor, then sleeps, so a SIGINT is sent while CPython's
# start-up is running, before any line of padconv.
SITECUSTOMIZE = """
import os, time
os.write(int(os.environ["READY_FD"]), b"r")
time.sleep(1.0)
"""


def test_ctrl_c_while_site_runs_gets_padconvs_one_line(tmp_path):
    """Before the launcher: CPython printed its report for sitecustomize and ran on (exit 0)."""
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    read_end, write_end = os.pipe()
    environment = {**os.environ, "PYTHONPATH": str(tmp_path / "hook"), "READY_FD": str(write_end)}
    process = subprocess.Popen([PADCONV, "pad", "x.npy", "--pads", "1", "1", "-o", "y.npy"],
                               cwd=tmp_path, env=environment, pass_fds=(write_end,),
                               stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               preexec_fn=sigint_as_from_a_terminal)
    os.close(write_end)
    try:
        assert os.read(read_end, 1) == b"r"
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=WAIT_SECONDS)
    finally:
        os.close(read_end)
        if process.poll() is None:
            process.kill()
    assert (process.returncode, stderr) == (130, b"padconv: interrupted\n")
    assert not (tmp_path / "y.npy").exists()


def _signal_set(status: str, field: str) -> set[int]:
    """The signal numbers of one mask line of /proc/PID/status (SigBlk, SigIgn, SigCgt)."""
    for line in status.splitlines():
        if line.startswith(field + ":"):
            bits = int(line.split()[1], 16)
            return {n for n in range(1, 65) if bits >> (n - 1) & 1}
    raise AssertionError(f"no {field} in /proc status")


# The number of the read system call, to see the child waiting in a read of its stdin.
READ_SYSCALL = {"x86_64": 0, "aarch64": 63}.get(platform.machine())


def _status_once_running(process: subprocess.Popen) -> str:
    """/proc/PID/status once padconv waits in a read of its stdin (handlers all installed)."""
    if READ_SYSCALL is None:
        pytest.skip(f"the read system call's number on {platform.machine()} is not listed")
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        call = Path(f"/proc/{process.pid}/syscall").read_text().split()
        if call[:2] == [str(READ_SYSCALL), "0x0"]:
            return Path(f"/proc/{process.pid}/status").read_text()
        time.sleep(0.01)
    raise AssertionError("padconv never waited on its stdin")


def _reading_stdin(tmp_path: Path, before_exec) -> subprocess.Popen:
    """``padconv pad - ...`` waiting on a pipe, started with SIGINT at its default action and
    then ``before_exec`` run in the child."""

    def prepare() -> None:
        sigint_as_from_a_terminal()
        if before_exec is not None:
            before_exec()

    return subprocess.Popen([PADCONV, "pad", "-", "--pads", "1", "1", "-o", "y.npy"],
                            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=prepare)


def _finish(process: subprocess.Popen, payload: bytes) -> tuple[int, bytes]:
    try:
        _, stderr = process.communicate(payload, timeout=WAIT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, stderr


def _npy_bytes() -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.arange(3, dtype=np.float32))
    return buffer.getvalue()


def test_the_run_has_a_normal_signal_mask(tmp_path):
    """SIGINT, blocked by the launcher until padconv's handler exists, is unblocked for the
    run, so every process padconv starts has the normal mask too."""
    process = _reading_stdin(tmp_path, None)
    status = _status_once_running(process)
    code, stderr = _finish(process, _npy_bytes())
    assert _signal_set(status, "SigBlk") == set()
    assert signal.SIGINT in _signal_set(status, "SigCgt")
    assert (code, stderr) == (0, b"")


def _ignore(*names: str):
    def before_exec() -> None:
        for name in names:
            signal.signal(getattr(signal, name), signal.SIG_IGN)

    return before_exec


def test_signals_the_caller_ignores_stay_ignored(tmp_path):
    """A background job of a shell ignores SIGINT; ``nohup`` ignores SIGHUP: padconv runs on."""
    process = _reading_stdin(tmp_path, _ignore("SIGINT", "SIGHUP"))
    status = _status_once_running(process)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGHUP)
    code, stderr = _finish(process, _npy_bytes())
    assert {signal.SIGINT, signal.SIGHUP} <= _signal_set(status, "SigIgn")
    assert (code, stderr) == (0, b"")
    assert np.load(tmp_path / "y.npy").tolist() == [0, 0, 1, 2, 0]


def _block_sigint() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def test_sigint_the_caller_blocked_stays_blocked(tmp_path):
    process = _reading_stdin(tmp_path, _block_sigint)
    status = _status_once_running(process)
    process.send_signal(signal.SIGINT)  # stays pending: the run completes
    code, stderr = _finish(process, _npy_bytes())
    assert _signal_set(status, "SigBlk") == {signal.SIGINT}
    assert (code, stderr) == (0, b"")


@pytest.mark.parametrize("name", ["with space.npy", "é-ü.npy", "--padconv-launched=blocked.npy"])
def test_arguments_pass_through_unchanged(tmp_path, name):
    """Names with spaces, non-ASCII letters, and the launcher's own marker given by the user
    (an ordinary argument, here a file name after ``--``)."""
    np.save(tmp_path / name, np.arange(2, dtype=np.float32))
    result = subprocess.run([PADCONV, "pad", "--pads", "1", "0", "-o", "y.npy", "--", name],
                            cwd=tmp_path, capture_output=True, timeout=WAIT_SECONDS)
    assert (result.returncode, result.stderr) == (0, b"")
    assert np.load(tmp_path / "y.npy").tolist() == [0, 0, 1]


def test_the_launchers_marker_as_the_first_argument_is_a_usage_error(tmp_path):
    result = subprocess.run([PADCONV, "--padconv-launched=unblock", "x"], cwd=tmp_path,
                            capture_output=True, timeout=WAIT_SECONDS)
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1
    assert "--padconv-launched" in result.stderr.decode()


def test_the_environment_passes_through(tmp_path):
    """A PADCONV_* variable reaches the run (an out-of-range value is refused by name)."""
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3), np.float32))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 1), np.float32))
    result = subprocess.run([PADCONV, "conv", "x.npy", "w.npy", "-o", "y.npy"], cwd=tmp_path,
                            env={**os.environ, "PADCONV_NATIVE_THREADS": "0"},
                            capture_output=True, timeout=WAIT_SECONDS)
    assert result.returncode == 2, result.stderr
    assert "PADCONV_NATIVE_THREADS" in result.stderr.decode()
