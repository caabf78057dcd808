"""``--emit-onnx FILE --emit-initializers``: the model stores the given tensors and runs on
its own, with no inputs, in onnx.reference and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator


@pytest.mark.parametrize(
    "args",
    [("pad", "[[1.0, 2.0], [3.0, 4.0]]", "--pads", "1", "0", "0", "1", "--mode", "reflect"),
     ("conv", "samples/conv_basic_x.npy", "samples/conv_basic_w.npy", "[0.5]",
      "--pads", "1", "1", "1", "1")],
    ids=["pad", "conv"],
)
def test_emitted_model_runs_without_inputs(run_cli, tmp_path, monkeypatch, args):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    model_path, out = tmp_path / "m.onnx", tmp_path / "y.npy"
    result = run_cli(*args, "--emit-onnx", str(model_path), "--emit-initializers",
                     "-o", str(out))
    assert result.exit_code == 0, result.stderr
    model = onnx.load(str(model_path))
    onnx.checker.check_model(model, full_check=True)
    stored = {tensor.name for tensor in model.graph.initializer}
    # before IR 4 initializers are listed as inputs too; none needs a feed
    assert [i.name for i in model.graph.input if i.name not in stored] == []
    assert stored
    expected = np.load(out)
    np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, {})[0], expected)
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the padconv[check] extra")
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {})[0], expected)


def test_without_the_flag_the_tensors_are_graph_inputs(run_cli, tmp_path):
    model_path = tmp_path / "m.onnx"
    result = run_cli("pad", "[1.0, 2.0]", "--pads", "1", "1", "--emit-onnx", str(model_path),
                     "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 0
    assert [i.name for i in onnx.load(str(model_path)).graph.input] == ["data"]


def test_the_flag_needs_emit_onnx(run_cli):
    result = run_cli("pad", "[1.0, 2.0]", "--pads", "1", "1", "--emit-initializers")
    assert result.exit_code == 2
    assert "--emit-initializers" in result.stderr and "--emit-onnx" in result.stderr
