"""``padconv verify`` output: one line per case fitted to the width, details on failure or -v,
-q for failures only, the summary last, and ``-k NAME`` showing one case side by side."""

from __future__ import annotations

import re
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from padconv_cli.verification.cases import Case, builtin_cases
from padconv_cli.verification.onnx_suite import onnx_data_root, shipped_cases
from padconv_cli.verification.report import case_table, side_by_side
from padconv_cli.verification.runner import run_case

BUILTIN = builtin_cases()


def _case(name: str) -> Case:
    (case,) = [c for c in BUILTIN if c.name == name]
    return case


@pytest.fixture
def failing_dir(tmp_path):
    source = onnx_data_root() / "pytorch-converted" / "test_ReflectionPad2d"
    folder = shutil.copytree(source, tmp_path / "test_ReflectionPad2d_with_an_unusually_long_name")
    output = folder / "test_data_set_0" / "output_0.pb"
    tensor = onnx.load_tensor(str(output))
    array = numpy_helper.to_array(tensor).copy()
    array[0, 0, 0, 0] += 1.0
    output.write_bytes(numpy_helper.from_array(array, tensor.name).SerializeToString())
    return folder


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_table_fits_the_width_with_one_line_per_case(width):
    results = [run_case(case) for case in BUILTIN]
    lines = case_table(results, width)
    assert len(lines) == len(results) + 1
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    assert lines[0].split()[:2] == ["RESULT", "CASE"]
    assert all(line.startswith("PASS ") for line in lines[1:])


def test_wider_terminals_get_more_columns():
    results = [run_case(case) for case in BUILTIN]
    assert "ATTRIBUTES" not in case_table(results, 80)[0]
    wide = case_table(results, 200)
    assert "ATTRIBUTES" in wide[0] and "MAX REL" in wide[0]
    assert any("strides=[2,2]" in line for line in wide)


def test_failure_details_are_shown_and_wrapped(run_cli, failing_dir):
    result = run_cli("verify", str(failing_dir), env={"COLUMNS": "80"})
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert re.match(r"^FAIL\s+test_Reflection", lines[1])
    assert any(line.strip().startswith("at [0, 0, 0, 0]: expected") for line in lines)
    assert "would pass with --atol" in result.stdout
    assert lines[-1] == "0 passed, 1 failed"


def test_quiet_keeps_failures_and_summary(run_cli, failing_dir):
    result = run_cli("verify", "-q")
    total = len(BUILTIN) + len(shipped_cases())
    assert result.stdout.strip() == f"{total} passed, 0 failed"
    result = run_cli("-q", "verify", str(failing_dir), env={"COLUMNS": "80"})
    assert "FAIL" in result.stdout and result.stdout.splitlines()[-1] == "0 passed, 1 failed"


def test_verbose_details_every_case(run_cli):
    plain = run_cli("verify", "-k", "pad_")
    verbose = run_cli("verify", "-k", "pad_", "-v")
    assert "attributes: mode=wrap pads=[1,2,0,1]" not in plain.stdout
    assert "attributes: mode=wrap pads=[1,2,0,1]" in verbose.stdout
    assert verbose.stdout.count("(rtol=") >= 5
    assert verbose.stdout.splitlines()[-1] == plain.stdout.splitlines()[-1]


def test_one_case_side_by_side(run_cli):
    result = run_cli("verify", "-k", "pad_doc_reflect", env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = result.stdout
    assert "command: padconv pad '[[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]]' --pads 0 2 0 0" in text
    assert "input 0: float32[3, 2]" in text
    heading = [line for line in text.splitlines() if "expected float32[3, 4]" in line]
    assert heading and "actual float32[3, 4]" in heading[0]
    assert "|actual - expected|" in heading[0]
    assert text.splitlines()[-1] == "1 passed, 0 failed"


def test_side_by_side_shows_where_a_failure_differs(failing_dir):
    from padconv_cli.verification.onnx_suite import cases_from_user_dir

    (case,) = cases_from_user_dir(str(failing_dir))
    result = run_case(case)
    lines = side_by_side(case, result, 80)
    assert all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    assert "|actual - expected|" in text
    difference_rows = text.split("|actual - expected|")[1]
    assert re.search(r"\[\[\[\[1\.(000)?\s+0\.", difference_rows)  # the changed element
    assert abs(float(result.comparison.max_abs) - 1.0) < 1e-6


def test_side_by_side_stacks_when_too_wide():
    case = _case("test_cc_conv_with_strides_padding")
    lines = side_by_side(case, run_case(case), 60)
    assert all(len(line) <= 60 for line in lines)
    titles = [line.strip() for line in lines if line.strip().startswith(("expected", "actual"))]
    assert titles == ["expected float32[1, 1, 4, 3]", "actual float32[1, 1, 4, 3]"]


def test_difference_is_nan_and_inf_aware():
    from padconv_cli.verification.report import difference

    expected = np.array([np.nan, np.inf, 1.0, 2.0], np.float32)
    actual = np.array([np.nan, np.inf, 1.5, np.nan], np.float32)
    diff = difference(expected, actual)
    assert diff[:3].tolist() == [0.0, 0.0, 0.5]
    assert np.isnan(diff[3])
    assert difference(np.array(["a", "b"], object), np.array(["a", "c"], object)).tolist() == [
        False, True
    ]
