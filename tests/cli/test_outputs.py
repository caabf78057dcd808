"""Outputs: --format agrees with the -o suffix, device and pipe targets, targets that cannot
mean what was typed are refused before any work, and every --json output encodes values alike."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from padconv_cli.cli.options import parse_size
from padconv_cli.errors import OutputError
from padconv_cli.json_output import dumps, jsonable
from padconv_cli.tensor_sources import read_tensor
from padconv_cli.tensorio import resolve_format

# Every ``--json`` output encodes values the same way (README, "JSON output"): complex numbers
# as {"real": re, "imag": im}, NaN and infinities as "nan", "inf", "-inf", strict JSON.


def _strict(text: str) -> object:
    """Parse ``text`` refusing the non-standard NaN/Infinity tokens."""
    def refuse(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (np.complex64(1.5 - 2j), '{"real": 1.5, "imag": -2.0}'),
        (complex(float("nan"), float("inf")), '{"real": "nan", "imag": "inf"}'),
        (np.float32("nan"), '"nan"'),
        (-np.inf, '"-inf"'),
        (np.array([[1, 2]], dtype=np.int8), "[[1, 2]]"),
        (b"caf\xc3\xa9", '"café"'),
        (np.dtype("float16"), '"float16"'),
        ((np.bool_(True), None, "x"), '[true, null, "x"]'),
    ],
)
def test_one_encoding(value, text):
    assert dumps(value) == text


def test_ml_dtypes_scalars_are_plain_numbers():
    import ml_dtypes

    values = np.array([0.5, np.nan], dtype=ml_dtypes.bfloat16)
    assert jsonable({"v": values}) == {"v": [0.5, "nan"]}


# --- --explain -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "constant", "encoded"),
    [
        ("complex64", "1+2j", '"constant_value": {\n      "real": 1.0,\n      "imag": 2.0\n    }'),
        ("float32", "nan", '"constant_value": "nan"'),
        ("float64", "-inf", '"constant_value": "-inf"'),
    ],
)
def test_explain_json_constant_value(run_cli, tmp_path, dtype, constant, encoded):
    np.save(tmp_path / "d.npy", np.ones((2, 2), dtype=dtype))
    result = run_cli("pad", str(tmp_path / "d.npy"), "--pads", "1", "0", "0", "0",
                     "--constant-value", constant, "--explain", "--json")
    assert result.exit_code == 0, result.stderr
    assert encoded in result.stdout
    _strict(result.stdout)


# --- --check ---------------------------------------------------------------------------------


def _off_by(monkeypatch, offset):
    from padconv_cli import ops as operators

    entry = operators.OPERATORS["Pad"]
    monkeypatch.setitem(operators.OPERATORS, "Pad", entry._replace(
        run=lambda *args: entry.run(*args) + offset))


def test_check_json_complex_mismatch(run_cli, tmp_path, monkeypatch):
    np.save(tmp_path / "d.npy", np.array([1 + 2j], dtype=np.complex64))
    _off_by(monkeypatch, np.complex64(0.5j))
    result = run_cli("pad", str(tmp_path / "d.npy"), "--pads", "0", "1", "--check", "--json",
                     "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 1, result.stderr
    report = _strict(result.stdout)
    (reference,) = [p for p in report["peers"] if p["peer"] == "onnx.reference"]
    assert reference["mismatches"][0] == {
        "index": [0],
        "expected": {"real": 1.0, "imag": 2.0},
        "actual": {"real": 1.0, "imag": 2.5},
    }


def test_check_json_nan_mismatch(run_cli, tmp_path, monkeypatch):
    np.save(tmp_path / "d.npy", np.array([1.0, 2.0], dtype=np.float32))
    _off_by(monkeypatch, np.float32("nan"))
    result = run_cli("pad", str(tmp_path / "d.npy"), "--pads", "1", "0", "--check", "--json",
                     "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 1, result.stderr
    assert '"actual": "nan"' in result.stdout
    report = _strict(result.stdout)
    (reference,) = [p for p in report["peers"] if p["peer"] == "onnx.reference"]
    assert reference["mismatches"][0] == {"index": [0], "expected": 0.0, "actual": "nan"}


# --- verify ----------------------------------------------------------------------------------


def _pad_case(folder, data: np.ndarray, expected: np.ndarray):
    """An ONNX test-case folder: Pad-18 of ``data`` by one element before, ``expected`` out."""
    kind = helper.np_dtype_to_tensor_dtype(data.dtype)
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["y"])], "pad",
        [helper.make_tensor_value_info("x", kind, data.shape)],
        [helper.make_tensor_value_info("y", kind, expected.shape)],
        [numpy_helper.from_array(np.array([1, 0], dtype=np.int64), "pads")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    (folder / "test_data_set_0").mkdir(parents=True)
    onnx.save(model, str(folder / "model.onnx"))
    for name, array in (("input_0.pb", data), ("output_0.pb", expected)):
        (folder / "test_data_set_0" / name).write_bytes(
            numpy_helper.from_array(array).SerializeToString())
    return folder


def _verify_record(run_cli, folder) -> dict:
    result = run_cli("verify", str(folder), "--json")
    assert result.exit_code == 1, result.stdout + result.stderr
    (record,) = [r for r in map(_strict, result.stdout.splitlines()) if r["type"] == "case"]
    return record


def test_verify_json_complex_mismatch(run_cli, tmp_path):
    data = np.array([1 + 2j, 3 - 4j], dtype=np.complex64)
    wrong = np.array([0, 1 + 2j, 3 + 4j], dtype=np.complex64)
    record = _verify_record(run_cli, _pad_case(tmp_path / "test_pad_complex", data, wrong))
    assert record["mismatches"] == [
        {"index": [2], "expected": {"real": 3.0, "imag": 4.0},
         "actual": {"real": 3.0, "imag": -4.0}},
    ]


def test_verify_json_nan_mismatch(run_cli, tmp_path):
    data = np.array([1.0, 2.0], dtype=np.float32)
    wrong = np.array([np.nan, 1.0, 2.0], dtype=np.float32)
    record = _verify_record(run_cli, _pad_case(tmp_path / "test_pad_nan", data, wrong))
    assert record["mismatches"] == [{"index": [0], "expected": "nan", "actual": 0.0}]


# --format must agree with the -o suffix; -o onto /dev/null, /dev/stdout, FIFOs and sockets.


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


# Output targets that cannot mean what was typed are usage errors, refused before any work.


@pytest.fixture
def x_npy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    return "x.npy"


@pytest.mark.parametrize("empty", ["", " "])
def test_empty_output_path_is_a_usage_error(run_cli, x_npy, tmp_path, empty):
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", empty)
    assert result.exit_code == 2
    assert "-o/--output is empty" in result.stderr
    assert result.stdout_bytes == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def test_empty_emit_onnx_path_is_a_usage_error(run_cli, x_npy):
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", "y.npy",
                     "--emit-onnx", "")
    assert result.exit_code == 2
    assert "--emit-onnx is empty" in result.stderr


@pytest.mark.parametrize("emit", ["f.npy", "./f.npy", "sub/../f.npy"])
def test_output_and_emitted_model_on_one_file_is_refused(run_cli, x_npy, tmp_path, emit):
    (tmp_path / "sub").mkdir()
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", "f.npy",
                     "--emit-onnx", emit)
    assert result.exit_code == 2
    assert "-o and --emit-onnx both name f.npy" in result.stderr
    assert not (tmp_path / "f.npy").exists()


def test_output_and_emitted_model_through_a_hardlink_is_refused(run_cli, x_npy, tmp_path):
    (tmp_path / "f.npy").write_bytes(b"old")
    (tmp_path / "link.onnx").hardlink_to(tmp_path / "f.npy")
    result = run_cli("conv", x_npy, "[[[[1.0]]]]", "-o", "f.npy", "--emit-onnx", "link.onnx")
    assert result.exit_code == 2
    assert (tmp_path / "f.npy").read_bytes() == b"old"


def test_distinct_output_and_model_are_both_written(run_cli, x_npy, tmp_path):
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", "f.npy",
                     "--emit-onnx", "f.onnx")
    assert result.exit_code == 0, result.stderr
    assert np.load(tmp_path / "f.npy").shape == (4, 5)
    assert (tmp_path / "f.onnx").stat().st_size > 0


@pytest.mark.parametrize("text", ["9" * 400, "9" * 400 + "G", "1" + "0" * 19, "9" * 5000,
                                  "99999999999T", "8388608T"], ids=lambda text: text[:12])
def test_absurd_sizes_are_refused(text):
    with pytest.raises(ValueError, match="too large|not a size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.5G", 3 * 2**29), ("0.5k", 512), ("8388607T", 8388607 * 2**40),
     ("1." + "9" * 5000, 1), ("9223372036854775807", 2**63 - 1)],
    ids=lambda value: str(value)[:12],
)
def test_sizes_are_exact(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("flag", ["--memory-limit", "--max-output-bytes"])
def test_size_flag_of_400_nines_is_one_line(run_cli, x_npy, flag):
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", "y.npy", flag, "9" * 400)
    assert result.exit_code == 2
    assert "too large" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert len(result.stderr) < 300
