"""stderr that cannot take padconv's line (``2>/dev/full``, ``2>&-``): the line is dropped,
the exit code is the one the run would have had (2 for a refused input, 0 for a good run with
its output written), never 1 or 120 from a failed write or the interpreter's final flush."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hostile.runner import padconv_command

WAIT_SECONDS = 60
needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")

PAD = ["pad", "x.npy", "--pads", "1", "1", "1", "1", "-o", "out.npy"]


def _run(tmp_path, args: list[str], stdout_full: bool = False, close_stderr: bool = False):
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    with open("/dev/full", "wb") as full:
        return subprocess.run([*padconv_command(), *args], cwd=tmp_path,
                              stdin=subprocess.DEVNULL,
                              stdout=full if stdout_full else subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL if close_stderr else full,
                              preexec_fn=(lambda: os.close(2)) if close_stderr else None,
                              timeout=WAIT_SECONDS).returncode


@needs_dev_full
@pytest.mark.parametrize("close_stderr", [False, True], ids=["dev-full", "closed"])
@pytest.mark.parametrize("args", [
    ["pad", "x.npy", "--pads", "1", "1", "-o", "out.npy"],  # the rank rule
    ["pad", "missing.npy", "--pads", "1", "1", "-o", "out.npy"],
    ["pad", "x.npy", "--pads", "1", "1", "1", "1", "--no-such-flag"],
], ids=["bad-pads", "missing-file", "usage"])
def test_a_refused_input_still_exits_2(tmp_path, args, close_stderr):
    assert _run(tmp_path, args, close_stderr=close_stderr) == 2
    assert not (tmp_path / "out.npy").exists()


@needs_dev_full
@pytest.mark.parametrize("close_stderr", [False, True], ids=["dev-full", "closed"])
def test_a_good_run_exits_0_with_its_output(tmp_path, close_stderr):
    assert _run(tmp_path, PAD, close_stderr=close_stderr) == 0
    assert np.load(tmp_path / "out.npy").shape == (4, 5)


@needs_dev_full
def test_a_report_to_a_full_stdout_with_a_full_stderr_exits_2(tmp_path):
    assert _run(tmp_path, ["show", "x.npy"], stdout_full=True) == 2


PROGRESS_LINE = """
from padconv_cli.outofcore import progress
progress.ANNOUNCE_AFTER_SECONDS = 0
with progress.TileProgress(2, 100, "line", "pad") as bar:
    bar.advance(50)
    bar.advance(50)
print(bar.tiles_done)
"""


@needs_dev_full
def test_the_progress_line_to_a_full_stderr_does_not_stop_the_run():
    """Neither the progress line's failed write nor the interpreter's final flush of stderr
    (exit 120) changes the run's ending."""
    with open("/dev/full", "wb") as full:
        result = subprocess.run([sys.executable, "-c", PROGRESS_LINE], stdout=subprocess.PIPE,
                                stderr=full, timeout=WAIT_SECONDS)
    assert (result.returncode, result.stdout) == (0, b"2\n")
