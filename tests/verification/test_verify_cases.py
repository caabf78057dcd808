"""padconv verify through the Python API: built-in cases, the family's ruling cases shipped as
package data, the onnx suite picked by the op type of a model's node, ONNX case folders."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from padconv_cli.errors import InputError
from padconv_cli.kernels.family_rulings import RULINGS
from padconv_cli.verification.cases import builtin_cases, cases_from_json, matches
from padconv_cli.verification.onnx_suite import (
    cases_from_user_dir,
    onnx_data_root,
    shipped_cases,
    suite_cases,
    suite_dirs,
)
from padconv_cli.verification.runner import (
    FAILED,
    PASSED,
    UNSUPPORTED,
    run_case,
    run_cases,
    summary_line,
)

# padconv verify through the Python API: built-in cases, the onnx suite, ONNX case folders.


BUILTIN = builtin_cases()
BUILTIN_IDS = [case.name for case in BUILTIN]
DOC_CONV_NAMES = {
    "test_cc_basic_conv_with_padding",
    "test_cc_basic_conv_without_padding",
    "test_cc_conv_fp16",
    "test_cc_conv_with_autopad_same",
    "test_cc_conv_with_strides_and_asymmetric_padding",
    "test_cc_conv_with_strides_no_padding",
    "test_cc_conv_with_strides_padding",
}
SUITE_FLOOR = 40


@pytest.fixture(scope="module")
def suite_results():
    return run_cases(suite_cases())


# --- built-in cases ----------------------------------------------------------------------------


def test_builtin_cases_cover_the_documented_examples():
    names = set(BUILTIN_IDS)
    assert DOC_CONV_NAMES <= names
    assert {"pad_doc_constant", "pad_doc_reflect", "pad_doc_edge", "pad_wrap"} <= names
    modes = {case.attributes.get("mode") for case in BUILTIN if case.op == "Pad"}
    assert modes == {"constant", "reflect", "edge", "wrap"}
    assert any(len(c.inputs) > 3 and c.inputs[3] is not None for c in BUILTIN)  # axes
    assert any(c.op == "Pad" and (c.inputs[1] < 0).any() for c in BUILTIN)  # negative pads
    assert len(names) == len(BUILTIN)


@pytest.mark.parametrize("case", BUILTIN, ids=BUILTIN_IDS)
def test_builtin_case_passes(case):
    result = run_case(case)
    assert result.status == PASSED, result.reason
    assert result.output_shape == case.expected[0].shape


def _numpy_pad_oracle(case):
    """Expected Pad output from numpy.pad: crop the negative pads, then pad the positive."""
    data, pads = case.inputs[0], [int(p) for p in case.inputs[1]]
    constant = case.inputs[2] if len(case.inputs) > 2 else None
    axes = case.inputs[3] if len(case.inputs) > 3 else None
    axes = list(range(data.ndim)) if axes is None else [int(a) % data.ndim for a in axes]
    crop, width = [slice(None)] * data.ndim, [(0, 0)] * data.ndim
    for i, axis in enumerate(axes):
        begin, end = pads[i], pads[i + len(axes)]
        crop[axis] = slice(max(-begin, 0), data.shape[axis] - max(-end, 0))
        width[axis] = (max(begin, 0), max(end, 0))
    mode = case.attributes.get("mode", "constant")
    extra = {"constant_values": constant if constant is not None else 0}
    return np.pad(data[tuple(crop)], width, mode=mode, **(extra if mode == "constant" else {}))


def _reference_conv_oracle(case):
    """Expected Conv output from onnx's reference evaluator."""
    names = ["X", "W", "B"][: len(case.inputs)]
    elem = helper.np_dtype_to_tensor_dtype(case.inputs[0].dtype)
    graph = helper.make_graph(
        [helper.make_node("Conv", names, ["Y"], **case.attributes)],
        "conv",
        [
            helper.make_tensor_value_info(n, elem, a.shape)
            for n, a in zip(names, case.inputs, strict=True)
        ],
        [helper.make_tensor_value_info("Y", elem, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, case.inputs, strict=True)))[0]


