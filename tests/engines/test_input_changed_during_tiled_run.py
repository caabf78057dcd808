"""An input truncated or replaced by another process while the out-of-core engine reads it
tile by tile: one line naming the file, exit 2, no result and no temporary file left (a
memory-mapped read of a truncated file would die of SIGBUS; tiles are read with pread)."""

from __future__ import annotations

import os
import subprocess
import time

import numpy as np
import pytest
from hostile.runner import one_line_refusal, start_padconv, wait_while_running

from padconv_cli.errors import InputError
from padconv_cli.outofcore.npy_blocks import open_npy_input

WAIT_SECONDS = 60


@pytest.fixture
def opened(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(4096, dtype=np.float64).reshape(64, 64))
    return path, open_npy_input(str(path))


def test_tile_read_after_truncation_is_an_input_error(opened):
    path, source = opened
    os.truncate(path, 4096)
    with pytest.raises(InputError, match="truncated"):
        source.read((slice(0, 64), slice(0, 64)))


def test_tile_read_after_replacement_is_an_input_error(opened):
    path, source = opened
    np.save(path.with_name("y.npy"), np.zeros((64, 64)))
    os.replace(path.with_name("y.npy"), path)
    with pytest.raises(InputError, match="replaced"):
        source.read((slice(0, 1), slice(0, 64)))


def test_tiles_read_by_pread_equal_numpy_slices(tmp_path):
    rng = np.random.default_rng(1)
    for order in ("C", "F"):
        array = rng.standard_normal((3, 5, 7)).astype(">f4")
        np.save(tmp_path / "a.npy", np.asfortranarray(array) if order == "F" else array)
        source = open_npy_input(str(tmp_path / "a.npy"))
        for box in [(slice(0, 3), slice(1, 4), slice(0, 7)), (slice(1, 2), slice(0, 5),
                    slice(2, 6)), (slice(0, 3), slice(0, 5), slice(0, 7)),
                    (slice(2, 2), slice(0, 5), slice(0, 7))]:
            np.testing.assert_array_equal(source.read(box), array[box])


BOXES = [
    (slice(None), slice(1, None), slice(0, 7)),
    (slice(1, 2),),
    (slice(2, 0), slice(None)),
    (slice(-2, None), slice(0, 5), slice(6, 7)),
]


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("box", BOXES, ids=range(len(BOXES)))
def test_boxes_read_by_pread_equal_numpy_indexing(tmp_path, order, box):
    array = np.random.default_rng(2).standard_normal((3, 5, 7)).astype(">f4")
    np.save(tmp_path / "a.npy", np.asfortranarray(array) if order == "F" else array)
    part = open_npy_input(str(tmp_path / "a.npy")).read(box)
    np.testing.assert_array_equal(part, array[box])
    assert part.flags.c_contiguous and part.dtype.isnative


@pytest.mark.parametrize("box", [(slice(None, None, 2),), (1, slice(None)), (Ellipsis,)])
def test_boxes_other_than_unit_step_slices_are_refused(tmp_path, box):
    np.save(tmp_path / "a.npy", np.zeros((3, 5)))
    with pytest.raises(ValueError, match="unit-step"):
        open_npy_input(str(tmp_path / "a.npy")).read(box)


def test_column_read_after_truncation_is_an_input_error(opened):
    path, source = opened
    os.truncate(path, 4096)
    with pytest.raises(InputError, match="truncated"):
        source.read((slice(0, 64), slice(5, 6)))


def _temp_output_started(folder, size: int) -> bool:
    return any(p.name.startswith(".out.npy") and p.stat().st_size >= size
               for p in folder.iterdir())


def _started_writing(folder, args: list[str], size: int) -> subprocess.Popen:
    """``padconv ARGS`` in ``folder``, returned once its temporary out.npy has reached ``size``
    bytes (or once it has ended)."""
    child = start_padconv(args, folder)
    started = wait_while_running(lambda: _temp_output_started(folder, size), child, WAIT_SECONDS)
    assert started or child.poll() is not None, "the tiled run never started writing"
    return child


def _tiled_pad_writing(folder) -> subprocess.Popen:
    """A tiled pad of folder/x.npy (4096x4096 float64), returned once its output is being
    written (its temporary file has reached full size)."""
    args = ["pad", "x.npy", "--pads", "1", "1", "1", "1", "--engine", "tiled",
            "--memory-limit", "16M", "-o", "out.npy"]
    return _started_writing(folder, args, 4098 * 4098 * 8)


