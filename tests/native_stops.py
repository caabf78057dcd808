"""Stopping a long native call, as the kernels' stop tests do it: a Python signal handler that
raises on the main thread (Ctrl-C), or ``request_stop()`` from another thread."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from padconv_cli.kernels import native

STOP_SECONDS = 5.0  # the kernels look for a stop every few milliseconds; slack for a busy machine


class Stopped(Exception):
    """Raised by the test's signal handler."""


def seconds_to_stop_on_a_signal(call: Callable[[], Any]) -> float:
    """Run ``call`` with a SIGALRM handler raising :class:`Stopped` 0.2 s in; the call must
    raise it. Returns the seconds the call took."""
    def raise_stopped(signum, frame):
        raise Stopped

    previous = signal.signal(signal.SIGALRM, raise_stopped)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        started = time.monotonic()
        with pytest.raises(Stopped):
            call()
        return time.monotonic() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome_when_stopped_from_another_thread(call: Callable[[], Any]) -> list[Any]:
    """Run ``call`` on a thread and ``request_stop()`` every 0.1 s until it ends (a request
    affects the calls running when it is made); the call's result or exception, in a list."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - what the call raised is the result
            outcome.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + STOP_SECONDS
    while worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
        native.extension().request_stop()
    worker.join(STOP_SECONDS)
    assert not worker.is_alive()
    return outcome
