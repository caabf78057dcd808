"""Malformed attributes in a model are refused naming the node and the attribute: a wrong type
(Conv ``group`` as STRING or GRAPH, a Constant's ``value_ints`` as STRING or GRAPH, its
``value`` as INT) or the type UNDEFINED, which onnx would silently read as the default."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper


def _graph_attribute() -> onnx.GraphProto:
    return helper.make_graph([], "empty", [], [])


def _retyped(name: str, kind: int, value=None) -> AttributeProto:
    """An attribute called ``name`` of type ``kind`` holding ``value`` in that type's field."""
    attribute = AttributeProto(name=name, type=kind)
    if kind == AttributeProto.STRING:
        attribute.s = b"2" if value is None else value
    elif kind == AttributeProto.GRAPH:
        attribute.g.CopyFrom(_graph_attribute())
    elif kind == AttributeProto.INT:
        attribute.i = 1 if value is None else value
    elif kind == AttributeProto.UNDEFINED:
        attribute.i = 2  # a value in some field, but no declared type
    return attribute


def _save(model: onnx.ModelProto, path) -> str:
    path.write_bytes(model.SerializeToString())
    return str(path)


def _conv_model(attribute: AttributeProto) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float32), "W")
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="c1")
    node.attribute.append(attribute)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2, 2, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _pad_model(constant_attribute: AttributeProto) -> onnx.ModelProto:
    constant = helper.make_node("Constant", [], ["pads"], name="k")
    constant.attribute.append(constant_attribute)
    pad = helper.make_node("Pad", ["X", "pads"], ["Y"], name="p1")
    graph = helper.make_graph(
        [constant, pad], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture
def x_npy(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 2, 2, 2), np.float32))
    np.save(tmp_path / "x2.npy", np.ones((2, 2), np.float32))
    return tmp_path


TYPES = {"STRING": AttributeProto.STRING, "GRAPH": AttributeProto.GRAPH,
         "UNDEFINED": AttributeProto.UNDEFINED}


@pytest.mark.parametrize("kind", ["STRING", "GRAPH", "UNDEFINED"])
def test_conv_group_of_the_wrong_type_is_refused(run_cli, x_npy, kind):
    model = _save(_conv_model(_retyped("group", TYPES[kind])), x_npy / "m.onnx")
    result = run_cli("conv", str(x_npy / "x.npy"), "--from-model", model, "-o",
                     str(x_npy / "y.npy"))
    assert result.exit_code == 2, result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "'group'" in line and "'c1'" in line and kind in line, line
    assert not (x_npy / "y.npy").exists()


@pytest.mark.parametrize("name", ["strides", "pads", "auto_pad"])
def test_any_conv_attribute_of_type_undefined_is_refused(run_cli, x_npy, name):
    model = _save(_conv_model(_retyped(name, AttributeProto.UNDEFINED)), x_npy / "m.onnx")
    result = run_cli("conv", str(x_npy / "x.npy"), "--from-model", model, "--explain")
    assert result.exit_code == 2
    assert f"'{name}'" in result.stderr and "UNDEFINED" in result.stderr


@pytest.mark.parametrize("kind", ["STRING", "GRAPH"])
def test_constant_value_ints_of_the_wrong_type_is_refused_by_from_model(run_cli, x_npy, kind):
    model = _save(_pad_model(_retyped("value_ints", TYPES[kind])), x_npy / "m.onnx")
    result = run_cli("pad", str(x_npy / "x2.npy"), "--from-model", model, "-o",
                     str(x_npy / "y.npy"))
    assert result.exit_code == 2, result.stderr
    line = result.stderr.strip()
    assert "'value_ints'" in line and kind in line and "INTS" in line, line
    assert not (x_npy / "y.npy").exists()


def _verify_case(folder, constant_attribute: AttributeProto):
    case = folder / "test_bad_constant"
    (case / "test_data_set_0").mkdir(parents=True)
    (case / "model.onnx").write_bytes(_pad_model(constant_attribute).SerializeToString())
    for name, array in (("input_0", np.ones((2, 2))), ("output_0", np.ones((4, 4)))):
        tensor = numpy_helper.from_array(array.astype(np.float32), name)
        (case / "test_data_set_0" / f"{name}.pb").write_bytes(tensor.SerializeToString())
    return case


@pytest.mark.parametrize(
    ("name", "kind"),
    [("value_ints", "STRING"), ("value_ints", "GRAPH"), ("value", "INT"),
     ("value", "UNDEFINED")],
)
def test_verify_refuses_a_constant_of_the_wrong_type(run_cli, tmp_path, name, kind):
    kinds = {**TYPES, "INT": AttributeProto.INT}
    case = _verify_case(tmp_path, _retyped(name, kinds[kind]))
    result = run_cli("verify", str(case))
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"'{name}'" in result.stderr and kind in result.stderr, result.stderr


def test_well_typed_constant_still_works(run_cli, x_npy):
    attribute = helper.make_attribute("value_ints", [1, 1, 1, 1])
    model = _save(_pad_model(attribute), x_npy / "m.onnx")
    result = run_cli("pad", str(x_npy / "x2.npy"), "--from-model", model, "-o",
                     str(x_npy / "y.npy"))
    assert result.exit_code == 0, result.stderr
    assert np.load(x_npy / "y.npy").shape == (4, 4)