@pytest.mark.parametrize("case", BUILTIN, ids=BUILTIN_IDS)
def test_builtin_expected_values_agree_with_an_independent_oracle(case):
    oracle = _numpy_pad_oracle(case) if case.op == "Pad" else _reference_conv_oracle(case)
    expected = case.expected[0]
    assert oracle.dtype == expected.dtype and oracle.shape == expected.shape
    if expected.dtype == object:
        assert oracle.tolist() == expected.tolist()
    else:
        np.testing.assert_array_equal(oracle, expected)


def test_case_file_errors_name_the_file():
    with pytest.raises(InputError, match="broken.json"):
        cases_from_json('{"cases": [{"name": "x"}]}', "broken.json")
    bad_shape = (
        '{"cases": [{"name": "x", "op": "Pad", "opset": 25, "inputs": ['
        '{"dtype": "float32", "shape": [2, 2], "values": [1, 2, 3]}], "outputs": []}]}'
    )
    with pytest.raises(InputError, match="3 values for shape"):
        cases_from_json(bad_shape, "bad.json")


@pytest.mark.parametrize(
    ("patterns", "name", "selected"),
    [
        ((), "anything", True),
        (("conv",), "test_cc_conv_fp16", True),
        (("CONV",), "test_cc_conv_fp16", True),
        (("pad_*",), "test_cc_basic_conv_with_padding", False),
        (("*pad*",), "test_cc_basic_conv_with_padding", True),
        (("test_Conv?d",), "test_Conv1d", True),
        (("test_Conv?d",), "test_Conv1d_pad1", False),
        (("wrap", "edge"), "pad_doc_edge", True),
    ],
)
def test_matches_substring_or_glob(patterns, name, selected):
    assert matches(name, patterns) is selected


# --- the onnx suite ----------------------------------------------------------------------------


def test_onnx_suite_passes_every_case(suite_results):
    failed = [(r.case.name, r.reason) for r in suite_results if r.status != PASSED]
    assert failed == []
    assert len(suite_results) >= SUITE_FLOOR


def test_onnx_suite_has_each_family(suite_results):
    by_source = {}
    for result in suite_results:
        by_source.setdefault(result.case.source, set()).add(result.case.name)
    assert {"test_wrap_pad", "test_constant_pad_negative_axes", "test_conv_with_autopad_same"} <= (
        by_source["onnx-node"]
    )
    converted = by_source["pytorch-converted"]
    assert {"test_ConstantPad2d", "test_ReflectionPad2d", "test_ReplicationPad2d"} <= converted
    assert {"test_ZeroPad2d", "test_Conv3d_dilated_strided", "test_Conv2d_groups"} <= converted
    assert {"test_ConvTranspose2d", "test_ConvTranspose2d_no_bias"} <= converted
    assert by_source["pytorch-operator"] == {"test_operator_conv", "test_operator_pad",
                                             "test_operator_convtranspose"}
    operators = {r.operator for r in suite_results}
    assert {"Pad-2", "Pad-25", "Conv-1", "Conv-22", "ConvTranspose-1", "ConvInteger-10",
            "QLinearConv-10"} <= operators


# --- case folders ------------------------------------------------------------------------------


def write_case_dir(folder: Path, model, inputs, outputs) -> Path:
    """An ONNX backend-test case folder: model.onnx and test_data_set_0/*.pb."""
    data_set = folder / "test_data_set_0"
    data_set.mkdir(parents=True)
    onnx.save(model, str(folder / "model.onnx"))
    for kind, arrays in (("input", inputs), ("output", outputs)):
        for i, array in enumerate(arrays):
            tensor = numpy_helper.from_array(array, f"{kind}{i}")
            (data_set / f"{kind}_{i}.pb").write_bytes(tensor.SerializeToString())
    return folder


