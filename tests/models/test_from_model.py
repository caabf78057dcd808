"""``--from-model MODEL.onnx --node NAME``: attributes and stored inputs of real nodes, the
patterns exporters write, flags overriding them, messages naming the model and the node, and
shell completion of node names."""

from __future__ import annotations

import io
import os
import subprocess

import exported_models as em
import numpy as np
import onnx
import pytest
from click.shell_completion import ShellComplete
from hostile.runner import PADCONV
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from padconv_cli.cli.main import cli

# ``--from-model MODEL.onnx --node NAME``: attributes and stored inputs of real Pad/Conv nodes,
# any opset, flags overriding them, node lists on mistakes and the external-data safety rules.


RNG = np.random.default_rng(11)
DATA = RNG.standard_normal((1, 2, 4, 5)).astype(np.float32)
W = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)


def _model(nodes, *, opset, initializers=(), inputs=("x",), path=None):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in inputs],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        initializer=list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 3 if opset < 8 else 8
    if path is not None:
        onnx.save(model, str(path))
    return model


def _int64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _float(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.float32), name)


def _load(result):
    return np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, DATA)
    return str(path)


PAD_MODELS = {
    "pad1_paddings": (
        [helper.make_node("Pad", ["x"], ["y"], paddings=[0, 0, 1, 2, 0, 0, 0, 1], value=1.5)],
        1, [],
    ),
    "pad2_attributes": (
        [helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 1, 0, 0, 0, 2, 1], mode="reflect")],
        2, [],
    ),
    "pad11_initializers": (
        [helper.make_node("Pad", ["x", "p", "v"], ["y"], mode="constant")],
        11, [_int64("p", [0, 1, 1, 1, 0, 0, 0, 2]), _float("v", -4.0)],
    ),
    "pad18_constant_node_axes": (
        [
            helper.make_node("Constant", [], ["p"], value_ints=[2, 1, 0, 3]),
            helper.make_node("Pad", ["x", "p", "", "a"], ["y"], mode="edge"),
        ],
        18, [_int64("a", [2, -1])],
    ),
    "pad19_wrap": (
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap")],
        19, [_int64("p", [0, 0, 3, 6, 0, 0, 1, 0])],
    ),
}


@pytest.mark.parametrize("name", sorted(PAD_MODELS))
def test_pad_node_of_any_opset_matches_onnx_reference(run_cli, tmp_path, data_file, name):
    nodes, opset, initializers = PAD_MODELS[name]
    model = _model(nodes, opset=opset, initializers=initializers, path=tmp_path / "m.onnx")
    result = run_cli("pad", data_file, "--from-model", str(tmp_path / "m.onnx"), "-o", "-")
    assert result.exit_code == 0, result.stderr
    expected = ReferenceEvaluator(model).run(None, {"x": DATA})[0]
    np.testing.assert_array_equal(_load(result), expected)


def test_flags_override_the_model(run_cli, tmp_path, data_file):
    nodes, opset, initializers = PAD_MODELS["pad11_initializers"]
    _model(nodes, opset=opset, initializers=initializers, path=tmp_path / "m.onnx")
    model = str(tmp_path / "m.onnx")
    base = ["pad", data_file, "--from-model", model, "-o", "-"]
    overridden = run_cli(*base, "--constant-value", "9", "--mode", "constant")
    direct = run_cli("pad", data_file, "--pads", "0,1,1,1,0,0,0,2", "--constant-value", "9",
                     "-o", "-")
    np.testing.assert_array_equal(_load(overridden), _load(direct))
    edge = run_cli(*base, "--mode", "edge", "--pads", "0", "0", "2", "2", "0", "0", "0", "0")
    np.testing.assert_array_equal(
        _load(edge), np.pad(DATA, ((0, 0), (0, 0), (2, 0), (2, 0)), mode="edge")
    )


def test_pads_computed_at_run_time_need_the_flag(run_cli, tmp_path, data_file):
    node = helper.make_node("Pad", ["x", "runtime_pads"], ["y"], name="p")
    _model([node], opset=13, inputs=("x", "runtime_pads"), path=tmp_path / "m.onnx")
    args = ["pad", data_file, "--from-model", str(tmp_path / "m.onnx"), "-o", "-"]
    refused = run_cli(*args)
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1
    assert "'runtime_pads'" in refused.stderr and "--pads" in refused.stderr
    given = run_cli(*args, "--pads", "0", "0", "1", "1", "0", "0", "1", "1")
    assert given.exit_code == 0, given.stderr
    assert _load(given).shape == (1, 2, 6, 7)


