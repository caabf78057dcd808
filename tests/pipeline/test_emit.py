"""``--emit-onnx``: the single-node model, its operator version, the round trip through
onnx.reference, initializers stored with --emit-initializers, and no model when the run fails."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from onnx.reference import ReferenceEvaluator

from padconv_cli.emit import operator_version, single_node_model
from padconv_cli.errors import AttributeValueError
from padconv_cli.models import resolve_call
from padconv_cli.ops import compute, plan_call
from padconv_cli.ops.onnx_graph import MIN_RUNTIME_OPSET

# ``--emit-onnx``: the single-node model, its operator version, and the round trip through
# onnx.reference.


def _pad_call(data, **flags):
    return resolve_call("Pad", (data,), flags).call


def _conv_call(x, w, b=None, **flags):
    return resolve_call("Conv", (x, w, b), flags).call


@pytest.mark.parametrize(
    ("data", "flags", "version"),
    [
        (np.zeros((2, 3), np.float32), dict(pads=(0, 1, 0, 1)), 2),
        (np.zeros((2, 3), np.float32), dict(pads=(0, -1, 0, 1), mode="edge"), 2),
        (np.zeros((2, 3), np.float32), dict(pads=(0, 1, 0, 1), constant_value="0.5"), 2),
        (np.zeros((2, 3), np.float64), dict(pads=(0, 1, 0, 1), constant_value="0.5"), 2),
        (np.zeros((2, 3), np.float64), dict(pads=(0, 1, 0, 1), constant_value="0.1"), 11),
        (np.zeros((2, 3), np.int32), dict(pads=(0, 1, 0, 1)), 11),
        (np.zeros((2, 3), np.bool_), dict(pads=(0, 1, 0, 1)), 13),
        (np.zeros((2, 3), np.float16), dict(pads=(1, 1), axes=(1,)), 18),
        (np.zeros((2, 3), np.float32), dict(pads=(0, 1, 0, 1), mode="wrap"), 19),
        (np.zeros((2, 3), ml_dtypes.int4), dict(pads=(0, 1, 0, 1)), 21),
        (np.zeros((2, 3), ml_dtypes.float4_e2m1fn), dict(pads=(0, 1, 0, 1)), 23),
    ],
)
def test_pad_gets_the_oldest_version_with_its_features(data, flags, version):
    call = _pad_call(data, **flags)
    choice = operator_version(call)
    assert choice.version == version
    model = single_node_model(call, plan_call(call))
    assert model.opset_import[0].version == max(version, MIN_RUNTIME_OPSET)
    assert model.ir_version == onnx.helper.find_min_ir_version_for(list(model.opset_import))
    onnx.checker.check_model(model, full_check=True)


@pytest.mark.parametrize(
    ("dtype", "flags", "version"),
    [
        (np.float32, dict(pads=(1, 1, 1, 1)), 1),
        (np.float16, dict(auto_pad="SAME_UPPER"), 1),
        (np.float32, dict(auto_pad="SAME_LOWER", strides=(2, 2)), 11),
        (ml_dtypes.bfloat16, dict(auto_pad="VALID"), 22),
    ],
)
def test_conv_gets_the_oldest_version_with_its_features(dtype, flags, version):
    x = np.zeros((1, 2, 5, 5), dtype)
    w = np.zeros((3, 2, 3, 3), dtype)
    call = _conv_call(x, w, **flags)
    assert operator_version(call).version == version
    model = single_node_model(call, plan_call(call))
    onnx.checker.check_model(model, full_check=True)
    names = [value.name for value in model.graph.input]
    assert names == ["X", "W"]
    attributes = {a.name for a in model.graph.node[0].attribute}
    assert {"kernel_shape", "strides", "dilations", "group"} <= attributes
    assert ("auto_pad" in attributes) != ("pads" in attributes)


def test_inputs_and_output_are_typed_and_shaped():
    call = _pad_call(np.zeros((2, 3), np.int8), pads=(1, 0, 0, 2), constant_value="7")
    model = single_node_model(call, plan_call(call))
    (data,) = model.graph.input
    (output,) = model.graph.output
    assert data.type.tensor_type.elem_type == onnx.TensorProto.INT8
    assert [d.dim_value for d in data.type.tensor_type.shape.dim] == [2, 3]
    assert [d.dim_value for d in output.type.tensor_type.shape.dim] == [3, 5]
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    assert stored["pads"].tolist() == [1, 0, 0, 2]
    assert stored["constant_value"].dtype == np.int8 and int(stored["constant_value"]) == 7


def test_embedded_weights_become_initializers_and_legacy_inputs():
    x = np.ones((1, 1, 4, 4), np.float32)
    w = np.ones((1, 1, 3, 3), np.float32)
    call = _conv_call(x, w)
    model = single_node_model(call, plan_call(call), embedded={"W"})
    assert [t.name for t in model.graph.initializer] == ["W"]
    # IR 3 (opset 7) requires every initializer to be listed as a graph input as well
    assert model.ir_version == 3
    assert [value.name for value in model.graph.input] == ["X", "W"]
    out = ReferenceEvaluator(model).run(None, {"X": x})[0]
    np.testing.assert_array_equal(out, compute(call))


def test_rank_zero_pad_has_typed_empty_pads():
    call = _pad_call(np.array(2.5, np.float32), pads=())
    model = single_node_model(call, plan_call(call))
    onnx.checker.check_model(model, full_check=True)
    (pads,) = [a for a in model.graph.node[0].attribute if a.name == "pads"]
    assert pads.type == onnx.AttributeProto.INTS and list(pads.ints) == []


ROUND_TRIP_PADS = [
    (["--pads", "0", "2", "0", "0", "--mode", "reflect"], np.float32),
    (["--pads", "1", "0", "2", "1", "--constant-value", "-3"], np.int16),
    (["--pads", "2", "3", "--axes", "-1", "--mode", "wrap"], np.float64),
    (["--pads", "1", "1", "1", "1", "--mode", "edge"], np.uint8),
    (["--pads", "0", "1", "0", "1", "--constant-value", "true"], np.bool_),
]


@pytest.mark.parametrize(("flags", "dtype"), ROUND_TRIP_PADS)
def test_pad_round_trip_through_onnx_reference(run_cli, tmp_path, flags, dtype):
    data = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    np.save(tmp_path / "x.npy", data)
    model_path, out = tmp_path / "pad.onnx", tmp_path / "y.npy"
    result = run_cli(
        "pad", str(tmp_path / "x.npy"), *flags, "--emit-onnx", str(model_path), "-o", str(out)
    )
    assert result.exit_code == 0, result.stderr
    model = onnx.load(str(model_path))
    onnx.checker.check_model(model, full_check=True)
    expected = ReferenceEvaluator(model).run(None, {"data": data})[0]
    got = np.load(out)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def _onnx_version() -> tuple[int, int]:
    major, minor = onnx.__version__.split(".")[:2]
    return int(major), int(minor)


@pytest.mark.parametrize(
    "flags",
    [
        ["--kernel-shape", "3", "3", "--pads", "1", "0", "1", "2"],
        ["--strides", "2", "1", "--auto-pad", "SAME_LOWER"],
        ["--dilations", "2", "1", "--auto-pad", "VALID"],
        ["--group", "2", "--strides", "2", "2"],
    ],
)
def test_conv_round_trip_through_onnx_reference(run_cli, tmp_path, flags):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    group = 2 if "--group" in flags else 1
    w = rng.standard_normal((4, 4 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    for name, array in (("x", x), ("w", w), ("b", b)):
        np.save(tmp_path / f"{name}.npy", array)
    model_path, out = tmp_path / "conv.onnx", tmp_path / "y.npy"
    args = [str(tmp_path / f"{n}.npy") for n in "xwb"]
    result = run_cli(
        "conv", *args, *flags, "--emit-onnx", str(model_path), "-o", str(out)
    )
    assert result.exit_code == 0, result.stderr
    model = onnx.load(str(model_path))
    onnx.checker.check_model(model, full_check=True)
    if "SAME_LOWER" in flags and _onnx_version() < (1, 22):
        pytest.skip("onnx.reference 1.21 gives SAME_LOWER with stride 2 on 7 rows 3 output rows; "
                    "the spec gives ceil(7 / 2) = 4, as padconv and later onnx do")
    expected = ReferenceEvaluator(model).run(None, {"X": x, "W": w, "B": b})[0]
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-5, atol=1e-5)


def test_emit_with_explain_writes_the_model_and_computes_nothing(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 2), np.float32))
    model_path, out = tmp_path / "m.onnx", tmp_path / "y.npy"
    result = run_cli(
        "pad", str(tmp_path / "x.npy"), "--pads", "1", "1", "1", "1", "--explain",
        "--emit-onnx", str(model_path), "-o", str(out),
    )
    assert result.exit_code == 0, result.stderr
    assert model_path.exists() and not out.exists()
    onnx.checker.check_model(onnx.load(str(model_path)), full_check=True)


def test_emit_into_a_missing_folder_is_one_line_exit_2(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 2), np.float32))
    target = tmp_path / "no" / "such" / "m.onnx"
    result = run_cli("pad", str(tmp_path / "x.npy"), "--pads", "1,1,1,1", "--emit-onnx",
                     str(target), "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "m.onnx" in result.stderr
    assert not (tmp_path / "y.npy").exists()


_DTYPES = [np.float32, np.float64, np.int64, np.uint16, np.bool_, np.complex64]


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
    mode=st.sampled_from(["constant", "reflect", "edge", "wrap"]),
    dtype=st.sampled_from(_DTYPES),
)
def test_any_valid_pad_emits_a_model_whose_inferred_shape_matches(shape, data, mode, dtype):
    """full_check runs strict shape inference against the declared output shape."""
    pads = data.draw(st.lists(st.integers(-1, 3), min_size=2 * len(shape),
                              max_size=2 * len(shape)))
    call = _pad_call(np.zeros(shape, dtype), pads=tuple(pads), mode=mode)
    try:
        plan = plan_call(call)
    except AttributeValueError:
        assume(False)  # invalid combinations are the kernel's business, tested there
    model = single_node_model(call, plan)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    dims = inferred.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == list(plan.output_shape)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize(("strides", "version"), [((1, 1), 1), ((2, 1), 1)])
def test_auto_pad_with_dilations_is_written_as_resolved_pads(auto_pad, strides, version):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 7, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    call = _conv_call(x, w, auto_pad=auto_pad, dilations=(2, 3), strides=strides)
    plan = plan_call(call)
    model = single_node_model(call, plan)
    onnx.checker.check_model(model, full_check=True)
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in model.graph.node[0].attribute}
    assert "auto_pad" not in attributes and attributes["pads"] == list(plan.pads)
    assert operator_version(call).version == version  # no auto_pad written: Conv-1 suffices
    expected = compute(call)
    (got,) = ReferenceEvaluator(model).run(None, {"X": x, "W": w})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"X": x, "W": w})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_same_with_stride_and_no_dilation_keeps_auto_pad_and_conv11():
    call = _conv_call(np.zeros((1, 1, 5, 5), np.float32), np.zeros((1, 1, 3, 3), np.float32),
                      auto_pad="SAME_UPPER", strides=(2, 2), dilations=(1, 1))
    model = single_node_model(call, plan_call(call))
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in model.graph.node[0].attribute}
    assert attributes["auto_pad"] == b"SAME_UPPER" and "pads" not in attributes
    assert operator_version(call).version == 11


# ``--emit-onnx FILE --emit-initializers``: the model stores the given tensors and runs on
# its own, with no inputs, in onnx.reference and onnxruntime.


@pytest.mark.parametrize(
    "args",
    [("pad", "[[1.0, 2.0], [3.0, 4.0]]", "--pads", "1", "0", "0", "1", "--mode", "reflect"),
     ("conv", "samples/conv_basic_x.npy", "samples/conv_basic_w.npy", "[0.5]",
      "--pads", "1", "1", "1", "1")],
    ids=["pad", "conv"],
)
def test_emitted_model_runs_without_inputs(run_cli, tmp_path, monkeypatch, args):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    model_path, out = tmp_path / "m.onnx", tmp_path / "y.npy"
    result = run_cli(*args, "--emit-onnx", str(model_path), "--emit-initializers",
                     "-o", str(out))
    assert result.exit_code == 0, result.stderr
    model = onnx.load(str(model_path))
    onnx.checker.check_model(model, full_check=True)
    stored = {tensor.name for tensor in model.graph.initializer}
    # before IR 4 initializers are listed as inputs too; none needs a feed
    assert [i.name for i in model.graph.input if i.name not in stored] == []
    assert stored
    expected = np.load(out)
    np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, {})[0], expected)
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the padconv[check] extra")
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {})[0], expected)


def test_without_the_flag_the_tensors_are_graph_inputs(run_cli, tmp_path):
    model_path = tmp_path / "m.onnx"
    result = run_cli("pad", "[1.0, 2.0]", "--pads", "1", "1", "--emit-onnx", str(model_path),
                     "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 0
    assert [i.name for i in onnx.load(str(model_path)).graph.input] == ["data"]


def test_the_flag_needs_emit_onnx(run_cli):
    result = run_cli("pad", "[1.0, 2.0]", "--pads", "1", "1", "--emit-initializers")
    assert result.exit_code == 2
    assert "--emit-initializers" in result.stderr and "--emit-onnx" in result.stderr


# --emit-onnx writes its model only when the run itself can succeed.


@pytest.fixture
def data_file(tmp_path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    return path


def test_emit_onnx_is_not_written_when_the_output_is_too_large(run_cli, data_file, tmp_path):
    model, output = tmp_path / "m.onnx", tmp_path / "y.npy"
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "--max-output-bytes",
                     "8", "--emit-onnx", str(model), "-o", str(output))
    assert result.exit_code == 2 and "--max-output-bytes" in result.stderr
    assert not model.exists() and not output.exists()


def test_conv_emit_onnx_is_not_written_when_the_output_is_too_large(run_cli, tmp_path):
    model = tmp_path / "m.onnx"
    result = run_cli("conv", "[[[[1.0, 2.0], [3.0, 4.0]]]]", "[[[[1.0]]]]", "--max-output-bytes",
                     "4", "--emit-onnx", str(model), "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert not model.exists()


def test_explain_with_emit_still_writes_the_model(run_cli, data_file, tmp_path):
    model = tmp_path / "m.onnx"
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "--max-output-bytes",
                     "8", "--emit-onnx", str(model), "--explain")
    assert result.exit_code == 0, result.stderr
    assert onnx.load(str(model)).graph.node[0].op_type == "Pad"
