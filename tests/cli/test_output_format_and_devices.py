"""--format must agree with the -o suffix; -o onto /dev/null, /dev/stdout, FIFOs and sockets."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from padconv_cli.errors import OutputError
from padconv_cli.tensor_sources import read_tensor
from padconv_cli.tensorio import resolve_format

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_file(tmp_path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    return path


@pytest.mark.parametrize(("target", "fmt", "implied"), [("y.npy", "pb", "npy"),
                                                      ("out/y.PB", "npy", "pb")])
def test_format_contradicting_suffix_is_refused(target, fmt, implied):
    with pytest.raises(OutputError) as excinfo:
        resolve_format(target, fmt)
    assert str(excinfo.value) == (
        f"{target}: suffix says {implied}, not {fmt}; make the suffix agree with format {fmt}"
    )
    assert excinfo.value.param == "format"


@pytest.mark.parametrize(("target", "fmt"), [("y.npy", "npy"), ("y.pb", "pb"), ("y", "pb"),
                                             ("-", "pb"), ("y.bin", "npy")])
def test_format_agreeing_or_without_known_suffix_is_accepted(target, fmt):
    assert resolve_format(target, fmt) == fmt


def test_cli_format_contradiction_writes_nothing(run_cli, data_file, tmp_path):
    output, model = tmp_path / "y.npy", tmp_path / "m.onnx"
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "--format", "pb",
                     "-o", str(output), "--emit-onnx", str(model))
    assert result.exit_code == 2
    assert f"{output}: suffix says npy, not pb; make the suffix agree with --format pb" in (
        result.stderr)
    assert result.stderr.count("\n") == 1
    assert not output.exists() and not model.exists()

def test_output_to_dev_null(run_cli, data_file):
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o", "/dev/null")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""


def test_output_to_dev_stdout_in_a_pipe():
    done = subprocess.run(
        [sys.executable, "-m", "padconv_cli", "pad", "[[1, 2]]", "--pads", "1", "1", "1", "1",
         "-o", "/dev/stdout"],
        capture_output=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert np.load(io.BytesIO(done.stdout)).shape == (3, 4)


def test_output_to_a_fifo_is_written_through(run_cli, data_file, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # the read end is open before padconv starts (a reader thread might not be there yet, and
    # a FIFO nobody reads is refused); the small result fits in the pipe's buffer
    read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o", str(fifo))
        received = os.read(read_end, 1 << 16)
    finally:
        os.close(read_end)
    assert result.exit_code == 0, result.stderr
    assert np.load(io.BytesIO(received)).shape == (4, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "x.npy"]


def test_socket_target_is_refused_without_proc_paths(run_cli, data_file, tmp_path):
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o", str(path))
    finally:
        server.close()
    assert result.exit_code == 2
    assert "not a regular file" in result.stderr and "/proc" not in result.stderr


def test_regular_file_stays_atomic(run_cli, data_file, tmp_path):
    output = tmp_path / "y.npy"
    output.write_bytes(b"old")
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o", str(output))
    assert result.exit_code == 0
    assert read_tensor(str(output)).shape == (4, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy", "y.npy"]
