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
