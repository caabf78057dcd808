"""A disk that another process fills while the tiled engine writes its result: one line, exit
2, nothing published and no temporary file left.  The result's temporary file is sparse until
written; a write through a memory map to it died of SIGBUS (exit 135, the temporary file left
behind); tiles are written with ``pwrite``, which fails with ENOSPC instead."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from hostile.runner import one_line_refusal, start_padconv, wait_while_running

WAIT_SECONDS = 60


@pytest.fixture
def small_disk(tmp_path):
    """A 40 MiB tmpfs of its own (root only: mounting is the way to fill a disk at will)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(folder) -> None:
    """Write zeros into ``folder`` until its file system is full (unbuffered: a buffered
    stream would raise ENOSPC again when it is closed, flushing what it still holds)."""
    with open(folder / "fill", "wb", buffering=0) as stream:
        try:
            while stream.write(b"\0" * 2**20):
                pass
        except OSError:
            pass


def test_disk_filled_during_a_tiled_conv_is_one_line(tmp_path, small_disk):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 8, 1024, 1024), dtype=np.float32))
    np.save(tmp_path / "w.npy", rng.standard_normal((8, 8, 5, 5), dtype=np.float32))
    child = start_padconv(
        ["conv", "x.npy", "w.npy", "--pads", "2", "2", "2", "2", "--engine", "tiled",
         "--memory-limit", "4M", "-o", str(small_disk / "y.npy")], tmp_path)
    assert wait_while_running(
        lambda: any(p.name.startswith(".y.npy") for p in small_disk.iterdir()), child,
        WAIT_SECONDS, poll=0.002), "no temporary file seen"
    _fill(small_disk)
    text = one_line_refusal(child, "the disk was full", WAIT_SECONDS)
    assert "y.npy" in text and "No space left" in text, text
    assert sorted(p.name for p in small_disk.iterdir()) == ["fill"]
