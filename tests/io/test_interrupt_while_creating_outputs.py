"""A Ctrl-C that lands right after a temporary output was created, or between moving an old
store aside and the new one in: nothing is left behind, nothing lost."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from padconv_cli.errors import OutputError
from padconv_cli.outofcore import npy_blocks
from padconv_cli.outofcore.npy_blocks import NpyOutput
from padconv_cli.tensorio import files as atomic
from padconv_cli.tensorio.files import atomic_write


def _interrupt_right_after(function):
    """``function``, followed by a Ctrl-C the moment it returns (before its caller sees the
    result)."""

    def wrapped(*args, **kwargs):
        function(*args, **kwargs)
        raise KeyboardInterrupt

    return wrapped


def test_ctrl_c_after_the_temporary_file_is_made_leaves_nothing(tmp_path, monkeypatch):
    (tmp_path / "out.bin").write_bytes(b"old")
    monkeypatch.setattr(atomic, "create_exclusive",
                        _interrupt_right_after(atomic.create_exclusive))
    with pytest.raises(KeyboardInterrupt):
        atomic_write(str(tmp_path / "out.bin"), lambda stream: stream.write(b"new"))
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]
    assert (tmp_path / "out.bin").read_bytes() == b"old"


def test_ctrl_c_after_the_tiled_output_is_made_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(npy_blocks, "create_exclusive",
                        _interrupt_right_after(npy_blocks.create_exclusive))
    with pytest.raises(KeyboardInterrupt):
        NpyOutput(str(tmp_path / "out.npy"), (4, 4), np.dtype(np.float32))
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_name_taken_by_another_file_is_not_removed(tmp_path, monkeypatch):
    taken = tmp_path / ".out.bin.taken.tmp"
    taken.write_bytes(b"someone else's")
    monkeypatch.setattr(atomic, "temp_name", lambda *args: str(taken))
    with pytest.raises(atomic.OutputError):
        atomic_write(str(tmp_path / "out.bin"), lambda stream: stream.write(b"new"))
    assert taken.read_bytes() == b"someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken.name]


def test_ctrl_c_between_moving_the_old_store_aside_and_the_new_one_in(tmp_path, monkeypatch):
    (tmp_path / "y.zarr").mkdir()
    (tmp_path / "y.zarr" / "old").write_text("old")
    (tmp_path / "new").mkdir()
    moves = []

    def replace(source, destination):
        moves.append(source)
        if len(moves) == 2:  # the new store's move
            raise KeyboardInterrupt
        return real_replace(source, destination)

    real_replace = atomic.os.replace
    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        atomic.replace_folder(str(tmp_path / "new"), str(tmp_path / "y.zarr"))
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "y.zarr"]
    assert (tmp_path / "y.zarr" / "old").read_text() == "old"


def test_a_new_store_replaces_the_old_one(tmp_path):
    (tmp_path / "y.zarr").mkdir()
    (tmp_path / "y.zarr" / "old").write_text("old")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "fresh").write_text("new")
    atomic.replace_folder(str(tmp_path / "new"), str(tmp_path / "y.zarr"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.zarr"]
    assert [p.name for p in (tmp_path / "y.zarr").iterdir()] == ["fresh"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_an_out_of_core_output_never_replaces_a_fifo_or_device(tmp_path):
    """Renaming the result over a FIFO or a device (``-o /dev/null`` as root) would replace it."""
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="character device or FIFO"):
        NpyOutput(str(fifo), (4, 4), np.dtype(np.float32))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
