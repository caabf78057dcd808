"""Timing primitives: per-call timeouts and repetition of several callables in blocks taken in
turns."""

from __future__ import annotations

import contextlib
import gc
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MIN_RUNS_BEFORE_BUDGET = 3
ROUNDS = 15
"""Number of turns each contender gets; its timed runs are spread evenly over them."""
SETTLE_S = 0.3
"""Pause after each block of runs: long enough for the worker threads a library leaves
spinning after a call (onnxruntime's pool, OpenBLAS's threads) to go to sleep, so that they do
not take a core from the next contender."""
WARMUP_S = 0.15
"""Least time spent in untimed runs at the start of each block (uncapped contenders): after the
pause, the cores need some tens of milliseconds of work to run at full speed again (measured on
the 2-core CI machine: about 20 calls of a 2 ms conv)."""


class CallTimeout(Exception):
    """A single call ran longer than its allowed time."""


@dataclass
class Timing:
    """Wall-clock durations of the timed runs of one callable."""

    times: list[float] = field(default_factory=list)
    timed_out_after: float | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    @property
    def best(self) -> float | None:
        return min(self.times) if self.times else None


@dataclass(frozen=True)
class Contender:
    """A callable to time, with its own caps (None: no cap)."""

    run: Callable[[], Any]
    max_repeat: int | None = None
    call_timeout_s: float | None = None


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise CallTimeout in the block after `seconds` (SIGALRM; main thread of POSIX only).

    A call inside C code is interrupted only when it returns to the interpreter, so the limit is
    a bound for Python-level loops (onnx.reference), not a hard kill.
    """
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise CallTimeout(f"call exceeded {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timed_call(run: Callable[[], Any], timeout_s: float | None) -> tuple[float, Any]:
    """(elapsed seconds by perf_counter, result) of one call, under the optional time limit."""
    with time_limit(timeout_s):
        start = time.perf_counter()
        result = run()
        elapsed = time.perf_counter() - start
    return elapsed, result


def time_round_robin(
    contenders: dict[str, Contender], *, warmup: int, repeat: int, budget_s: float
) -> dict[str, Timing]:
    """Time each contender `repeat` times, in blocks of consecutive runs taken in turns.

    There are ``min(ROUNDS, repeat)`` rounds; in each, every contender in turn gets at least
    `warmup` untimed runs lasting at least WARMUP_S and then its share of the timed runs back
    to back (the shares add up to `repeat`). Consecutive runs show each implementation as a
    user calling it repeatedly sees it: alternating call by call lets one library's idle worker
    threads (onnxruntime and OpenBLAS spin for a while after a call) slow the other down; for
    the same reason each block is followed by a pause of SETTLE_S. Taking turns per block
    still spreads load changes on a shared machine over all contenders. A contender stops
    early when it reaches its max_repeat, times out, or has spent more than `budget_s` in at
    least MIN_RUNS_BEFORE_BUDGET timed runs; capped contenders (max_repeat set, the slow reference
    implementations) get no warm-up runs. Garbage collection is paused while timing.
    """
    timings = {name: Timing() for name in contenders}
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for runs in block_sizes(repeat, ROUNDS):
            for name, contender in contenders.items():
                ran = _run_block(
                    contender, timings[name], warmup=warmup, runs=runs, budget_s=budget_s
                )
                if ran:
                    time.sleep(SETTLE_S)
    finally:
        if gc_was_enabled:
            gc.enable()
    return timings


def block_sizes(repeat: int, rounds: int) -> list[int]:
    """`repeat` split into ``min(rounds, repeat)`` nearly equal positive parts, larger first."""
    count = max(1, min(rounds, repeat))
    base, extra = divmod(max(0, repeat), count)
    return [base + (1 if index < extra else 0) for index in range(count)]


def _run_block(
    contender: Contender, timing: Timing, *, warmup: int, runs: int, budget_s: float
) -> bool:
    """At least `warmup` untimed runs, and more until WARMUP_S has passed (uncapped contenders
    only), then up to `runs` timed runs; False when the contender had finished already."""
    if not _still_active(contender, timing, budget_s):
        return False
    if contender.max_repeat is None:
        started = time.perf_counter()
        done = 0
        while done < warmup or time.perf_counter() - started < WARMUP_S:
            _run_once(contender, timing, record=False)
            done += 1
            if timing.timed_out_after is not None:
                return True
    for _ in range(runs):
        if not _still_active(contender, timing, budget_s):
            break
        _run_once(contender, timing, record=True)
    return True


def _still_active(contender: Contender, timing: Timing, budget_s: float) -> bool:
    """Whether the contender gets another timed run."""
    if timing.timed_out_after is not None:
        return False
    if contender.max_repeat is not None and len(timing.times) >= contender.max_repeat:
        return False
    spent = sum(timing.times)
    return len(timing.times) < MIN_RUNS_BEFORE_BUDGET or spent < budget_s


def _run_once(contender: Contender, timing: Timing, *, record: bool) -> None:
    """One call; records its duration, or the time-out, in `timing`."""
    try:
        elapsed, _ = timed_call(contender.run, contender.call_timeout_s)
    except CallTimeout:
        timing.timed_out_after = contender.call_timeout_s
        return
    if record:
        timing.times.append(elapsed)
