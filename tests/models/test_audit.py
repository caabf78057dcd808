"""``padconv audit``: every Pad and Conv node of a model checked against a runtime or against a
runtime's dumped outputs, exporters' dynamic dims, the table at 80 columns, and the checked nodes
saved as backend-test cases."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import exported_models as em
import numpy as np
import onnx
import pytest
from audit_models import YOLO_NAMES, exported_model
from onnx import TensorProto, helper, numpy_helper
from polygraphy_files import FIXTURES, polygraphy_command
from pty_terminal import run_in_terminal

from padconv_cli.audit import audit_model
from padconv_cli.audit.dumped import file_key
from padconv_cli.audit.report import distinct_labels
from padconv_cli.errors import InputError

# ``padconv audit``: every Pad and Conv node of a model checked against a runtime.


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


# ``audit MODEL --outputs FILE|DIR`` judges another runtime's own dumped tensors: every
# Pad/Conv node recomputed from that runtime's inputs for it, the first node outside its bound
# named; nothing is run.


needs_polygraphy = pytest.mark.skipif(polygraphy_command() is None,
                                      reason="polygraphy is not installed")


def dump_every_tensor(model_path, folder, x):
    """What a runtime dumping every tensor writes: onnxruntime's values of all of them."""
    import onnxruntime

    model = onnx.load(model_path)
    names = [out for node in model.graph.node for out in node.output]
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    folder.mkdir()
    np.save(folder / "x.npy", x)
    for name, value in zip(names, session.run(None, {"x": x}), strict=True):
        np.save(folder / f"{file_key(name)}.npy", value)
    return folder


