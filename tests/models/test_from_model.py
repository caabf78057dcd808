"""``--from-model MODEL.onnx --node NAME``: attributes and stored inputs of real Pad/Conv nodes,
any opset, flags overriding them, node lists on mistakes and the external-data safety rules."""

from __future__ import annotations

import io
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

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
