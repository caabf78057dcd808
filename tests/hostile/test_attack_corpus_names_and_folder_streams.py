"""Attack cases on names and standard streams, through the installed command: an output name
at the file system's NAME_MAX (its temporary file beside it must still fit), and a standard
stream that is a folder (``< /``: CPython itself stops at start-up with a fatal error, before
any of padconv's code runs; nothing is read or written)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hostile.runner import PADCONV, run_command

pytestmark = pytest.mark.skipif(PADCONV is None, reason="the installed command is attacked")
PEAK_LIMIT = 300 * 2**20
X = np.arange(6, dtype=np.float32).reshape(2, 3)
PADDED = np.pad(X, 1)


def _name_max(folder: Path) -> int:
    return os.pathconf(folder, "PC_NAME_MAX")


@pytest.mark.parametrize("engine", ["memory", "tiled"])
@pytest.mark.parametrize("letter", ["a", "é"], ids=["ascii", "two-byte"])
def test_an_output_name_at_name_max_is_written(tmp_path, engine, letter):
    """Before: "cannot create a file in ... (File name too long)", exit 2, for a valid name."""
    np.save(tmp_path / "x.npy", X)
    width = len(letter.encode())
    name = letter * ((_name_max(tmp_path) - 4) // width) + ".npy"
    run = run_command([PADCONV, "pad", "x.npy", "--pads", "1", "1", "1", "1", "--engine",
                       engine, "-o", name], cwd=tmp_path, measure_memory=True)
    assert (run.returncode, run.stderr_text) == (0, ""), run.stderr_text
    assert np.load(tmp_path / name).tobytes() == PADDED.tobytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["x.npy", name])
    assert run.peak_rss_bytes < PEAK_LIMIT


def _folder_on(fd: int, folder: Path):
    def before_exec() -> None:
        opened = os.open(folder, os.O_RDONLY)
        os.dup2(opened, fd)
        os.close(opened)

    return before_exec

FOLDER_STREAMS = {  # stream: args
    "stdin_read": (0, ["pad", "-", "--pads", "1", "1", "1", "1", "-o", "y.npy"]),
    "stdin_unused": (0, ["pad", "x.npy", "--pads", "1", "1", "1", "1", "-o", "y.npy"]),
    "stdout_result": (1, ["pad", "x.npy", "--pads", "1", "1", "1", "1"]),
    "stderr_refusal": (2, ["pad", "x.npy", "--pads", "1", "1", "-o", "y.npy"]),
}


@pytest.mark.parametrize("case", sorted(FOLDER_STREAMS))
def test_a_standard_stream_that_is_a_folder(tmp_path, case):
    """The interpreter's own refusal ("Fatal Python error: init_sys_streams: <stdin> is a
    directory", exit 1), as for any Python command; nothing is written."""
    fd, args = FOLDER_STREAMS[case]
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "folder").mkdir()
    run = run_command([PADCONV, *args], cwd=tmp_path,
                      preexec_fn=_folder_on(fd, tmp_path / "folder"))
    assert run.returncode != 0, run.stderr_text
    assert "Traceback" not in run.stderr_text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "x.npy"]
