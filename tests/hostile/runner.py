"""Run the installed ``padconv`` command as a child process and measure what it cost.

The child's peak resident memory comes from ``os.wait4``'s resource usage of that one child
(``ru_maxrss``, KiB on Linux), so runs happening in parallel threads do not mix their numbers.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

CHILD_TIMEOUT_SECONDS = 60.0
MAX_PEAK_RSS_BYTES = 300 * 2**20
MAX_LINE_CHARACTERS = 1000  # one line a person can read: lists in messages are cut
CONTROL_BYTES = re.compile(rb"[\x00-\x1f\x7f]")  # what a terminal acts on: must be escaped

# A fork keeps the parent's resident-set high-water mark through exec, so a child started by a
# large test process would report the parent's size.  The launcher below is a fresh, small
# python that forks the command itself, reaps it and writes the grandchild's ru_maxrss (KiB).
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as report:
    report.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def _installed_script() -> str | None:
    """The ``padconv`` script beside this interpreter (no version-manager shim), else PATH's."""
    beside = Path(sys.executable).with_name("padconv")
    return str(beside) if beside.is_file() else shutil.which("padconv")


PADCONV = _installed_script()


def sigint_as_from_a_terminal() -> None:
    """``preexec_fn`` of a child that a test sends SIGINT: its SIGINT starts at the default
    action, as for a command typed at a terminal, even when the suite itself runs where SIGINT
    is ignored (a background job), which the child would inherit and keep ignoring."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def padconv_command() -> list[str]:
    """The installed console script, or ``python -m padconv_cli`` when it is not installed."""
    return [PADCONV] if PADCONV else [sys.executable, "-m", "padconv_cli"]


def start_padconv(args: Sequence[str], cwd: Path) -> subprocess.Popen:
    """``padconv ARGS`` started in ``cwd``: stdin and stdout on /dev/null, stderr piped."""
    return subprocess.Popen([*padconv_command(), *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_while_running(condition: Callable[[], bool], process: subprocess.Popen,
                       timeout: float = CHILD_TIMEOUT_SECONDS, poll: float = 0.005) -> bool:
    """True as soon as ``condition()`` holds; False when ``process`` ended first or
    ``timeout`` seconds passed without it (``process.poll()`` tells the two apart)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if condition():
            return True
        time.sleep(poll)
    return condition()


def one_line_refusal(process: subprocess.Popen, event: str,
                     timeout: float = CHILD_TIMEOUT_SECONDS) -> str:
    """The stderr of ``process`` once it ends, which must be exit 2 with one line and no
    traceback; ``event`` names what was done to it meanwhile (a run that finished first
    tested nothing)."""
    _, stderr = process.communicate(timeout=timeout)
    text = stderr.decode("utf-8", "replace")
    if process.returncode == 0:
        raise AssertionError(f"the run finished before {event}; make the input larger")
    assert process.returncode == 2, text
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    return text


@dataclass(frozen=True)
class ChildRun:
    """What one run of the child did: exit code, output, wall time and peak memory."""

    args: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes
    wall_seconds: float
    peak_rss_bytes: int
    timed_out: bool

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr_text.splitlines()


def _stdin_file(stdin: bytes | None):
    if stdin is None:
        return subprocess.DEVNULL
    handle = tempfile.TemporaryFile()
    handle.write(stdin)
    handle.seek(0)
    return handle


def _wait_with_rusage(pid: int, deadline: float) -> tuple[int, object, bool]:
    """Reap ``pid``, killing its process group at ``deadline``; (wait status, rusage, timed out)."""
    delay = 0.002
    while True:
        reaped, status, usage = os.wait4(pid, os.WNOHANG)
        if reaped == pid:
            return status, usage, False
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return status, usage, True
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _read_report(path: str) -> int:
    try:
        with open(path, encoding="ascii") as report:
            return int(report.read() or 0) * 1024
    except (OSError, ValueError):
        return -1


def run_padconv(args: Sequence[str], **options) -> ChildRun:
    """Run the installed ``padconv ARGS`` (see :func:`run_command` for the options)."""
    run = run_command([*padconv_command(), *args], **options)
    return dataclasses.replace(run, args=tuple(args))


def run_command(
    command: Sequence[str],
    *,
    cwd: Path,
    stdin: bytes | None = None,
    timeout: float = CHILD_TIMEOUT_SECONDS,
    measure_memory: bool = False,
    stdout_target=None,
    preexec_fn=None,
) -> ChildRun:
    """Run ``command`` in ``cwd`` and capture stdout/stderr in anonymous files (not in cwd).

    With ``measure_memory`` the command runs under the launcher and ``peak_rss_bytes`` is its
    own peak; otherwise it is -1.  ``stdout_target`` replaces the captured stdout (e.g. an open
    ``/dev/full``); ``preexec_fn`` runs in the child before the command (resource limits).
    The command runs in a new session so that a timeout kills all of it.
    """
    command = list(command)
    report = None
    if measure_memory:
        handle, report = tempfile.mkstemp(prefix="padconv-rss-")
        os.close(handle)
        # -I -S: the launcher needs only os and sys; no site, no .pth files (tens of ms per run)
        command = [sys.executable, "-I", "-S", "-c", _LAUNCHER, report, *command]
    stdin_handle = _stdin_file(stdin)
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            process = subprocess.Popen(
                command,
                cwd=cwd,
                stdin=stdin_handle,
                stdout=out if stdout_target is None else stdout_target,
                stderr=err,
                start_new_session=True,
                preexec_fn=preexec_fn,
            )
            status, _, timed_out = _wait_with_rusage(process.pid, start + timeout)
            wall = time.monotonic() - start
            process.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        peak = _read_report(report) if report else -1
    finally:
        if stdin_handle is not subprocess.DEVNULL:
            stdin_handle.close()
        if report:
            os.unlink(report)
    return ChildRun(
        args=tuple(command),
        returncode=process.returncode,
        stdout=stdout,
        stderr=stderr,
        wall_seconds=wall,
        peak_rss_bytes=peak,
        timed_out=timed_out,
    )


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry below ``folder`` (relative name -> (size, mtime_ns)), symlinks not followed."""
    entries = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        entries[str(path.relative_to(folder))] = (info.st_size, info.st_mtime_ns)
    return entries


def assert_refused_in_one_line(run: ChildRun, detail: str, words: Sequence[str] = (),
                               any_of: Sequence[str] = ()) -> None:
    """The corpora's refusal: no hang, exit 2, one ``padconv ...: error: ...`` line of at most
    MAX_LINE_CHARACTERS naming every word of ``words`` and one of ``any_of`` (ignoring case),
    no traceback, no raw control byte, nothing on stdout, a peak under MAX_PEAK_RSS_BYTES."""
    assert not run.timed_out, "hung: " + detail
    assert run.returncode == 2, detail
    assert "Traceback" not in run.stderr_text, detail
    assert len(run.stderr_lines) == 1, detail
    line = run.stderr_lines[0]
    assert line.startswith("padconv") and ": error: " in line, detail
    assert len(line) <= MAX_LINE_CHARACTERS, f"a {len(line)}-character line: " + detail
    for word in words:
        assert word.lower() in line.lower(), f"should name {word!r}: {detail}"
    if any_of:
        assert any(w.lower() in line.lower() for w in any_of), f"none of {any_of}: {detail}"
    assert not CONTROL_BYTES.search(run.stderr.rstrip(b"\n")), "raw control bytes: " + detail
    assert run.stdout == b"", detail
    assert 0 < run.peak_rss_bytes < MAX_PEAK_RSS_BYTES, detail
