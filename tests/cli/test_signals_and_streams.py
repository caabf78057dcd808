"""Signals and standard streams: the installed command in real child processes (Ctrl-C and
SIGTERM during a run, closed or full stdout and stderr, pipelines and exit codes) and stdin as a
source."""

from __future__ import annotations

import io
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hostile.runner import PADCONV, padconv_command, sigint_as_from_a_terminal

# Signals and closed standard streams, through the installed command in real child processes.
#
# Ctrl-C (SIGINT) or SIGTERM in the middle of a long Conv, on each engine, ends the run at once:
# one line, exit 130 or 143, no output and no temporary file left.  A signal the caller ignores
# stays ignored.  A closed stdout pipe is exit 141 without a word; a report to a closed stdout or a
# read from a closed stdin is one line.
#
# Each child starts with SIGINT at its default action, as a command typed at a terminal, even when
# the suite runs where SIGINT is ignored (a background job).  The time from the signal to the
# child's exit is measured; the bound asserted is far above what the kernels need (they look for
# a stop between tasks of milliseconds), so that a loaded machine does not fail the test.


WAIT_SECONDS = 60
STOP_SECONDS = 5.0  # signal to exit; the kernels stop within a few tens of milliseconds

# A Conv of ~260 GFLOP on the portable kernels and two threads: tens of seconds on any machine,
# so the signal always lands in the middle of it.  Only one thread for numpy's BLAS: the native
# pool's helper thread is then the sign that the Conv is running.
LONG_CONV_ENVIRONMENT = {"PADCONV_NATIVE_ISA": "generic", "PADCONV_NATIVE_THREADS": "2",
                         "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                         "MKL_NUM_THREADS": "1"}
ENGINES = {
    "memory": ["--engine", "memory"],
    "tiled": ["--engine", "tiled", "--memory-limit", "64M"],
    "dask": ["--engine", "dask", "--memory-limit", "256M"],
}
SIGNALS = {"SIGINT": (signal.SIGINT, 130, "padconv: interrupted"),
           "SIGTERM": (signal.SIGTERM, 143, "padconv: terminated")}

needs_proc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture(scope="module")
def long_conv(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("long_conv")
    rng = np.random.default_rng(0)
    np.save(folder / "x.npy", rng.standard_normal((1, 64, 512, 512), dtype=np.float32))
    np.save(folder / "w.npy", rng.standard_normal((64, 64, 11, 11), dtype=np.float32))
    return folder


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _temp_output(folder: Path) -> bool:
    return any(p.name.startswith(".out.npy") for p in folder.iterdir())


def _wait_until(condition, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the run never reached the point to interrupt"
        time.sleep(0.01)


def _wait_until_computing(engine: str, folder: Path, process: subprocess.Popen) -> None:
    """Until the Conv runs: the native pool's helper thread (in memory), the tiles written
    into the temporary output (tiled), one CPU-second spent on blocks after the temporary
    output was made (dask: its cluster's threads start before)."""
    if engine == "memory":
        _wait_until(lambda: _threads(process.pid) >= 2, process)
        time.sleep(0.2)
    elif engine == "tiled":
        _wait_until(lambda: _temp_output(folder), process)
        time.sleep(0.5)
    else:
        _wait_until(lambda: _temp_output(folder), process)
        spent = _cpu_seconds(process.pid)
        _wait_until(lambda: _cpu_seconds(process.pid) > spent + 1.0, process)


@needs_proc
@pytest.mark.parametrize(("engine", "signal_name"), [
    # each engine stops its own way (the native core between tasks, the tiled engine between
    # tiles, dask by cancelling its futures); the signal only picks the exit line and code
    ("memory", "SIGINT"), ("tiled", "SIGTERM"), ("dask", "SIGINT"),
])
def test_a_signal_in_the_middle_of_a_long_conv_ends_the_run_at_once(long_conv, engine,
                                                                    signal_name):
    if engine == "dask":
        pytest.importorskip("distributed")
    signum, code, line = SIGNALS[signal_name]
    command = [*padconv_command(), "conv", "x.npy", "w.npy", "--pads", "5", "5", "5", "5",
               "-o", "out.npy", *ENGINES[engine]]
    process = subprocess.Popen(command, cwd=long_conv, env={**os.environ, **LONG_CONV_ENVIRONMENT},
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, preexec_fn=sigint_as_from_a_terminal)
    try:
        _wait_until_computing(engine, long_conv, process)
        sent = time.monotonic()
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=WAIT_SECONDS)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
    print(f"{engine} {signal_name}: exit {took:.3f} s after the signal")
    assert (process.returncode, stderr.decode()) == (code, line + "\n")
    assert sorted(p.name for p in long_conv.iterdir()) == ["w.npy", "x.npy"]
    assert took < STOP_SECONDS, f"{took:.1f} s from the signal to the exit"


@needs_proc
def test_ctrl_c_while_reading_stdin_is_one_line(tmp_path):
    process = _reading_stdin(tmp_path, None)
    _wait_until_reading_stdin(process)
    process.send_signal(signal.SIGINT)
    code, stderr = _finish(process, b"")
    assert (code, stderr) == (130, b"padconv: interrupted\n")
    assert list(tmp_path.iterdir()) == []


@needs_proc
def test_signals_the_caller_ignores_stay_ignored(tmp_path):
    """A background job of a shell ignores SIGINT; ``nohup`` ignores SIGHUP: padconv runs on."""

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    process = _reading_stdin(tmp_path, ignore)
    _wait_until_reading_stdin(process)
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGHUP)
    code, stderr = _finish(process, _npy_bytes(np.arange(3, dtype=np.float32)))
    assert (code, stderr) == (0, b"")
    assert np.load(tmp_path / "y.npy").tolist() == [0, 0, 1, 2, 0]


@needs_proc
def test_a_closed_stdout_pipe_is_exit_141_without_a_word(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1024, 1024), np.float32))  # 4 MiB: more than a pipe
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        result = subprocess.run([*padconv_command(), "pad", "x.npy", "--pads", "1", "1", "1", "1"],
                                cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=write_end,
                                stderr=subprocess.PIPE, timeout=WAIT_SECONDS)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, b"")