def _conv_model(path, **attributes):
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["h"], name="conv_a", **attributes),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Conv", ["r", "W2"], ["y"], kernel_shape=[1, 1]),
    ]
    w2 = RNG.standard_normal((2, 3, 1, 1)).astype(np.float32)
    initializers = [_float("W", W), _float("B", B), _float("W2", w2)]
    return _model(nodes, opset=11, initializers=initializers, path=path)


def test_conv_takes_weights_bias_and_attributes_from_the_model(run_cli, tmp_path, data_file):
    _conv_model(tmp_path / "m.onnx", kernel_shape=[3, 3], pads=[1, 0, 1, 2], strides=[1, 2])
    np.save(tmp_path / "w.npy", W)
    np.save(tmp_path / "b.npy", B)
    from_model = run_cli("conv", data_file, "--from-model", str(tmp_path / "m.onnx"),
                         "--node", "conv_a", "-o", "-")
    assert from_model.exit_code == 0, from_model.stderr
    direct = run_cli("conv", data_file, str(tmp_path / "w.npy"), str(tmp_path / "b.npy"),
                     "--pads", "1", "0", "1", "2", "--strides", "1", "2", "-o", "-")
    np.testing.assert_array_equal(_load(from_model), _load(direct))


def test_replacing_w_drops_the_models_kernel_shape(run_cli, tmp_path, data_file):
    _conv_model(tmp_path / "m.onnx", kernel_shape=[3, 3])
    w5 = RNG.standard_normal((3, 2, 1, 1)).astype(np.float32)
    np.save(tmp_path / "w5.npy", w5)
    result = run_cli("conv", data_file, str(tmp_path / "w5.npy"), "--from-model",
                     str(tmp_path / "m.onnx"), "--node", "conv_a", "-o", "-")
    assert result.exit_code == 0, result.stderr
    assert _load(result).shape == (1, 3, 4, 5)


def test_pads_flag_replaces_the_models_auto_pad(run_cli, tmp_path, data_file):
    _conv_model(tmp_path / "m.onnx", auto_pad="SAME_UPPER")
    model = str(tmp_path / "m.onnx")
    same = run_cli("conv", data_file, "--from-model", model, "--node", "conv_a", "-o", "-")
    assert _load(same).shape == (1, 3, 4, 5)
    padded = run_cli("conv", data_file, "--from-model", model, "--node", "conv_a",
                     "--pads", "0", "0", "0", "0", "-o", "-")
    assert padded.exit_code == 0, padded.stderr
    assert _load(padded).shape == (1, 3, 2, 3)


@pytest.mark.parametrize(
    ("node", "expected_shape"),
    [("conv_a", (1, 3, 2, 3)), ("Conv#0", (1, 3, 2, 3)), ("h", (1, 3, 2, 3))],
)
def test_node_by_name_label_or_output(run_cli, tmp_path, data_file, node, expected_shape):
    _conv_model(tmp_path / "m.onnx", kernel_shape=[3, 3])
    result = run_cli("conv", data_file, "--from-model", str(tmp_path / "m.onnx"),
                     "--node", node, "-o", "-")
    assert result.exit_code == 0, result.stderr
    assert _load(result).shape == expected_shape


def test_unnamed_node_by_label(run_cli, tmp_path):
    _conv_model(tmp_path / "m.onnx", kernel_shape=[3, 3])
    x = RNG.standard_normal((1, 3, 2, 2)).astype(np.float32)
    np.save(tmp_path / "r.npy", x)
    result = run_cli("conv", str(tmp_path / "r.npy"), "--from-model", str(tmp_path / "m.onnx"),
                     "--node", "Conv#1", "-o", "-")
    assert result.exit_code == 0, result.stderr
    assert _load(result).shape == (1, 2, 2, 2)


