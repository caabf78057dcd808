"""Worker threads shared by the numpy kernels."""

from __future__ import annotations

import threading
import time

import pytest

from padconv_cli.kernels import pad as workers


def test_run_tasks_runs_every_task_once():
    done = []
    lock = threading.Lock()

    def record(index: int) -> None:
        with lock:
            done.append(index)

    workers.run_tasks([lambda i=i: record(i) for i in range(50)])
    assert sorted(done) == list(range(50))


def test_run_tasks_raises_a_task_failure_once_the_running_tasks_finished():
    done = []

    def slow() -> None:
        time.sleep(0.05)
        done.append("slow")

    def fail() -> None:
        raise ValueError("task failed")

    with pytest.raises(ValueError, match="task failed"):
        workers.run_tasks([slow, fail])
    assert done == ["slow"]


def test_tasks_that_run_tasks_of_their_own_finish():
    done = []
    lock = threading.Lock()

    def inner(index: int) -> None:
        with lock:
            done.append(index)

    def outer(first: int) -> None:
        workers.run_tasks([lambda i=i: inner(i) for i in range(first, first + 3)])

    runner = threading.Thread(
        target=workers.run_tasks, args=([lambda f=f: outer(f) for f in (0, 3, 6, 9)],)
    )
    runner.start()
    runner.join(30)
    assert not runner.is_alive()
    assert sorted(done) == list(range(12))


def test_ctrl_c_while_waiting_for_a_helper_still_waits_for_it(monkeypatch):
    if workers.worker_count() == 1:
        pytest.skip("one core: no helper threads")
    started = threading.Event()
    finished = []

    def slow() -> None:  # one thread takes it while the other waits in fast()
        started.set()
        time.sleep(0.2)
        finished.append("slow")

    def fast() -> None:
        assert started.wait(10)

    interrupts = iter([KeyboardInterrupt()])
    real_wait = threading.Event.wait

    def interrupted_wait(self, timeout=None):  # Ctrl-C in the wait for the helpers (no timeout)
        if timeout is None and threading.current_thread() is threading.main_thread():
            exc = next(interrupts, None)
            if exc is not None:
                raise exc
        return real_wait(self, timeout)

    monkeypatch.setattr(threading.Event, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        workers.run_tasks([fast, slow])
    assert finished == ["slow"]  # the interrupted wait went on until the helper was done


def test_helpers_are_daemon_threads():
    workers.run_tasks([lambda: None, lambda: None])
    helpers = [t for t in threading.enumerate() if t.name.startswith("padconv-helper")]
    assert helpers and all(t.daemon for t in helpers)


def test_ctrl_c_wins_over_a_task_failure():
    if workers.worker_count() == 1:
        pytest.skip("one core: the first failure stops the run")
    failed = threading.Event()

    def fail() -> None:
        failed.set()
        raise ValueError("task failed")

    def interrupt() -> None:  # raised after the other thread's failure was recorded
        assert failed.wait(10)
        time.sleep(0.01)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        workers.run_tasks([interrupt, fail])

