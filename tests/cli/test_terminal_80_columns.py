"""What a user sees in a real terminal (a pty of 80 columns, colour on or NO_COLOR): nothing
wider than the terminal, no escape codes under NO_COLOR or --no-color, colour otherwise."""

from __future__ import annotations

import re

import numpy as np
import pytest
from pty_terminal import ESCAPE, run_in_terminal

from padconv_cli.verification.cases import builtin_cases
from padconv_cli.verification.onnx_suite import shipped_cases

NO_COLOR = {"NO_COLOR": "1"}
STATUS_LINE = re.compile(r"^(?:\x1b\[[\d;]*m)*(PASS|FAIL|UNSUPPORTED)\b")
ESCAPE_CODE = re.compile(r"\x1b\[[\d;?]*[A-Za-z]")


def visible(line: str) -> str:
    return ESCAPE_CODE.sub("", line)


def widest(run) -> int:
    return max(len(visible(line)) for line in run.lines)


@pytest.mark.parametrize("env", [None, NO_COLOR], ids=["colour", "NO_COLOR"])
def test_verify_is_one_line_per_case_within_80_columns(env):
    run = run_in_terminal("verify", env=env)
    assert run.exit_code == 0, run.text
    assert widest(run) <= 80, run.text
    status_lines = [line for line in run.lines if STATUS_LINE.match(line)]
    cases = builtin_cases() + shipped_cases()
    assert len(status_lines) == len(cases)
    for line, case in zip(status_lines, cases, strict=True):
        shown = visible(line).split()[1]
        if shown != case.name:  # too long for 80 columns: cut in the middle
            head, tail = shown.split("...")
            assert case.name.startswith(head) and case.name.endswith(tail)
            assert len(head) >= 10 and len(tail) >= 10
    assert run.lines[-1].endswith(f"{len(cases)} passed, 0 failed") or (
        visible(run.lines[-1]) == f"{len(cases)} passed, 0 failed"
    )
    if env:
        assert ESCAPE not in run.text
    else:
        assert ESCAPE in run.text


def test_verify_on_a_wide_terminal_shows_attributes_and_max_rel():
    narrow = run_in_terminal("verify", env=NO_COLOR)
    wide = run_in_terminal("verify", columns=200, env=NO_COLOR)
    assert "ATTRIBUTES" not in narrow.lines[0]
    assert "ATTRIBUTES" in wide.lines[0] and "MAX REL" in wide.lines[0]
    assert "mode=reflect pads=[0,2,0,0]" in wide.text
    assert widest(wide) <= 200


def test_onnx_suite_fits_80_columns():
    run = run_in_terminal("verify", "--onnx-suite", env=NO_COLOR)
    assert run.exit_code == 0, run.text[-2000:]
    assert widest(run) <= 80


@pytest.mark.parametrize(
    "command",
    [(), ("pad",), ("conv",), ("show",), ("inspect",), ("compare",), ("verify",), ("audit",)],
)
def test_every_help_fits_80_columns(command):
    run = run_in_terminal(*command, "--help", env=NO_COLOR)
    assert run.exit_code == 0
    too_wide = [line for line in run.lines if len(line) > 80]
    assert not too_wide, too_wide
    assert "Examples:" in run.text


@pytest.mark.parametrize("env", [None, NO_COLOR], ids=["colour", "NO_COLOR"])
def test_show_of_a_feature_map_fits_80_columns(tmp_path, env):
    path = tmp_path / "fmap.npy"
    np.save(path, np.arange(3 * 32 * 32, dtype=np.float32).reshape(1, 3, 32, 32))
    run = run_in_terminal("show", path.name, env=env, cwd=tmp_path)
    assert run.exit_code == 0, run.text
    assert widest(run) <= 80
    assert run.lines[-1].rstrip().endswith("]]]]")
    assert ESCAPE not in run.text


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        ((), None, True),
        ((), NO_COLOR, False),
        (("--no-color",), None, False),
        (("-q", "--no-color"), None, False),
    ],
    ids=["colour", "NO_COLOR", "--no-color-after", "global-flags-after"],
)
def test_pretty_printed_result_honours_no_color(args, env, coloured):
    run = run_in_terminal("pad", "[[1, 2, 3], [4, 5, 6]]", "--pads", "0", "1", "0", "1",
                          "--mode", "wrap", *args, env=env)
    assert run.exit_code == 0, run.text
    assert (ESCAPE in run.text) is coloured
    assert "[[3 1 2 3 1]" in visible(run.text)


def test_global_no_color_before_the_command():
    run = run_in_terminal("--no-color", "pad", "[1, 2]", "--pads", "1", "1")
    assert run.exit_code == 0, run.text
    assert ESCAPE not in run.text
    run = run_in_terminal("--no-color", "verify", "-k", "wrap")
    assert ESCAPE not in run.text and "PASS" in run.text


def test_binary_output_to_a_terminal_is_refused_with_a_hint():
    run = run_in_terminal("pad", "[1.0, 2.0]", "--pads", "1", "1", "-o", "-")
    assert run.exit_code == 2
    assert "NUMPY" not in run.text
    (line,) = run.lines
    assert line.startswith("padconv pad: error: refusing to write binary .npy data to a terminal")
    assert "--force-binary" in line
    run = run_in_terminal("pad", "[1.0, 2.0]", "--pads", "1", "1", "--format", "pb")
    assert run.exit_code == 2 and "binary .pb data" in run.text


def test_binary_output_to_a_terminal_when_forced():
    run = run_in_terminal("pad", "[1.0, 2.0]", "--pads", "1", "1", "-o", "-", "--force-binary")
    assert run.exit_code == 0
    assert "NUMPY" in run.text and "'descr'" in run.text
