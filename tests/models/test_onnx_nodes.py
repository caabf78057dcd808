"""onnx_nodes: ONNX Pad/Conv nodes of every opset mapped onto padconv's kernels."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from padconv_cli.errors import AttributeValueError, InputError
from padconv_cli.onnx_nodes import (
    call_for_node,
    decode_attribute_text,
    default_opset,
    kernel_call,
    node_attributes,
    operator_version,
)
from padconv_cli.ops import compute, operator

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


def test_models_does_not_depend_on_emit():
    import ast
    import inspect

    from padconv_cli import models

    tree = ast.parse(inspect.getsource(models))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "padconv_cli.onnx_nodes" in imported and "padconv_cli.emit" not in imported
