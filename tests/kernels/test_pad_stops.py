"""A running Pad stops between its tasks: on request_stop() (the CLI's signal handler calls it)
or when a Python signal handler raised on the main thread."""

from __future__ import annotations

import signal
import threading

import numpy as np
import pytest

from padconv_cli.kernels import native
from padconv_cli.kernels.pad import pad


def long_pad(out: np.ndarray) -> None:
    """A constant pad of a (1, 1) input into the large ``out`` (rows shared by three threads)."""
    pad(np.zeros((1, 1), np.uint8), [0, 0, out.shape[0] - 1, out.shape[1] - 1], 1, out=out)


def test_request_stop_ends_a_pad_on_another_thread(monkeypatch):
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", "3")
    out = np.empty((2048, 8192), np.uint8)
    raised = []

    def run() -> None:
        try:
            for _ in range(1000):  # until a request lands in a pad (on a busy machine the
                long_pad(out)      # requesting thread may get no core before one ends)
        except RuntimeError as exc:
            raised.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    while runner.is_alive():
        native.extension().request_stop()
    runner.join()
    assert raised and "pad stopped" in str(raised[0])


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_a_signal_handler_that_raises_ends_a_pad_on_the_main_thread():
    out = np.empty((2048, 8192), np.uint8)
    main, done, armed = threading.get_ident(), threading.Event(), threading.Event()
    raised = []

    def handler(signum, frame):
        if armed.is_set() and not raised:  # once, and only inside pytest.raises below
            raised.append(signum)
            raise KeyboardInterrupt

    def send() -> None:
        while not done.wait(0.001):
            signal.pthread_kill(main, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, handler)
    sender = threading.Thread(target=send)
    try:
        with pytest.raises(KeyboardInterrupt):
            armed.set()
            sender.start()
            for _ in range(1000):  # until a signal lands
                long_pad(out)
    finally:
        armed.clear()
        done.set()
        if sender.ident is not None:
            sender.join()
        signal.signal(signal.SIGUSR1, previous)
    assert raised == [signal.SIGUSR1]
