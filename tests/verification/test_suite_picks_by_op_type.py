"""``verify --onnx-suite`` picks conformance folders by the op type of the model's node (an
operator padconv implements, domain-less, any opset), never by the folder's name."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from padconv_cli.verification.onnx_suite import suite_dirs


def _case_folder(root, sub, name, nodes, domain="", opset=13):
    folder = root / sub / name
    (folder / "test_data_set_0").mkdir(parents=True)
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    onnx.save(helper.make_model(graph, opset_imports=imports), str(folder / "model.onnx"))
    tensor = numpy_helper.from_array(np.ones((1, 1, 4, 4), np.float32), "x")
    (folder / "test_data_set_0" / "input_0.pb").write_bytes(tensor.SerializeToString())
    return folder


def test_cases_are_picked_by_the_node_not_the_name(tmp_path):
    pads = helper.make_node("Constant", [], ["p"], value=numpy_helper.from_array(
        np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)))
    picked = {
        _case_folder(tmp_path, "node", "test_unusual_name", [pads,
                     helper.make_node("Pad", ["x", "p"], ["y"])]),
        _case_folder(tmp_path, "simple", "test_conv_old_opset",
                     [helper.make_node("Conv", ["x", "x"], ["y"])], opset=7),
        _case_folder(tmp_path, "node", "test_convinteger_with_padding",
                     [helper.make_node("ConvInteger", ["x", "x"], ["y"])]),
    }
    _case_folder(tmp_path, "node", "test_averagepool_2d_pads",
                 [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2],
                                   pads=[1, 1, 1, 1])])
    _case_folder(tmp_path, "node", "test_conv_in_another_domain",
                 [helper.make_node("Conv", ["x", "x"], ["y"], domain="com.example")],
                 domain="com.example")
    _case_folder(tmp_path, "node", "test_pad_then_relu",
                 [pads, helper.make_node("Pad", ["x", "p"], ["q"]),
                  helper.make_node("Relu", ["q"], ["y"])])
    found = suite_dirs(tmp_path)
    assert {folder for _, folder in found} == picked
    assert [source for source, _ in found] == ["onnx-node", "onnx-node", "simple"]


def test_installed_suite_has_no_unsupported_case(run_cli):
    result = run_cli("verify", "--onnx-suite", "--json")
    import json

    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[-1]["unsupported"] == 0
    assert {r["operator"].split("-")[0] for r in records[:-1]} == {
        "Pad", "Conv", "ConvTranspose", "ConvInteger", "QLinearConv"}
