"""ONNX nodes of every opset mapped onto padconv's kernels: attributes of the wrong type
refused naming the node, constants seen from inside subgraphs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from padconv_cli.errors import AttributeValueError, InputError
from padconv_cli.models import find_node
from padconv_cli.onnx_nodes import (
    call_for_node,
    decode_attribute_text,
    default_opset,
    kernel_call,
    node_attributes,
    operator_version,
)
from padconv_cli.ops import compute, operator

# onnx_nodes: ONNX Pad/Conv nodes of every opset mapped onto padconv's kernels.


DATA = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], dtype=np.float32)
PADS = np.array([0, 2, 0, 0], dtype=np.int64)


def run_node(op_type, attributes, inputs, *, opset):
    return compute(kernel_call(op_type, attributes, inputs, opset=opset))


@pytest.mark.parametrize(
    ("op", "opset", "version"),
    [
        ("Pad", 1, 1),
        ("Pad", 2, 2),
        ("Pad", 10, 2),
        ("Pad", 11, 11),
        ("Pad", 17, 13),
        ("Pad", 18, 18),
        ("Pad", 20, 19),
        ("Pad", 25, 25),
        ("Pad", 99, 25),
        ("Conv", 6, 1),
        ("Conv", 11, 11),
        ("Conv", 21, 11),
        ("Conv", 22, 22),
    ],
)
def test_operator_version_is_newest_not_after_opset(op, opset, version):
    assert operator_version(op, opset) == version


def test_operator_version_refuses_unknown_operator_and_opset_zero():
    with pytest.raises(AttributeValueError, match="MaxPool"):
        operator_version("MaxPool", 13)
    with pytest.raises(AttributeValueError, match="opset 0"):
        operator_version("Pad", 0)


def test_pad1_uses_the_paddings_attribute_and_value():
    call = kernel_call(
        "Pad", {"paddings": [0, 1, 0, 0], "value": 7.0, "mode": b"constant"}, [DATA], opset=1
    )
    assert call.operator == "Pad-1"
    out = compute(call)
    np.testing.assert_array_equal(out[:, 0], np.float32(7.0))
    np.testing.assert_array_equal(out[:, 1:], DATA)


@pytest.mark.parametrize("opset", [2, 6, 10])
def test_pad2_attributes_pads_and_value(opset):
    attributes = {"mode": "constant", "pads": [1, 0, 0, 1], "value": 2.5}
    out = run_node("Pad", attributes, [DATA], opset=opset)
    expected = np.pad(DATA, ((1, 0), (0, 1)), constant_values=2.5)
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.float32


def test_pad2_reflect_without_value_and_with_bytes_mode():
    out = run_node("Pad", {"mode": b"reflect", "pads": [0, 1, 0, 1]}, [DATA], opset=2)
    np.testing.assert_array_equal(out, np.pad(DATA, ((0, 0), (1, 1)), mode="reflect"))


@pytest.mark.parametrize(
    ("opset", "attributes", "message"),
    [
        (2, {"paddings": [0, 0, 0, 0]}, "'paddings' is not defined"),
        (1, {"pads": [0, 0, 0, 0]}, "'pads' is not defined"),
        (2, {"mode": "edge"}, "required attribute 'pads'"),
        (11, {"pads": [0, 0, 0, 0]}, "'pads' is not defined"),
    ],
)
def test_pad_attributes_outside_their_version_are_refused(opset, attributes, message):
    inputs = [DATA] if opset < 11 else [DATA, PADS]
    with pytest.raises(AttributeValueError, match=message):
        kernel_call("Pad", attributes, inputs, opset=opset)


@pytest.mark.parametrize("opset", [2, 11, 13, 18])
def test_wrap_before_pad19_is_computed_as_pad19_with_a_note(opset):
    """Exporters write wrap at opset 18 and runtimes run it: computed as Pad-19, noted."""
    attributes = {"mode": "wrap"} if opset >= 11 else {"mode": "wrap", "pads": [0, 2, 0, 0]}
    inputs = [DATA] if opset < 11 else [DATA, PADS]
    call = kernel_call("Pad", attributes, inputs, opset=opset)
    np.testing.assert_array_equal(compute(call), np.pad(DATA, ((0, 0), (2, 0)), mode="wrap"))
    assert len(call.notes) == 1
    assert "off-spec" in call.notes[0] and "Pad-19" in call.notes[0]
    assert kernel_call("Pad", attributes, inputs, opset=19 if opset >= 11 else 2).notes == (
        () if opset >= 11 else call.notes
    )


def test_pad11_takes_pads_and_constant_value_inputs():
    value = np.array(9.0, dtype=np.float32)
    out = run_node("Pad", {"mode": "constant"}, [DATA, PADS, value], opset=11)
    np.testing.assert_array_equal(out, np.pad(DATA, ((0, 0), (2, 0)), constant_values=9.0))


def test_pad11_accepts_omitted_constant_value_and_one_element_value():
    out = run_node("Pad", {}, [DATA, PADS, None], opset=13)
    np.testing.assert_array_equal(out[:, :2], 0.0)
    out = run_node("Pad", {}, [DATA, PADS, np.array([3.0], np.float32)], opset=13)
    np.testing.assert_array_equal(out[:, :2], 3.0)


def test_pad18_axes_input_with_negative_axes_and_negative_pads():
    data = np.arange(12, dtype=np.int64).reshape(3, 4)
    pads = np.array([-1, 1, 2, -1], dtype=np.int64)
    axes = np.array([-1, 0], dtype=np.int32)
    out = run_node("Pad", {"mode": "constant"}, [data, pads, np.int64(5), axes], opset=18)
    expected = np.full((3, 5), 5, dtype=np.int64)
    expected[1:, :3] = data[:2, 1:]
    np.testing.assert_array_equal(out, expected)


def test_pad19_wrap_mode():
    out = run_node("Pad", {"mode": "wrap"}, [DATA, PADS], opset=19)
    np.testing.assert_array_equal(out, np.pad(DATA, ((0, 0), (2, 0)), mode="wrap"))


@pytest.mark.parametrize(
    ("opset", "inputs", "message"),
    [
        (13, [DATA, PADS, None, np.array([0, 1])], "takes 2 to 3 inputs"),
        (18, [DATA], "takes 2 to 4 inputs"),
        (18, [DATA, PADS.astype(np.float32)], "'pads' must be a 1-D integer tensor"),
        (18, [DATA, PADS.reshape(2, 2)], "'pads' must be a 1-D integer tensor"),
        (18, [DATA, PADS, np.float64(1.0)], "constant_value type float64 != data type float32"),
        (18, [DATA, PADS, np.zeros(2, np.float32)], "must be a scalar"),
        (2, [DATA, PADS], "takes 1 input"),
    ],
)
def test_pad_input_errors_name_the_rule(opset, inputs, message):
    attributes = {} if opset >= 11 else {"pads": [0, 0, 0, 0]}
    with pytest.raises(AttributeValueError, match=message):
        kernel_call("Pad", attributes, inputs, opset=opset)


def test_pad_values_are_validated_by_the_kernel():
    with pytest.raises(AttributeValueError):
        run_node("Pad", {}, [DATA, np.array([0, 1], np.int64)], opset=18)  # wrong pads length


def test_conv_attributes_reach_the_kernel():
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    w = np.ones((1, 1, 3, 3), dtype=np.float32)
    attributes = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}
    call = kernel_call("Conv", attributes, [x, w], opset=22)
    assert call.operator == "Conv-22"
    assert call.describe() == "kernel_shape=[3,3] pads=[1,1,1,1] strides=[2,2]"
    expected = np.array([[[[12, 27, 24], [63, 108, 81], [72, 117, 84]]]], dtype=np.float32)
    np.testing.assert_array_equal(compute(call), expected)


def test_conv_auto_pad_bytes_and_bias_input():
    x = np.zeros((1, 1, 4, 4), dtype=np.float32)
    w = np.ones((1, 1, 3, 3), dtype=np.float32)
    b = np.array([0.5], dtype=np.float32)
    out = run_node("Conv", {"auto_pad": b"SAME_UPPER"}, [x, w, b], opset=11)
    assert out.shape == (1, 1, 4, 4)
    np.testing.assert_array_equal(out, 0.5)


@pytest.mark.parametrize(
    ("attributes", "inputs", "message"),
    [
        ({"kernel": [3, 3]}, 2, "'kernel' is not defined"),
        ({}, 1, "takes 2 to 3 inputs"),
        ({"group": 0}, 2, "group"),
    ],
)
def test_conv_errors(attributes, inputs, message):
    arrays = [np.zeros((1, 1, 3, 3), np.float32)] * inputs
    with pytest.raises(AttributeValueError, match=message):
        run_node("Conv", attributes, arrays, opset=22)


def test_other_domains_are_refused():
    with pytest.raises(AttributeValueError, match="com.example.Pad"):
        kernel_call("Pad", {}, [DATA, PADS], opset=18, domain="com.example")


def test_node_protos_are_read_through_onnx():
    node = helper.make_node("Pad", ["x"], ["y"], mode="edge", pads=[0, 1, 0, 1])
    assert node_attributes(node) == {"mode": "edge", "pads": (0, 1, 0, 1)}
    opset = default_opset([helper.make_opsetid("ai.onnx.ml", 3), helper.make_opsetid("", 9)])
    assert opset == 9
    out = compute(call_for_node(node, [DATA], opset=opset))
    np.testing.assert_array_equal(out, np.pad(DATA, ((0, 0), (1, 1)), mode="edge"))


def test_default_opset_is_required():
    with pytest.raises(AttributeValueError, match="opset_import"):
        default_opset([helper.make_opsetid("ai.onnx.ml", 3)])


def test_decode_attribute_text_names_where_the_bad_bytes_are():
    assert decode_attribute_text("réflect".encode(), "here") == "réflect"
    with pytest.raises(InputError) as error:
        decode_attribute_text(b"\xff", "m.onnx: attribute 'mode' of node 'p'")
    assert str(error.value) == "m.onnx: attribute 'mode' of node 'p' is not valid UTF-8"


@pytest.mark.parametrize("name", ["mode", "auto_pad"])
def test_string_attribute_that_is_not_utf8_is_an_input_error(name):
    op_type = "Pad" if name == "mode" else "Conv"
    node = helper.make_node(op_type, ["x"], ["y"], name="p")
    node.attribute.append(helper.make_attribute(name, b"\xff\xfe"))
    message = f"m.onnx: attribute '{name}' of node 'p' is not valid UTF-8"
    with pytest.raises(InputError) as error:
        node_attributes(node, source="m.onnx")
    assert str(error.value) == message
    with pytest.raises(InputError, match="not valid UTF-8"):
        call_for_node(node, [DATA], opset=2, source="m.onnx")
    with pytest.raises(InputError, match=f"{op_type}: attribute '{name}' is not valid UTF-8"):
        kernel_call(op_type, {name: b"\xff"}, [DATA], opset=2)


@pytest.mark.parametrize(
    ("op_type", "opset", "most"),
    [("Pad", 1, 1), ("Pad", 2, 1), ("Pad", 11, 3), ("Pad", 13, 3), ("Pad", 17, 3),
     ("Pad", 18, 4), ("Pad", 25, 4), ("Conv", 1, 3), ("Conv", 22, 3)],
)
def test_more_inputs_than_the_version_defines_are_refused(op_type, opset, most):
    import onnx.defs

    assert operator(op_type).max_inputs(operator_version(op_type, opset)) == most
    assert onnx.defs.get_schema(op_type, opset).max_input == most
    extra = [f"i{k}" for k in range(most + 1)]
    for inputs in (extra, extra[:-1] + [""]):  # an extra slot counts even when left empty
        node = helper.make_node(op_type, inputs, ["y"], name="p")
        with pytest.raises(InputError) as error:
            call_for_node(node, [DATA] + [PADS] * most, opset=opset, source="m.onnx")
        assert str(error.value) == (
            f"m.onnx: node 'p' ({op_type}-{operator_version(op_type, opset)}) lists {most + 1} "
            f"inputs; {op_type}-{operator_version(op_type, opset)} takes at most {most}"
        )


# Malformed attributes in a model are refused naming the node and the attribute: a wrong type
# (Conv ``group`` as STRING or GRAPH, a Constant's ``value_ints`` as STRING or GRAPH, its
# ``value`` as INT) or the type UNDEFINED, which onnx would silently read as the default.


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


# Constants seen from inside subgraphs (If branches): the graph's own first, then those of the
# graphs around it, at any depth; a model with tens of thousands of subgraphs reads in one pass
# (its hostile-corpus case, model_many_if_subgraphs, bounds it by the child timeout).


def _if(then_nodes: list, name: str) -> object:
    branch = helper.make_graph(then_nodes, name, [], [])
    empty = helper.make_graph([], f"{name}_else", [], [])
    return helper.make_node("If", ["cond"], [], then_branch=branch, else_branch=empty)


def _model(tmp_path, nodes) -> str:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2])], [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_outer_constant_is_seen_two_levels_down_and_inner_one_shadows_it(tmp_path):
    outer = helper.make_node("Constant", [], ["pads"], value_ints=[1, 1, 1, 1])
    deep_pad = helper.make_node("Pad", ["X", "pads"], ["Y1"], name="deep")
    shadow = helper.make_node("Constant", [], ["pads"], value_ints=[0, 2, 0, 2])
    shadowed_pad = helper.make_node("Pad", ["X", "pads"], ["Y2"], name="shadowed")
    sibling_pad = helper.make_node("Pad", ["X", "pads"], ["Y3"], name="sibling")
    nodes = [
        outer,
        _if([_if([deep_pad], "inner")], "middle"),
        _if([shadow, shadowed_pad], "shadowing"),
        _if([sibling_pad], "sibling_branch"),
    ]
    path = _model(tmp_path, nodes)
    assert list(find_node(path, "deep", "Pad").constant(1)) == [1, 1, 1, 1]
    assert list(find_node(path, "shadowed", "Pad").constant(1)) == [0, 2, 0, 2]
    assert list(find_node(path, "sibling", "Pad").constant(1)) == [1, 1, 1, 1]


def test_many_subgraphs_without_constants_still_see_the_outer_ones(tmp_path):
    constants = [helper.make_node("Constant", [], [f"c{i}"], value_ints=[i, i])
                 for i in range(300)]
    branches = [_if([], f"b{i}") for i in range(300)]
    pad = helper.make_node("Pad", ["X", "c299"], ["Y"], name="last")
    nodes = [*constants, *branches, _if([pad], "holder")]
    node = find_node(_model(tmp_path, nodes), "last", "Pad")
    np.testing.assert_array_equal(node.constant(1), [299, 299])
