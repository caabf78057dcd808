"""Runtime failures of the dask engine (exit 3, one line, nothing written), leftovers of killed
runs, and block sizes taken from the workers' memory limits."""

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

pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

from distributed import Client, LocalCluster  # noqa: E402

from padconv_cli.engines import dask_engine  # noqa: E402
from padconv_cli.engines.cluster import (  # noqa: E402
    block_budget,
    quiet_distributed,
    worker_limits,
)
from padconv_cli.engines.dask_engine import dask_pad  # noqa: E402
from padconv_cli.engines.dask_io import OWNER_FILE, ZarrOutput  # noqa: E402
from padconv_cli.errors import OutputError  # noqa: E402
from padconv_cli.kernels.pad import pad  # noqa: E402

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