def _model(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(nodes, "case", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, elem=onnx.TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, None)


X = np.arange(6, dtype=np.float32).reshape(2, 3)
X_EDGE = np.pad(X, ((1, 0), (0, 2)), mode="edge")


def test_constant_node_feeding_pads_is_supported(tmp_path):
    nodes = [
        helper.make_node("Constant", [], ["pads"], value_ints=[1, 0, 0, 2]),
        helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge"),
    ]
    model = _model(nodes, [_vi("x")], [_vi("y")], 18)
    folder = write_case_dir(tmp_path / "test_const_pads", model, [X], [X_EDGE])
    (case,) = cases_from_user_dir(str(folder))
    assert run_case(case).status == PASSED


def test_initializer_pads_and_omitted_optional_input(tmp_path):
    pads = numpy_helper.from_array(np.array([1, 0, 0, 2], np.int64), "pads")
    axes = numpy_helper.from_array(np.array([0, 1], np.int64), "axes")
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode="edge")
    model = _model([node], [_vi("x")], [_vi("y")], 21, initializers=[pads, axes])
    folder = write_case_dir(tmp_path / "case", model, [X], [X_EDGE])
    (case,) = cases_from_user_dir(str(folder))
    result = run_case(case)
    assert result.status == PASSED and result.operator == "Pad-21"


def test_other_computing_nodes_make_the_case_unsupported(tmp_path):
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="edge"),
        helper.make_node("Relu", ["p"], ["y"]),
    ]
    pads = numpy_helper.from_array(np.array([1, 0, 0, 2], np.int64), "pads")
    model = _model(nodes, [_vi("x")], [_vi("y")], 18, initializers=[pads])
    folder = write_case_dir(tmp_path / "test_pad_relu", model, [X], [X_EDGE])
    (case,) = cases_from_user_dir(str(folder))
    result = run_case(case)
    assert result.status == UNSUPPORTED
    assert "Pad, Relu" in result.reason
    assert summary_line([result]) == "0 passed, 0 failed, 1 unsupported"


def test_folder_of_case_folders_and_several_data_sets(tmp_path):
    node = helper.make_node("Pad", ["x"], ["y"], mode="edge", pads=[1, 0, 0, 2])
    model = _model([node], [_vi("x")], [_vi("y")], 2)
    folder = write_case_dir(tmp_path / "suite" / "test_a", model, [X], [X_EDGE])
    shutil.copytree(folder / "test_data_set_0", folder / "test_data_set_1")
    cases = cases_from_user_dir(str(tmp_path / "suite"))
    assert [c.name for c in cases] == ["test_a:test_data_set_0", "test_a:test_data_set_1"]
    assert {run_case(c).status for c in cases} == {PASSED}


def test_corrupted_output_fails_with_mismatches(tmp_path):
    source = onnx_data_root() / "pytorch-converted" / "test_ConstantPad2d"
    folder = shutil.copytree(source, tmp_path / "test_ConstantPad2d")
    output = folder / "test_data_set_0" / "output_0.pb"
    tensor = onnx.load_tensor(str(output))
    array = numpy_helper.to_array(tensor).copy()
    array[0, 0, 5, 3] += 0.25
    output.write_bytes(numpy_helper.from_array(array, tensor.name).SerializeToString())
    (case,) = cases_from_user_dir(str(folder))
    result = run_case(case)
    assert result.status == FAILED
    assert result.comparison.mismatch_count == 1
    ((index, expected, actual),) = result.comparison.mismatches
    assert index == (0, 0, 5, 3) and float(expected) - float(actual) == pytest.approx(0.25)
    assert result.comparison.min_atol == pytest.approx(0.25, abs=1e-4)  # minus rtol*|e|


