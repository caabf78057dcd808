"""Ctrl-C at any moment of a run, and standard streams that are closed: one line, a known exit
code, never a traceback.  Real child processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hostile.runner import padconv_command, sigint_as_from_a_terminal

from padconv_cli.kernels.conv import conv

EXIT_INTERRUPTED = 130
WAIT_SECONDS = 60
# Delays (seconds) after the start at which SIGINT is sent: during the imports of the command
# group and of the command module, while reading the input, computing and writing.
DELAYS = (0.0, 0.01, 0.02, 0.03, 0.045, 0.06, 0.08, 0.1, 0.13, 0.16, 0.2, 0.25, 0.3, 0.4, 0.6)


def _own_code_command(ready_fd: int) -> list[str]:
    """padconv's entry point in an interpreter started without ``site`` (-S), which reports on
    ``ready_fd`` once padconv's entry module has run: delays count from padconv's first line,
    not from the interpreter's start-up (not padconv's code; in an editable install or with
    .pth files it spends 100 ms or more in ``site`` before padconv is reached)."""
    import padconv_cli

    package_root = str(Path(padconv_cli.__file__).resolve().parents[1])
    paths = [package_root, *[p for p in sys.path if p and "site-packages" in p]]
    code = (f"import os, sys; sys.path[:0] = {paths!r}; sys.argv[0] = 'padconv'; "
            "from padconv_cli.cli.entry import main; "
            f"os.write({ready_fd}, b'r'); os.close({ready_fd}); main()")
    return [sys.executable, "-S", "-c", code]


def _interrupt(process: subprocess.Popen, delay: float) -> tuple[int, str]:
    """Sleep ``delay``, send SIGINT, wait; (exit code, stderr)."""
    try:
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=WAIT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, stderr.decode("utf-8", "replace")


def _start(command: list[str], cwd: Path, **options) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=sigint_as_from_a_terminal, **options)


def _interrupted_own_code(args: list[str], cwd: Path, delay: float) -> tuple[int, str]:
    """Run padconv (see :func:`_own_code_command`), interrupt it ``delay`` after its entry
    module has run."""
    read_end, write_end = os.pipe()
    try:
        process = _start([*_own_code_command(write_end), *args], cwd, pass_fds=(write_end,))
        os.close(write_end)
        write_end = -1
        os.read(read_end, 1)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    return _interrupt(process, delay)


def _assert_interrupted_cleanly(code: int, stderr: str, delay: float) -> None:
    """130 and one line; or, for a signal that came before the interpreter had installed any
    handler, killed by SIGINT (a shell shows 130 too) without a word."""
    detail = f"SIGINT after {delay * 1000:.0f} ms: exit {code}, stderr={stderr[-800:]!r}"
    assert "Traceback" not in stderr, detail
    if code == -signal.SIGINT:
        assert stderr == "", detail
        return
    assert code in (EXIT_INTERRUPTED, 0), detail  # 0: the run had already finished
    assert stderr == ("padconv: interrupted\n" if code else ""), detail


@pytest.fixture
def work(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 8, 256, 256), dtype=np.float32))
    np.save(tmp_path / "w.npy", rng.standard_normal((8, 8, 3, 3), dtype=np.float32))
    return tmp_path


def _no_output_left(folder: Path) -> None:
    leftovers = [p.name for p in folder.iterdir() if p.name not in ("x.npy", "w.npy")]
    assert leftovers in ([], ["out.npy"]), leftovers  # out.npy only when the run completed


@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_at_any_moment_of_padconvs_own_code(work, delay):
    args = ["conv", "x.npy", "w.npy", "--pads", "1", "1", "1", "1", "-o", "out.npy"]
    code, stderr = _interrupted_own_code(args, work, delay)
    _assert_interrupted_cleanly(code, stderr, delay)
    if (work / "out.npy").exists():  # published (atomically) before Ctrl-C came: whole
        expected = conv(np.load(work / "x.npy"), np.load(work / "w.npy"), pads=[1, 1, 1, 1])
        assert np.load(work / "out.npy").tobytes() == expected.tobytes()
    _no_output_left(work)


@pytest.mark.parametrize("delay", (0.6, 0.9, 1.3))
def test_ctrl_c_through_the_installed_command(work, delay):
    """The console script, at delays past the interpreter's start-up."""
    command = [*padconv_command(), "conv", "x.npy", "w.npy", "-o", "out.npy"]
    code, stderr = _interrupt(_start(command, work), delay)
    _assert_interrupted_cleanly(code, stderr, delay)
    _no_output_left(work)


# SIGINT sent this long after the command was started: through the launcher, the interpreter's
# start-up (``site``, .pth files), padconv's script, the imports of the command and the whole run
# of a small pad.  Denser where the start-up is.
START_UP_DELAYS = (0, 1, 2, 3, 5, 8, 12, 16, 20, 25, 30, 35, 40, 50, 60, 75, 90, 110, 140, 180,
                   240, 300)  # milliseconds


@pytest.fixture
def small(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(192, dtype=np.float32).reshape(1, 3, 8, 8))
    return tmp_path


@pytest.mark.parametrize("delay_ms", START_UP_DELAYS)
def test_ctrl_c_at_any_moment_through_the_installed_command(small, delay_ms):
    """From the exec of the installed command on: killed by SIGINT before the launcher blocked
    it (a shell shows 130, no word), 130 and one line, or the run had finished (exit 0, a whole
    output); never CPython's own report of a Ctrl-C in its start-up, never a traceback."""
    command = padconv_command()
    code, stderr = _interrupt(
        _start([*command, "pad", "x.npy", "--pads", "0", "0", "1", "1", "0", "0", "1", "1",
                "-o", "out.npy"], small),
        delay_ms / 1000,
    )
    finished = (small / "out.npy").exists()
    _assert_interrupted_cleanly(code, stderr, delay_ms / 1000)
    if finished:  # published atomically before the signal came: whole
        expected = np.pad(np.load(small / "x.npy"), [(0, 0), (0, 0), (1, 1), (1, 1)])
        assert np.load(small / "out.npy").tobytes() == expected.tobytes()
    else:
        assert code != 0, f"exit 0 without an output after {delay_ms} ms"
    assert sorted(p.name for p in small.iterdir()) in (["x.npy"], ["out.npy", "x.npy"])


