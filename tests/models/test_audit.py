"""``padconv audit``: every Pad and Conv node of a model checked against a runtime."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import exported_models as em
import numpy as np
import pytest

from padconv_cli.audit import audit_model
from padconv_cli.errors import InputError

RUNTIMES = ["onnxruntime", "onnx.reference"]


def _statuses(report):
    return {node.label: node.status for node in report.nodes}


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("external", [False, True])
def test_every_node_of_an_exported_block_is_within_the_bound(tmp_path, runtime, external):
    path = em.save(em.resnet_block(channels=(16, 32, 32)), tmp_path / "m.onnx",
                   external=external)
    report = audit_model(path, runtime=runtime)
    assert _statuses(report) == {"/conv1/Conv": "ok", "/conv2/Conv": "ok"}
    assert report.passed
    first = report.nodes[0]
    assert first.operator == "Conv-11" and first.output_shape == [1, 32, 10, 10]
    assert first.input_shapes == [[1, 16, 10, 10], [32, 16, 3, 3], [32]]


@pytest.mark.parametrize("opset", [7, 11, 13, 17, 18, 19, 21, 25])
def test_opsets_7_to_25(tmp_path, opset):
    path = em.save(em.symbolic_batch_model(opset=opset), tmp_path / "m.onnx")
    report = audit_model(path, dims={"batch": 2})
    assert _statuses(report) == {"pad": "ok", "conv": "ok"}
    assert report.nodes[1].output_shape == [2, 4, 5, 5]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_float16_models(tmp_path, runtime):
    path = em.save(em.resnet_block(np.float16, channels=(8, 16, 16)), tmp_path / "m.onnx")
    report = audit_model(path, runtime=runtime)
    assert report.passed and {n.dtype for n in report.nodes} == {"float16"}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_every_conv_of_a_resnet18_shaped_model(tmp_path, dtype):
    path = em.save(em.resnet18_like(width=8, size=32, dtype=dtype), tmp_path / "m.onnx")
    report = audit_model(path, dims={"batch": 2}, runtime="onnxruntime")
    assert len(report.nodes) == 20 and set(_statuses(report).values()) == {"ok"}
    assert all(node.bound_use is not None and node.bound_use <= 1 for node in report.nodes)


def test_patterns_exporters_write(tmp_path):
    patterns = {"cast": em.cast_pads_model(), "chain": em.torch_pad_chain_model(),
                "wrap": em.wrap_model(opset=18)}
    for name, model in patterns.items():
        report = audit_model(em.save(model, tmp_path / f"{name}.onnx"))
        assert _statuses(report) == {"/pad/Pad": "ok"}, name
    assert "off-spec" in report.nodes[0].notes[0]


def test_same_with_dilations_refused_by_onnxruntime_is_reported(tmp_path):
    path = em.save(em.same_dilated_model(), tmp_path / "m.onnx")
    report = audit_model(path, runtime="onnxruntime")
    node = report.nodes[0]
    assert node.status == "runtime refused" and node.right == "padconv"
    assert node.detail  # onnxruntime's own message
    assert report.passed  # a runtime refusal is reported, not a failure of padconv
    assert report.notes and "onnxruntime refused the model" in report.notes[0]
    assert audit_model(path, runtime="onnx.reference").nodes[0].status == "ok"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_nodes_in_if_branches_not_taken_are_not_reached(tmp_path, runtime):
    path = em.save(em.if_model(), tmp_path / "m.onnx")
    np.save(tmp_path / "yes.npy", np.array(True))
    taken = audit_model(path, [f"cond={tmp_path / 'yes.npy'}"], runtime=runtime)
    assert _statuses(taken) == {"then_conv": "ok", "else_pad": "not reached"}
    where = {node.label: node.graph for node in taken.nodes}
    assert where == {"then_conv": "If 'branch' then_branch",
                     "else_pad": "If 'branch' else_branch"}
    np.save(tmp_path / "no.npy", np.array(False))
    other = audit_model(path, [str(tmp_path / "no.npy")], runtime=runtime)  # by position
    assert _statuses(other) == {"then_conv": "not reached", "else_pad": "ok"}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_nodes_in_loop_bodies(tmp_path, runtime):
    report = audit_model(em.save(em.loop_model(), tmp_path / "m.onnx"), runtime=runtime)
    assert _statuses(report) == {"body_conv": "ok"}


def test_a_runtime_that_is_wrong_is_outside_and_padconv_is_right(tmp_path):
    """onnx.reference fills strings with 0, not the spec's "": a real disagreement."""
    model = em.make([em.helper.make_node("Pad", ["x", "pads"], ["y"], name="strpad")],
                    [("x", object, [2])], [("y", object, None)],
                    [em.numpy_helper.from_array(np.array([1, 0], np.int64), "pads")], opset=17)
    path = em.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.array(["a", "b"]))
    report = audit_model(path, [str(tmp_path / "x.npy")], runtime="onnx.reference")
    node = report.nodes[0]
    assert node.status == "outside" and node.right == "padconv" and not report.passed