def test_kernel_refusal_is_a_failure_not_a_crash(tmp_path):
    node = helper.make_node("Pad", ["x"], ["y"], mode="edge", pads=[1, 0])  # too few pads
    model = _model([node], [_vi("x")], [_vi("y")], 2)
    folder = write_case_dir(tmp_path / "bad", model, [X], [X])
    (case,) = cases_from_user_dir(str(folder))
    result = run_case(case)
    assert result.status == FAILED and "refused" in result.reason


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("missing", "not a folder"),
        ("empty", "not an ONNX backend-test case folder"),
        ("no_data_set", "no test_data_set_"),
        ("bad_model", "not an ONNX model"),
    ],
)
def test_bad_case_folders_are_input_errors(tmp_path, layout, message):
    folder = tmp_path / "case"
    if layout != "missing":
        folder.mkdir()
    if layout == "no_data_set":
        node = helper.make_node("Pad", ["x"], ["y"], pads=[0, 0, 0, 0])
        onnx.save(_model([node], [_vi("x")], [_vi("y")], 2), str(folder / "model.onnx"))
    if layout == "bad_model":
        (folder / "model.onnx").write_bytes(b"\x00not a protobuf\xff" * 3)
        (folder / "test_data_set_0").mkdir()
    with pytest.raises(InputError, match=message):
        cases_from_user_dir(str(folder))


@pytest.mark.parametrize(
    ("node", "attribute"),
    [
        (helper.make_node("Constant", [], ["v"], name="c", value_string=b"\xff"), "value_string"),
        (helper.make_node("Constant", [], ["v"], name="c", value_strings=[b"a", b"\xc3"]),
         "value_strings"),
        (helper.make_node("Pad", ["x", "p"], ["y"], name="c", mode=b"\xfe"), "mode"),
    ],
)
def test_model_text_that_is_not_utf8_is_an_input_error(node, attribute):
    from padconv_cli.verification.onnx_suite import case_from_model

    nodes = [node] if node.op_type == "Pad" else [node, helper.make_node("Pad", ["x", "p", "v"],
                                                                         ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.STRING, None)],
        initializer=[numpy_helper.from_array(np.array([1, 1], np.int64), "p")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(InputError) as error:
        case_from_model(model, [np.array(["a"], dtype=object)], [np.array(["", "a", ""], object)],
                        name="t", source="dir", location="suite/t")
    assert str(error.value) == f"suite/t: attribute {attribute!r} of node 'c' is not valid UTF-8"


def test_a_missing_input_named_with_control_characters_is_one_escaped_line(tmp_path):
    """Found by fuzz/fuzz_models.py (verify target): the node input's name went into the
    library's message raw, a newline included."""
    from padconv_cli.errors import InputError
    from padconv_cli.verification.onnx_suite import cases_from_user_dir

    model = _model([helper.make_node("Pad", ["X\x01\np", "pads"], ["Y"])], [], [_vi("Y")], 13)
    folder = write_case_dir(tmp_path / "test_case", model, [], [np.zeros(1, np.float32)])
    with pytest.raises(InputError) as caught:
        cases_from_user_dir(str(folder))
    assert "\n" not in str(caught.value) and "X\\x01\\np" in str(caught.value)


# ``verify --onnx-suite`` picks conformance folders by the op type of the model's node (an
# operator padconv implements, domain-less, any opset), never by the folder's name.


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


# padconv's own cases of the convolution family's rulings: backend-test folders shipped as
# package data, one per ruling, current with the independent oracles, and run by ``padconv
# verify`` without arguments.


REPO = Path(__file__).resolve().parents[2]


def test_every_ruling_is_applied_by_a_shipped_case():
    from padconv_cli.onnx_nodes import kernel_call
    from padconv_cli.ops import plan_call

    applied = set()
    for case in shipped_cases():
        call = kernel_call(case.op, case.attributes, case.inputs, opset=case.opset)
        applied.update(plan_call(call).rulings)
    assert applied >= set(RULINGS)


def test_shipped_cases_cover_the_three_operators():
    assert {case.op for case in shipped_cases()} == {"ConvTranspose", "ConvInteger",
                                                     "QLinearConv"}


def test_verify_without_arguments_runs_and_passes_them(run_cli):
    result = run_cli("verify", "--json")
    assert result.exit_code == 0, result.stdout[-2000:]
    records = [json.loads(line) for line in result.stdout.splitlines()]
    family = [r for r in records[:-1] if r["name"].startswith("test_fam_")]
    assert len(family) == len(shipped_cases())
    assert all(r["status"] == "passed" for r in family)


def test_shipped_cases_are_current_with_the_oracles():
    done = subprocess.run([sys.executable, "scripts/make_family_cases.py", "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
