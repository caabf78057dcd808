"""``model.onnx:NAME``: a tensor the model stores, wherever a tensor is accepted."""

from __future__ import annotations

import io

import exported_models as em
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from padconv_cli.errors import InputError
from padconv_cli.tensor_sources import read_named_tensor, read_tensor
from padconv_cli.tensorio import classify_source

ODD_NAMES = ("conv1.weight", "/features/0/Conv:weight", "onnx::Conv_7", "a.onnx:b")


def _model_with_odd_names(path):
    """Initializers whose names hold ':' and '/', a Constant, and a subgraph initializer."""
    arrays = {name: np.full((2,), i, np.float32) for i, name in enumerate(ODD_NAMES)}
    inner = helper.make_graph(
        [helper.make_node("Identity", ["inner_w"], ["z"])], "then", [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.arange(3, dtype=np.float32), "inner_w")],
    )
    nodes = [
        helper.make_node("Constant", [], ["const_out"], value_ints=[4, 5, 6]),
        helper.make_node("If", ["cond"], ["z"], then_branch=inner, else_branch=inner),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in arrays.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return em.save(model, path), arrays


@pytest.mark.parametrize("name", ODD_NAMES)
def test_initializers_by_name_even_with_colons_and_slashes(tmp_path, name):
    path, arrays = _model_with_odd_names(tmp_path / "m.onnx")
    assert classify_source(f"{path}:{name}").kind == "model"
    stored_name, array = read_named_tensor(f"{path}:{name}")
    assert stored_name == name
    np.testing.assert_array_equal(array, arrays[name])


def test_constant_outputs_subgraph_initializers_and_folded_values(tmp_path):
    path, _ = _model_with_odd_names(tmp_path / "m.onnx")
    np.testing.assert_array_equal(read_tensor(f"{path}:const_out"), [4, 5, 6])
    np.testing.assert_array_equal(read_tensor(f"{path}:inner_w"), [0, 1, 2])
    block = em.save(em.resnet_block(), tmp_path / "r.onnx")
    np.testing.assert_array_equal(read_tensor(f"{block}:onnx::Conv_b1"),
                                  read_tensor(f"{block}:conv1.bias"))


def test_a_wrong_name_lists_close_matches(tmp_path):
    path, _ = _model_with_odd_names(tmp_path / "m.onnx")
    with pytest.raises(InputError) as error:
        read_tensor(f"{path}:conv1.wieght")
    message = str(error.value)
    assert message.startswith(f"{path}: no stored tensor 'conv1.wieght'")
    assert "did you mean 'conv1.weight'" in message and "\n" not in message


def test_a_model_without_a_name_says_how_to_name_a_tensor(tmp_path):
    path, _ = _model_with_odd_names(tmp_path / "m.onnx")
    with pytest.raises(InputError, match=r"a model, not a tensor; .*m.onnx:NAME"):
        read_tensor(path)


def test_a_missing_model_is_no_such_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_tensor(f"{tmp_path}/absent.onnx:w")


def test_external_data_is_read_under_the_model_rules(tmp_path):
    model = em.resnet_block()
    expected = numpy_helper.to_array(model.graph.initializer[0])
    path = em.save(model, tmp_path / "m.onnx", external=True)
    np.testing.assert_array_equal(read_tensor(f"{path}:conv1.weight"), expected)
    (tmp_path / "weights.bin").write_bytes(b"short")
    with pytest.raises(InputError):
        read_tensor(f"{path}:conv1.weight")


def _npy(result) -> np.ndarray:
    assert result.exit_code == 0, result.stderr
    return np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)


def test_conv_show_and_compare_take_model_tensors(run_cli, tmp_path):
    model = em.resnet_block()
    path = em.save(model, tmp_path / "m.onnx")
    x = em.weights((1, 3, 10, 10), seed=9)
    np.save(tmp_path / "x.npy", x)
    by_name = _npy(run_cli("conv", str(tmp_path / "x.npy"), f"{path}:conv1.weight",
                           f"{path}:conv1.bias", "--pads", "1", "1", "1", "1", "-o", "-"))
    by_node = _npy(run_cli("conv", str(tmp_path / "x.npy"), "--from-model", path, "--node",
                           "/conv1/Conv", "-o", "-"))
    np.testing.assert_array_equal(by_name, by_node)
    shown = run_cli("show", f"{path}:conv1.bias")
    assert shown.exit_code == 0 and "float32[8]" in shown.stdout
    same = run_cli("compare", f"{path}:conv1.bias", f"{path}:onnx::Conv_b1")
    assert same.exit_code == 0 and same.stdout.startswith("PASS")
    differ = run_cli("compare", f"{path}:conv1.bias", f"{path}:conv2.bias")
    assert differ.exit_code == 1
    wrong = run_cli("show", f"{path}:conv9.bias")
    assert wrong.exit_code == 2 and wrong.stderr.count("\n") == 1 and "conv1.bias" in wrong.stderr
