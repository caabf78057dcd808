"""--from-model on the patterns exporters write: Identity-routed biases, Cast-ed pads, wrap at
opset 18, external data; values folded from stored tensors and the limits of folding."""

from __future__ import annotations

import io

import exported_models as em
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

X3 = em.weights((1, 3, 10, 10), seed=9)
X2 = em.weights((1, 2, 4, 5), seed=9)


def _load(result) -> np.ndarray:
    assert result.exit_code == 0, result.stderr
    return np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)


@pytest.fixture
def x3(tmp_path):
    np.save(tmp_path / "x3.npy", X3)
    return str(tmp_path / "x3.npy")


@pytest.fixture
def x2(tmp_path):
    np.save(tmp_path / "x2.npy", X2)
    return str(tmp_path / "x2.npy")


@pytest.mark.parametrize("external", [False, True])
def test_identity_routed_bias_is_folded(run_cli, tmp_path, x3, external):
    model = em.resnet_block()
    np.save(tmp_path / "w.npy", numpy_helper.to_array(model.graph.initializer[0]))
    np.save(tmp_path / "b.npy", numpy_helper.to_array(model.graph.initializer[1]))
    path = em.save(model, tmp_path / "m.onnx", external=external)
    folded = _load(run_cli("conv", x3, "--from-model", path, "--node", "/conv1/Conv", "-o", "-"))
    given = _load(run_cli("conv", x3, str(tmp_path / "w.npy"), str(tmp_path / "b.npy"),
                          "--pads", "1", "1", "1", "1", "-o", "-"))
    np.testing.assert_array_equal(folded, given)  # the folded B is the stored bias, exactly


def test_cast_pads_and_value_are_folded(run_cli, tmp_path, x2):
    path = em.save(em.cast_pads_model(), tmp_path / "m.onnx")
    result = _load(run_cli("pad", x2, "--from-model", path, "-o", "-"))
    expected = np.pad(X2, ((0, 0), (0, 0), (1, 2), (2, 1)), constant_values=1.5)
    np.testing.assert_array_equal(result, expected)


def test_torch_order_pads_through_reshape_slice_transpose_are_folded(run_cli, tmp_path, x2):
    x = em.weights((1, 2, 8, 8), seed=9)
    np.save(tmp_path / "x8.npy", x)
    path = em.save(em.torch_pad_chain_model(), tmp_path / "m.onnx")
    result = _load(run_cli("pad", str(tmp_path / "x8.npy"), "--from-model", path, "-o", "-"))
    expected = np.pad(x, ((0, 0), (0, 0), (3, 4), (1, 2)), mode="reflect")
    np.testing.assert_array_equal(result, expected)


def test_wrap_at_opset_18_is_computed_as_pad19_with_one_note(run_cli, tmp_path, x2):
    path = em.save(em.wrap_model(opset=18), tmp_path / "m.onnx")
    result = run_cli("pad", x2, "--from-model", path, "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 0, result.stderr
    expected = np.pad(X2, ((0, 0), (0, 0), (1, 2), (2, 1)), mode="wrap")
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("padconv: note: ")
    assert "off-spec" in lines[0] and "'/pad/Pad'" in lines[0] and "Pad-19" in lines[0]
    explained = run_cli("pad", x2, "--from-model", path, "--explain")
    assert explained.exit_code == 0 and explained.stderr == ""
    assert "note: " in explained.stdout and "off-spec" in explained.stdout
    replaced = run_cli("pad", x2, "--from-model", path, "--mode", "edge", "-o", "-")
    assert replaced.exit_code == 0 and replaced.stderr == ""


def _one_node_model(path, nodes, initializers=(), inputs=(("x", [1, 2, 4, 5]),), ir=8):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT if n == "x" else TensorProto.INT64, s)
         for n, s in inputs],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir
    return em.save(model, path)


def test_a_graph_input_with_an_initializer_folds_its_stored_default(run_cli, tmp_path, x2):
    """Initializers listed as graph inputs (every initializer before IR 4) count as stored,
    as they do for a node's own inputs; a graph input without one is computed at run time."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "p")
    nodes = [helper.make_node("Identity", ["p"], ["q"]),
             helper.make_node("Pad", ["x", "q"], ["y"], name="pad")]
    for ir in (3, 8):
        path = _one_node_model(tmp_path / f"m{ir}.onnx", nodes, [pads],
                               (("x", [1, 2, 4, 5]), ("p", [8])), ir=ir)
        result = _load(run_cli("pad", x2, "--from-model", path, "-o", "-"))
        np.testing.assert_array_equal(result, np.pad(X2, ((0, 0), (0, 0), (1, 1), (1, 1))))
    fed = _one_node_model(tmp_path / "fed.onnx", nodes, [], (("x", [1, 2, 4, 5]), ("p", [8])))
    refused = run_cli("pad", x2, "--from-model", fed, "-o", "-")
    assert refused.exit_code == 2
    assert "'q'" in refused.stderr and "computed at run time" in refused.stderr


def test_random_values_are_not_folded(run_cli, tmp_path, x2):
    nodes = [
        helper.make_node("Constant", [], ["shape"], value_ints=[1]),
        helper.make_node("RandomUniformLike", ["shape"], ["r"], dtype=TensorProto.FLOAT),
        helper.make_node("Pad", ["x", "pads", "r"], ["y"], name="pad"),
    ]
    pads = numpy_helper.from_array(np.zeros(8, np.int64), "pads")
    path = _one_node_model(tmp_path / "m.onnx", nodes, [pads])
    result = run_cli("pad", x2, "--from-model", path, "-o", "-")
    assert result.exit_code == 2 and "computed at run time" in result.stderr


def test_a_folded_value_too_large_is_refused_before_it_is_computed(run_cli, tmp_path, x2):
    huge = numpy_helper.from_array(np.array([10**6, 10**6, 10**3], np.int64), "huge")
    nodes = [
        helper.make_node("ConstantOfShape", ["huge"], ["big"]),
        helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
        helper.make_node("Pad", ["x", "pads", "total"], ["y"], name="pad"),
    ]
    pads = numpy_helper.from_array(np.zeros(8, np.int64), "pads")
    path = _one_node_model(tmp_path / "m.onnx", nodes, [huge, pads])
    result = run_cli("pad", x2, "--from-model", path, "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "cannot be folded" in result.stderr and "'big'" in result.stderr
    assert not (tmp_path / "y.npy").exists()
