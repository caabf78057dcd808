"""padconv's dask engine against a hand-written dask pipeline, side by side on one cluster.

Case: a single-channel float32 Conv 3x3 with pads 1 (ONNX Conv = cross-correlation) of an
``N x N`` Zarr array with ``C x C`` chunks.  Runs, each on the same ``LocalCluster`` (worker
processes on 127.0.0.1, one thread each) and timed with ``time.perf_counter`` (best of
``--repeat``):

* ``padconv zarr->zarr`` and ``padconv zarr->npy``: :func:`padconv_cli.engines.dask_engine.
  dask_conv` (every check of the engine included: fingerprints, chunk presence, temporary store
  and publish);
* ``padconv npy->npy``: the same from a ``.npy`` copy of the input;
* ``map_overlap + scipy.ndimage.correlate``: ``dask.array.from_zarr`` ->
  ``map_overlap(correlate, depth=1, boundary=0)`` -> ``to_zarr``, the correct hand-written
  version (``scipy.ndimage.convolve`` would flip the kernel, which is wrong for ONNX Conv).

Results are compared with the float64 oracle: ``|y - y64| <= 2 * 9 * eps * sum(|x| * |w|)``
per element (the dot-product error bound of a 9-term sum).  The table goes to stdout as
Markdown (``--update-readme README.md`` also puts it between the README's markers);
``--json`` writes the figures too.

    pip install -e '.[dask,bench]'
    python benchmarks/bench_cluster.py --size 8192 --chunk 2048 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)


def make_inputs(folder: Path, size: int, chunk: int, seed: int = 0) -> tuple[Path, Path, Path]:
    """The Zarr input, its ``.npy`` copy and W (3x3), written row band by row band."""
    import zarr

    rng = np.random.default_rng(seed)
    zarr_path, npy_path, w_path = folder / "x.zarr", folder / "x.npy", folder / "w.npy"
    store = zarr.create_array(
        str(zarr_path), shape=(1, 1, size, size), chunks=(1, 1, chunk, chunk), dtype="f4"
    )
    npy = np.lib.format.open_memmap(npy_path, mode="w+", dtype="f4", shape=(1, 1, size, size))
    for start in range(0, size, chunk):
        rows = rng.standard_normal((1, 1, min(chunk, size - start), size), dtype=np.float32)
        store[:, :, start : start + rows.shape[2], :] = rows
        npy[:, :, start : start + rows.shape[2], :] = rows
    npy.flush()
    del npy
    np.save(w_path, rng.standard_normal((1, 1, 3, 3)).astype(np.float32))
    return zarr_path, npy_path, w_path


def hand_written(address: str, source: Path, w: np.ndarray, target: Path) -> None:
    """``from_zarr -> map_overlap(scipy.ndimage.correlate) -> to_zarr`` on the cluster."""
    import dask.array as da
    import scipy.ndimage
    from distributed import Client

    kernel = w[0, 0].astype(np.float32)

    def correlate(block: np.ndarray) -> np.ndarray:
        return scipy.ndimage.correlate(block, kernel, mode="constant", cval=0.0)

    with Client(address):
        x = da.from_zarr(str(source))[0, 0]
        y = x.map_overlap(correlate, depth=1, boundary=0, dtype=np.float32)
        y[None, None].to_zarr(str(target), overwrite=True)


def padconv_run(address: str, source: Path, w: np.ndarray, target: Path) -> None:
    """padconv's dask engine on the same cluster."""
    from padconv_cli.engines.dask_engine import dask_conv

    dask_conv(str(source), w, None, str(target), memory_limit=None, scheduler=address,
              pads=[1, 1, 1, 1])


def timed(run: Callable[[], None], repeat: int) -> float:
    """Best wall time of ``repeat`` runs (seconds)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def read_result(path: Path) -> np.ndarray:
    """A result as a memory map (``.npy``) or a Zarr array."""
    if path.suffix == ".npy":
        return np.load(path, mmap_mode="r")
    import zarr

    return zarr.open_array(str(path), mode="r")


def check_within_bound(npy_input: Path, w: np.ndarray, result: Path, band: int = 1024) -> bool:
    """Every element within the dot-product bound of the float64 oracle (module docstring)."""
    import scipy.ndimage

    x = np.load(npy_input, mmap_mode="r")[0, 0]
    y = read_result(result)
    k64, k_abs = w[0, 0].astype(np.float64), np.abs(w[0, 0].astype(np.float64))
    for start in range(0, x.shape[0], band):
        low, high = max(0, start - 1), min(x.shape[0], start + band + 1)
        part = np.asarray(x[low:high], dtype=np.float64)
        exact = scipy.ndimage.correlate(part, k64, mode="constant")
        scale = scipy.ndimage.correlate(np.abs(part), k_abs, mode="constant")
        rows = slice(start - low, start - low + min(band, x.shape[0] - start))
        got = np.asarray(y[0, 0, start : start + band], dtype=np.float64)
        if np.any(np.abs(got - exact[rows]) > 2 * 9 * EPS32 * scale[rows]):
            return False
    return True


def start_cluster(workers: int, memory_limit: str) -> tuple[object, str]:
    """A LocalCluster of worker processes on 127.0.0.1, one thread each."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None, memory_limit=memory_limit,
    )
    return cluster, cluster.scheduler_address