def test_symbolic_dims_take_a_default_and_say_so(tmp_path):
    path = em.save(em.symbolic_batch_model(), tmp_path / "m.onnx")
    report = audit_model(path)
    assert report.inputs == {
        "x": "random [1, 2, 5, 5] (seed 0; unknown dims chosen by default)"}
    assert report.passed


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["x=W"], "holds float64, input 'x' is float32"),
        (["x=S"], r"shape \[1, 2\] does not fit input 'x' \[batch, 2, 5, 5\]"),
        (["X", "X"], "one input too many"),
        (["xx=X"], r"no input 'xx'; did you mean 'x'\? \(inputs: x\)"),
    ],
)
def test_given_inputs_are_checked(tmp_path, words, message):
    path = em.save(em.symbolic_batch_model(), tmp_path / "m.onnx")
    np.save(tmp_path / "w.npy", np.zeros((1, 2, 5, 5)))
    np.save(tmp_path / "s.npy", np.zeros((1, 2), np.float32))
    np.save(tmp_path / "x.npy", np.zeros((3, 2, 5, 5), np.float32))
    names = {"W": "w.npy", "S": "s.npy", "X": "x.npy"}
    words = [w[:-1] + str(tmp_path / names[w[-1]]) if w[-1] in names else w for w in words]
    with pytest.raises(InputError, match=message):
        audit_model(path, words)


def test_the_cli_table_json_and_junit(run_cli, tmp_path):
    path = em.save(em.if_model(), tmp_path / "m.onnx")
    np.save(tmp_path / "yes.npy", np.array(True))
    result = run_cli("audit", path, f"cond={tmp_path / 'yes.npy'}", "--junit-xml",
                     str(tmp_path / "a.xml"))
    assert result.exit_code == 0, result.stderr
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    assert "then_conv" in result.stdout and "not reached" in result.stdout
    suite = ET.parse(tmp_path / "a.xml").getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("skipped") == "1"
    as_json = run_cli("audit", path, f"cond={tmp_path / 'yes.npy'}", "--json", "--seed", "3")
    record = json.loads(as_json.stdout)
    statuses = {n["label"]: n["status"] for n in record["nodes"]}
    assert record["passed"] and statuses == {"then_conv": "ok", "else_pad": "not reached"}


def test_the_cli_exit_codes(run_cli, tmp_path):
    model = em.make([em.helper.make_node("Pad", ["x", "pads"], ["y"], name="strpad")],
                    [("x", object, [2])], [("y", object, None)],
                    [em.numpy_helper.from_array(np.array([1, 0], np.int64), "pads")], opset=17)
    path = em.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.array(["a", "b"]))
    outside = run_cli("audit", path, str(tmp_path / "x.npy"), "--runtime", "onnx.reference")
    assert outside.exit_code == 1 and "OUTSIDE" in outside.stdout and "right: padconv" in (
        outside.stdout)
    bad = run_cli("audit", str(tmp_path / "absent.onnx"))
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1
    bad_dim = run_cli("audit", path, "--dim", "batch")
    assert bad_dim.exit_code == 2 and "NAME=VALUE" in bad_dim.stderr