# A KeyboardInterrupt raised inside a weakref callback: Python cannot raise it there, reports it
# to sys.unraisablehook and goes on (the import system's module locks have such callbacks).
SWALLOWED_INTERRUPT = """
import signal, sys, time, weakref
from padconv_cli.cli.main import DeferredInterrupt
deferred = DeferredInterrupt()
deferred.install()
signal.signal(signal.SIGINT, signal.default_int_handler)
class Thing:
    pass
thing = Thing()
ref = weakref.ref(thing, lambda ref: signal.raise_signal(signal.SIGINT))
try:
    del thing
    {after}
    print("ran on")
except KeyboardInterrupt:
    print("interrupted")
"""


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=WAIT_SECONDS)


def test_a_ctrl_c_swallowed_by_a_callback_is_raised_again_in_the_main_code():
    busy = "deadline = time.monotonic() + 5\n    while time.monotonic() < deadline: pass"
    result = _run_python(SWALLOWED_INTERRUPT.format(after=busy))
    assert (result.stdout, result.stderr) == ("interrupted\n", "")


def test_a_swallowed_ctrl_c_still_waiting_when_the_run_ends_is_reported():
    result = _run_python(SWALLOWED_INTERRUPT.format(after="print(deferred.uninstall())"))
    assert (result.stdout, result.stderr) == ("True\nran on\n", "")


def _closed_fd(fd: int):
    def close() -> None:
        os.close(fd)

    return close


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
    assert "Traceback" not in text
    assert text.splitlines() == ["padconv pad: error: <stdout>: standard output is closed; "
                                 "give -o FILE"]


def test_closed_stdout_does_not_stop_a_file_output(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    process = subprocess.run(
        [*padconv_command(), "pad", "x.npy", "--pads", "1", "1", "1", "1", "-o", "y.npy"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=_closed_fd(1), timeout=WAIT_SECONDS,
    )
    assert process.returncode == 0, process.stderr
    assert np.load(tmp_path / "y.npy").shape == (4, 5)


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


@pytest.mark.parametrize("args, code", [(("show", "missing.npy"), 2), (("--version",), 0)],
                         ids=["refused", "succeeded"])
def test_what_libraries_say_while_the_interpreter_exits_adds_nothing(tmp_path, args, code):
    process = subprocess.run([sys.executable, "-c", LATE_LIBRARY_NOISE, *args], cwd=tmp_path,
                             capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert process.returncode == code, process.stderr
    assert not {"destroyed", "awaited", "finaliser"} & set(process.stderr.split()), process.stderr
    assert len(process.stderr.splitlines()) == (1 if code else 0), process.stderr


CTRL_C_REPLACED = """
import os, signal, sys
import click
from padconv_cli.cli.main import COMMANDS, main

@click.command()
def replaced():
    how = sys.argv[1]
    try:
        if how == "printed":  # what C code's PyErr_Print does with a pending Ctrl-C
            raise KeyboardInterrupt
        if how == "swallowed":
            os.kill(os.getpid(), signal.SIGINT)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())  # delivered here, at the latest
    except KeyboardInterrupt:
        if how == "printed":
            sys.excepthook(*sys.exc_info())
    if how != "none":  # what an interrupted Cython module's import warns
        import warnings
        warnings.warn("Cython module failed to patch module with custom type", RuntimeWarning)
    raise ImportError("numpy.core.multiarray failed to import") from None

COMMANDS["replaced"] = "__main__:replaced"
main(["replaced"])
"""


@pytest.mark.parametrize("how", ["printed", "swallowed"])
def test_a_ctrl_c_that_c_code_replaced_by_another_error_is_still_the_interrupt(how):
    """...and what the unwinding warns of is not shown before the one line."""
    result = subprocess.run([sys.executable, "-c", CTRL_C_REPLACED, how], capture_output=True,
                            text=True, timeout=WAIT_SECONDS, preexec_fn=sigint_as_from_a_terminal)
    assert (result.returncode, result.stderr) == (130, "padconv: interrupted\n")


def test_the_same_error_without_a_ctrl_c_is_not_taken_for_one():
    result = subprocess.run([sys.executable, "-c", CTRL_C_REPLACED, "none"], capture_output=True,
                            text=True, timeout=WAIT_SECONDS, preexec_fn=sigint_as_from_a_terminal)
    assert result.returncode == 1
    assert "ImportError: numpy.core.multiarray failed to import" in result.stderr


CTRL_C_AS_CLICK_CLOSES = """
import os, signal
import click
from padconv_cli.cli.main import COMMANDS, main

def interrupt():
    os.kill(os.getpid(), signal.SIGINT)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())

@click.command()
def closing():
    click.get_current_context().find_root().call_on_close(interrupt)

COMMANDS["closing"] = "__main__:closing"
main(["closing"])
"""


def test_a_ctrl_c_while_click_closes_the_run_is_one_line_without_an_empty_one():
    result = subprocess.run([sys.executable, "-c", CTRL_C_AS_CLICK_CLOSES], capture_output=True,
                            text=True, timeout=WAIT_SECONDS, preexec_fn=sigint_as_from_a_terminal)
    assert (result.returncode, result.stderr) == (130, "padconv: interrupted\n")