@pytest.mark.parametrize(
    ("node", "wanted"),
    [
        (None, ["2 Conv nodes", "choose one with --node", "conv_a", "Conv#1"]),
        ("conv_b", ["no Conv node 'conv_b'", "did you mean 'conv_a'", "Conv nodes: conv_a"]),
        ("Relu", ["no Conv node 'Relu'", "Conv nodes: conv_a, Conv#1"]),
    ],
)
def test_missing_or_wrong_node_lists_the_nodes(run_cli, tmp_path, data_file, node, wanted):
    _conv_model(tmp_path / "m.onnx", kernel_shape=[3, 3])
    args = ["conv", data_file, "--from-model", str(tmp_path / "m.onnx"), "-o", "-"]
    result = run_cli(*args, *(["--node", node] if node else []))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    for text in wanted:
        assert text in result.stderr


def test_asking_a_pad_command_for_a_conv_node_says_so(run_cli, tmp_path, data_file):
    _conv_model(tmp_path / "m.onnx", kernel_shape=[3, 3])
    result = run_cli("pad", data_file, "--from-model", str(tmp_path / "m.onnx"), "-o", "-")
    assert result.exit_code == 2
    assert "has no Pad node" in result.stderr and "Conv" in result.stderr


def test_node_inside_a_subgraph_sees_outer_initializers(run_cli, tmp_path, data_file):
    inner_pad = helper.make_node("Pad", ["x", "outer_pads"], ["z"], name="inner", mode="edge")
    branch = helper.make_graph(
        [inner_pad], "then", [], [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]
    )
    empty = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["z2"])], "else", [],
        [helper.make_tensor_value_info("z2", TensorProto.FLOAT, None)],
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=empty)
    cond = numpy_helper.from_array(np.array(True), "cond")
    _model([node], opset=13, initializers=[cond, _int64("outer_pads", [0, 0, 0, 1, 0, 0, 0, 1])],
           path=tmp_path / "m.onnx")
    result = run_cli("pad", data_file, "--from-model", str(tmp_path / "m.onnx"),
                     "--node", "inner", "-o", "-")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(_load(result), np.pad(DATA, ((0, 0),) * 3 + ((1, 1),), "edge"))


@pytest.mark.parametrize(
    "content", [b"", b"not a model at all \x00\x01", b"\x08\x07"]
)
def test_not_a_model_is_exit_2(run_cli, tmp_path, data_file, content):
    (tmp_path / "bad.onnx").write_bytes(content)
    result = run_cli("pad", data_file, "--from-model", str(tmp_path / "bad.onnx"), "-o", "-")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "bad.onnx" in result.stderr


def test_node_without_model_is_a_usage_error(run_cli, data_file):
    result = run_cli("pad", data_file, "--pads", "0", "0", "0", "0", "0", "0", "0", "0",
                     "--node", "x")
    assert result.exit_code == 2
    assert "--node needs --from-model" in result.stderr


# --- external data ---------------------------------------------------------------------------


def _external_weight_model(folder, location, *, write_data=True):
    """A Conv model whose W lives in an external file named by ``location``."""
    tensor = _float("W", W)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(W.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    if write_data:
        (folder / "weights.bin").write_bytes(W.tobytes())
    node = helper.make_node("Conv", ["x", "W"], ["y"], name="c", kernel_shape=[3, 3])
    _model([node], opset=11, initializers=[tensor], path=folder / "m.onnx")
    return str(folder / "m.onnx")


def test_external_data_inside_the_models_folder_is_read(run_cli, tmp_path, data_file):
    model = _external_weight_model(tmp_path, "weights.bin")
    np.save(tmp_path / "w.npy", W)
    result = run_cli("conv", data_file, "--from-model", model, "-o", "-")
    assert result.exit_code == 0, result.stderr
    direct = run_cli("conv", data_file, str(tmp_path / "w.npy"), "-o", "-")
    np.testing.assert_array_equal(_load(result), _load(direct))


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("../weights.bin", "'..'"),
        ("sub/../../weights.bin", "'..'"),
        ("/etc/passwd", "absolute path"),
        ("link.bin", "outside"),
        ("absent.bin", "no such file"),
    ],
)
def test_unsafe_external_data_is_refused(run_cli, tmp_path, data_file, location, message):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "weights.bin").write_bytes(W.tobytes())
    os.symlink(tmp_path / "weights.bin", folder / "link.bin")
    model = _external_weight_model(folder, location, write_data=False)
    result = run_cli("conv", data_file, "--from-model", model, "-o", "-")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert message in result.stderr and "'W'" in result.stderr
    assert result.stdout_bytes == b""


