"""Running Pad or Conv on a dask cluster: open the input, build the blocks, write them.

Each block task reads the box of the input it needs straight from the ``.npy`` file; from a
Zarr store whose chunks fit a block, each chunk is read once and the blocks follow the chunk
grid, taking their halo as small crops of the neighbouring chunks.  The blocks of the result are
computed and written by the workers (each task writes its block
into the ``.npy`` or Zarr target), so only small results travel back to the client; the
client counts finished blocks for the progress bar and commits the target at the end.

Before the first block, every worker confirms that it reads the client's input and sees the
client's temporary output (:mod:`padconv_cli.engines.shared_files`); paths are made absolute
on the client.  A lost scheduler or a dead worker ends the run with one
:class:`~padconv_cli.errors.RuntimeFailure` line and no output.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from padconv_cli.engines.cluster import block_budget, dask_client, runtime_failure, worker_limits
from padconv_cli.engines.dask_io import block_output, open_block_input
from padconv_cli.engines.dask_ops import conv_dask, output_nbytes, pad_dask
from padconv_cli.engines.locations import check_url
from padconv_cli.engines.shared_files import absolute, confirm_on_workers, is_url
from padconv_cli.errors import PadconvError
from padconv_cli.outofcore.progress import TiledResult, TileProgress


def store_block(values: np.ndarray, target: Any, box: tuple[slice, ...]) -> int:
    """Write one computed block into the target; returns its byte count (for progress)."""
    target[box] = values
    return int(values.nbytes)


def regular_chunks(array: Any) -> Any:
    """The array rechunked, where needed, so that all chunks but the last per axis are equal
    (Zarr chunk grids are regular)."""
    wanted = []
    for sizes in array.chunks:
        if len(sizes) > 1 and len(set(sizes[:-1])) == 1 and sizes[-1] <= sizes[0]:
            wanted.append(sizes)
        else:
            wanted.append(max(sizes) if sizes else 0)
    return array if tuple(wanted) == array.chunks else array.rechunk(tuple(wanted))


def _boxes(chunks: tuple[tuple[int, ...], ...]) -> Any:
    """Every chunk's box in C order."""
    starts = [list(itertools.accumulate((0, *sizes[:-1]))) for sizes in chunks]
    per_axis = [
        [slice(start, start + size) for start, size in zip(axis_starts, sizes, strict=True)]
        for axis_starts, sizes in zip(starts, chunks, strict=True)
    ]
    return itertools.product(*per_axis)


def store(
    client: Any,
    array: Any,
    target: str,
    show_progress: bool | str,
    label: str,
    inputs: list[Any] | None = None,
    scheduler: str | None = None,
) -> int:
    """Compute every block of ``array`` on the cluster and write it into ``target``, once
    every worker confirmed the ``inputs`` (fingerprints) and the temporary output."""
    array = regular_chunks(array)
    chunk_shape = tuple(sizes[0] if sizes else 0 for sizes in array.chunks)
    with block_output(target, array.shape, array.dtype, chunk_shape) as out:
        if math.prod(array.shape) == 0:
            return 0
        try:
            confirm_on_workers(client, inputs or [], [out])
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


def _compute_blocks(
    client: Any, array: Any, out: Any, show_progress: bool | str, label: str
) -> int:
    import dask
    from distributed import as_completed

    delayed_blocks = array.to_delayed().ravel()
    tasks = [
        dask.delayed(store_block, pure=False)(block, out, box)
        for block, box in zip(delayed_blocks, _boxes(array.chunks), strict=True)
    ]
    futures = client.compute(tasks)
    try:
        with TileProgress(len(tasks), output_nbytes(array), show_progress, label) as progress:
            for future in as_completed(futures):
                progress.advance(future.result())
    except BaseException:
        _cancel_quietly(client, futures)
        raise
    return len(tasks)


def _cancel_quietly(client: Any, futures: list[Any]) -> None:
    """Ask the scheduler to drop the remaining blocks (a lost scheduler cannot be asked)."""
    import contextlib

    with contextlib.suppress(Exception):
        client.cancel(futures, asynchronous=False)


def _paths(source: str, target: str) -> tuple[str, str]:
    """Both paths absolute on the client; URLs checked by
    :func:`padconv_cli.engines.locations.check_url`."""
    for path, param in ((source, "data"), (target, "output")):
        if is_url(path):
            check_url(path, param)
    return absolute(source), absolute(target)


def _block_bytes(client: Any, memory_limit: int | None, fallback: int | None) -> int:
    if fallback is None:
        from padconv_cli.resources import available_memory_bytes

        fallback = available_memory_bytes() // 2
    return block_budget(worker_limits(client), memory_limit, fallback)


def _run_blocks(label: str, blocks: Callable[[Any, int], tuple[Any, bool]], source: str,
                target: str, memory_limit: int | None, scheduler: str | None,
                show_progress: bool | str, verbose: bool, fallback_limit: int | None,
                read_policy: Any = None) -> TiledResult:
    """One dask run of Pad or Conv: connect, size the blocks (:func:`_block_bytes`), open the
    input, build ``blocks(x chunked, block_bytes) -> (y, exact)`` and store y into ``target``."""
    source, target = _paths(source, target)
    with dask_client(scheduler, verbose) as client:
        block_bytes = _block_bytes(client, memory_limit, fallback_limit)
        x = open_block_input(source, read_policy)
        y, exact = blocks(x.chunked(block_bytes), block_bytes)
        count = store(client, y, target, show_progress, label, [x.fingerprint], scheduler)
    return TiledResult(tuple(y.shape), count, exact)


def dask_pad(
    source: str,
    target: str,
    pads: Any,
    constant_value: Any = None,
    axes: Any = None,
    mode: str = "constant",
    *,
    memory_limit: int | None,
    scheduler: str | None = None,
    show_progress: bool | str = False,
    verbose: bool = False,
    fallback_limit: int | None = None,
    plan: Any = None,
    read_policy: Any = None,
) -> TiledResult:
    """ONNX Pad of the ``.npy``/Zarr ``source`` into the ``.npy``/Zarr ``target`` on dask.

    Blocks are sized by :func:`padconv_cli.engines.cluster.block_budget` from the workers'
    memory limits, ``memory_limit`` (a per-worker cap, None: none) and ``fallback_limit``
    (for workers without a limit; default half the available memory); the input is read
    under ``read_policy`` (a ReadPolicy; None: the default).
    """
    def blocks(x: Any, block_bytes: int) -> tuple[Any, bool]:
        return pad_dask(x, pads, constant_value, axes, mode, block_bytes=block_bytes,
                        plan=plan), True

    return _run_blocks("pad", blocks, source, target, memory_limit, scheduler, show_progress,
                       verbose, fallback_limit, read_policy)


def dask_conv(
    source: str,
    w: np.ndarray,
    b: np.ndarray | None,
    target: str,
    *,
    memory_limit: int | None,
    scheduler: str | None = None,
    show_progress: bool | str = False,
    verbose: bool = False,
    fallback_limit: int | None = None,
    plan: Any = None,
    read_policy: Any = None,
    **attributes: Any,
) -> TiledResult:
    """ONNX Conv of the ``.npy``/Zarr ``source`` with W (and B) into ``target`` on dask
    (blocks sized as for :func:`dask_pad`)."""
    def blocks(x: Any, block_bytes: int) -> tuple[Any, bool]:
        return conv_dask(x, w, b, block_bytes=block_bytes, plan=plan, **attributes)

    return _run_blocks("conv", blocks, source, target, memory_limit, scheduler, show_progress,
                       verbose, fallback_limit, read_policy)
