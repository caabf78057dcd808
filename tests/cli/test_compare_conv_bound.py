"""``padconv compare --conv-x``: Conv outputs judged with the dot-product error bound."""

from __future__ import annotations

import json

import exported_models as em
import numpy as np
import pytest

from padconv_cli.kernels.conv import conv


@pytest.fixture
def conv_files(tmp_path):
    """x, w, b of a 64-channel 3x3 Conv, padconv's output and the same output summed in
    reverse channel order (correct, rounded differently), and a wrong one."""
    x = em.weights((1, 64, 10, 10), seed=3)
    w, b = em.weights((16, 64, 3, 3), seed=4), em.weights((16,), seed=5)
    y = conv(x, w, b, pads=[1, 1, 1, 1])
    other = conv(x[:, ::-1].copy(), w[:, ::-1].copy(), b, pads=[1, 1, 1, 1])
    wrong = y.copy()
    products = x[0, :, 4, 4] * w[2, :, 1, 1]
    wrong[0, 2, 4, 4] -= products[np.argmax(np.abs(products))]
    files = {}
    for name, array in dict(x=x, w=w, b=b, y=y, other=other, wrong=wrong).items():
        files[name] = str(tmp_path / f"{name}.npy")
        np.save(files[name], array)
    model = em.make(
        [em.helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", pads=[1, 1, 1, 1])],
        [("x", np.float32, [1, 64, 10, 10])], [("y", np.float32, [1, 16, 10, 10])],
        [em.numpy_helper.from_array(w, "w"), em.numpy_helper.from_array(b, "b")],
    )
    files["model"] = em.save(model, tmp_path / "m.onnx")
    return files


def _conv_args(files):
    return ["--conv-x", files["x"], "--conv-w", files["w"], "--conv-b", files["b"],
            "--pads", "1", "1", "1", "1"]


def test_a_correct_other_order_passes_with_the_bound(run_cli, conv_files):
    result = run_cli("compare", conv_files["other"], conv_files["y"], *_conv_args(conv_files))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.startswith("PASS") and "c*n*eps" in result.stdout


def test_the_bound_from_a_model_node(run_cli, conv_files):
    result = run_cli("compare", conv_files["other"], conv_files["y"], "--conv-x",
                     conv_files["x"], "--from-model", conv_files["model"], "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    record = json.loads(result.stdout)
    assert record["passed"] and record["conv_bound"] is True


def test_a_wrong_element_fails_with_the_bound(run_cli, conv_files):
    result = run_cli("compare", conv_files["y"], conv_files["wrong"], *_conv_args(conv_files))
    assert result.exit_code == 1
    assert "1 of 1600 elements differ" in result.stdout and "at [0, 2, 4, 4]" in result.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pads", "1", "1", "1", "1"], "--pads describes the Conv of --conv-x"),
        (["--conv-x", "X"], "--conv-x needs the Conv's W"),
    ],
)
def test_incomplete_conv_options_are_usage_errors(run_cli, conv_files, extra, message):
    extra = [conv_files["x"] if word == "X" else word for word in extra]
    result = run_cli("compare", conv_files["y"], conv_files["y"], *extra)
    assert result.exit_code == 2 and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_conv_of_another_shape_is_refused(run_cli, conv_files):
    result = run_cli("compare", conv_files["y"], conv_files["y"], "--conv-x", conv_files["x"],
                     "--conv-w", conv_files["w"])
    assert result.exit_code == 2 and "gives shape [1, 16, 8, 8]" in result.stderr


def test_a_failing_conv_output_points_to_the_bound_options(run_cli, conv_files):
    result = run_cli("compare", conv_files["other"], conv_files["y"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    pointer = [i for i, line in enumerate(lines) if "--conv-x X --conv-w W" in line]
    atol = [i for i, line in enumerate(lines) if "would pass with --atol" in line]
    assert pointer and atol and pointer[0] < atol[0], result.stdout
    assert "--from-model" in "\n".join(lines[pointer[0]:])
    assert max(len(line) for line in lines[pointer[0]:atol[0]]) <= 80


def test_a_failure_that_cannot_be_a_conv_output_does_not_point_there(run_cli):
    result = run_cli("compare", "[[1.0, 2.0]]", "[[1.0, 2.5]]")
    assert result.exit_code == 1
    assert "--conv-x" not in result.stdout