def test_duplicate_names_ask_for_the_label(run_cli, tmp_path, data_file):
    pads = _int64("p", [0, 0, 0, 1, 0, 0, 0, 1])
    nodes = [
        helper.make_node("Pad", ["x", "p"], ["a"], name="same"),
        helper.make_node("Pad", ["a", "p"], ["y"], name="same", mode="edge"),
    ]
    _model(nodes, opset=13, initializers=[pads], path=tmp_path / "m.onnx")
    args = ["pad", data_file, "--from-model", str(tmp_path / "m.onnx"), "-o", "-"]
    ambiguous = run_cli(*args, "--node", "same")
    assert ambiguous.exit_code == 2
    assert "2 Pad nodes match 'same'; use Pad#0, Pad#1" in ambiguous.stderr
    second = run_cli(*args, "--node", "Pad#1")
    assert second.exit_code == 0, second.stderr
    np.testing.assert_array_equal(_load(second), np.pad(DATA, ((0, 0),) * 3 + ((1, 1),), "edge"))


def test_constant_node_value_tensor(run_cli, tmp_path, data_file):
    value = numpy_helper.from_array(np.array([1, 0, 0, 2], np.int64), "v")
    nodes = [
        helper.make_node("Constant", [], ["p"], value=value),
        helper.make_node("Pad", ["x", "p", "", "axes"], ["y"], name="pd", mode="reflect"),
    ]
    _model(nodes, opset=18, initializers=[_int64("axes", [2, 3])], path=tmp_path / "m.onnx")
    result = run_cli("pad", data_file, "--from-model", str(tmp_path / "m.onnx"), "-o", "-")
    assert result.exit_code == 0, result.stderr
    expected = np.pad(DATA, ((0, 0), (0, 0), (1, 0), (0, 2)), mode="reflect")
    np.testing.assert_array_equal(_load(result), expected)


def _bad_text_constant(name="s"):
    return helper.make_node("Constant", [], [name], name=name, value_string=b"caf\xe9")


def test_a_bad_constant_no_chosen_node_reads_does_not_break_the_model(run_cli, tmp_path,
                                                                       data_file):
    nodes = [
        _bad_text_constant(),
        helper.make_node("Identity", ["s"], ["t"]),
        helper.make_node("Pad", ["x", "p"], ["y"], name="pd", mode="edge"),
    ]
    _model(nodes, opset=13, initializers=[_int64("p", [0, 0, 1, 0, 0, 0, 0, 1])],
           path=tmp_path / "m.onnx")
    result = run_cli("pad", data_file, "--from-model", str(tmp_path / "m.onnx"), "-o", "-")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(_load(result), np.pad(DATA, ((0, 0), (0, 0), (1, 0), (0, 1)),
                                                        mode="edge"))


@pytest.mark.parametrize("attribute", ["value_string", "value_strings"])
def test_a_constant_that_is_not_utf8_is_an_input_error_when_read(tmp_path, attribute):
    from padconv_cli.errors import InputError
    from padconv_cli.models import find_node, resolve_call

    constant = helper.make_node("Constant", [], ["s"], name="s")
    raw = b"caf\xe9" if attribute == "value_string" else [b"ok", b"caf\xe9"]
    constant.attribute.append(helper.make_attribute(attribute, raw))
    nodes = [constant, helper.make_node("Pad", ["x", "p", "s"], ["y"], name="pd")]
    path = tmp_path / "m.onnx"
    _model(nodes, opset=13, initializers=[_int64("p", [0, 1, 0, 1])], path=path)
    origin = find_node(str(path), "pd", "Pad")  # loading the model reads no constant
    with pytest.raises(InputError) as error:
        resolve_call("Pad", (np.array([["a"]], dtype=object),), {}, origin)
    assert str(error.value) == f"{path}: attribute {attribute!r} of node 's' is not valid UTF-8"


