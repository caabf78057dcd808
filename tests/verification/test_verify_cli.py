"""``padconv verify`` on the command line (in-process, through padconv's error mapping)."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from padconv_cli.cli.sample_commands import cli_arguments
from padconv_cli.tensor_sources import read_tensor
from padconv_cli.verification.cases import builtin_cases
from padconv_cli.verification.onnx_suite import onnx_data_root, shipped_cases
from padconv_cli.verification.samples import has_command, sample_arrays

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