def test_an_input_that_is_not_a_tensor_is_refused(tmp_path):
    seq = em.helper.make_tensor_sequence_value_info("s", em.TensorProto.FLOAT, None)
    node = em.helper.make_node("SequenceAt", ["s", "i"], ["x"])
    pad = em.helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")
    graph = em.helper.make_graph(
        [node, pad], "g", [seq], [em.helper.make_tensor_value_info("y", 1, None)],
        [em.numpy_helper.from_array(np.array(0, np.int64), "i"),
         em.numpy_helper.from_array(np.zeros(2, np.int64), "pads")])
    model = em.helper.make_model(graph, opset_imports=[em.helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(InputError, match="'s' is not a typed tensor"):
        audit_model(em.save(model, tmp_path / "m.onnx"))


def test_a_node_padconv_refuses_is_a_failure_naming_the_rule(tmp_path):
    """Repeated Pad axes: onnxruntime adds the pads up, the spec leaves it undefined and
    padconv refuses; the node could not be checked, so the audit fails."""
    model = em.make(
        [em.helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], name="twice")],
        [("x", np.float32, [2, 3])], [("y", np.float32, None)],
        [em.numpy_helper.from_array(np.array([1, 1, 0, 0], np.int64), "pads"),
         em.numpy_helper.from_array(np.array([0, -2], np.int64), "axes")], opset=18)
    report = audit_model(em.save(model, tmp_path / "m.onnx"), runtime="onnxruntime")
    node = report.nodes[0]
    assert node.status == "padconv refused" and "repeats axis 0" in node.detail
    assert not report.passed


def _model_with_unknown_op(before_conv: bool):
    """x -> Conv -> Weird (or x -> Weird -> Conv), Weird from a domain no runtime knows."""
    weights = em.numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    if before_conv:
        nodes = [em.helper.make_node("Weird", ["x"], ["x2"], domain="my.domain"),
                 em.helper.make_node("Conv", ["x2", "w"], ["y"], name="conv", pads=[1] * 4)]
    else:
        nodes = [em.helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1] * 4),
                 em.helper.make_node("Weird", ["y"], ["z"], domain="my.domain")]
    model = em.make(nodes, [("x", np.float32, [1, 1, 5, 5])],
                    [("y" if before_conv else "z", np.float32, None)], [weights])
    model.opset_import.append(em.helper.make_opsetid("my.domain", 1))
    return model


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_nodes_after_the_last_pad_or_conv_cannot_stop_the_audit(tmp_path, runtime):
    path = em.save(_model_with_unknown_op(before_conv=False), tmp_path / "m.onnx")
    report = audit_model(path, runtime=runtime)
    assert _statuses(report) == {"conv": "ok"} and report.passed


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_node_the_run_never_got_to_fails_the_audit(run_cli, tmp_path, runtime):
    path = em.save(_model_with_unknown_op(before_conv=True), tmp_path / "m.onnx")
    report = audit_model(path, runtime=runtime)
    assert _statuses(report) == {"conv": "not run"} and not report.passed
    assert "Weird" in report.nodes[0].detail
    result = run_cli("audit", path, "--runtime", runtime)
    assert result.exit_code == 1 and "NOT RUN" in result.stdout


def _model_with_a_local_function():
    """x -> Block(x, w, p), Block a model-local function holding a Conv and a reflect Pad."""
    helper = em.helper
    body = [helper.make_node("Conv", ["a", "w"], ["b"], name="inner_conv", pads=[1] * 4),
            helper.make_node("Pad", ["b", "p"], ["c"], name="inner_pad", mode="reflect")]
    function = helper.make_function("my.fn", "Block", ["a", "w", "p"], ["c"], body,
                                    [helper.make_opsetid("", 18)])
    stored = [em.numpy_helper.from_array(np.arange(18, dtype=np.float32).reshape(2, 1, 3, 3),
                                         "w"),
              em.numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "p")]
    call = helper.make_node("Block", ["x", "w", "p"], ["y"], domain="my.fn", name="block1")
    model = em.make([call], [("x", np.float32, [1, 1, 5, 5])], [("y", np.float32, [1, 2, 7, 7])],
                    stored, opset=18)
    model.opset_import.append(helper.make_opsetid("my.fn", 1))
    model.functions.append(function)
    return model


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_nodes_inside_model_local_functions_are_audited(tmp_path, runtime):
    path = em.save(_model_with_a_local_function(), tmp_path / "m.onnx")
    report = audit_model(path, runtime=runtime)
    assert _statuses(report) == {"inner_conv__1": "ok", "inner_pad__1": "ok"}


def test_from_model_finds_a_node_inside_a_local_function(run_cli, tmp_path):
    path = em.save(_model_with_a_local_function(), tmp_path / "m.onnx")
    x = np.random.default_rng(0).random((1, 1, 5, 5), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    result = run_cli("pad", "--from-model", path, str(tmp_path / "x.npy"), "-o",
                     str(tmp_path / "y.npy"))
    assert result.exit_code == 0, result.stderr
    expected = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="reflect")
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)
