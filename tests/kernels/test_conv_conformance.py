"""Conv against the single-node Conv models shipped in onnx's backend test data."""

from __future__ import annotations

import glob
import os

import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402
from oracles import assert_conv_within_bound  # noqa: E402

from padconv_cli.kernels.conv import conv  # noqa: E402

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def conv_model_dirs() -> list[str]:
    """Folders holding a model whose only node is a Conv, picked by the node's op type (a name
    such as test_deform_conv_* or test_convinteger_* holds another operator)."""
    found = []
    for model_path in sorted(glob.glob(os.path.join(DATA, "*", "*", "model.onnx"))):
        with open(model_path, "rb") as handle:
            nodes = onnx.ModelProto.FromString(handle.read()).graph.node
        if len(nodes) == 1 and nodes[0].op_type == "Conv" and nodes[0].domain in ("", "ai.onnx"):
            found.append(os.path.dirname(model_path))
    return found


MODEL_DIRS = conv_model_dirs()


def load_case(folder: str):
    model = onnx.load(os.path.join(folder, "model.onnx"))
    (node,) = model.graph.node
    assert node.op_type == "Conv"
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    data_set = os.path.join(folder, "test_data_set_0")
    graph_inputs = [i.name for i in model.graph.input if i.name not in values]
    for index, name in enumerate(graph_inputs):
        tensor = onnx.TensorProto()
        with open(os.path.join(data_set, f"input_{index}.pb"), "rb") as handle:
            tensor.ParseFromString(handle.read())
        values[name] = numpy_helper.to_array(tensor)
    expected = onnx.TensorProto()
    with open(os.path.join(data_set, "output_0.pb"), "rb") as handle:
        expected.ParseFromString(handle.read())
    inputs = [values[name] for name in node.input if name]
    return inputs, attrs, numpy_helper.to_array(expected)


def test_the_suite_is_there():
    assert len(MODEL_DIRS) >= 20


@pytest.mark.parametrize("folder", MODEL_DIRS, ids=os.path.basename)
def test_onnx_backend_conv_model(folder):
    inputs, attrs, expected = load_case(folder)
    result = conv(*inputs, **attrs)
    assert result.dtype == expected.dtype
    assert result.shape == expected.shape
    assert_conv_within_bound(result, *inputs, expected=expected, slack=2, reference=conv,
                             **attrs)
