"""Worker threads shared by the numpy kernels (Pad).

numpy releases the GIL inside its copy loops, so independent blocks of one operator can run on
all the cores from a plain thread pool. (Conv runs in the native core, which has its own
threads: :mod:`padconv_cli.kernels.native`.)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when first needed: kept off the CLI's start-up path
    from queue import SimpleQueue

_HELPER_PREFIX = "padconv-helper"
_Job = tuple[Callable[[], None], threading.Event]
_jobs: SimpleQueue[_Job] | None = None
_jobs_pid = -1


def worker_count() -> int:
    """Cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def run_tasks(tasks: Sequence[Callable[[], None]]) -> None:
    """Run independent numpy-heavy tasks on the cores (numpy releases the GIL in its loops).

    The calling thread and ``worker_count() - 1`` pool threads take the tasks in order from
    one shared queue, so a call wakes as few threads as possible. The first exception raised
    by a task (or a Ctrl-C) is raised here, once every thread has stopped (a failure skips the
    tasks not yet started).
    """
    if len(tasks) <= 1 or worker_count() == 1 or _on_helper_thread():
        for task in tasks:
            task()
        return
    pending = iter(tasks)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def drain() -> None:
        while True:
            with lock:
                task = None if errors else next(pending, None)
            if task is None:
                return
            try:
                task()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                with lock:
                    errors.append(exc)

    def stop(exc: BaseException) -> None:
        with lock:
            errors.append(exc)

    jobs = _helper_jobs()
    helpers: list[threading.Event] = []
    try:
        for _ in range(min(worker_count(), len(tasks)) - 1):
            done = threading.Event()
            jobs.put((drain, done))
            helpers.append(done)
        drain()
    except BaseException as exc:  # e.g. Ctrl-C between two tasks: the helpers stop too
        stop(exc)
    _wait_for_helpers(helpers, stop)
    if errors:  # Ctrl-C first, then the first failure
        raise next((e for e in errors if not isinstance(e, Exception)), errors[0])


def _wait_for_helpers(
    helpers: list[threading.Event], stop: Callable[[BaseException], None]
) -> None:
    """Wait until every helper has returned, even through Ctrl-C (recorded with ``stop``, which
    makes the helpers take no new task): the caller must not go on (reuse a buffer the tasks
    write) while a helper is still inside a task."""
    for done in helpers:
        while True:
            try:
                done.wait()
                break
            except BaseException as exc:  # noqa: BLE001 - recorded, raised by run_tasks
                stop(exc)


def _on_helper_thread() -> bool:
    """Whether this is one of the pool's helper threads: a task that runs tasks of its own runs
    them itself, as waiting for the pool from inside the pool could wait for ever."""
    return threading.current_thread().name.startswith(_HELPER_PREFIX)


def _helper_jobs() -> SimpleQueue[_Job]:
    """The queue the helper threads (one fewer than the cores) take jobs from; the threads are
    started on first use, and anew in a forked child (threads do not survive fork).

    They are daemon threads: an interpreter exiting on Ctrl-C, however early, never waits for
    them (a pool's worker interrupted while it starts could otherwise hold the exit for ever).
    """
    global _jobs, _jobs_pid
    if _jobs is None or _jobs_pid != os.getpid():
        from queue import SimpleQueue

        jobs: SimpleQueue[_Job] = SimpleQueue()
        for index in range(max(1, worker_count() - 1)):
            threading.Thread(
                target=_serve, args=(jobs,), name=f"{_HELPER_PREFIX}-{index}", daemon=True
            ).start()
        _jobs, _jobs_pid = jobs, os.getpid()
    return _jobs


def _serve(jobs: SimpleQueue[_Job]) -> None:
    """A helper thread: run each job, then set its event."""
    while True:
        job, done = jobs.get()
        try:
            job()
        finally:
            done.set()
