"""Running Pad or Conv on a dask cluster: the workers compute each block
(:mod:`.dask_ops`) and write it into the target (:mod:`.dask_io`), once each confirmed the
client's input and output; only byte counts travel back.  A lost scheduler or a dead worker
ends the run with one :class:`~padconv_cli.errors.RuntimeFailure` line and no output.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from padconv_cli.engines.cluster import block_budget, dask_client, runtime_failure, worker_limits
from padconv_cli.engines.dask_io import absolute, block_output, confirm_on_workers, open_block_input
from padconv_cli.engines.dask_ops import conv_dask, pad_dask
from padconv_cli.engines.locations import check_url, is_url
from padconv_cli.errors import PadconvError
from padconv_cli.outofcore.progress import TiledResult, TileProgress


def store_block(values: np.ndarray, target: Any, box: tuple[slice, ...]) -> int:
    """Write one computed block into the target; returns its byte count (for progress)."""
    target[box] = values
    return int(values.nbytes)


def regular_chunks(array: Any) -> Any:
    """The array rechunked, where needed, so that all chunks but the last per axis are equal
    (Zarr chunk grids are regular)."""
    wanted = tuple(sizes if len(sizes) > 1 and len(set(sizes[:-1])) == 1 and sizes[-1] <= sizes[0]
                   else max(sizes, default=0) for sizes in array.chunks)
    return array if wanted == array.chunks else array.rechunk(wanted)


def store(client: Any, array: Any, target: str, show_progress: bool | str, label: str,
          inputs: list[Any], scheduler: str | None = None) -> int:
    """Compute every block of ``array`` on the cluster and write it into ``target``, once every
    worker confirmed the ``inputs`` (fingerprints) and the temporary output; returns the
    number of blocks."""
    array = regular_chunks(array)
    chunk_shape = tuple(sizes[0] if sizes else 0 for sizes in array.chunks)
    with block_output(target, array.shape, array.dtype, chunk_shape) as out:
        if math.prod(array.shape) == 0:
            return 0
        try:
            confirm_on_workers(client, inputs, [out])
            blocks = _compute_blocks(client, array, out, show_progress, label)
        except PadconvError:
            raise
        except Exception as exc:
            failure = runtime_failure(exc, scheduler)
            if failure is None:
                raise
            raise failure from None
        out.check_complete(blocks)
        return blocks


def _compute_blocks(client: Any, array: Any, out: Any, show_progress: bool | str,
                    label: str) -> int:
    import dask
    from dask.array.core import slices_from_chunks
    from distributed import as_completed

    tasks = [dask.delayed(store_block, pure=False)(block, out, box)
             for block, box in zip(array.to_delayed().ravel(), slices_from_chunks(array.chunks),
                                   strict=True)]
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


def _run_blocks(label: str, blocks: Callable[[Any, int], tuple[Any, bool]], source: str,
                target: str, memory_limit: int | None, scheduler: str | None,
                show_progress: bool | str, verbose: bool, fallback_limit: int | None,
                read_policy: Any = None) -> TiledResult:
    """One dask run: paths made absolute (URLs checked), blocks sized by
    :func:`padconv_cli.engines.cluster.block_budget` (``fallback_limit`` for workers without a
    limit, default half the available memory), the input opened, ``blocks(x chunked,
    block_bytes) -> (y, exact)`` built and y stored into ``target``; the input is read under
    ``read_policy`` (a ReadPolicy; None: the default)."""
    for path, param in ((source, "data"), (target, "output")):
        if is_url(path):
            check_url(path, param)
    source, target = absolute(source), absolute(target)
    if fallback_limit is None:
        from padconv_cli.resources import available_memory_bytes

        fallback_limit = available_memory_bytes() // 2
    with dask_client(scheduler, verbose) as client:
        block_bytes = block_budget(worker_limits(client), memory_limit, fallback_limit)
        x = open_block_input(source, read_policy)
        y, exact = blocks(x.chunked(block_bytes), block_bytes)
        count = store(client, y, target, show_progress, label, [x.fingerprint], scheduler)
    return TiledResult(tuple(y.shape), count, exact)


def dask_pad(source: str, target: str, pads: Any, constant_value: Any = None, axes: Any = None,
             mode: str = "constant", *, memory_limit: int | None, scheduler: str | None = None,
             show_progress: bool | str = False, verbose: bool = False,
             fallback_limit: int | None = None, plan: Any = None,
             read_policy: Any = None) -> TiledResult:
    """ONNX Pad of the ``.npy``/Zarr ``source`` into the ``.npy``/Zarr ``target`` on dask;
    ``memory_limit``: a per-worker cap (None: none), see :func:`_run_blocks`."""
    def blocks(x: Any, block_bytes: int) -> tuple[Any, bool]:
        return pad_dask(x, pads, constant_value, axes, mode, block_bytes=block_bytes,
                        plan=plan), True

    return _run_blocks("pad", blocks, source, target, memory_limit, scheduler, show_progress,
                       verbose, fallback_limit, read_policy)


def dask_conv(source: str, w: np.ndarray, b: np.ndarray | None, target: str, *,
              memory_limit: int | None, scheduler: str | None = None,
              show_progress: bool | str = False, verbose: bool = False,
              fallback_limit: int | None = None, plan: Any = None, read_policy: Any = None,
              **attributes: Any) -> TiledResult:
    """ONNX Conv of the ``.npy``/Zarr ``source`` with W (and B) into ``target`` on dask
    (blocks sized as for :func:`dask_pad`)."""
    def blocks(x: Any, block_bytes: int) -> tuple[Any, bool]:
        return conv_dask(x, w, b, block_bytes=block_bytes, plan=plan, **attributes)

    return _run_blocks("conv", blocks, source, target, memory_limit, scheduler, show_progress,
                       verbose, fallback_limit, read_policy)
