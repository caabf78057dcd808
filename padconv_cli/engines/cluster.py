"""Connecting to a ``dask.distributed`` scheduler, or starting a local cluster.

Rules: with ``--scheduler ADDRESS`` padconv connects to that running scheduler (its workers
must see the input and output paths, e.g. on a shared file system); without it, a local
cluster runs in this process (one worker, one thread per core, no dashboard) and is shut down
when the work ends.  Its workers are threads of this process talking in-process, so it opens no
network port.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from padconv_cli.errors import PadconvError

CONNECT_TIMEOUT_SECONDS = 10
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
            f"--engine dask needs {', '.join(missing)}; {DASK_EXTRA_HINT} "
            "(zarr 3 needs Python >= 3.11)"
        )


def core_count() -> int:
    """Cores this process may run on."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def dask_client(scheduler: str | None) -> Iterator[Any]:
    """A ``distributed.Client`` for the block computations (module docstring)."""
    require_dask()
    from distributed import Client, LocalCluster

    from padconv_cli.tensorio.files import one_line

    if scheduler:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_SECONDS)
        except (OSError, TimeoutError, ValueError) as exc:
            raise PadconvError(
                f"--scheduler {scheduler}: cannot connect to a dask scheduler "
                f"({one_line(exc, 200)})"
            ) from None
        with client:
            yield client
        return
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=core_count(),
            processes=False,
            dashboard_address=None,
            memory_limit=0,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def worker_threads(client: Any) -> int:
    """Total threads of the cluster's workers (at least 1)."""
    info = client.scheduler_info()
    return max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))