def _closed_fd(fd: int):
    def close() -> None:
        os.close(fd)

    return close


@needs_proc
@pytest.mark.parametrize("dash", [(), ("-o", "-")], ids=["no-o", "dash-o"])
def test_closed_stdout_is_one_line_and_exit_2(tmp_path, dash):
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    process = subprocess.run(
        [*padconv_command(), "pad", "x.npy", "--pads", "1", "1", "1", "1", *dash],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=_closed_fd(1), timeout=WAIT_SECONDS,
    )
    text = process.stderr.decode()
    assert process.returncode == 2, text
    assert text.splitlines() == ["padconv pad: error: <stdout>: standard output is closed; "
                                 "give -o FILE"]


@needs_proc
def test_closed_stdout_does_not_stop_a_file_output(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    process = subprocess.run(
        [*padconv_command(), "pad", "x.npy", "--pads", "1", "1", "1", "1", "-o", "y.npy"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=_closed_fd(1), timeout=WAIT_SECONDS,
    )
    assert process.returncode == 0, process.stderr
    assert np.load(tmp_path / "y.npy").shape == (4, 5)


@needs_proc
def test_closed_stdin_is_one_line(tmp_path):
    process = subprocess.run(
        [*padconv_command(), "pad", "-", "--pads", "1", "1", "-o", "y.npy"],
        cwd=tmp_path, stderr=subprocess.PIPE, preexec_fn=_closed_fd(0), timeout=WAIT_SECONDS,
    )
    text = process.stderr.decode()
    assert process.returncode == 2, text
    assert len(text.splitlines()) == 1 and "stdin" in text, text
    assert not (tmp_path / "y.npy").exists()


LATE_LIBRARY_NOISE = """
import atexit, logging, sys, warnings
from padconv_cli.cli.main import main

class Finalised:
    def __del__(self):
        raise RuntimeError("ignored in a finaliser")

def noise():
    logging.getLogger("asyncio").error("Task was destroyed but it is pending!")
    warnings.warn("coroutine was never awaited", RuntimeWarning)
    global leftover
    leftover = None

leftover = Finalised()
atexit.register(noise)
main(sys.argv[1:])
"""


@needs_proc
@pytest.mark.parametrize("args, code", [(("show", "missing.npy"), 2), (("--version",), 0)],
                         ids=["refused", "succeeded"])
def test_what_libraries_say_while_the_interpreter_exits_adds_nothing(tmp_path, args, code):
    process = subprocess.run([sys.executable, "-c", LATE_LIBRARY_NOISE, *args], cwd=tmp_path,
                             capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert process.returncode == code, process.stderr
    assert not {"destroyed", "awaited", "finaliser"} & set(process.stderr.split()), process.stderr
    assert len(process.stderr.splitlines()) == (1 if code else 0), process.stderr


# --- a child waiting on its stdin ------------------------------------------------------------

# The number of the read system call, to see the child waiting in a read of its stdin.
READ_SYSCALL = {"x86_64": 0, "aarch64": 63}.get(platform.machine())


def _wait_until_reading_stdin(process: subprocess.Popen) -> None:
    """Until padconv waits in a read of its stdin (its handlers are all installed by then)."""
    if READ_SYSCALL is None:
        pytest.skip(f"the read system call's number on {platform.machine()} is not listed")

    def reading() -> bool:
        try:
            call = Path(f"/proc/{process.pid}/syscall").read_text().split()
        except OSError:
            return False
        return call[:2] == [str(READ_SYSCALL), "0x0"]

    _wait_until(reading, process)


def _reading_stdin(tmp_path: Path, before_exec) -> subprocess.Popen:
    """``padconv pad - ...`` waiting on a pipe, started with SIGINT at its default action and
    then ``before_exec`` run in the child."""

    def prepare() -> None:
        sigint_as_from_a_terminal()
        if before_exec is not None:
            before_exec()

    return subprocess.Popen([*padconv_command(), "pad", "-", "--pads", "1", "1", "-o", "y.npy"],
                            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=prepare)


def _finish(process: subprocess.Popen, payload: bytes) -> tuple[int, bytes]:
    try:
        _, stderr = process.communicate(payload, timeout=WAIT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, stderr


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# A few real runs of the installed ``padconv`` command: pipelines, exit codes, quiet pipes.


needs_padconv_script = pytest.mark.skipif(
    PADCONV is None, reason="the padconv script is not installed"
)


def sh(command: str, cwd) -> subprocess.CompletedProcess:
    """``command`` in bash, with the installed script's folder first on PATH (the suite may
    run from an environment that is not activated)."""
    path = os.pathsep.join([os.path.dirname(PADCONV or sys.executable), os.environ["PATH"]])
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env={**os.environ, "PATH": path},
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


# stderr that cannot take padconv's line (``2>/dev/full``, ``2>&-``): the line is dropped,
# the exit code is the one the run would have had (2 for a refused input, 0 for a good run with
# its output written), never 1 or 120 from a failed write or the interpreter's final flush.


needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")

PAD = ["pad", "x.npy", "--pads", "1", "1", "1", "1", "-o", "out.npy"]


def _run(tmp_path, args: list[str], stdout_full: bool = False, close_stderr: bool = False):
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    with open("/dev/full", "wb") as full:
        return subprocess.run([*padconv_command(), *args], cwd=tmp_path,
                              stdin=subprocess.DEVNULL,
                              stdout=full if stdout_full else subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL if close_stderr else full,
                              preexec_fn=(lambda: os.close(2)) if close_stderr else None,
                              timeout=WAIT_SECONDS).returncode


@needs_dev_full
@pytest.mark.parametrize("close_stderr", [False, True], ids=["dev-full", "closed"])
@pytest.mark.parametrize("args", [
    ["pad", "x.npy", "--pads", "1", "1", "-o", "out.npy"],  # the rank rule
    ["pad", "missing.npy", "--pads", "1", "1", "-o", "out.npy"],
    ["pad", "x.npy", "--pads", "1", "1", "1", "1", "--no-such-flag"],
], ids=["bad-pads", "missing-file", "usage"])
def test_a_refused_input_still_exits_2(tmp_path, args, close_stderr):
    assert _run(tmp_path, args, close_stderr=close_stderr) == 2
    assert not (tmp_path / "out.npy").exists()


@needs_dev_full
@pytest.mark.parametrize("close_stderr", [False, True], ids=["dev-full", "closed"])
def test_a_good_run_exits_0_with_its_output(tmp_path, close_stderr):
    assert _run(tmp_path, PAD, close_stderr=close_stderr) == 0
    assert np.load(tmp_path / "out.npy").shape == (4, 5)


@needs_dev_full
def test_a_report_to_a_full_stdout_with_a_full_stderr_exits_2(tmp_path):
    assert _run(tmp_path, ["show", "x.npy"], stdout_full=True) == 2


PROGRESS_LINE = """
from padconv_cli.outofcore import progress
progress.ANNOUNCE_AFTER_SECONDS = 0
with progress.TileProgress(2, 100, "line", "pad") as bar:
    bar.advance(50)
    bar.advance(50)
print(bar.tiles_done)
"""


@needs_dev_full
def test_the_progress_line_to_a_full_stderr_does_not_stop_the_run():
    """Neither the progress line's failed write nor the interpreter's final flush of stderr
    (exit 120) changes the run's ending."""
    with open("/dev/full", "wb") as full:
        result = subprocess.run([sys.executable, "-c", PROGRESS_LINE], stdout=subprocess.PIPE,
                                stderr=full, timeout=WAIT_SECONDS)
    assert (result.returncode, result.stdout) == (0, b"2\n")


# stdin as a source: a typeable .npz member hint, and at most one stdin per conv.


def _two_member_npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, a=np.ones((2, 2), np.float32), b=np.zeros(3, np.float32))
    return buffer.getvalue()


def test_stdin_npz_ambiguity_names_a_typeable_form(run_cli):
    result = run_cli("pad", "--pads", "1", "1", "-", "-o", "-", input=_two_member_npz())
    assert result.exit_code == 2
    assert "pick one with -:NAME (after a -- that ends the options)" in result.stderr
    assert "<stdin>:NAME" not in result.stderr


def test_the_suggested_stdin_member_form_works(run_cli):
    result = run_cli("pad", "--pads", "1", "1", "-o", "-", "--", "-:b", input=_two_member_npz())
    assert result.exit_code == 0, result.stderr
    assert np.load(io.BytesIO(result.stdout_bytes)).shape == (5,)

@pytest.mark.parametrize("sources", [("-", "-"), ("-", "[[[1.0]]]", "-"), ("x", "-", "-")])
def test_conv_refuses_stdin_twice(run_cli, sources):
    result = run_cli("conv", *sources, input=b"")
    assert result.exit_code == 2
    assert "only one of X, W, B can be - (stdin)" in result.stderr
    assert result.stderr.count("\n") == 1
