"""The corpora's runs of ``python -m padconv_cli ARGS``, forked from a server that has imported
numpy, click, onnx, zarr and padconv's modules once, instead of started as a fresh interpreter
each.

Nine tenths of a refused run's CPU time is the interpreter's start-up, the imports and its
shutdown; the corpora make hundreds of runs.  Each run is still a process of its own: a fork of
the server in its own session, on the case's stdin, stdout and stderr, in the case's folder,
running ``padconv_cli.__main__``.  When it ends, the interpreter's exit is done by hand:
non-daemon threads are joined, atexit functions run, the standard streams flushed, then
``os._exit`` (a full shutdown in a fork would touch, and copy, every page of the server's
imports).  What a library prints while a fresh interpreter finalises its modules is therefore
not seen here; tests/cli/test_signals_and_streams.py checks that in real processes.

The server waits for the run, kills its session at the timeout, and reports the wait status and
the run's peak resident memory (``ru_maxrss`` of that child, the server's own included).
Runs with environment variables of their own are not forked: padconv may read them at import.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path


class ForkServer:
    """One server process; :meth:`run` forks one padconv run from it and waits for it."""

    def __init__(self) -> None:
        self._control, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        theirs.close()

    def run(self, args: Sequence[str], cwd: Path, streams: list[int],
            timeout: float) -> tuple[int, int, bool]:
        """padconv ARGS in ``cwd`` on the descriptors ``streams`` (stdin, stdout, stderr):
        (wait status, peak resident bytes, timed out)."""
        with tempfile.TemporaryFile() as request:  # arguments may be megabytes long
            request.write(json.dumps({"args": list(args), "cwd": str(cwd),
                                      "timeout": timeout}).encode())
            request.seek(0)
            socket.send_fds(self._control, [b"run"], [*streams, request.fileno()])
            reply = json.loads(self._control.recv(4096))
        return reply["status"], reply["peak"], reply["timed_out"]

    def close(self) -> None:
        self._control.close()
        self._process.wait(timeout=30)


def _stdin_file(data: bytes | None):
    """A file holding ``data`` from its start; /dev/null for None."""
    if data is None:
        return open(os.devnull, "rb")  # noqa: SIM115 (closed by the caller's with)
    handle = tempfile.TemporaryFile()
    handle.write(data)
    handle.seek(0)
    return handle


@contextlib.contextmanager
def forked_padconv(servers: int = 2) -> Iterator[Callable[..., object]]:
    """A thread-safe ``run(args, cwd, stdin=None)`` -> :class:`hostile.runner.ChildRun` over
    ``servers`` fork servers (as many runs at a time)."""
    from hostile.runner import CHILD_TIMEOUT_SECONDS, ChildRun

    made = [ForkServer() for _ in range(servers)]
    idle: queue.SimpleQueue[ForkServer] = queue.SimpleQueue()
    for server in made:
        idle.put(server)

    def run(args: Sequence[str], cwd: Path, stdin: bytes | None = None) -> ChildRun:
        server = idle.get()
        start = time.monotonic()
        try:
            with _stdin_file(stdin) as given, tempfile.TemporaryFile() as out, \
                    tempfile.TemporaryFile() as err:
                status, peak, timed_out = server.run(
                    args, cwd, [given.fileno(), out.fileno(), err.fileno()],
                    CHILD_TIMEOUT_SECONDS)
                out.seek(0)
                err.seek(0)
                stdout, stderr = out.read(), err.read()
        finally:
            idle.put(server)
        return ChildRun(tuple(args), os.waitstatus_to_exitcode(status), stdout, stderr,
                        time.monotonic() - start, peak, timed_out)

    try:
        yield run
    finally:
        for server in made:
            server.close()


# --- the server side ----------------------------------------------------------------------------


THIRD_PARTY = ("numpy", "click", "onnx", "onnx.helper", "onnx.numpy_helper", "zarr")


def _preload() -> None:
    """The libraries padconv reads with and every module of padconv that imports."""
    import importlib
    import pkgutil

    for name in THIRD_PARTY:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    import padconv_cli

    for module in pkgutil.walk_packages(padconv_cli.__path__, "padconv_cli.",
                                        onerror=lambda name: None):
        if not module.name.endswith(".__main__"):  # runpy runs that one, fresh, per run
            with contextlib.suppress(Exception):
                importlib.import_module(module.name)


def _exit_code(code: object) -> int:
    """The process exit code of ``SystemExit(code)``, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish(code: int) -> None:
    """The interpreter's exit without finalising modules: threads, atexit, streams, _exit."""
    import atexit
    import threading

    threading._shutdown()  # joins non-daemon threads, as the interpreter's exit does
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 (the interpreter reports it and exits 120)
            sys.excepthook(*sys.exc_info())
            code = 120
    os._exit(code)


def _become_the_run(request: dict, streams: list[int], control: socket.socket) -> None:
    """In the forked child: take the case's streams and folder, run ``python -m padconv_cli``."""
    import runpy

    control.close()
    os.setsid()
    for target, fd in enumerate(streams):
        os.dup2(fd, target)
    for fd in streams:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # as for ``python -m``: not this file's folder
    sys.argv = ["padconv", *request["args"]]
    code = 0
    try:
        runpy.run_module("padconv_cli", run_name="__main__", alter_sys=True)
    except SystemExit as ended:
        code = _exit_code(ended.code)
    except BaseException:  # noqa: BLE001 (an uncaught exception: traceback, exit 1)
        sys.excepthook(*sys.exc_info())
        code = 1
    _finish(code)


def _wait(pid: int, timeout: float) -> tuple[int, int, bool]:
    """Reap ``pid``, killing its session at the timeout: (status, peak bytes, timed out)."""
    deadline, delay = time.monotonic() + timeout, 0.001
    while True:
        reaped, status, usage = os.wait4(pid, os.WNOHANG)
        if reaped == pid:
            return status, usage.ru_maxrss * 1024, False
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return status, usage.ru_maxrss * 1024, True
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def serve(control: socket.socket) -> None:
    """Fork one run per request until the client closes the socket."""
    _preload()
    while True:
        message, fds, _, _ = socket.recv_fds(control, 16, 4)
        if not message:
            return
        *streams, request_fd = fds
        with os.fdopen(request_fd, "rb") as request_file:
            request = json.loads(request_file.read())
        pid = os.fork()
        if pid == 0:
            _become_the_run(request, streams, control)
        for fd in streams:
            os.close(fd)
        status, peak, timed_out = _wait(pid, request["timeout"])
        control.sendall(json.dumps({"status": status, "peak": peak,
                                    "timed_out": timed_out}).encode())


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
