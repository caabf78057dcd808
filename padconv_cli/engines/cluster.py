"""Connecting to a ``dask.distributed`` scheduler, or starting a local cluster.

With ``--scheduler ADDRESS`` padconv connects to that running scheduler; without it, a local
cluster runs in this process (one worker, one thread per core, talking in-process; the only
sockets are distributed's status HTTP servers, bound to 127.0.0.1) and is shut down at the end.

distributed's log lines and warnings reach stderr only with ``--verbose``.  asyncio reports a
future whose exception nobody read when it is collected, maybe long after the run: a quiet run
collects its garbage before it ends, and leaves the ``asyncio`` logger quiet when nobody had
set its level.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import warnings
from collections.abc import Iterator
from typing import Any

from padconv_cli.errors import PadconvError, RuntimeFailure
from padconv_cli.tensorio.files import one_line

CONNECT_TIMEOUT_SECONDS = 10
BLOCK_CEILING_BYTES = 512 * 2**20
QUIET_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")


def require_dask(modules: tuple[str, ...] = ("dask.array", "distributed")) -> None:
    """Raise a one-line :class:`PadconvError` naming the missing ones of ``modules``."""
    missing = []
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            missing.append(module.split(".")[0])
    if missing:
        raise PadconvError(
            f"engine dask needs {', '.join(missing)}; install the optional packages with: "
            "pip install 'padconv[dask]' (zarr 3 needs Python >= 3.11)",
            param="engine",
        )


@contextlib.contextmanager
def quiet_distributed(verbose: bool) -> Iterator[None]:
    """Hide distributed's log lines and warnings unless ``verbose`` (module docstring)."""
    if verbose:
        yield
        return
    import distributed  # noqa: F401  (configures its loggers on import; quiet them after)

    names = {name for name in list(logging.root.manager.loggerDict)
             if name.split(".")[0] in QUIET_LOGGERS}
    loggers = [logging.getLogger(name) for name in sorted({*QUIET_LOGGERS, *names})]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:  # what distributed's objects say when collected stays hidden
                yield
            except Exception:
                gc.collect()
                raise
            gc.collect()  # not after a signal: the process ends now
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            if logger.name != "asyncio" or level != logging.NOTSET:
                logger.setLevel(level)


@contextlib.contextmanager
def dask_client(scheduler: str | None, verbose: bool = False) -> Iterator[Any]:
    """A ``distributed.Client`` of ``scheduler``, else of a local cluster (module docstring)."""
    require_dask()
    from distributed import Client, LocalCluster

    with quiet_distributed(verbose):
        if not scheduler:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
            with (
                LocalCluster(n_workers=1, threads_per_worker=max(1, cores or os.cpu_count() or 1),
                             processes=False, protocol="inproc://",
                             dashboard_address="127.0.0.1:0",
                             worker_dashboard_address="127.0.0.1:0", memory_limit=0) as cluster,
                Client(cluster) as client,
            ):
                yield client
            return
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_SECONDS)
        except (OSError, TimeoutError, ValueError) as exc:
            raise PadconvError(f"scheduler {scheduler}: cannot connect to a dask scheduler "
                               f"({one_line(exc, 200)})", param="scheduler") from None
        try:
            yield client
        finally:
            with contextlib.suppress(Exception):  # a scheduler that is gone is not waited for
                client.close(timeout=2)


def worker_limits(client: Any) -> list[tuple[int, int]]:
    """``(memory_limit, threads)`` of each worker as the scheduler reports them (0: none)."""
    workers = client.scheduler_info().get("workers", {}).values()
    return [(int(w.get("memory_limit") or 0), max(1, int(w.get("nthreads") or 1)))
            for w in workers]


def block_budget(workers: list[tuple[int, int]], memory_limit: int | None, fallback: int,
                 ceiling: int = BLOCK_CEILING_BYTES) -> int:
    """Bytes of one block: ``min`` over the workers of ``budget / (2 * threads)`` (two blocks
    in flight per thread: one computed, one written), at most ``ceiling``, with ``budget =
    min(limit / 2, memory_limit)`` (``limit``: the worker's reported memory limit, of which
    distributed spills at 60 % and pauses at 80 %); ``memory_limit``, else ``fallback``, for a
    worker without a limit."""
    per_worker = []
    for limit, threads in workers or [(0, 1)]:
        caps = [cap for cap in (limit // 2 if limit > 0 else None, memory_limit) if cap]
        per_worker.append((min(caps) if caps else fallback) // (2 * threads))
    return max(1, min(min(per_worker), ceiling))


def runtime_failure(exc: BaseException, scheduler: str | None) -> RuntimeFailure | None:
    """The one-line :class:`RuntimeFailure` for a failure of the cluster (None for others)."""
    name = type(exc).__name__
    where = f"the dask scheduler {scheduler}" if scheduler else "the local dask cluster"
    if name == "KilledWorker":
        return RuntimeFailure(
            "a dask worker died while computing a block (KilledWorker: it ran out of memory or "
            "was stopped); give the workers more memory (`dask worker --memory-limit`) "
            "or lower memory_limit so that blocks are smaller",
            param="memory_limit",
        )
    lost = ("CommClosedError", "CancelledError", "FutureCancelledError", "TimeoutError")
    if name in lost or isinstance(exc, OSError):
        return RuntimeFailure(
            f"lost the connection to {where} while computing ({name}: {one_line(exc, 120)}); "
            "nothing was written; check that the scheduler runs and rerun"
        )
    return None
