"""Small things a new user trips on: --constant-value with a mode that does not use it gets a
note; the --dtype help says what an empty literal becomes."""

from __future__ import annotations

import numpy as np


def test_constant_value_with_another_mode_is_noted(run_cli, tmp_path):
    out = tmp_path / "y.npy"
    result = run_cli("pad", "[1, 2]", "--pads", "1", "1", "--mode", "edge",
                     "--constant-value", "3", "-o", str(out))
    assert result.exit_code == 0
    assert result.stderr == (
        "padconv pad: note: --constant-value 3 is ignored: --mode edge fills from the data, "
        "only --mode constant uses it\n"
    )
    assert np.load(out).tolist() == [1, 1, 2, 2]


def test_the_note_is_quiet_with_q_and_absent_in_constant_mode(run_cli, tmp_path):
    out = str(tmp_path / "y.npy")
    args = ("pad", "[1, 2]", "--pads", "1", "1", "--constant-value", "3", "-o", out)
    assert run_cli(*args, "--mode", "edge", "-q").stderr == ""
    assert run_cli("-q", *args, "--mode", "edge").stderr == ""
    assert run_cli(*args).stderr == ""
    assert np.load(out).tolist() == [3, 1, 2, 3]


def test_dtype_help_matches_what_an_empty_literal_becomes(run_cli):
    shown = run_cli("show", "[]").stdout
    assert shown.startswith("[]: float32[0]")
    help_text = " ".join(run_cli("show", "--help").stdout.split())
    assert "float32 for numbers with a point and for []" in help_text
