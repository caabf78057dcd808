"""audit on what exporters write: ``-1`` and repeated ``?`` dims accept any given size; sizes
not given take documented defaults, said in one line; a chosen size the model cannot run with
is a bad input (exit 2, one line), never a traceback."""

from __future__ import annotations

import numpy as np
import onnx
from audit_models import exported_model
from onnx import TensorProto, helper, numpy_helper


def test_minus_one_and_question_marks_take_defaults(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("audit", path)
    assert result.exit_code == 0, result.stderr
    assert "  input x: random [1, 3, 64, 64] (seed 0; unknown dims chosen by default)" in (
        result.stdout.splitlines())


def test_a_given_input_fills_minus_one_and_question_marks(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.ones((2, 3, 48, 40), np.float32))
    result = run_cli("audit", path, str(tmp_path / "x.npy"))
    assert result.exit_code == 0, result.stderr
    assert "[2,4,48,40]" in result.stdout


def test_dim_question_mark_sets_every_question_mark(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("audit", path, "--dim", "?=48")
    assert result.exit_code == 0, result.stderr
    assert "  input x: random [1, 3, 48, 48] (seed 0; unknown dims chosen by default)" in (
        result.stdout.splitlines())


def test_named_dims_share_their_default(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=("batch", "c", "side", "side"))
    result = run_cli("audit", path, "--dim", "batch=2")
    assert result.exit_code == 0, result.stderr
    assert "random [2, 3, 64, 64]" in result.stdout


def test_channels_default_to_what_the_first_conv_takes(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, "?", 8, 8))
    result = run_cli("audit", path)
    assert result.exit_code == 0, result.stderr
    assert "random [1, 3, 8, 8]" in result.stdout


def test_chosen_sizes_that_stop_the_model_are_a_bad_input(run_cli, tmp_path):
    weights = [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w"),
               numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w2"),
               numpy_helper.from_array(np.array([1, 4, 48, 48], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1], name="c1"),
             helper.make_node("Reshape", ["a", "shape"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], name="c2")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    result = run_cli("audit", str(tmp_path / "m.onnx"))
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert "sizes chosen for its unknown dims (x [1, 3, 64, 64])" in result.stderr
    assert "--dim NAME=VALUE" in result.stderr
    assert run_cli("audit", str(tmp_path / "m.onnx"), "--dim", "?=48").exit_code == 0


def test_a_huge_chosen_size_is_refused_before_anything_is_allocated(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("audit", path, "--dim", "?=100000")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "over a tenth of the memory available" in result.stderr
