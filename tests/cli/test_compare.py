"""``padconv compare A B``: verify's comparison rule as a command, exit 0 same / 1 different."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest

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
