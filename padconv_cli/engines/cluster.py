"""Connecting to a ``dask.distributed`` scheduler, or starting a local cluster.

Rules: with ``--scheduler ADDRESS`` padconv connects to that running scheduler (its workers
must see the input and output paths, e.g. on a shared file system); without it, a local
cluster runs in this process (one worker, one thread per core) and is shut down when the work
ends.  Its workers are threads of this process talking in-process (``inproc://``); the only
sockets are the status HTTP servers distributed always starts, bound to 127.0.0.1.

Messages: distributed's own log lines and warnings (``Couldn't gather ... rescheduling``,
reconnection attempts) reach stderr only with ``--verbose``; a lost scheduler or a dead
worker becomes one :class:`~padconv_cli.errors.RuntimeFailure` line (exit code 3).  asyncio
reports a future whose exception nobody read when the future is collected, which can be long
after the run (a timeout while a loaded cluster shuts down: "Future exception was never
retrieved"): a quiet run collects its garbage before it ends, and leaves the ``asyncio``
logger quiet when nobody had set its level.

Block sizes (:func:`block_budget`): each worker's memory budget is half of the memory limit
the scheduler reports for it (distributed spills to disk at 60 % of that limit and pauses
the worker at 80 %), or ``--memory-limit`` when that is given and smaller; a worker without
a limit (``--memory-limit 0`` on ``dask worker``, or padconv's local cluster) gets
``--memory-limit`` (default: half the memory available to the client).  A block gets that
budget divided by two blocks in flight (one computed, one written) per worker thread; the
smallest over the workers, at most 512 MiB.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import warnings
from collections.abc import Iterator
from typing import Any

from padconv_cli.errors import PadconvError, RuntimeFailure

CONNECT_TIMEOUT_SECONDS = 10
LOOPBACK_ANY_PORT = "127.0.0.1:0"
BLOCK_CEILING_BYTES = 512 * 2**20
QUIET_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")
DASK_EXTRA_HINT = "install the optional packages with: pip install 'padconv[dask]'"


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
            f"engine dask needs {', '.join(missing)}; {DASK_EXTRA_HINT} "
            "(zarr 3 needs Python >= 3.11)",
            param="engine",
        )


def core_count() -> int:
    """Cores this process may run on."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def quiet_distributed(verbose: bool) -> Iterator[None]:
    """Hide distributed's log lines and warnings unless ``verbose`` (module docstring)."""
    if verbose:
        yield
        return
    import distributed  # noqa: F401  (configures its loggers on import; quiet them after)

    names = [
        name
        for name in list(logging.root.manager.loggerDict)
        if name.split(".")[0] in QUIET_LOGGERS
    ]
    loggers = [logging.getLogger(name) for name in sorted({*QUIET_LOGGERS, *names})]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ending = False
            try:
                yield
            except BaseException as exc:
                ending = not isinstance(exc, Exception)  # a signal: the process ends now
                raise
            finally:
                if not ending:  # what distributed's objects say when collected stays hidden
                    gc.collect()
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            if logger.name != "asyncio" or level != logging.NOTSET:
                logger.setLevel(level)


@contextlib.contextmanager
def dask_client(scheduler: str | None, verbose: bool = False) -> Iterator[Any]:
    """A ``distributed.Client`` for the block computations (module docstring)."""
    require_dask()
    with quiet_distributed(verbose), _client(scheduler) as client:
        yield client


@contextlib.contextmanager
def _client(scheduler: str | None) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    from padconv_cli.tensorio.files import one_line

    if scheduler:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_SECONDS)
        except (OSError, TimeoutError, ValueError) as exc:
            raise PadconvError(
                f"scheduler {scheduler}: cannot connect to a dask scheduler "
                f"({one_line(exc, 200)})",
                param="scheduler",
            ) from None
        try:
            yield client
        finally:
            _close_quietly(client)
        return
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=core_count(),
            processes=False,
            protocol="inproc://",
            dashboard_address=LOOPBACK_ANY_PORT,
            worker_dashboard_address=LOOPBACK_ANY_PORT,
            memory_limit=0,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _close_quietly(client: Any) -> None:
    """Close the client without waiting long for a scheduler that is gone."""
    with contextlib.suppress(Exception):
        client.close(timeout=2)


def worker_limits(client: Any) -> list[tuple[int, int]]:
    """``(memory_limit, threads)`` of each worker as the scheduler reports them (0: none)."""
    info = client.scheduler_info()
    return [
        (int(w.get("memory_limit") or 0), max(1, int(w.get("nthreads") or 1)))
        for w in info.get("workers", {}).values()
    ]


def block_budget(
    workers: list[tuple[int, int]],
    memory_limit: int | None,
    fallback: int,
    ceiling: int = BLOCK_CEILING_BYTES,
) -> int:
    """Bytes of one block by the rule of the module docstring: ``min`` over the workers of
    ``budget / (2 * threads)``, with ``budget = min(limit / 2, memory_limit)`` (``limit`` the
    worker's reported memory limit; ``memory_limit``, else ``fallback``, when it has none)."""
    per_worker = []
    for limit, threads in workers or [(0, 1)]:
        caps = [cap for cap in (limit // 2 if limit > 0 else None, memory_limit) if cap]
        budget = min(caps) if caps else fallback
        per_worker.append(budget // (2 * threads))
    return max(1, min(min(per_worker), ceiling))


def runtime_failure(exc: BaseException, scheduler: str | None) -> RuntimeFailure | None:
    """The one-line :class:`RuntimeFailure` for a failure of the cluster (None for others)."""
    from padconv_cli.tensorio.files import one_line

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
