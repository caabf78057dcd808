"""Running Pad or Conv on a dask cluster: the workers compute each block (:mod:`.dask_ops`) and
write it into the target, once each confirmed the client's input and output
(:mod:`.dask_io`); only byte counts travel back.  A lost scheduler or a dead worker
ends the run with one :class:`~padconv_cli.errors.RuntimeFailure` line and no output.

The cluster: the running scheduler of ``--scheduler ADDRESS``, else a local cluster in this
process (one worker, one thread per core, talking in-process; the only sockets are
distributed's status HTTP servers, bound to 127.0.0.1), shut down at the end.  distributed's
log lines and warnings reach stderr only with ``--verbose``; asyncio reports a future whose
exception nobody read when it is collected, maybe long after the run, so a quiet run collects
its garbage before it ends and leaves the ``asyncio`` logger quiet when nobody had set its level.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from padconv_cli.engines import dask_io
from padconv_cli.engines.dask_ops import conv_dask, pad_dask
from padconv_cli.errors import PadconvError, RuntimeFailure
from padconv_cli.kernels.native import thread_count
from padconv_cli.outofcore.progress import TiledResult, TileProgress
from padconv_cli.resources import default_memory_limit
from padconv_cli.tensorio.files import one_line

CONNECT_TIMEOUT_SECONDS = 10
BLOCK_CEILING_BYTES = 512 * 2**20
QUIET_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")


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
    dask_io.require_dask()
    from distributed import Client, LocalCluster

    with quiet_distributed(verbose):
        if not scheduler:
            with (LocalCluster(n_workers=1, threads_per_worker=thread_count(), processes=False,
                               protocol="inproc://", dashboard_address="127.0.0.1:0",
                               worker_dashboard_address="127.0.0.1:0", memory_limit=0) as cluster,
                  Client(cluster) as client):
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


def block_budget(workers: list[tuple[int, int]], memory_limit: int | None, fallback: int) -> int:
    """Bytes of one block: ``min`` over the workers of ``budget / (2 * threads)`` (two blocks
    in flight per thread: one computed, one written), at most :data:`BLOCK_CEILING_BYTES`, with
    ``budget = min(limit / 2, memory_limit)`` (``limit``: the worker's reported memory limit,
    of which distributed spills at 60 % and pauses at 80 %); ``memory_limit``, else
    ``fallback``, for a worker without a limit."""
    per_worker = []
    for limit, threads in workers or [(0, 1)]:
        caps = [cap for cap in (limit // 2 if limit > 0 else None, memory_limit) if cap]
        per_worker.append((min(caps) if caps else fallback) // (2 * threads))
    return max(1, min(min(per_worker), BLOCK_CEILING_BYTES))


def runtime_failure(exc: BaseException, scheduler: str | None) -> RuntimeFailure | None:
    """The one-line :class:`RuntimeFailure` for a failure of the cluster (None for others)."""
    name = type(exc).__name__
    where = f"the dask scheduler {scheduler}" if scheduler else "the local dask cluster"
    if name == "KilledWorker":
        return RuntimeFailure("a dask worker died while computing a block (KilledWorker: it ran "
                              "out of memory or was stopped); give the workers more memory (`dask "
                              "worker --memory-limit`) or lower memory_limit so that blocks are "
                              "smaller", param="memory_limit")
    lost = ("CommClosedError", "CancelledError", "FutureCancelledError", "TimeoutError")
    if name in lost or isinstance(exc, OSError):
        return RuntimeFailure(
            f"lost the connection to {where} while computing ({name}: {one_line(exc, 120)}); "
            "nothing was written; check that the scheduler runs and rerun")
    return None


def store_block(values: np.ndarray, target: Any, box: tuple[slice, ...]) -> int:
    """Write one computed block into the target; returns its byte count (for progress)."""
    target[box] = values
    return int(values.nbytes)


def store(client: Any, array: Any, target: str, show_progress: bool | str, label: str,
          inputs: list[Any], scheduler: str | None = None) -> int:
    """Compute and write every block of ``array`` on the cluster once every worker confirmed
    the ``inputs`` (fingerprints) and the temporary ``target``; returns the number of blocks.
    Blocks are rechunked where needed to equal chunks but the last per axis (Zarr's grid)."""
    wanted = tuple(sizes if len(sizes) > 1 and len(set(sizes[:-1])) == 1 and sizes[-1] <= sizes[0]
                   else max(sizes, default=0) for sizes in array.chunks)
    array = array if wanted == array.chunks else array.rechunk(wanted)
    chunk_shape = tuple(sizes[0] if sizes else 0 for sizes in array.chunks)
    with dask_io.block_output(target, array.shape, array.dtype, chunk_shape) as out:
        if math.prod(array.shape) == 0:
            return 0
        try:
            dask_io.confirm_on_workers(client, inputs, [out])
            blocks = _compute_blocks(client, array, out, show_progress, label)
        except Exception as exc:
            failure = None if isinstance(exc, PadconvError) else runtime_failure(exc, scheduler)
            if failure is None:
                raise
            raise failure from None
        return blocks


def _compute_blocks(client: Any, array: Any, out: Any, show_progress: bool | str,
                    label: str) -> int:
    import dask
    from dask.array.core import slices_from_chunks
    from distributed import as_completed

    boxes = slices_from_chunks(array.chunks)
    tasks = [dask.delayed(store_block, pure=False)(block, out, box)
             for block, box in zip(array.to_delayed().ravel(), boxes, strict=True)]
    futures = client.compute(tasks)
    total = math.prod(array.shape) * array.dtype.itemsize
    try:
        with TileProgress(len(tasks), total, show_progress, label) as progress:
            for future in as_completed(futures):
                progress.advance(future.result())
    except BaseException:
        with contextlib.suppress(Exception):  # a lost scheduler cannot be asked
            client.cancel(futures, asynchronous=False)
        raise
    return len(tasks)


def _run_blocks(label: str, blocks: Callable[[Any, int], Any], source: str,
                target: str, memory_limit: int | None, scheduler: str | None = None,
                show_progress: bool | str = False, verbose: bool = False,
                fallback_limit: int | None = None, read_policy: Any = None) -> TiledResult:
    """One dask run: paths made absolute (URLs checked), blocks sized by :func:`block_budget`
    (``fallback_limit`` for workers without a limit, default half the available memory), the
    input opened under ``read_policy``, ``blocks(x chunked, block_bytes=...) -> y``
    built and y stored into ``target``."""
    for path, param in ((source, "data"), (target, "output")):
        if dask_io.is_url(path):
            dask_io.check_url(path, param)
    source, target = dask_io.absolute(source), dask_io.absolute(target)
    fallback_limit = default_memory_limit() if fallback_limit is None else fallback_limit
    with dask_client(scheduler, verbose) as client:
        block_bytes = block_budget(worker_limits(client), memory_limit, fallback_limit)
        x = dask_io.open_block_input(source, read_policy)
        y = blocks(x.chunked(block_bytes), block_bytes=block_bytes)
        count = store(client, y, target, show_progress, label, [x.fingerprint], scheduler)
    return TiledResult(tuple(y.shape), count)


def dask_pad(source: str, target: str, pads: Any, constant_value: Any = None, axes: Any = None,
             mode: str = "constant", *, plan: Any = None, **settings: Any) -> TiledResult:
    """ONNX Pad of the ``.npy``/Zarr ``source`` into the ``.npy``/Zarr ``target`` on dask;
    ``settings``: those of :func:`_run_blocks` (``memory_limit``: a per-worker cap)."""
    blocks = functools.partial(pad_dask, pads=pads, constant_value=constant_value, axes=axes,
                               mode=mode, plan=plan)
    return _run_blocks("pad", blocks, source, target, **settings)


def dask_conv(source: str, w: np.ndarray, b: np.ndarray | None, target: str, *,
              memory_limit: int | None, scheduler: str | None = None,
              show_progress: bool | str = False, verbose: bool = False,
              fallback_limit: int | None = None, plan: Any = None, read_policy: Any = None,
              **attributes: Any) -> TiledResult:
    """ONNX Conv of the ``.npy``/Zarr ``source`` with W and B into ``target``, as dask_pad."""
    blocks = functools.partial(conv_dask, w=w, b=b, plan=plan, **attributes)
    return _run_blocks("conv", blocks, source, target, memory_limit, scheduler, show_progress,
                       verbose, fallback_limit, read_policy)
