"""``padconv convert IN OUT`` writes any tensor padconv reads as .npy or .pb, unchanged."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper
from polygraphy_files import FIXTURES

from padconv_cli import read_tensor


def test_a_model_tensor_becomes_a_named_pb(run_cli, tmp_path):
    out = tmp_path / "w.pb"
    result = run_cli("convert", f"{FIXTURES / 'pad_conv.onnx'}:w", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"wrote {out}: float32[2, 1, 3, 3] (TensorProto 'w')\n"
    tensor = onnx.load_tensor(str(out))
    assert tensor.name == "w"
    np.testing.assert_array_equal(numpy_helper.to_array(tensor),
                                  read_tensor(f"{FIXTURES / 'pad_conv.onnx'}:w"))


def test_a_polygraphy_output_becomes_npy(run_cli, tmp_path):
    out = tmp_path / "y.npy"
    assert run_cli("convert", f"{FIXTURES / 'outputs.json'}:y", str(out)).exit_code == 0
    np.testing.assert_array_equal(np.load(out), read_tensor(f"{FIXTURES / 'outputs.json'}:y"))


def test_a_literal_with_its_dtype_and_name(run_cli, tmp_path):
    out = tmp_path / "x.pb"
    result = run_cli("convert", "[[1, 2], [3, 4]]", str(out), "--dtype", "float16",
                     "--name", "x")
    assert result.exit_code == 0, result.stderr
    array = read_tensor(str(out))
    assert array.dtype == np.float16 and array.tolist() == [[1, 2], [3, 4]]
    assert onnx.load_tensor(str(out)).name == "x"


def test_stdout_gets_the_bytes_only(run_cli):
    result = run_cli("convert", "[1.5, 2.5]", "-")
    assert result.exit_code == 0
    assert result.stdout_bytes.startswith(b"\x93NUMPY")


def test_bad_input_writes_nothing(run_cli, tmp_path):
    out = tmp_path / "x.npy"
    result = run_cli("convert", str(tmp_path / "absent.npy"), str(out))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert not out.exists()
    clash = run_cli("convert", "[1]", str(out), "--format", "pb")
    assert clash.exit_code == 2 and not out.exists()


def test_out_cannot_be_in(run_cli, tmp_path):
    source = tmp_path / "x.npy"
    np.save(source, np.arange(3))
    result = run_cli("convert", str(source), str(source))
    assert result.exit_code == 2 and "also an input" in result.stderr
    assert np.load(source).tolist() == [0, 1, 2]