def warm_up(address: str) -> None:
    """Import what both sides use on every worker, so that no run pays for it."""
    from distributed import Client

    def imports() -> None:
        import scipy.ndimage  # noqa: F401

        import padconv_cli.engines.dask_io  # noqa: F401
        import padconv_cli.kernels.conv  # noqa: F401

    with Client(address) as client:
        client.run(imports)


def measure(args: argparse.Namespace) -> dict:
    """Every run of the module docstring; their times and whether each is within bound."""
    folder = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=args.folder))
    try:
        zarr_in, npy_in, w_path = make_inputs(folder, args.size, args.chunk)
        w = np.load(w_path)
        cluster, address = start_cluster(args.workers, args.worker_memory)
        warm_up(address)
        runs = {
            "map_overlap + scipy.ndimage.correlate, zarr->zarr": (hand_written, zarr_in, "h.zarr"),
            "padconv zarr->zarr": (padconv_run, zarr_in, "p.zarr"),
            "padconv zarr->npy": (padconv_run, zarr_in, "p.npy"),
            "padconv npy->npy": (padconv_run, npy_in, "q.npy"),
        }
        figures = {}
        try:
            for label, (function, source, name) in runs.items():
                target = folder / name
                seconds = timed(lambda f=function, s=source, t=target: f(address, s, w, t),
                                args.repeat)
                figures[label] = {"seconds": seconds, "within_bound": check_within_bound(
                    npy_in, w, target)}
                shutil.rmtree(target, ignore_errors=True) if target.is_dir() else os.remove(target)
        finally:
            cluster.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return figures


def markdown(args: argparse.Namespace, figures: dict) -> str:
    """The table of the README (time, ratio to the hand-written version, bound check)."""
    reference = figures["map_overlap + scipy.ndimage.correlate, zarr->zarr"]["seconds"]
    gib = args.size * args.size * 4 / 2**30
    lines = [
        f"Conv 3x3, pads 1, float32 `(1, 1, {args.size}, {args.size})` ({gib:.2f} GiB), Zarr "
        f"chunks {args.chunk}x{args.chunk}; LocalCluster of {args.workers} worker processes x 1 "
        f"thread ({args.worker_memory} each) on 127.0.0.1; best of {args.repeat}.",
        "",
        "| run | wall time | vs hand-written | within the error bound |",
        "| --- | --- | --- | --- |",
    ]
    for label, figure in figures.items():
        ratio = figure["seconds"] / reference
        bound = "yes" if figure["within_bound"] else "NO"
        lines.append(f"| {label} | {figure['seconds']:.1f} s | {ratio:.2f}x | {bound} |")
    return "\n".join(lines)


BEGIN, END = "<!-- bench_cluster: begin -->", "<!-- bench_cluster: end -->"


def update_readme(path: Path, table: str) -> None:
    """Replace the text between the README's ``bench_cluster`` markers with ``table``."""
    text = path.read_text(encoding="utf-8")
    head, found, rest = text.partition(BEGIN)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise SystemExit(f"{path}: no {BEGIN} ... {END} markers")
    path.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192, help="N (default 8192: 256 MiB)")
    parser.add_argument("--chunk", type=int, default=2048, help="Zarr chunk edge C")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="4GiB")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--folder", default=None, help="where the inputs go (default: TMPDIR)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--update-readme", default=None, metavar="README",
                        help="put the table between the bench_cluster markers of this file")
    args = parser.parse_args(argv)
    figures = measure(args)
    table = markdown(args, figures)
    print(table)
    if args.update_readme:
        update_readme(Path(args.update_readme), table)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "figures": figures}, indent=1))
    return 0 if all(f["within_bound"] for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
