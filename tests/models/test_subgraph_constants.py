"""Constants seen from inside subgraphs (If branches): the graph's own first, then those of the
graphs around it, at any depth; a model with tens of thousands of subgraphs reads in one pass
(its hostile-corpus case, model_many_if_subgraphs, bounds it by the child timeout)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from padconv_cli.models import find_node


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
