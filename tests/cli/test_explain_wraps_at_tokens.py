"""``--explain`` on a terminal narrower than its lines wraps them at token boundaries with a
hanging indent, never inside a number or a name; piped and with --json it is unchanged."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from pty_terminal import run_in_terminal

from padconv_cli.cli.style import wrap_at_tokens

QLINEAR = ["qlinear-conv", "x.npy", "s.npy", "z.npy", "x.npy", "s.npy", "z.npy", "s.npy",
           "z.npy", "--pads", "1", "1", "1", "1", "--explain"]
CONV_INTEGER = ["conv-integer", "[[[[1, 2, 3]]]]", "[[[[1, -1]]]]", "--dtype", "int8",
                "--explain"]
TOKEN = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|[A-Za-z_]\w*")


@pytest.fixture
def quantized_files(tmp_path):
    np.save(tmp_path / "x.npy", np.array([[[[1, 2], [3, 4]]]], dtype=np.uint8))
    np.save(tmp_path / "s.npy", np.array(0.5, dtype=np.float32))
    np.save(tmp_path / "z.npy", np.array(0, dtype=np.uint8))
    return tmp_path


def _piped(args: list[str], cwd) -> str:
    done = subprocess.run([sys.executable, "-m", "padconv_cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("args", [QLINEAR, CONV_INTEGER], ids=["qlinear-conv", "conv-integer"])
def test_explain_fits_80_columns_and_keeps_every_token_whole(quantized_files, args):
    unwrapped = _piped(args, quantized_files)
    assert max(len(line) for line in unwrapped.splitlines()) > 80  # piped: lines unchanged
    shown = run_in_terminal(*args, columns=80, cwd=quantized_files)
    assert shown.exit_code == 0, shown.text
    assert all(len(line) <= 80 for line in shown.lines), shown.lines
    assert "".join(shown.text.split()) == "".join(unwrapped.split())
    assert Counter(TOKEN.findall(shown.text)) == Counter(TOKEN.findall(unwrapped))


def test_explain_json_on_a_terminal_is_not_wrapped(quantized_files):
    shown = run_in_terminal(*QLINEAR, "--json", columns=80, cwd=quantized_files)
    assert shown.exit_code == 0, shown.text
    assert json.loads(shown.text) == json.loads(_piped([*QLINEAR, "--json"], quantized_files))


def test_continuation_lines_hang_under_their_line():
    text = "  ruling r: y = saturate(round(acc * x_scale) + y_zero_point), rounded once"
    assert wrap_at_tokens(text, 40).splitlines() == [
        "  ruling r: y = saturate(round(acc *",
        "      x_scale) + y_zero_point), rounded",
        "      once",
    ]


def test_no_break_inside_an_exponent_or_a_digit_group():
    text = "v=" + "+".join(["1e+05"] * 6) + ",1,000"
    for width in range(6, len(text)):
        pieces = "".join(wrap_at_tokens(text, width).split())
        assert pieces == text
        lines = [line.strip() for line in wrap_at_tokens(text, width).splitlines()]
        assert not any(line.startswith(("05", "000")) for line in lines), lines


def test_lines_that_fit_are_unchanged():
    text = "a = b + c\n  d, e"
    assert wrap_at_tokens(text, 80) == text
