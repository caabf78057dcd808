"""A Ctrl-C that lands between creating a temporary output and recording it for clean-up, or
between moving an old output aside and the new one in: nothing is left behind, nothing lost."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from padconv_cli.held_signals import signals_held
from padconv_cli.outofcore import npy_memmap
from padconv_cli.outofcore.npy_memmap import NpyOutput
from padconv_cli.tensorio import atomic
from padconv_cli.tensorio.atomic import atomic_write


@pytest.fixture
def ctrl_c_raises():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_right_after(function):
    """``function``, followed by a SIGINT the moment it returns."""

    def wrapped(*args, **kwargs):
        result = function(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)
        return result

    return wrapped


def test_a_held_signal_is_handled_when_the_block_ends(ctrl_c_raises):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            signal.raise_signal(signal.SIGINT)
            done.append("after the signal")
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_after_the_temporary_file_is_made_leaves_nothing(tmp_path, ctrl_c_raises,
                                                               monkeypatch):
    (tmp_path / "out.bin").write_bytes(b"old")
    monkeypatch.setattr(atomic, "make_temp_file", _interrupt_right_after(atomic.make_temp_file))
    with pytest.raises(KeyboardInterrupt):
        atomic_write(str(tmp_path / "out.bin"), lambda stream: stream.write(b"new"))
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]
    assert (tmp_path / "out.bin").read_bytes() == b"old"


def test_ctrl_c_after_the_tiled_output_is_made_leaves_nothing(tmp_path, ctrl_c_raises,
                                                             monkeypatch):
    monkeypatch.setattr(npy_memmap, "make_temp_file",
                        _interrupt_right_after(npy_memmap.make_temp_file))
    with pytest.raises(KeyboardInterrupt):
        NpyOutput(str(tmp_path / "out.npy"), (4, 4), np.dtype(np.float32))
    assert list(tmp_path.iterdir()) == []
