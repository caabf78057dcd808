"""--emit-onnx writes its model only when the run itself can succeed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest


@pytest.fixture
def data_file(tmp_path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    return path


def test_emit_onnx_is_not_written_when_the_output_is_too_large(run_cli, data_file, tmp_path):
    model, output = tmp_path / "m.onnx", tmp_path / "y.npy"
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "--max-output-bytes",
                     "8", "--emit-onnx", str(model), "-o", str(output))
    assert result.exit_code == 2 and "--max-output-bytes" in result.stderr
    assert not model.exists() and not output.exists()


def test_conv_emit_onnx_is_not_written_when_the_output_is_too_large(run_cli, tmp_path):
    model = tmp_path / "m.onnx"
    result = run_cli("conv", "[[[[1.0, 2.0], [3.0, 4.0]]]]", "[[[[1.0]]]]", "--max-output-bytes",
                     "4", "--emit-onnx", str(model), "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert not model.exists()


def test_explain_with_emit_still_writes_the_model(run_cli, data_file, tmp_path):
    model = tmp_path / "m.onnx"
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "--max-output-bytes",
                     "8", "--emit-onnx", str(model), "--explain")
    assert result.exit_code == 0, result.stderr
    assert onnx.load(str(model)).graph.node[0].op_type == "Pad"
