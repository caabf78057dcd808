"""The dask engine on a LocalCluster on loopback: results equal to the in-memory kernels, blocks
following the input's chunk grid, runtime failures (exit 3, one line, nothing written), and a
chunk the store holds never read as the fill value."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import socket
import subprocess

import numpy as np
import pytest

pytest.importorskip("dask.array")
pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from padconv_cli.engines import dask_engine  # noqa: E402
from padconv_cli.engines.dask_engine import (  # noqa: E402
    block_budget,
    dask_conv,
    dask_pad,
    quiet_distributed,
    worker_limits,
)
from padconv_cli.engines.dask_io import (  # noqa: E402
    OWNER_FILE,
    ZarrOutput,
    open_block_input,  # noqa: E402
)
from padconv_cli.engines.dask_ops import aligned_split, conv_dask, pad_dask  # noqa: E402  # noqa: E402
from padconv_cli.errors import (  # noqa: E402
    InputError,  # noqa: E402
    OutputError,  # noqa: E402
    PadconvError,
)
from padconv_cli.kernels.conv import (  # noqa: E402
    conv,  # noqa: E402
    plan_conv,
)
from padconv_cli.kernels.pad import pad  # noqa: E402
from padconv_cli.outofcore.conv_tiles import conv_tile_cost, fixed_bytes  # noqa: E402

# The dask engine on a LocalCluster on loopback, compared with the in-memory kernels.


RNG = np.random.default_rng(99)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def scheduler():
    """A one-worker, two-thread cluster on 127.0.0.1 over TCP (its dashboard on a free port)."""
    with LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        host="127.0.0.1",
        protocol="tcp",
        dashboard_address="127.0.0.1:0",
    ) as local:
        yield local.scheduler_address


@pytest.fixture
def client(scheduler):
    with Client(scheduler) as connected:
        yield connected


# --- dask arrays in, dask arrays out -------------------------------------------------------


@pytest.mark.parametrize(
    "mode, pads",
    [
        ("constant", [1, -2, 0, 3, 2, -1]),
        ("edge", [4, 0, 1, 0, 5, 2]),
        ("reflect", [0, 9, 15, 0, 13, 20]),
        ("wrap", [2, 11, 3, 1, 0, 8]),
        ("reflect", [-1, 2, 0, 1, -2, 3]),
    ],
)
def test_pad_dask_matches_the_kernel(client, mode, pads):
    data = RNG.standard_normal((4, 6, 7)).astype(np.float64)
    x = da.from_array(data, chunks=(2, 3, 4))
    value = np.float64(-1.5) if mode == "constant" else None
    got = pad_dask(x, pads, value, None, mode, block_bytes=6000).compute()
    expected = pad(data, pads, value, None, mode)
    assert same_bits(got, expected)


CONV_CASES = [
    ((2, 4, 21, 13), (6, 4, 3, 3), 1, {"pads": [1, 0, 2, 3], "strides": [2, 1]}),
    ((1, 4, 20, 17), (6, 2, 3, 3), 2, {"dilations": [2, 1], "auto_pad": "SAME_LOWER"}),
    ((2, 6, 18, 18), (6, 1, 3, 3), 6, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 3, 15, 9), (5, 3, 2, 3), 1, {"auto_pad": "VALID", "strides": [3, 1]}),
    ((3, 2, 40), (4, 1, 5), 2, {"pads": [3, 1], "dilations": [2]}),
    ((1, 2, 9, 8, 10), (3, 2, 3, 2, 2), 1, {"pads": [1, 0, 1, 0, 2, 1], "strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("x_shape, w_shape, group, attrs", CONV_CASES)
def test_conv_dask_matches_the_kernel(client, x_shape, w_shape, group, attrs):
    data = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    b = RNG.standard_normal(w_shape[0]).astype(np.float32)
    x = da.from_array(data, chunks=tuple(max(1, n // 2) for n in x_shape))
    plan = plan_conv(x_shape, w_shape, b.shape, group=group, **attrs)
    whole = conv_tile_cost(plan.output_shape, plan=plan, itemsize=4)
    blocks = fixed_bytes(w, b) + min(12_000, whole * 2 // 3)  # at least two blocks
    y = conv_dask(x, w, b, block_bytes=blocks, group=group, **attrs)
    assert y.npartitions > 1
    expected = conv(data, w, b, group=group, **attrs)
    assert same_bits(y.compute(), expected)


def test_conv_dask_exact_blocks_are_bit_identical(client):
    data = RNG.standard_normal((1, 3, 64, 48)).astype(np.float32)
    w = RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)
    y = conv_dask(
        da.from_array(data, chunks=(1, 3, 16, 48)), w, None, block_bytes=200_000, pads=[1, 1, 1, 1]
    )
    assert y.npartitions > 1
    assert same_bits(y.compute(), conv(data, w, pads=[1, 1, 1, 1]))


# --- files and stores through a scheduler address -----------------------------------------


def test_npy_to_zarr_and_back(scheduler, tmp_path):
    data = RNG.integers(0, 1000, size=(5, 33, 17)).astype(np.int32)
    np.save(tmp_path / "x.npy", data)
    result = dask_pad(
        str(tmp_path / "x.npy"),
        str(tmp_path / "y.zarr"),
        [0, 2, -3, 1, 4, 2],
        None,
        None,
        "edge",
        memory_limit=40_000,
        scheduler=scheduler,
    )
    expected = pad(data, [0, 2, -3, 1, 4, 2], mode="edge")
    assert result.tiles > 1
    assert same_bits(zarr.open_array(str(tmp_path / "y.zarr"), mode="r")[...], expected)
    dask_pad(
        str(tmp_path / "y.zarr"),
        str(tmp_path / "z.npy"),
        [1, 0, 0, 0, 0, 1],
        np.int32(9),
        memory_limit=40_000,
        scheduler=scheduler,
    )
    assert same_bits(np.load(tmp_path / "z.npy"), pad(expected, [1, 0, 0, 0, 0, 1], np.int32(9)))


def test_conv_zarr_to_zarr_replaces_an_old_store(scheduler, tmp_path):
    data = RNG.standard_normal((2, 2, 30, 30)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    zarr.save_array(str(tmp_path / "x.zarr"), data)
    zarr.save_array(str(tmp_path / "y.zarr"), np.zeros(3))
    dask_conv(
        str(tmp_path / "x.zarr"),
        w,
        None,
        str(tmp_path / "y.zarr"),
        memory_limit=10**8,
        scheduler=scheduler,
        strides=[2, 2],
    )
    got = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")[...]
    assert same_bits(got, conv(data, w, strides=[2, 2]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.zarr", "y.zarr"]


def test_kernel_errors_come_back_as_padconv_errors_and_leave_no_output(scheduler, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 2, 8, 8), np.int32))
    with pytest.raises(PadconvError, match="float"):
        dask_conv(
            str(tmp_path / "x.npy"),
            np.zeros((1, 2, 3, 3), np.int32),
            None,
            str(tmp_path / "y.npy"),
            memory_limit=10**7,
            scheduler=scheduler,
        )
    assert [p.name for p in tmp_path.iterdir()] == ["x.npy"]


def test_refuses_to_replace_a_non_zarr_folder(scheduler, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3,), np.float32))
    (tmp_path / "keep.zarr").mkdir()
    (tmp_path / "keep.zarr" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="not a Zarr store"):
        dask_pad(
            str(tmp_path / "x.npy"),
            str(tmp_path / "keep.zarr"),
            [1, 1],
            memory_limit=10**6,
            scheduler=scheduler,
        )
    assert (tmp_path / "keep.zarr" / "notes.txt").read_text() == "mine"


def test_bad_zarr_input_is_an_input_error(scheduler, tmp_path):
    (tmp_path / "bad.zarr").mkdir()
    (tmp_path / "bad.zarr" / "zarr.json").write_text("{not json")
    with pytest.raises(InputError, match="bad.zarr"):
        dask_pad(
            str(tmp_path / "bad.zarr"),
            str(tmp_path / "y.npy"),
            [1, 1],
            memory_limit=10**6,
            scheduler=scheduler,
        )


def test_unreachable_scheduler_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setattr(dask_engine, "CONNECT_TIMEOUT_SECONDS", 1)
    np.save(tmp_path / "x.npy", np.zeros((3,), np.float32))
    with pytest.raises(PadconvError, match="^scheduler tcp://127.0.0.1:9: cannot connect") as e:
        dask_pad(
            str(tmp_path / "x.npy"),
            str(tmp_path / "y.npy"),
            [1, 1],
            memory_limit=10**6,
            scheduler="tcp://127.0.0.1:9",
        )
    assert e.value.param == "scheduler"  # the CLI renders it as --scheduler


# Runtime failures of the dask engine (exit 3, one line, nothing written), leftovers of killed
# runs, and block sizes taken from the workers' memory limits.


MiB, GiB = 2**20, 2**30


def test_a_killed_worker_is_one_line_exit_3_and_no_output(run_cli, monkeypatch, tmp_path):
    from distributed.scheduler import KilledWorker

    def dies(*args, **kwargs):
        raise KilledWorker("padconv-pad-0", "tcp://127.0.0.1:1", 3)

    monkeypatch.setattr(dask_engine, "_compute_blocks", dies)
    np.save(tmp_path / "x.npy", np.zeros((4, 4), np.float32))
    result = run_cli(
        "pad", str(tmp_path / "x.npy"), "--pads", "1,1,1,1", "--engine", "dask",
        "-o", str(tmp_path / "y.zarr"),
    )
    assert result.exit_code == 3
    assert result.stderr.count("\n") == 1 and "KilledWorker" in result.stderr
    assert "dask worker --memory-limit" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


def test_distributed_log_lines_are_hidden_unless_verbose():
    logger = logging.getLogger("distributed.client")
    with quiet_distributed(verbose=False):
        assert not logger.isEnabledFor(logging.CRITICAL)
    with quiet_distributed(verbose=True):
        assert logger.isEnabledFor(logging.ERROR)
    assert logger.isEnabledFor(logging.ERROR)


def test_a_future_a_quiet_run_left_unread_reports_nothing_when_collected(caplog):
    loop = asyncio.new_event_loop()
    try:
        with quiet_distributed(verbose=False):
            future = loop.create_future()
            future.set_exception(TimeoutError("Timeout"))
            cycle = [future]
            cycle.append(cycle)  # only the garbage collector frees it
            del future, cycle
        gc.collect()
    finally:
        loop.close()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def _leftover(folder, suffix: str, owner: dict | None) -> str:
    path = folder / f".y.zarr.padconv-{suffix}"
    (path / "c" / "0").mkdir(parents=True)
    (path / "c" / "0" / "0").write_bytes(b"partial")
    if owner is not None:
        (path / OWNER_FILE).write_text(json.dumps(owner))
    return path.name


def test_a_later_run_removes_what_killed_runs_left_and_keeps_live_ones(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    _leftover(tmp_path, "orphan", None)  # chunks written after the client gave up
    _leftover(tmp_path, "deadpid", {"token": "t", "host": host, "pid": dead.pid})
    live = _leftover(tmp_path, "live", {"token": "t", "host": host, "pid": os.getpid()})
    remote = _leftover(tmp_path, "remote", {"token": "t", "host": "elsewhere.", "pid": 1})
    data = np.arange(12, dtype=np.int16).reshape(3, 4)
    np.save(tmp_path / "x.npy", data)
    dask_pad(str(tmp_path / "x.npy"), str(tmp_path / "y.zarr"), [1, 0, 0, 2], memory_limit=MiB)
    assert sorted(os.listdir(tmp_path)) == sorted([live, remote, "x.npy", "y.zarr"])
    got = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")[...]
    assert np.array_equal(got, pad(data, [1, 0, 0, 2]))
    assert OWNER_FILE not in os.listdir(tmp_path / "y.zarr")


def test_a_zarr_result_missing_blocks_is_refused_and_leaves_nothing(tmp_path):
    out = ZarrOutput(str(tmp_path / "y.zarr"), (4, 4), np.dtype("f4"), (2, 2))
    out[(slice(0, 2), slice(0, 2))] = np.ones((2, 2), np.float32)  # one block of four
    with pytest.raises(OutputError, match="1 of 4 blocks reached the client's store"):
        out.commit()
    assert os.listdir(tmp_path) == []


def test_a_block_written_after_the_client_gave_up_leaves_nothing(tmp_path):
    out = ZarrOutput(str(tmp_path / "y.zarr"), (4, 4), np.dtype("f4"), (2, 2))
    out.discard()  # the client gives the run up ...
    with pytest.raises(OutputError, match="run given up"):
        out[(slice(0, 2), slice(0, 2))] = np.ones((2, 2), np.float32)  # ... a worker writes
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "workers, memory_limit, fallback, expected",
    [
        ([(4 * GiB, 2), (2 * GiB, 4)], None, 1, 128 * MiB),  # min(2G/4, 1G/8)
        ([(4 * GiB, 2), (2 * GiB, 4)], 64 * MiB, 1, 8 * MiB),  # the flag caps each worker
        ([(0, 2)], None, 100 * MiB, 25 * MiB),  # no worker limit: the fallback
        ([(0, 1), (GiB, 1)], 32 * MiB, 5, 16 * MiB),
        ([(64 * GiB, 1)], None, 1, 512 * MiB),  # at most 512 MiB
    ],
)
def test_blocks_are_sized_from_the_workers_memory_limits(workers, memory_limit, fallback, expected):
    assert block_budget(workers, memory_limit, fallback) == expected


def test_worker_limits_are_the_ones_the_scheduler_reports():
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, memory_limit="300MiB",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster) as client,
    ):
        assert worker_limits(client) == [(300 * MiB, 2)]


# Blocks of the dask engine follow the input's chunk grid: each Zarr chunk is read once, the
# output chunks are the input's, and the halo comes from small crops of the neighbours.


CHUNK_RNG = np.random.default_rng(6)


def zarr_input(path, data, chunks):
    store = zarr.create_array(str(path), shape=data.shape, chunks=chunks, dtype=data.dtype)
    store[...] = data
    return str(path)


@pytest.mark.parametrize(
    "attrs", [{"pads": [1, 1, 1, 1]}, {"pads": [2, 0, 1, 3], "dilations": [2, 1]}, {}]
)
def test_conv_from_zarr_is_exact_and_its_output_chunks_are_the_inputs(tmp_path, attrs):
    data = CHUNK_RNG.standard_normal((1, 1, 70, 50)).astype(np.float32)
    w = CHUNK_RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    source = zarr_input(tmp_path / "x.zarr", data, (1, 1, 16, 16))
    dask_conv(source, w, None, str(tmp_path / "y.zarr"), memory_limit=2**24, **attrs)
    y = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")
    assert y[...].tobytes() == conv(data, w, **attrs).tobytes()
    assert y.chunks[2:] == (16, 16)


def test_each_chunk_is_read_once_and_blocks_get_crops_of_their_neighbours(tmp_path):
    data = CHUNK_RNG.standard_normal((1, 1, 64, 64)).astype(np.float32)
    w = CHUNK_RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    x = open_block_input(zarr_input(tmp_path / "x.zarr", data, (1, 1, 16, 16))).chunked(2**24)
    y = conv_dask(x, w, None, block_bytes=2**24, pads=[1, 1, 1, 1])
    graph = dict(y.__dask_graph__())
    reads = [key for key in graph if isinstance(key, tuple) and "padconv-read" in key[0]]
    crops = [key for key in graph if isinstance(key, tuple) and "padconv-crop" in key[0]]
    assert len(reads) == 16 and y.numblocks == (1, 1, 4, 4)
    assert crops  # halos travel as crops, not as whole chunks
    assert y.compute(scheduler="sync").tobytes() == conv(data, w, pads=[1, 1, 1, 1]).tobytes()


def test_pad_from_zarr_follows_the_chunks_and_is_exact(tmp_path):
    data = CHUNK_RNG.integers(0, 100, size=(3, 40, 30)).astype(np.int32)
    source = zarr_input(tmp_path / "x.zarr", data, (1, 16, 16))
    pads = [0, 3, 2, 1, 4, 5]
    dask_pad(source, str(tmp_path / "y.zarr"), pads, mode="reflect", memory_limit=2**24)
    y = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")
    assert y[...].tobytes() == pad(data, pads, mode="reflect").tobytes()
    assert y.chunks == (1, 16, 16)


def test_a_dask_array_input_with_small_blocks_is_still_exact():
    data = CHUNK_RNG.standard_normal((2, 1, 45, 33)).astype(np.float32)
    w = CHUNK_RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    x = da.from_array(data, chunks=(1, 1, 10, 7))
    y = conv_dask(x, w, None, block_bytes=20_000, pads=[1, 1, 1, 1], strides=[2, 1])
    assert y.npartitions > 4
    got = y.compute(scheduler="sync")
    assert got.tobytes() == conv(data, w, pads=[1, 1, 1, 1], strides=[2, 1]).tobytes()


@pytest.mark.parametrize(
    "length, chunk, step",
    [(10, 4, 8), (3, 8, 3), (5, 16, 4), (7, 7, 7), (100, 0, 100)],
)
def test_aligned_split_never_exceeds_the_tile_and_divides_or_multiplies_the_chunk(
    length, chunk, step
):
    ranges = [(start, min(start + length, 40)) for start in range(0, 40, length)]
    got = aligned_split(ranges, chunk)
    assert got[0] == (0, min(step, 40)) and got[-1][1] == 40


# A Zarr chunk the client's store holds is never read as the fill value by a block task that
# cannot find it; a chunk the store never held still reads as the fill value (Zarr's rule).


def run_task(task: tuple) -> np.ndarray:
    function, *arguments = task
    return function(*arguments)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "x.zarr"
    array = zarr.create_array(str(path), shape=(8, 8), chunks=(4, 4), dtype="f4", fill_value=7)
    array[:4, :] = np.arange(32, dtype=np.float32).reshape(4, 8)  # chunks (0, 0) and (0, 1)
    return path


def test_a_stored_chunk_that_vanished_is_an_error_naming_the_chunk(store):
    source = open_block_input(str(store))
    task = source.fetch_task((slice(2, 6), slice(0, 8)))
    run_task(task)  # this process confirms the store once
    os.remove(store / "c" / "0" / "1")
    with pytest.raises(InputError, match=r"x\.zarr: chunk c/0/1 is stored in the client's store"):
        run_task(task)


def test_chunks_never_stored_read_as_the_fill_value(store):
    source = open_block_input(str(store))
    got = run_task(source.fetch_task((slice(2, 6), slice(0, 8))))
    assert np.array_equal(got[:2], np.arange(16, 32, dtype=np.float32).reshape(2, 8))
    assert np.array_equal(got[2:], np.full((2, 8), 7, np.float32))


def test_a_store_changed_after_it_was_opened_is_refused(store):
    source = open_block_input(str(store))
    task = source.fetch_task((slice(0, 4), slice(0, 4)))
    zarr.open_array(str(store), mode="r+")[4:, 4:] = 1  # one more stored chunk
    with pytest.raises(InputError, match="not the client's file: stored chunks is 3"):
        run_task(task)
