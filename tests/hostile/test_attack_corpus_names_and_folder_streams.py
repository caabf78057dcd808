"""Attack cases on names and standard streams, through the installed command: an output name
at the file system's NAME_MAX (its temporary file beside it must still fit), and a standard
stream that is a folder (CPython itself stops at start-up with a fatal error on
``< /``; the installed command treats such a stream as closed)."""

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

FOLDER_STREAMS = {
    # stream: (args, exit code, words of the one line; None: no line)
    "stdin_read": (0, ["pad", "-", "--pads", "1", "1", "1", "1", "-o", "y.npy"], 2,
                   ("<stdin>", "folder")),
    "stdin_unused": (0, ["pad", "x.npy", "--pads", "1", "1", "1", "1", "-o", "y.npy"], 0, None),
    "stdout_result": (1, ["pad", "x.npy", "--pads", "1", "1", "1", "1"], 2, ("<stdout>",)),
    "stderr_refusal": (2, ["pad", "x.npy", "--pads", "1", "1", "-o", "y.npy"], 2, None),
}


@pytest.mark.parametrize("case", sorted(FOLDER_STREAMS))
def test_a_standard_stream_that_is_a_folder(tmp_path, case):
    """Before: "Fatal Python error: init_sys_streams: <stdin> is a directory", exit 1."""
    fd, args, code, words = FOLDER_STREAMS[case]
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "folder").mkdir()
    # not measured: the measuring launcher is a Python, which the folder stream would stop
    run = run_command([PADCONV, *args], cwd=tmp_path,
                      preexec_fn=_folder_on(fd, tmp_path / "folder"))
    assert run.returncode == code, run.stderr_text
    assert "Traceback" not in run.stderr_text and "Fatal" not in run.stderr_text
    if words is None and fd != 2:
        assert run.stderr_text == ""
    elif words is not None:
        assert len(run.stderr_lines) == 1 and all(w in run.stderr_text for w in words), (
            run.stderr_text)
    assert (tmp_path / "y.npy").exists() == (code == 0)
    if code == 0:
        assert np.load(tmp_path / "y.npy").tobytes() == PADDED.tobytes()
