"""The native Conv stops early: on the main thread when a Python signal handler raises (Ctrl-C),
on any thread after ``request_stop()``; the call raises, and later calls are unaffected."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

from padconv_cli.kernels import native
from padconv_cli.kernels.conv import conv

STOP_SECONDS = 5.0  # the kernels look for a stop every few milliseconds; slack for a busy machine


class Stopped(Exception):
    """Raised by the test's signal handler."""


def _long_conv_inputs() -> tuple[np.ndarray, ...]:
    """About 65 GFLOP on the portable kernels and two threads: seconds on any machine."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64, 256, 256), dtype=np.float32)
    w = rng.standard_normal((64, 64, 11, 11), dtype=np.float32)
    return x, w, np.empty((1, 64, 256, 256), np.float32)


def _long_conv(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> None:
    native.conv_into(x, w, None, y, strides=(1, 1), dilations=(1, 1), pads_begin=(5, 5),
                     group=1, threads=2, isa="generic")


def _a_small_conv_is_still_right() -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    y = conv(x, np.ones((1, 1, 2, 2), np.float32))
    assert y.tolist() == [[[[10, 14, 18], [26, 30, 34], [42, 46, 50]]]]


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_signal_handler_that_raises_stops_a_conv_on_the_main_thread():
    def raise_stopped(signum, frame):
        raise Stopped

    inputs = _long_conv_inputs()
    previous = signal.signal(signal.SIGALRM, raise_stopped)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        started = time.monotonic()
        with pytest.raises(Stopped):
            _long_conv(*inputs)
        took = time.monotonic() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert took < STOP_SECONDS
    _a_small_conv_is_still_right()


def test_request_stop_stops_a_conv_on_another_thread():
    """A request affects the calls running when it is made: it is repeated until the call,
    started on its thread meanwhile, has ended."""
    inputs = _long_conv_inputs()
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            _long_conv(*inputs)
            outcome.append(None)
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
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
    _a_small_conv_is_still_right()
