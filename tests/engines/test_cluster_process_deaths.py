"""A real cluster losing processes mid-run: a killed worker's blocks are recomputed elsewhere
(the result is still exact); a killed scheduler ends padconv with one line, exit code 3, no
output and nothing partial left beside the target."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

from cluster_processes import Cluster, child_environment  # noqa: E402
from hostile.runner import wait_while_running  # noqa: E402

from padconv_cli.kernels.conv import conv  # noqa: E402

RNG = np.random.default_rng(1919)
SHAPE = (1, 1, 480, 480)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("deaths")
    started = Cluster(root)
    try:
        started.start_scheduler()
        for name in ("w1", "w2"):
            started.start_worker(name, death_timeout=5)
        started.wait_for_workers(2)
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("deaths-data")
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    w = RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    np.save(folder / "x.npy", x)
    np.save(folder / "w.npy", w)
    return folder, x, w


def start_conv(cluster: Cluster, folder, target: str) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "padconv_cli", "conv", str(folder / "x.npy"), str(folder / "w.npy"),
        "--pads", "1,1,1,1", "--engine", "dask", "--scheduler", cluster.address,
        "--memory-limit", "96K", "--quiet", "-o", target,
    ]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=child_environment(),
    )


def wait_for_written_blocks(folder, name: str, count: int, run: subprocess.Popen) -> None:
    """Wait until the temporary store holds ``count`` chunks (the run is under way)."""
    pattern = str(folder / f".{name}.padconv-*" / "c" / "*" / "*" / "*" / "*")
    if not wait_while_running(lambda: len(glob.glob(pattern)) >= count, run, 120, poll=0.02):
        pytest.fail(f"the run ended or stalled before writing {count} blocks")


def test_a_worker_killed_mid_run_leaves_the_result_exact(cluster, inputs):
    folder, x, w = inputs
    run = start_conv(cluster, folder, str(folder / "y.zarr"))
    wait_for_written_blocks(folder, "y.zarr", 3, run)
    cluster.kill("w1")
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    # distributed's "Couldn't gather ... rescheduling" stays hidden; a slow run may print its
    # one progress line (stderr is not a terminal), and nothing else
    assert [line for line in stderr.splitlines() if " tiles, " not in line] == []
    got = zarr.open_array(str(folder / "y.zarr"), mode="r")[...]
    expected = conv(x, w, pads=[1, 1, 1, 1])
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def test_a_scheduler_killed_mid_run_is_one_line_exit_3_and_nothing_partial(cluster, inputs):
    folder, _, _ = inputs
    run = start_conv(cluster, folder, str(folder / "z.zarr"))
    wait_for_written_blocks(folder, "z.zarr", 3, run)
    cluster.kill("scheduler")
    _, stderr = run.communicate(timeout=300)
    lines = stderr.strip().splitlines()
    assert run.returncode == 3, stderr
    assert len(lines) == 1 and "lost the connection to the dask scheduler" in lines[0], stderr
    for name in ("w1", "w2"):  # the workers still computing stop once the scheduler is gone
        assert name not in cluster.processes or cluster.wait_exit(name, 60)
    assert not os.path.exists(folder / "z.zarr")
    assert not glob.glob(str(folder / ".z.zarr*"))
