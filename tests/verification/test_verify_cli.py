"""``padconv verify`` on the command line: in-process through padconv's error mapping, one line
per case fitted to the width and quiet by default, details on failure or -v, every case name
whole at 80 columns, and exit 1 when nothing was verified."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from pty_terminal import run_in_terminal

from padconv_cli.cli.sample_commands import cli_arguments
from padconv_cli.kernels.conv import conv
from padconv_cli.tensor_sources import read_tensor
from padconv_cli.verification.cases import Case, builtin_cases
from padconv_cli.verification.onnx_suite import onnx_data_root, shipped_cases, write_case_folder
from padconv_cli.verification.report import case_table, side_by_side
from padconv_cli.verification.runner import run_case
from padconv_cli.verification.samples import has_command, sample_arrays

# ``padconv verify`` on the command line (in-process, through padconv's error mapping).


REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
BUILTIN = builtin_cases() + shipped_cases()
SAMPLE_CASES = [case for case in BUILTIN if has_command(case)]
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) unsupported)?$", re.MULTILINE)
SUITE_FLOOR = 40


def summary_of(text: str) -> tuple[int, int, int]:
    (match,) = SUMMARY.finditer(text)
    passed, failed, unsupported = match.groups()
    return int(passed), int(failed), int(unsupported or 0)


def json_records(text: str) -> tuple[list[dict], dict]:
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert records[-1]["type"] == "summary"
    return records[:-1], records[-1]


@pytest.fixture
def corrupted_dir(tmp_path) -> Path:
    """A copy of the ReflectionPad2d conformance case with one output element changed."""
    source = onnx_data_root() / "pytorch-converted" / "test_ReflectionPad2d"
    folder = shutil.copytree(source, tmp_path / "test_ReflectionPad2d_corrupted")
    output = folder / "test_data_set_0" / "output_0.pb"
    tensor = onnx.load_tensor(str(output))
    array = numpy_helper.to_array(tensor).copy()
    array[1, 2, 3, 4] += 1.0
    output.write_bytes(numpy_helper.from_array(array, tensor.name).SerializeToString())
    return folder


# --- built-in cases ----------------------------------------------------------------------------


def test_builtin_cases_pass(run_cli):
    result = run_cli("verify")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert summary_of(result.stdout) == (len(BUILTIN), 0, 0)
    assert result.stdout.rstrip().endswith(f"{len(BUILTIN)} passed, 0 failed")
    picked = run_cli("verify", "-k", "pad_doc_reflect", "-k", "test_cc_conv_with_autopad_same")
    for name in ("pad_doc_reflect", "test_cc_conv_with_autopad_same"):
        assert re.search(rf"^PASS\s+{name}\s+\S+-\d+\s", picked.stdout, re.MULTILINE)


def test_plain_output_has_no_colour_or_box_drawing(run_cli):
    for extra, env in (((), None), (("--no-color",), None), ((), {"NO_COLOR": "1"})):
        result = run_cli("verify", "-k", "edge", *extra, env=env)
        assert result.exit_code == 0
        assert "\x1b[" not in result.stdout
        assert not re.search(r"[\u2500-\u257f]", result.stdout)
        assert "CASE" in result.stdout.splitlines()[0]
        assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_k_selects_by_substring_and_glob(run_cli):
    result = run_cli("verify", "-k", "strides")
    assert summary_of(result.stdout) == (3, 0, 0)
    result = run_cli("verify", "-k", "pad_*", "-k", "test_cc_conv_fp16")
    expected = sum(c.name.startswith("pad_") for c in BUILTIN) + 1
    assert summary_of(result.stdout) == (expected, 0, 0)


def test_k_without_match_is_a_usage_error(run_cli):
    result = run_cli("verify", "-k", "no_such_case")
    assert result.exit_code == 2
    assert result.stderr.startswith("padconv verify: error: no case matches -k 'no_such_case'")
    assert len(result.stderr.strip().splitlines()) == 1


def test_list_names_cases_without_running(run_cli):
    result = run_cli("verify", "--list")
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == f"{len(BUILTIN)} cases"
    assert [line.split()[0] for line in lines[:-1]] == [c.name for c in BUILTIN]
    assert "passed" not in result.stdout
    listed = run_cli("verify", "--list", "--json", "-k", "pad_wrap").stdout
    records, summary = json_records(listed)
    assert [record["name"] for record in records] == ["pad_wrap"]
    assert summary == {"type": "summary", "total": 1}


def test_json_lines(run_cli):
    result = run_cli("verify", "--json")
    assert result.exit_code == 0
    records, summary = json_records(result.stdout)
    assert summary == {
        "type": "summary",
        "passed": len(BUILTIN),
        "failed": 0,
        "unsupported": 0,
        "total": len(BUILTIN),
    }
    by_name = {record["name"]: record for record in records}
    fp16 = by_name["test_cc_conv_fp16"]
    assert fp16["status"] == "passed" and fp16["operator"] == "Conv-22"
    assert fp16["output_shape"] == [1, 1, 4, 4] and fp16["output_dtype"] == "float16"
    assert fp16["rtol"] == 1e-3 and fp16["max_abs"] == 0.0


def test_help_states_the_rule_and_examples(run_cli):
    result = run_cli("verify", "-h")
    assert result.exit_code == 0
    assert "|actual - expected| <= atol + rtol * |expected|" in result.stdout
    assert "NaN equals NaN only where both have NaN" in result.stdout
    assert result.stdout.count("  padconv verify") >= 3


@pytest.mark.parametrize("value", ["-1", "nan", "abc"])
def test_bad_tolerance_is_a_usage_error(run_cli, value):
    result = run_cli("verify", "--atol", value)
    assert result.exit_code == 2
    assert "--atol" in result.stderr


# --- the onnx suite ----------------------------------------------------------------------------


def test_onnx_suite_passes_with_json_and_junit(run_cli, tmp_path):
    report = tmp_path / "report.xml"
    result = run_cli("verify", "--onnx-suite", "--json", "--junit-xml", str(report))
    assert result.exit_code == 0, result.stdout[-2000:]
    records, summary = json_records(result.stdout)
    suite = [r for r in records if r["source"] != "builtin"]
    assert len(suite) >= SUITE_FLOOR
    assert summary["failed"] == 0 and summary["passed"] == len(records)
    assert {r["status"] for r in records} == {"passed"}
    root = ET.parse(report).getroot()
    (testsuite,) = root.iter("testsuite")
    assert int(testsuite.get("tests")) == len(records)
    assert testsuite.get("failures") == "0"
    names = {case.get("name") for case in testsuite.iter("testcase")}
    assert {"test_operator_pad", "test_wrap_pad", "test_Conv3d_groups"} <= names


# --- case folders ------------------------------------------------------------------------------


def test_corrupted_case_exits_1_and_shows_the_mismatch(run_cli, corrupted_dir):
    result = run_cli("verify", str(corrupted_dir))
    assert result.exit_code == 1
    assert summary_of(result.stdout) == (0, 1, 0)
    assert "FAIL test_ReflectionPad2d_corrupted" in result.stdout
    assert "1 of 990 elements differ" in result.stdout
    assert re.search(r"at \[1, 2, 3, 4\]: expected \S+, actual \S+", result.stdout)
    hint = r"would pass with --atol 1 \(with rtol=1e-05\) or --rtol [\d.]+ \(with atol=1e-06\)"
    assert re.search(hint, result.stdout)


def test_corrupted_case_in_json_and_junit(run_cli, corrupted_dir, unsupported_dir, tmp_path):
    report = tmp_path / "out" / "report.xml"
    report.parent.mkdir()
    args = ("verify", str(corrupted_dir), str(unsupported_dir), "--json")
    result = run_cli(*args, "--junit-xml", str(report))
    assert result.exit_code == 1
    records, summary = json_records(result.stdout)
    assert (summary["passed"], summary["failed"], summary["unsupported"]) == (0, 1, 1)
    failed, unsupported = records
    assert failed["status"] == "failed" and failed["mismatch_count"] == 1
    assert failed["mismatches"][0]["index"] == [1, 2, 3, 4]
    assert failed["min_atol"] == pytest.approx(1.0, abs=1e-3)
    assert unsupported["status"] == "unsupported" and "Relu" in unsupported["reason"]
    testsuite = ET.parse(report).getroot().find("testsuite")
    assert (testsuite.get("failures"), testsuite.get("skipped")) == ("1", "1")
    cases = {case.get("name"): case for case in testsuite.iter("testcase")}
    failure = cases["test_ReflectionPad2d_corrupted"].find("failure")
    assert "1 of 990 elements differ" in failure.get("message")
    assert "[1, 2, 3, 4]" in failure.text
    assert cases["test_pad_then_relu"].find("skipped") is not None
    assert [p.name for p in report.parent.iterdir()] == ["report.xml"]  # no temporary left


def test_tolerance_flags_can_make_a_mismatch_pass(run_cli, corrupted_dir):
    assert run_cli("verify", str(corrupted_dir), "--atol", "1").exit_code == 0  # as hinted
    assert run_cli("verify", str(corrupted_dir), "--atol", "0.9").exit_code == 1


def test_unsupported_only_exits_1_and_is_counted(run_cli, unsupported_dir):
    result = run_cli("verify", str(unsupported_dir))
    assert result.exit_code == 1
    assert "nothing was verified" in result.stderr
    assert result.stdout.rstrip().endswith("0 passed, 0 failed, 1 unsupported")
    assert re.search(r"^UNSUPPORTED\s+test_pad_then_relu\s", result.stdout, re.MULTILINE)


@pytest.mark.parametrize("make", ["missing", "not_a_case"])
def test_dir_that_is_not_a_case_dir_is_a_usage_error(run_cli, tmp_path, make):
    path = tmp_path / "nothing"
    if make == "not_a_case":
        path.mkdir()
        (path / "readme.txt").write_text("hi")
    result = run_cli("verify", str(path))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"padconv verify: error: DIR {path}")


def test_junit_xml_into_a_missing_folder_is_an_error(run_cli, tmp_path):
    result = run_cli("verify", "-k", "wrap", "--junit-xml", str(tmp_path / "no" / "r.xml"))
    assert result.exit_code == 2
    assert "r.xml" in result.stderr


# --- samples -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", SAMPLE_CASES, ids=[c.name for c in SAMPLE_CASES])
def test_sample_files_match_the_case_data(case):
    for name, array in sample_arrays(case).items():
        stored = read_tensor(str(SAMPLES / name))
        assert stored.dtype == array.dtype and stored.shape == array.shape
        np.testing.assert_array_equal(stored, array)


@pytest.mark.parametrize("case", SAMPLE_CASES, ids=[c.name for c in SAMPLE_CASES])
def test_sample_command_reproduces_the_documented_output(run_cli, case, tmp_path):
    out = tmp_path / "out.npy"
    result = run_cli(*cli_arguments(case, folder=str(SAMPLES)), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    actual = np.load(out, allow_pickle=False)
    expected = case.expected[0]
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


# ``padconv verify`` output: one line per case fitted to the width, details on failure or -v,
# -q for failures only, the summary last, and ``-k NAME`` showing one case side by side.


BUILTIN_EXAMPLES = builtin_cases()


def _case(name: str) -> Case:
    (case,) = [c for c in BUILTIN_EXAMPLES if c.name == name]
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
    results = [run_case(case) for case in BUILTIN_EXAMPLES]
    lines = case_table(results, width)
    assert len(lines) == len(results) + 1
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    assert lines[0].split()[:2] == ["RESULT", "CASE"]
    assert all(line.startswith("PASS ") for line in lines[1:])


def test_wider_terminals_get_more_columns():
    results = [run_case(case) for case in BUILTIN_EXAMPLES]
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
    total = len(BUILTIN_EXAMPLES) + len(shipped_cases())
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


# ``padconv verify DIR`` is quiet by default: one line per passing case (the side-by-side
# view of a single case is for -k or -v), and every case name, which ``verify -k`` takes back,
# is shown whole at 80 columns, never cut.


PLAIN = {"columns": 80, "env": {"NO_COLOR": "1"}}
LONG_NAME = "test_conv_with_strides_and_asymmetric_padding_exported_twice"


def conv_case(parent, name, *, wrong=False, size=12):
    x = np.random.RandomState(1).randn(1, 3, size, size).astype(np.float32)
    w = np.random.RandomState(2).randn(4, 3, 3, 3).astype(np.float32)
    y = conv(x, w, pads=[1, 0, 1, 0], strides=[2, 2])
    if wrong:
        y[0, 0, 0, 0] += 1
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 0, 1, 0], strides=[2, 2])
    return write_case_folder(parent, name, node, [x, w], y, opset=22)


@pytest.fixture
def cases(tmp_path):
    conv_case(tmp_path, LONG_NAME)
    conv_case(tmp_path, "test_short")
    return tmp_path


def test_one_passing_case_is_one_line(tmp_path):
    folder = conv_case(tmp_path, "test_one_conv")
    run = run_in_terminal("verify", str(folder), **PLAIN)
    assert run.exit_code == 0, run.text
    lines = [line for line in run.lines if line.strip()]
    assert len(lines) == 3, run.text  # the header, the case, the summary
    assert lines[1].split()[:2] == ["PASS", "test_one_conv"]


def test_a_case_picked_by_name_is_shown_side_by_side(tmp_path):
    folder = conv_case(tmp_path, "test_one_conv", size=5)
    run = run_in_terminal("verify", str(folder), "-k", "test_one_conv", **PLAIN)
    assert run.exit_code == 0
    assert "|actual - expected|" in run.text


def test_long_names_are_whole_at_80_columns(cases):
    run = run_in_terminal("verify", str(cases), **PLAIN)
    assert run.exit_code == 0, run.text
    assert any(LONG_NAME in line for line in run.lines), run.text
    assert all(len(line) <= 80 for line in run.lines), run.text
    again = run_in_terminal("verify", str(cases), "-k", LONG_NAME, **PLAIN)
    assert again.exit_code == 0 and "1 passed, 0 failed" in again.text


def test_a_failing_long_name_is_whole_in_its_details(tmp_path):
    conv_case(tmp_path, LONG_NAME, wrong=True)
    run = run_in_terminal("verify", str(tmp_path), **PLAIN)
    assert run.exit_code == 1
    details = [line for line in run.lines if line.startswith("FAIL ")]
    assert len(details) == 2 and all(LONG_NAME in line for line in details), run.text


def test_written_case_folder_replaces_an_old_one_whole(tmp_path):
    conv_case(tmp_path, "test_again", wrong=True)
    conv_case(tmp_path, "test_again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_again"]
    run = run_in_terminal("verify", str(tmp_path / "test_again"), **PLAIN)
    assert run.exit_code == 0


def test_a_name_longer_than_the_line_is_still_whole(tmp_path):
    name = "test_" + "very_long_" * 9 + "name"
    conv_case(tmp_path, name)
    run = run_in_terminal("verify", str(tmp_path), **PLAIN)
    assert run.exit_code == 0
    assert any(line.split() == ["PASS", name] for line in run.lines), run.text


# verify exits 1 when nothing was verified, and its help says so.


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_verify_with_nothing_verified_exits_1(run_cli, unsupported_dir, extra):
    result = run_cli("verify", str(unsupported_dir), *extra)
    assert result.exit_code == 1
    assert "nothing was verified" in result.stderr


def test_verify_help_states_the_exit_rule(run_cli):
    text = " ".join(run_cli("verify", "--help").stdout.split())
    assert "nothing was verified" in text and "Exit status" in text