@pytest.fixture
def dumped(tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    return path, dump_every_tensor(path, tmp_path / "dump", x)


def test_polygraphy_results_of_every_tensor_are_judged(run_cli):
    result = run_cli("audit", str(FIXTURES / "pad_conv.onnx"), str(FIXTURES / "inputs.json"),
                     "--outputs", str(FIXTURES / "outputs.json"))
    assert result.exit_code == 0, result.stderr
    assert "every judged node is within the bound (2 of 2 judged)" in result.stdout
    assert "2 nodes padconv implements: 2 ok (onnxrt-runner-N0" in result.stdout


def test_a_folder_dump_within_the_bound_passes(run_cli, dumped):
    path, folder = dumped
    result = run_cli("audit", path, "--outputs", str(folder), "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["counts"] == {"ok": 7}


def test_the_first_node_to_leave_the_bound_is_named(run_cli, dumped):
    path, folder = dumped
    third = folder / f"{file_key(YOLO_NAMES[2])}_output_0.npy"
    value = np.load(third)
    value[0, 1, 5, 5] += 0.01  # that runtime's Conv is off by much more than its sums allow
    np.save(third, value)
    result = run_cli("audit", path, "--outputs", str(folder), env={"COLUMNS": "120"})
    assert result.exit_code == 1, result.stderr
    assert f"note: first node outside the bound: {YOLO_NAMES[2]}" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("/model.22/")]
    statuses = [row.split()[-1] for row in rows]
    assert statuses == ["ok", "ok", "OUTSIDE", "ok", "ok", "ok", "ok"], result.stdout
    assert "right: padconv" in result.stdout


def test_nodes_not_dumped_are_said_and_nothing_judged_is_a_bad_input(run_cli, dumped):
    path, folder = dumped
    for file in folder.glob("*cv3*"):
        file.unlink()
    partial = run_cli("audit", path, "--outputs", str(folder), env={"COLUMNS": "120"})
    assert partial.exit_code == 0, partial.stderr
    assert partial.stdout.count("not dumped") >= 3 and "3 ok" in partial.stdout
    for file in folder.glob("*conv_Conv*"):
        file.unlink()
    nothing = run_cli("audit", path, "--outputs", str(folder))
    assert nothing.exit_code == 2 and nothing.stderr.count("\n") == 1
    assert "holds no Pad/Conv node's output" in nothing.stderr


def test_several_runners_need_one_named(run_cli):
    result = run_cli("audit", str(FIXTURES / "pad_conv.onnx"),
                     "--outputs", str(FIXTURES / "two_runners.json"))
    assert result.exit_code == 2
    assert "onnxrt-runner-N0, trt-runner-N0" in result.stderr and ":RUNNER" in result.stderr


def test_runtime_and_dims_do_not_go_with_outputs(run_cli):
    result = run_cli("audit", str(FIXTURES / "pad_conv.onnx"), "--outputs",
                     str(FIXTURES / "outputs.json"), "--runtime", "onnx.reference")
    assert result.exit_code == 2 and "--outputs judges tensors" in result.stderr


@needs_polygraphy
@pytest.mark.parametrize("inputs, outputs", [("in.json", "out.json"), ("inputs", "outputs")])
def test_what_polygraphy_dumps_is_judged_from_files_and_iteration_folders(run_cli, tmp_path,
                                                                         inputs, outputs):
    import subprocess

    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    subprocess.run([*polygraphy_command(), "run", path, "--onnxrt", "--onnx-outputs", "mark",
                    "all", "--save-inputs", inputs, "--save-outputs", outputs],
                   cwd=tmp_path, check=True, capture_output=True, timeout=300)
    result = run_cli("audit", path, str(tmp_path / inputs),
                     "--outputs", str(tmp_path / outputs), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["counts"] == {"ok": 7}


# audit on what exporters write: ``-1`` and repeated ``?`` dims accept any given size; sizes
# not given take documented defaults, said in one line; a chosen size the model cannot run with
# is a bad input (exit 2, one line), never a traceback.


def test_minus_one_and_question_marks_take_defaults(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("audit", path)
    assert result.exit_code == 0, result.stderr
    assert "  input x: random [1, 3, 64, 64] (seed 0; unknown dims chosen by default)" in (
        result.stdout.splitlines())


def test_a_given_input_fills_minus_one_and_question_marks(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.ones((2, 3, 48, 40), np.float32))
    result = run_cli("audit", path, str(tmp_path / "x.npy"))
    assert result.exit_code == 0, result.stderr
    assert "[2,4,48,40]" in result.stdout


def test_dim_question_mark_sets_every_question_mark(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("audit", path, "--dim", "?=48")
    assert result.exit_code == 0, result.stderr
    assert "  input x: random [1, 3, 48, 48] (seed 0; unknown dims chosen by default)" in (
        result.stdout.splitlines())


def test_named_dims_share_their_default(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=("batch", "c", "side", "side"))
    result = run_cli("audit", path, "--dim", "batch=2")
    assert result.exit_code == 0, result.stderr
    assert "random [2, 3, 64, 64]" in result.stdout


def test_channels_default_to_what_the_first_conv_takes(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, "?", 8, 8))
    result = run_cli("audit", path)
    assert result.exit_code == 0, result.stderr
    assert "random [1, 3, 8, 8]" in result.stdout


def test_chosen_sizes_that_stop_the_model_are_a_bad_input(run_cli, tmp_path):
    weights = [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w"),
               numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w2"),
               numpy_helper.from_array(np.array([1, 4, 48, 48], np.int64), "shape")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1], name="c1"),
             helper.make_node("Reshape", ["a", "shape"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], name="c2")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    result = run_cli("audit", str(tmp_path / "m.onnx"))
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert "sizes chosen for its unknown dims (x [1, 3, 64, 64])" in result.stderr
    assert "--dim NAME=VALUE" in result.stderr
    assert run_cli("audit", str(tmp_path / "m.onnx"), "--dim", "?=48").exit_code == 0


def test_a_huge_chosen_size_is_refused_before_anything_is_allocated(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("audit", path, "--dim", "?=100000")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "over a tenth of the memory available" in result.stderr


# ``audit --save DIR`` writes every checked node as an ONNX backend-test case folder, which
# ``padconv verify DIR`` replays and any runtime can run.


@pytest.fixture
def saved(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("audit", path, "-q", "--save", str(tmp_path / "cases"))
    assert result.exit_code == 0, result.stderr
    return tmp_path / "cases", result


def test_every_checked_node_is_a_case_verify_replays(run_cli, saved):
    folder, result = saved
    assert result.stdout.splitlines()[-1] == (
        f"saved 7 case folders in {folder} (padconv verify {folder} replays them)")
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 7 and "test_model.22_Pad" in names
    assert "test_model.22_cv3.0_cv3.0.0_conv_Conv" in names
    replay = run_cli("verify", str(folder), "-q")
    assert replay.exit_code == 0, replay.stdout
    assert replay.stdout.strip() == "7 passed, 0 failed"


def test_a_saved_case_is_a_valid_single_node_model(saved):
    import onnxruntime

    case = saved[0] / "test_model.22_Pad"
    model = onnx.load(str(case / "model.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert [node.op_type for node in model.graph.node] == ["Pad"]
    data = case / "test_data_set_0"
    feeds = {}
    for index, value in enumerate(model.graph.input):
        feeds[value.name] = numpy_helper.to_array(onnx.load_tensor(str(data / f"input_{index}.pb")))
    expected = numpy_helper.to_array(onnx.load_tensor(str(data / "output_0.pb")))
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected)


def test_json_lists_the_saved_folders(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", names=YOLO_NAMES[:1], with_pad=False)
    result = run_cli("audit", path, "-q", "--json", "--save", str(tmp_path / "cases"))
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["saved"] == [str(tmp_path / "cases" / "test_model.22_cv2.0_cv2.0.0_conv_Conv")]


def test_saving_again_replaces_the_cases(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", names=YOLO_NAMES[:1], with_pad=False)
    for seed in ("1", "2"):
        assert run_cli("audit", path, "-q", "--seed", seed, "--save",
                       str(tmp_path / "cases")).exit_code == 0
    assert len(list((tmp_path / "cases").iterdir())) == 1


# audit's table at 80 columns tells every node apart (YOLOv8's names differ only in their
# middle), gives each shortened label whole on the next line, and widens on wider terminals.


PLAIN = {"NO_COLOR": "1"}


def rows(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("NODE "))
    return [line for line in lines[start + 1:] if line and not line.startswith(" ")][:-1]


def test_labels_are_distinct_and_whole_below_at_80_columns(tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    run = run_in_terminal("audit", path, "-q", columns=80, env=PLAIN)
    assert run.exit_code == 0, run.text
    assert all(len(line) <= 80 for line in run.lines), run.text
    labels = [row[:20] for row in rows(run.lines)]
    assert len(labels) == 7 and len(set(labels)) == 7, run.text
    for name in YOLO_NAMES:
        assert f"  node {name}" in run.lines


def test_a_wider_terminal_shows_whole_labels(tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    for run in (run_in_terminal("audit", path, "-q", columns=200, env=PLAIN),
                run_in_terminal("audit", path, "-q", columns=80, env={**PLAIN, "COLUMNS": "200"})):
        assert run.exit_code == 0, run.text
        starts = {row.split(" ")[0] for row in rows(run.lines)}
        assert set(YOLO_NAMES) <= starts, run.text
        assert not any(line.startswith("  node ") for line in run.lines)


def test_labels_alike_after_shortening_are_told_apart():
    names = [*YOLO_NAMES, "/model.4/m.0/cv1/conv/Conv", "/model.6/m.0/cv1/conv/Conv", "a", "a"]
    short = distinct_labels(names, 20)
    assert all(len(text) <= 20 for text in short)
    assert len(set(short)) == len(short)
    assert short[0] == "~cv2.0/cv2.0.0~/Conv"