def test_input_truncated_during_a_tiled_pad_is_one_line(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((4096, 4096), np.float64))
    child = _tiled_pad_writing(tmp_path)
    os.truncate(tmp_path / "x.npy", 2**20)
    text = one_line_refusal(child, "the input was truncated", WAIT_SECONDS)
    assert "x.npy" in text and "truncated" in text, text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def _truncate_mid_run(tmp_path, args: list[str], output_bytes: int) -> str:
    """Run padconv, truncate its input once it has begun writing, return its one-line stderr
    (exit 2)."""
    child = _started_writing(tmp_path, args, output_bytes)
    os.truncate(tmp_path / "x.npy", 2**16)
    return one_line_refusal(child, "the input was truncated", WAIT_SECONDS)


CHANGED_MID_RUN = {
    "conv_strided_dilated": (
        ["conv", "x.npy", "w.npy", "--strides", "2", "3", "--dilations", "2", "2",
         "--engine", "tiled", "--memory-limit", "8M", "-o", "out.npy"],
        (1, 2, 2048, 4096), (2, 2, 3, 3), 2 * 1022 * 1363 * 4,
    ),
    "pad_reflect": (
        ["pad", "x.npy", "--pads", "0", "0", "3", "2", "0", "0", "1", "5", "--mode", "reflect",
         "--engine", "tiled", "--memory-limit", "8M", "-o", "out.npy"],
        (1, 2, 2048, 4096), None, 2 * 2052 * 4103 * 4,
    ),
}


@pytest.mark.parametrize("case", sorted(CHANGED_MID_RUN))
def test_input_truncated_during_a_strided_conv_or_reflect_pad_is_one_line(tmp_path, case):
    args, x_shape, w_shape, output_bytes = CHANGED_MID_RUN[case]
    np.save(tmp_path / "x.npy", np.ones(x_shape, np.float32))
    if w_shape is not None:
        np.save(tmp_path / "w.npy", np.ones(w_shape, np.float32))
    text = _truncate_mid_run(tmp_path, args, output_bytes)
    assert "x.npy" in text and "truncated" in text, text
    assert not (tmp_path / "out.npy").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.npy")]


# --- rewritten in place: same inode, same size, new bytes ------------------------------------


def _rewrite_in_place(path) -> None:
    """Overwrite the first data bytes of ``path`` (same inode, same size)."""
    with open(path, "r+b") as stream:
        stream.seek(-4096, os.SEEK_END)
        stream.write(b"\x01" * 4096)


def _saved_in_the_past(path, array: np.ndarray) -> None:
    """Save ``array``, its modification time set a minute back: a rewrite now moves it even on
    a file system whose clock ticks coarsely."""
    np.save(path, array)
    past = time.time_ns() - 60 * 10**9
    os.utime(path, ns=(past, past))


def test_tile_read_after_an_in_place_rewrite_is_an_input_error(tmp_path):
    path = tmp_path / "x.npy"
    _saved_in_the_past(path, np.zeros((64, 64)))
    source = open_npy_input(str(path))
    _rewrite_in_place(path)
    with pytest.raises(InputError, match="x.npy: changed by another process"):
        source.read((slice(0, 1), slice(0, 64)))


def test_a_rewrite_after_the_last_read_publishes_nothing(tmp_path):
    """One tile: the change comes after every read, so only the check before publishing sees
    it; the target is not created."""
    from padconv_cli.outofcore.npy_blocks import NpyInput
    from padconv_cli.outofcore.pad_tiles import tiled_pad

    class RewrittenAfterEachRead(NpyInput):
        def read(self, box):
            part = super().read(box)
            _rewrite_in_place(self.path)
            return part

    path = tmp_path / "x.npy"
    _saved_in_the_past(path, np.zeros((64, 64)))
    opened = open_npy_input(str(path))
    source = RewrittenAfterEachRead(opened.path, opened.header, opened.identity,
                                    opened.max_read_bytes)
    with pytest.raises(InputError, match="changed by another process"):
        tiled_pad(source, str(tmp_path / "out.npy"), [1, 1, 1, 1], memory_limit=2**26)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def test_input_rewritten_in_place_during_a_tiled_pad_is_one_line(tmp_path):
    """Through the installed command: before this rule the run exited 0 with a result mixing
    the old and the new bytes."""
    _saved_in_the_past(tmp_path / "x.npy", np.zeros((4096, 4096), np.float64))
    child = _tiled_pad_writing(tmp_path)
    _rewrite_in_place(tmp_path / "x.npy")
    text = one_line_refusal(child, "the input was rewritten", WAIT_SECONDS)
    assert "x.npy" in text and "changed by another process" in text, text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]
