"""``padconv conv`` as a user runs it."""

from __future__ import annotations

import io

import numpy as np
import pytest
from oracles import fp16_spec_example

X5 = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
W3 = np.ones((1, 1, 3, 3), dtype=np.float32)
WITH_PADDING = [
    [12.0, 21.0, 27.0, 33.0, 24.0],
    [33.0, 54.0, 63.0, 72.0, 51.0],
    [63.0, 99.0, 108.0, 117.0, 81.0],
    [93.0, 144.0, 153.0, 162.0, 111.0],
    [72.0, 111.0, 117.0, 123.0, 84.0],
]


@pytest.fixture
def xw(tmp_path):
    x, w = tmp_path / "x.npy", tmp_path / "w.npy"
    np.save(x, X5)
    np.save(w, W3)
    return x, w


def test_documented_padding_example(run_cli, xw, tmp_path):
    out = tmp_path / "y.npy"
    result = run_cli(
        "conv",
        str(xw[0]),
        str(xw[1]),
        "--kernel-shape",
        "3",
        "3",
        "--pads",
        "1",
        "1",
        "1",
        "1",
        "-o",
        str(out),
    )
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(out)[0, 0], WITH_PADDING)


def test_kernel_shape_taken_from_w_and_bias_literal(run_cli, xw):
    result = run_cli("conv", str(xw[0]), str(xw[1]), "[0.5]", "--auto-pad", "VALID", "-o", "-")
    assert result.exit_code == 0, result.stderr
    got = np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    np.testing.assert_array_equal(got[0, 0], np.array(WITH_PADDING)[1:4, 1:4] + 0.5)


def test_fp16_example_bit_exact(run_cli, tmp_path):
    for name, tensor in zip(("x", "w", "b"), fp16_spec_example()[:3], strict=True):
        np.save(tmp_path / f"{name}.npy", tensor)
    result = run_cli("conv", *(str(tmp_path / f"{n}.npy") for n in "xwb"), "--pads", "1,1,1,1",
                     "-o", "-")
    assert result.exit_code == 0, result.stderr
    got = np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    assert got.dtype == np.float16
    assert got.tobytes() == fp16_spec_example()[3].tobytes()


ERROR_CASES = [
    (["--kernel-shape", "2", "2"], "--kernel-shape"),
    (["--strides", "0", "1"], "strides"),
    (["--dilations", "1"], "dilations"),
    (["--pads", "1", "1", "1", "1", "--auto-pad", "SAME_UPPER"], "auto_pad"),
    (["--pads", "-1", "0", "0", "0"], "pads"),
    (["--group", "2"], "group"),
    (["--auto-pad", "SAME"], "--auto-pad"),
]


@pytest.mark.parametrize(("args", "needle"), ERROR_CASES)
def test_errors_are_one_line_exit_2(run_cli, xw, tmp_path, args, needle):
    out = tmp_path / "y.npy"
    result = run_cli("conv", str(xw[0]), str(xw[1]), *args, "-o", str(out))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert needle in result.stderr
    assert not out.exists()


def test_integer_input_is_refused_with_advice(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3, 3), dtype=np.int64))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 3, 3), dtype=np.int64))
    result = run_cli("conv", str(tmp_path / "x.npy"), str(tmp_path / "w.npy"), "-o", "-")
    assert result.exit_code == 2
    assert "float" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize(("bias", "shape"), [("[0.5, 1.5]", "(2,)"), ("[[0.5]]", "(1, 1)")])
def test_bias_of_wrong_shape(run_cli, xw, bias, shape):
    result = run_cli("conv", str(xw[0]), str(xw[1]), bias, "-o", "-")
    assert result.exit_code == 2
    message = f"padconv conv: error: Conv bias B must have shape (M,) = (1,), got {shape}\n"
    assert result.stderr == message
    assert result.stdout_bytes == b""