def test_a_string_attribute_that_is_not_utf8_is_exit_2(run_cli, tmp_path, data_file):
    node = helper.make_node("Pad", ["x", "p"], ["y"], name="p")
    node.attribute.append(helper.make_attribute("mode", b"\xff"))
    _model([node], opset=13, initializers=[_int64("p", [0] * 8)], path=tmp_path / "m.onnx")
    result = run_cli("pad", data_file, "--from-model", str(tmp_path / "m.onnx"), "-o", "-")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{tmp_path / 'm.onnx'}: attribute 'mode' of node 'p' is not valid UTF-8" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("op_type", "opset", "inputs", "most"),
    [
        ("Pad", 13, ["x", "p", "v", "a", "extra"], 3),
        ("Pad", 13, ["x", "p", "", "a"], 3),
        ("Pad", 18, ["x", "p", "v", "a", ""], 4),
        ("Conv", 11, ["x", "w", "b", "extra"], 3),
    ],
)
def test_more_node_inputs_than_the_version_takes_are_refused(run_cli, tmp_path, data_file,
                                                             op_type, opset, inputs, most):
    node = helper.make_node(op_type, inputs, ["y"], name="n")
    initializers = [_int64("p", [0] * 8), _float("v", 1.0), _int64("a", [0]), _float("w", W),
                    _float("b", B), _float("extra", 0.0)]
    _model([node], opset=opset, initializers=initializers, path=tmp_path / "m.onnx")
    result = run_cli(op_type.lower(), data_file, "--from-model", str(tmp_path / "m.onnx"),
                     "-o", "-")
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    operator = f"{op_type}-{opset}"  # each opset here is the operator's own version
    assert f"node 'n' ({operator}) lists {len(inputs)} inputs; {operator} takes at most {most}" in (
        result.stderr
    )


# --from-model on the patterns exporters write: Identity-routed biases, Cast-ed pads, wrap at
# opset 18, external data; values folded from stored tensors and the limits of folding.


X3 = em.weights((1, 3, 10, 10), seed=9)
X2 = em.weights((1, 2, 4, 5), seed=9)


def _stdout(result) -> np.ndarray:
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
    folded = _stdout(run_cli("conv", x3, "--from-model", path, "--node", "/conv1/Conv", "-o", "-"))
    given = _stdout(run_cli("conv", x3, str(tmp_path / "w.npy"), str(tmp_path / "b.npy"),
                   "--pads", "1", "1", "1", "1", "-o", "-"))
    np.testing.assert_array_equal(folded, given)  # the folded B is the stored bias, exactly


def test_cast_pads_and_value_are_folded(run_cli, tmp_path, x2):
    path = em.save(em.cast_pads_model(), tmp_path / "m.onnx")
    result = _stdout(run_cli("pad", x2, "--from-model", path, "-o", "-"))
    expected = np.pad(X2, ((0, 0), (0, 0), (1, 2), (2, 1)), constant_values=1.5)
    np.testing.assert_array_equal(result, expected)


def test_torch_order_pads_through_reshape_slice_transpose_are_folded(run_cli, tmp_path, x2):
    x = em.weights((1, 2, 8, 8), seed=9)
    np.save(tmp_path / "x8.npy", x)
    path = em.save(em.torch_pad_chain_model(), tmp_path / "m.onnx")
    result = _stdout(run_cli("pad", str(tmp_path / "x8.npy"), "--from-model", path, "-o", "-"))
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
        result = _stdout(run_cli("pad", x2, "--from-model", path, "-o", "-"))
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


# Shell completion (click's ``_PADCONV_COMPLETE``): the scripts, and --node names from the
# model given with --from-model.


@pytest.fixture
def model(tmp_path):
    nodes = [
        helper.make_node("Pad", ["x", "p"], ["a"], name="pad_in"),
        helper.make_node("Conv", ["a", "w"], ["b"], name="conv_1"),
        helper.make_node("Conv", ["b", "w"], ["c"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("x", "p", "w")],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    return str(path)


def _complete(args, incomplete):
    completer = ShellComplete(cli, {}, "padconv", "_PADCONV_COMPLETE")
    return [(item.type, item.value) for item in completer.get_completions(args, incomplete)]


@pytest.mark.parametrize(
    ("command", "incomplete", "expected"),
    [
        ("conv", "", ["conv_1", "Conv#1"]),
        ("conv", "Co", ["Conv#1"]),
        ("pad", "", ["pad_in"]),
    ],
)
def test_node_names_come_from_the_model(model, command, incomplete, expected):
    args = [command, "x.npy", "--from-model", model, "--node"]
    assert [value for _, value in _complete(args, incomplete)] == expected


def test_node_completion_is_silent_for_a_broken_model(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"garbage")
    args = ["pad", "--from-model", str(tmp_path / "bad.onnx"), "--node"]
    assert _complete(args, "") == []


def test_commands_options_and_files_complete():
    assert ("plain", "show") in _complete([], "sh")
    assert ("plain", "compare") in _complete([], "c")
    assert ("plain", "--emit-onnx") in _complete(["pad", "x.npy"], "--em")
    assert _complete(["show"], "sam") == [("file", "sam")]


@pytest.mark.skipif(PADCONV is None, reason="the padconv script is not installed")
@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o"), ("zsh", "#compdef"),
                                              ("fish", "complete --no-files")])
