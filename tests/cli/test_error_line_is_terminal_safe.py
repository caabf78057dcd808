"""The error line on a terminal: a value from the environment holding an escape sequence is
shown escaped, never sent to the terminal (click strips styles only when stderr is not one)."""

from __future__ import annotations

import numpy as np
from pty_terminal import run_in_terminal


def test_an_escape_sequence_in_an_environment_variable_is_escaped(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3), np.float32))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 1), np.float32))
    run = run_in_terminal("conv", "x.npy", "w.npy", "-o", "y.npy", cwd=tmp_path,
                          env={"PADCONV_NATIVE_ISA": "a\x1b[2jcleared", "NO_COLOR": "1"})
    assert run.exit_code == 2, run.text
    assert "\x1b[2j" not in run.text
    assert "PADCONV_NATIVE_ISA=a\\x1b[2jcleared" in run.text, run.text
    assert len(run.lines) == 1, run.text


def _line_of(tmp_path, *args: str) -> str:
    import subprocess

    from hostile.runner import padconv_command

    result = subprocess.run([*padconv_command(), *args], cwd=tmp_path, capture_output=True,
                            stdin=subprocess.DEVNULL, timeout=60)
    text = result.stderr.decode()
    assert result.returncode == 2, text
    assert len(text.splitlines()) == 1, text[:300]
    return text


def test_a_list_echoed_from_a_huge_argument_is_cut(tmp_path):
    """50,000 strides: the values were all listed (a 340 KB line)."""
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3, 3), np.float32))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 1, 1), np.float32))
    text = _line_of(tmp_path, "conv", "x.npy", "w.npy", "--strides",
                    *map(str, range(1, 50001)), "-o", "y.npy")
    assert "--strides" in text and "and 49988 more" in text and len(text) < 300, text


def test_a_huge_value_echoed_whole_is_cut_in_the_middle(tmp_path):
    """Every error line is at most about 2,000 characters; its start (the flag) and its end
    (the rule) stay."""
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    text = _line_of(tmp_path, "pad", "x.npy", "--pads", "1", "1", "1", "1",
                    "--constant-value", "9" * 50000, "-o", "y.npy")
    assert len(text) < 2100, len(text)
    assert "--constant-value" in text[:100] and "characters cut" in text
    assert text.rstrip().endswith("does not fit float32 [-3.40282e+38, 3.40282e+38]"), text[-200:]
