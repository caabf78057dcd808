"""``padconv compare A B``: verify's comparison rule as a command (exit 0 same, 1 different),
and Conv outputs judged with the dot-product error bound (``--conv-x``)."""

from __future__ import annotations

import io
import json
import re

import exported_models as em
import numpy as np
import pytest

from padconv_cli.kernels.conv import conv

# ``padconv compare A B``: verify's comparison rule as a command, exit 0 same / 1 different.


BASE = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], dtype=np.float32)


@pytest.fixture
def files(tmp_path):
    changed = BASE.copy()
    changed[0, 1] = 1.01
    changed[1, 2] = 5.2
    np.save(tmp_path / "a.npy", BASE)
    np.save(tmp_path / "b.npy", changed)
    return tmp_path


def test_equal_tensors_pass(run_cli, files):
    result = run_cli("compare", str(files / "a.npy"), str(files / "a.npy"))
    assert result.exit_code == 0
    assert result.stdout.startswith("PASS (rtol=1e-05, atol=1e-06)")


def test_differences_fail_with_indices_and_passing_tolerances(run_cli, files):
    result = run_cli("compare", str(files / "a.npy"), str(files / "b.npy"))
    assert result.exit_code == 1
    text = result.stdout
    assert text.startswith("FAIL")
    assert "2 of 6 elements differ" in text
    assert "at [0, 1]: A 1.0, B 1.01" in text and "at [1, 2]: A 5.0, B 5.2" in text
    match = re.search(r"--atol (\S+) \(with rtol", text)
    assert match, text
    # the smallest tolerance reported really passes
    again = run_cli("compare", str(files / "a.npy"), str(files / "b.npy"), "--atol", match[1])
    assert again.exit_code == 0, again.stdout


def test_tolerance_flags(run_cli, files):
    a, b = str(files / "a.npy"), str(files / "b.npy")
    assert run_cli("compare", a, b, "--rtol", "0.05").exit_code == 0
    assert run_cli("compare", a, b, "--atol", "0.1").exit_code == 1
    assert run_cli("compare", a, b, "--atol", "0.21").exit_code == 0
    bad = run_cli("compare", a, b, "--atol", "-1")
    assert bad.exit_code == 2 and "not a tolerance" in bad.stderr


@pytest.mark.parametrize(
    ("other", "reason"),
    [
        (np.zeros((3, 2), np.float32), "shape (3, 2) != expected (2, 3)"),
        (BASE.astype(np.float64), "float64"),
    ],
)
def test_shape_or_dtype_mismatch_fails(run_cli, files, other, reason):
    np.save(files / "other.npy", other)
    result = run_cli("compare", str(files / "a.npy"), str(files / "other.npy"), "--json")
    assert result.exit_code == 1
    record = json.loads(result.stdout)
    assert record["passed"] is False and reason in record["reason"]
    assert record["min_atol"] is None


def test_json_record(run_cli, files):
    result = run_cli("compare", str(files / "a.npy"), str(files / "b.npy"), "--json")
    assert result.exit_code == 1
    record = json.loads(result.stdout)
    assert record["a"] == {"source": str(files / "a.npy"), "dtype": "float32", "shape": [2, 3]}
    assert record["mismatch_count"] == 2
    assert [m["index"] for m in record["mismatches"]] == [[0, 1], [1, 2]]
    assert record["max_abs"] == pytest.approx(0.2, rel=1e-5)
    assert record["min_atol"] >= record["max_abs"] - record["rtol"] * 5.0


def test_nan_matches_only_nan(run_cli):
    assert run_cli("compare", "[1.0, nan]", "[1.0, nan]").exit_code == 0
    result = run_cli("compare", "[1.0, nan]", "[1.0, 2.0]", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["mismatches"][0]["a"] == "nan"


def test_integers_exact_and_strings(run_cli):
    assert run_cli("compare", "[1, 2]", "[1, 3]").exit_code == 1
    assert run_cli("compare", "[1, 2]", "[1, 3]", "--atol", "1").exit_code == 0
    assert run_cli("compare", '["a", "b"]', '["a", "b"]').exit_code == 0
    assert run_cli("compare", '["a", "b"]', '["a", "c"]').exit_code == 1


def test_stdin_for_one_side(run_cli, files):
    buffer = io.BytesIO()
    np.save(buffer, BASE)
    result = run_cli("compare", str(files / "a.npy"), "-", input=buffer.getvalue())
    assert result.exit_code == 0, result.stderr
    both = run_cli("compare", "-", "-", input=buffer.getvalue())
    assert both.exit_code == 2 and "only one of A and B" in both.stderr


def test_unreadable_input_is_exit_2(run_cli, files):
    result = run_cli("compare", str(files / "a.npy"), str(files / "absent.npy"))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "absent.npy" in result.stderr


# ``padconv compare --conv-x``: Conv outputs judged with the dot-product error bound.


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
