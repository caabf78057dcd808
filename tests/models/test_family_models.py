"""Models holding ConvTranspose, ConvInteger or QLinearConv nodes: audit checks them against
onnxruntime, ``--from-model`` runs them, a command given a node of another operator names the
right command, and an audit that checked nothing says so and exits 1."""

from __future__ import annotations

import json

import numpy as np
import pytest
from family_models import (
    conv_integer_model,
    conv_transpose_model,
    no_operator_model,
    qlinear_conv_model,
)

pytest.importorskip("onnxruntime")


def _audit(run_cli, model):
    result = run_cli("audit", "-q", str(model), "--json")
    return result, json.loads(result.stdout) if result.stdout.strip() else None


@pytest.mark.parametrize("build, operator", [
    (conv_transpose_model, "ConvTranspose"),
    (conv_integer_model, "ConvInteger"),
    (qlinear_conv_model, "QLinearConv"),
])
def test_audit_checks_the_family_node(run_cli, tmp_path, build, operator):
    result, record = _audit(run_cli, build(tmp_path / "m.onnx"))
    assert result.exit_code == 0, result.stdout + result.stderr
    nodes = [n for n in record["nodes"] if n["operator"].startswith(operator)]
    assert len(nodes) == 1
    assert nodes[0]["status"] in ("ok", "known deviation")
    assert record["checked"] >= 1


def test_audit_checks_grouped_conv_transpose(run_cli, tmp_path):
    result, record = _audit(run_cli, conv_transpose_model(tmp_path / "m.onnx", group=2))
    assert result.exit_code == 0, result.stdout
    assert [n["status"] for n in record["nodes"]] == ["ok", "ok"]


def test_integer_nodes_are_judged_exactly(run_cli, tmp_path):
    result, record = _audit(run_cli, conv_integer_model(tmp_path / "m.onnx"))
    node = record["nodes"][0]
    assert node["max_abs"] == 0 and node["status"] == "ok"


def test_audit_that_checked_nothing_says_so_and_exits_1(run_cli, tmp_path):
    result = run_cli("audit", "-q", str(no_operator_model(tmp_path / "relu.onnx")))
    assert result.exit_code == 1
    assert "nothing was checked" in result.stderr
    assert "no node was checked" in result.stdout


@pytest.mark.parametrize("build, command, node, x", [
    (conv_transpose_model, "conv-transpose", "up", np.ones((1, 4, 6, 6), np.float32)),
    (conv_integer_model, "conv-integer", "qconv", np.full((1, 2, 5, 5), 7, np.uint8)),
    (qlinear_conv_model, "qlinear-conv", "qlconv", np.full((1, 3, 6, 6), 200, np.uint8)),
])
def test_from_model_runs_the_node_and_matches_the_reference(run_cli, tmp_path, build, command,
                                                           node, x):
    from padconv_cli.models import find_node, resolve_call
    from padconv_cli.ops import operator

    model = build(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    given = [str(tmp_path / "x.npy")]
    arrays = (x,)
    if command == "conv-integer":  # its x_zero_point is computed at run time
        np.save(tmp_path / "xz.npy", np.array(3, np.uint8))
        given += [f"{model}:w", str(tmp_path / "xz.npy")]
        arrays = (x, None, np.array(3, np.uint8))
    result = run_cli(command, *given, "--from-model", str(model), "--node", node,
                     "-o", str(out))
    assert result.exit_code == 0, result.stderr
    entry = operator(command)
    origin = find_node(str(model), node, entry.name)
    arrays += (None,) * (len(entry.inputs) - len(arrays))
    call = resolve_call(entry.name, arrays, {}, origin).call
    expected = entry.reference(call)
    got = np.load(out)
    if got.dtype.kind == "f":
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-5)
    else:
        assert np.array_equal(got, expected)


def test_conv_given_a_conv_transpose_node_names_the_right_command(run_cli, tmp_path):
    model = conv_transpose_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.ones((1, 4, 6, 6), np.float32))
    result = run_cli("conv", str(tmp_path / "x.npy"), "--from-model", str(model), "--node",
                     "up")
    assert result.exit_code == 2
    assert "padconv conv-transpose" in result.stderr
    assert "ConvTranspose" in result.stderr


def test_conv_on_a_model_without_conv_points_to_the_family_command(run_cli, tmp_path):
    model = conv_integer_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.ones((1, 2, 5, 5), np.float32))
    result = run_cli("conv", str(tmp_path / "x.npy"), "--from-model", str(model))
    assert result.exit_code == 2
    assert "padconv conv-integer" in result.stderr


def test_compare_classifies_a_one_unit_qlinear_conv_difference(run_cli, tmp_path):
    import onnx
    import onnxruntime as ort

    model_path = qlinear_conv_model(tmp_path / "m.onnx")
    model = onnx.load(str(model_path))
    for name in ("xq", "yq"):
        model.graph.output.append(onnx.helper.make_tensor_value_info(
            name, onnx.TensorProto.UINT8, None))
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, 6, 6)).astype(np.float32)
    _, xq, yq = session.run(None, {"x": x})
    np.save(tmp_path / "xq.npy", xq)
    np.save(tmp_path / "ort.npy", yq)
    ours = tmp_path / "ours.npy"
    assert run_cli("qlinear-conv", str(tmp_path / "xq.npy"), "--from-model", str(model_path),
                   "--node", "qlconv", "-o", str(ours)).exit_code == 0
    result = run_cli("compare", str(ours), str(tmp_path / "ort.npy"), "--conv-x",
                     str(tmp_path / "xq.npy"), "--from-model", str(model_path), "--node",
                     "qlconv", "--json")
    record = json.loads(result.stdout)
    differing = np.load(ours).astype(int) != yq.astype(int)
    if not differing.any():
        assert result.exit_code == 0 and record["known_deviation"] is None
        return
    assert result.exit_code == 1
    assert "float32 requantization" in record["known_deviation"]
