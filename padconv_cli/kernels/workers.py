"""Worker threads, BLAS thread control and kept scratch buffers shared by the kernels.

numpy releases the GIL inside its copy and arithmetic loops, so independent blocks of one
operator can run on all the cores from a plain thread pool. Scratch buffers are kept per
thread between calls: on Linux a fresh large allocation costs a page fault per 4 KiB on first
touch, which for a few-millisecond kernel is a large share of its time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported when first needed: kept off the CLI's start-up path
    from queue import SimpleQueue

KEPT_BUFFER_BYTES = 16 * 2**20
"""Scratch buffers up to this size are kept from call to call (one per thread and slot)."""

_HELPER_PREFIX = "padconv-helper"
_Job = tuple[Callable[[], None], threading.Event]
_jobs: SimpleQueue[_Job] | None = None
_jobs_pid = -1
_kept = threading.local()


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
    run_stages([tasks])


def run_stages(stages: Sequence[Sequence[Callable[[], None]]]) -> None:
    """:func:`run_tasks` for tasks in stages: every task of a stage has finished before any task
    of the next one starts, and the threads are woken once for all the stages.

    The tasks are taken in order, so a thread that takes a task of stage ``k`` waits only for
    tasks already taken by running threads; a thread still asleep never holds a stage up.
    """
    stages = [stage for stage in stages if stage]
    if (
        not stages
        or max(len(stage) for stage in stages) <= 1
        or worker_count() == 1
        or _on_helper_thread()
    ):
        for stage in stages:
            for task in stage:
                task()
        return
    pending = iter([(index, task) for index, stage in enumerate(stages) for task in stage])
    unfinished = [len(stage) for stage in stages]
    finished = [threading.Event() for _ in stages]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def drain() -> None:
        while True:
            with lock:
                item = None if errors else next(pending, None)
            if item is None:
                return
            stage, task = item
            try:
                if stage:
                    finished[stage - 1].wait()
                if not errors:
                    task()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                with lock:
                    errors.append(exc)
            finally:  # a skipped task counts as finished too, so no stage waits for ever
                with lock:
                    unfinished[stage] -= 1
                    if not unfinished[stage]:
                        finished[stage].set()

    def stop(exc: BaseException) -> None:
        with lock:
            errors.append(exc)
        for event in finished:  # threads waiting for a stage go on, and skip their task
            event.set()

    jobs = _helper_jobs()
    helpers: list[threading.Event] = []
    try:
        for _ in range(min(worker_count(), max(len(stage) for stage in stages)) - 1):
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
    makes the helpers take no new task): the caller must not go on (restore BLAS's threads,
    reuse a scratch buffer) while a helper is still inside a task."""
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


def scratch(size: int, dtype: np.dtype, slot: str) -> np.ndarray:
    """A 1-D uninitialised array of ``size`` elements for temporary use inside one call.

    Arrays of at most KEPT_BUFFER_BYTES come from a buffer kept per thread and ``slot`` (two
    live scratch arrays of one thread need different slots); larger ones are allocated fresh.
    """
    nbytes = size * np.dtype(dtype).itemsize
    if nbytes > KEPT_BUFFER_BYTES:
        return np.empty(size, dtype=dtype)
    buffers = getattr(_kept, "buffers", None)
    if buffers is None:
        buffers = _kept.buffers = {}
    kept = buffers.get(slot)
    if kept is None or kept.nbytes < nbytes:
        kept = buffers[slot] = np.empty(nbytes, dtype=np.uint8)
    return kept[:nbytes].view(dtype)


_blas_lock = threading.Lock()
_blas_users = 0
_blas_saved_threads = 0


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[bool]:
    """Set OpenBLAS to one thread for the block (restored when the last concurrent user leaves);
    yields whether it could (False when numpy's BLAS is not a known OpenBLAS, or with one core).

    The thread count changes how OpenBLAS cuts the matrices among its threads, and with the cut
    which kernel variant sums an element, so a product's last bits may differ between thread
    counts (measured on 64x576 @ 576x3136). Paths that must repeat their sums bit for bit run
    their products in here.
    """
    global _blas_users, _blas_saved_threads
    controls = openblas_thread_controls()
    if controls is None or worker_count() == 1:
        yield False
        return
    get_threads, set_threads = controls
    with _blas_lock:
        if _blas_users == 0:
            _blas_saved_threads = get_threads()
            set_threads(1)
        _blas_users += 1
    try:
        yield True
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                set_threads(_blas_saved_threads)


@functools.cache
def openblas_thread_controls() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the thread count of the OpenBLAS numpy links
    (:func:`~padconv_cli.kernels.blas.openblas_library`); None when there is none."""
    import ctypes

    from padconv_cli.kernels.blas import openblas_library

    found = openblas_library()
    if found is None:
        return None
    library, prefix, _, suffix = found
    getter = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
    setter = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
    if getter is None or setter is None:
        return None
    getter.restype, getter.argtypes = ctypes.c_int, []
    setter.restype, setter.argtypes = None, [ctypes.c_int]
    return getter, setter
