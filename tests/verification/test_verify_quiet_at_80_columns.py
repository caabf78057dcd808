"""``padconv verify DIR`` is quiet by default: one line per passing case (the side-by-side
view of a single case is for -k or -v), and every case name, which ``verify -k`` takes back,
is shown whole at 80 columns, never cut."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from pty_terminal import run_in_terminal

from padconv_cli.kernels.conv import conv
from padconv_cli.verification.case_folder import write_case_folder

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
