"""A real dask cluster (scheduler and workers started as processes on 127.0.0.1): workers see
the client's files only as the client does, a killed worker's blocks are recomputed, a killed
scheduler ends padconv with one line and exit 3."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

from cluster_processes import Cluster, can_hide_folders, child_environment  # noqa: E402  # noqa: E402
from hostile.runner import wait_while_running  # noqa: E402

from padconv_cli.engines.dask_engine import dask_conv, dask_pad  # noqa: E402
from padconv_cli.errors import InputError  # noqa: E402
from padconv_cli.kernels.conv import conv  # noqa: E402
from padconv_cli.kernels.pad import pad  # noqa: E402

# On a real cluster (a scheduler and two `dask worker` processes on 127.0.0.1, each in its own
# folder, the second in a mount namespace where the client's private folder is a tmpfs holding
# decoys), padconv computes from the client's files or refuses naming the worker and the path;
# it never returns the workers' data or Zarr fill values with exit 0.


RNG = np.random.default_rng(19)
HIDE_PROBLEM = can_hide_folders()
needs_hidden_folders = pytest.mark.skipif(HIDE_PROBLEM is not None, reason=str(HIDE_PROBLEM))


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Folders and files: ``client`` (the client's working folder), ``shared``, ``private``
    (hidden from worker w2, which sees ``decoys`` there instead) and w1's own folder."""
    root = tmp_path_factory.mktemp("cluster")
    folders = {name: root / name for name in ("client", "shared", "private", "decoys", "w1")}
    for folder in folders.values():
        folder.mkdir()
    x = RNG.integers(-50, 50, size=(1, 2, 40, 30)).astype(np.float32)
    np.save(folders["client"] / "x.npy", x)
    np.save(folders["w1"] / "x.npy", -x)  # a different file of the same name in w1's folder
    np.save(folders["private"] / "p.npy", x)
    np.save(folders["decoys"] / "p.npy", x + 1)  # same shape and dtype, other values
    for name in ("p.zarr", "q.zarr"):
        store = zarr.create_array(
            str(folders["private"] / name), shape=x.shape, chunks=(1, 1, 16, 16), dtype=x.dtype
        )
        store[...] = x
    shutil.copytree(folders["private"] / "q.zarr", folders["decoys"] / "q.zarr")
    os.remove(folders["decoys"] / "q.zarr" / "c" / "0" / "1" / "1" / "0")  # one chunk fewer
    np.save(folders["client"] / "w.npy", RNG.integers(-3, 4, size=(3, 2, 3, 3)).astype(np.float32))
    return root, folders, x


@pytest.fixture(scope="module")
def cluster(site):
    root, folders, _ = site
    started = Cluster(root)
    try:
        started.start_scheduler()
        started.start_worker("w1")
        started.start_worker("w2", hide=folders["private"], decoys=folders["decoys"])
        started.wait_for_workers(2)
        yield started
    finally:
        started.stop()


def padconv(cluster: Cluster, cwd, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "padconv_cli", *args, "--scheduler", cluster.address]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=300, env=child_environment()
    )


@needs_hidden_folders
def test_relative_npy_path_is_read_from_the_client_folder_not_the_workers(site, cluster):
    root, folders, x = site
    w = np.load(folders["client"] / "w.npy")
    result = padconv(
        cluster, folders["client"], "conv", "x.npy", "w.npy", "--pads", "1,1,1,1",
        "--engine", "dask", "--memory-limit", "8K", "-o", "y.npy",
    )
    assert result.returncode == 0, result.stderr
    assert same_bits(np.load(folders["client"] / "y.npy"), conv(x, w, pads=[1, 1, 1, 1]))


@needs_hidden_folders
def test_relative_zarr_output_lands_in_the_client_folder(site, cluster, monkeypatch):
    root, folders, x = site
    monkeypatch.chdir(folders["client"])
    dask_pad("x.npy", "padded.zarr", [0, 0, 1, 2, 0, 0, 3, 0], mode="reflect",
             memory_limit=8000, scheduler=cluster.address)
    got = zarr.open_array(str(folders["client"] / "padded.zarr"), mode="r")[...]
    assert same_bits(got, pad(x, [0, 0, 1, 2, 0, 0, 3, 0], mode="reflect"))
    assert not os.path.exists(folders["w1"] / "padded.zarr")