def test_completion_scripts(shell, marker):
    env = {**os.environ, "_PADCONV_COMPLETE": f"{shell}_source"}
    result = subprocess.run([PADCONV], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert marker in result.stdout and "_PADCONV_COMPLETE" in result.stdout


# Errors about a model's node name the model and the node; the wrong command is redirected.


def test_a_wrong_shaped_x_names_the_model_and_the_node(run_cli, tmp_path):
    path = em.save(em.resnet_block(), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((1, 5, 10, 10), np.float32))
    result = run_cli("conv", str(tmp_path / "x.npy"), "--from-model", path, "--node",
                     "/conv1/Conv", "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert f"{path} node '/conv1/Conv' (Conv-11)" in result.stderr
    assert "C=5 != W.shape[1]*group = 3*1" in result.stderr
    assert not (tmp_path / "y.npy").exists()


def test_a_bad_pad_data_names_the_model_and_the_node(run_cli, tmp_path):
    path = em.save(em.wrap_model(opset=19), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((2, 5), np.float32))  # rank 2, pads for rank 4
    result = run_cli("pad", str(tmp_path / "x.npy"), "--from-model", path, "-o", "-")
    assert result.exit_code == 2
    assert f"{path} node '/pad/Pad' (Pad-19)" in result.stderr and "pads has 8 values" in (
        result.stderr
    )


def test_pad_on_a_conv_only_model_suggests_padconv_conv(run_cli, tmp_path):
    path = em.save(em.resnet_block(), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 10, 10), np.float32))
    result = run_cli("pad", str(tmp_path / "x.npy"), "--from-model", path, "-o", "-")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "no Pad node" in result.stderr and "`padconv conv`" in result.stderr
    assert "/conv1/Conv" in result.stderr
    other = run_cli("conv", str(tmp_path / "x.npy"), "--from-model",
                    em.save(em.wrap_model(), tmp_path / "p.onnx"), "-o", "-")
    assert other.exit_code == 2 and "`padconv pad`" in other.stderr


def test_a_name_that_is_not_utf8_is_refused_in_one_line(run_cli, tmp_path):
    weights = em.numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    model = em.make([em.helper.make_node("Conv", ["x", "w"], ["ZZZZ"], name="conv")],
                    [("x", np.float32, [1, 1, 4, 4])], [("ZZZZ", np.float32, None)], [weights])
    data = model.SerializeToString().replace(b"ZZZZ", b"\xad\xad\xad\xad")
    (tmp_path / "m.onnx").write_bytes(data)
    np.save(tmp_path / "x.npy", np.ones((1, 1, 4, 4), np.float32))
    for args in (["conv", "--from-model", str(tmp_path / "m.onnx"), str(tmp_path / "x.npy")],
                 ["audit", str(tmp_path / "m.onnx")]):
        result = run_cli(*args)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "not UTF-8" in result.stderr and "m.onnx" in result.stderr


def test_a_value_the_model_gave_is_not_named_as_a_flag(run_cli, tmp_path, monkeypatch):
    """A Pad-13 node whose stored pads do not fit X: the line names the node and says pads,
    not --pads, which the user did not type; with --pads typed, the flag is named."""
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.ones((1, 1, 4, 4), np.float32))
    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode="constant")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "m.onnx")
    stored = run_cli("pad", "x.npy", "--from-model", "m.onnx", "--node", "p", "-o", "y.npy")
    typed = run_cli("pad", "x.npy", "--from-model", "m.onnx", "--node", "p", "--pads", "0", "1",
                    "0", "1", "-o", "y.npy")
    assert stored.exit_code == typed.exit_code == 2
    assert "node 'p'" in stored.stderr and "pads has 4 values" in stored.stderr
    assert "--pads" not in stored.stderr, stored.stderr
    assert "--pads has 4 values" in typed.stderr, typed.stderr
    assert not os.path.exists("y.npy")