@needs_hidden_folders
def test_cli_refusal_is_one_line_naming_the_worker_and_the_path(site, cluster):
    root, folders, _ = site
    src = str(folders["private"] / "p.npy")
    result = padconv(
        cluster, root, "conv", src, str(folders["client"] / "w.npy"), "--engine", "dask",
        "-o", str(folders["shared"] / "y.npy"),
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"worker {cluster.worker_address('w2')}: {src}: not the client's file" in lines[0]
    assert os.listdir(folders["shared"]) == []


@needs_hidden_folders
@pytest.mark.parametrize(
    "operator, source, output, reason",
    [
        ("conv", "p.zarr", "y.npy", "cannot read it"),
        ("pad", "p.zarr", "y.npy", "cannot read it"),
        ("pad", "p.zarr", "y.zarr", "cannot read it"),
        ("pad", "q.zarr", "y.zarr", "not the client's file: stored chunks is 11"),
        ("conv", "p.npy", "y.zarr", "not the client's file: mtime"),
    ],
    ids=["conv-zarr-npy", "pad-zarr-npy", "pad-zarr-zarr", "zarr-chunk-missing", "npy-decoy"],
)
def test_input_a_worker_does_not_share_is_refused_naming_worker_and_path(
    site, cluster, operator, source, output, reason
):
    root, folders, _ = site
    src, target = str(folders["private"] / source), str(folders["shared"] / output)
    w = np.load(folders["client"] / "w.npy")
    with pytest.raises(InputError) as refused:
        if operator == "pad":
            dask_pad(src, target, [0, 0, 1, 1, 0, 0, 1, 1], memory_limit=8000,
                     scheduler=cluster.address)
        else:
            dask_conv(src, w, None, target, memory_limit=8000, scheduler=cluster.address)
    message = str(refused.value)
    assert message.startswith(f"worker {cluster.worker_address('w2')}: {src}: {reason}")
    assert os.listdir(folders["shared"]) == []


@needs_hidden_folders
def test_output_folder_a_worker_cannot_see_is_refused(site, cluster):
    root, folders, _ = site
    target = str(folders["private"] / "out.zarr")
    with pytest.raises(InputError) as refused:
        dask_pad(str(folders["client"] / "x.npy"), target, [0, 0, 1, 1, 0, 0, 1, 1],
                 memory_limit=8000, scheduler=cluster.address)
    message = str(refused.value)
    assert message.startswith(f"worker {cluster.worker_address('w2')}: {target}: ")
    assert "does not see the client's temporary store" in message
    assert sorted(os.listdir(folders["private"])) == ["p.npy", "p.zarr", "q.zarr"]


# A real cluster losing processes mid-run: a killed worker's blocks are recomputed elsewhere
# (the result is still exact); a killed scheduler ends padconv with one line, exit code 3, no
# output and nothing partial left beside the target.


DEATHS_RNG = np.random.default_rng(1919)
SHAPE = (1, 1, 480, 480)


@pytest.fixture(scope="module")
def deaths_cluster(tmp_path_factory):
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
    x = DEATHS_RNG.standard_normal(SHAPE).astype(np.float32)
    w = DEATHS_RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    np.save(folder / "x.npy", x)
    np.save(folder / "w.npy", w)
    return folder, x, w


def start_conv(deaths_cluster: Cluster, folder, target: str) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "padconv_cli", "conv", str(folder / "x.npy"), str(folder / "w.npy"),
        "--pads", "1,1,1,1", "--engine", "dask", "--scheduler", deaths_cluster.address,
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


def test_a_worker_killed_mid_run_leaves_the_result_exact(deaths_cluster, inputs):
    folder, x, w = inputs
    run = start_conv(deaths_cluster, folder, str(folder / "y.zarr"))
    wait_for_written_blocks(folder, "y.zarr", 3, run)
    deaths_cluster.kill("w1")
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    # distributed's "Couldn't gather ... rescheduling" stays hidden; a slow run may print its
    # one progress line (stderr is not a terminal), and nothing else
    assert [line for line in stderr.splitlines() if " tiles, " not in line] == []
    got = zarr.open_array(str(folder / "y.zarr"), mode="r")[...]
    expected = conv(x, w, pads=[1, 1, 1, 1])
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def test_a_scheduler_killed_mid_run_is_one_line_exit_3_and_nothing_partial(deaths_cluster, inputs):
    folder, _, _ = inputs
    run = start_conv(deaths_cluster, folder, str(folder / "z.zarr"))
    wait_for_written_blocks(folder, "z.zarr", 3, run)
    deaths_cluster.kill("scheduler")
    _, stderr = run.communicate(timeout=300)
    lines = stderr.strip().splitlines()
    assert run.returncode == 3, stderr
    assert len(lines) == 1 and "lost the connection to the dask scheduler" in lines[0], stderr
    for name in ("w1", "w2"):  # the workers still computing stop once the scheduler is gone
        assert name not in deaths_cluster.processes or deaths_cluster.wait_exit(name, 60)
    assert not os.path.exists(folder / "z.zarr")
    assert not glob.glob(str(folder / ".z.zarr*"))
