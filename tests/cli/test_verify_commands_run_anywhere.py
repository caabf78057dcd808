"""``padconv verify -k NAME`` prints a command that reproduces a built-in case after a plain
install, from any folder: the inputs as inline literals (no ``samples/`` of a clone), laid out
within 80 columns as lines a shell takes back whole."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from padconv_cli.verification.cases import builtin_cases
from padconv_cli.verification.samples import has_command

CASES = [case for case in builtin_cases() if case.samples and has_command(case)]


def _printed_command(run_cli, name: str) -> list[str]:
    text = run_cli("verify", "-k", name, env={"COLUMNS": "80"}).stdout
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  command: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("  operator: "))
    return lines[start:end]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_printed_command_reproduces_the_case_from_an_empty_folder(run_cli, tmp_path, case):
    lines = _printed_command(run_cli, f"[{case.name[0]}]{case.name[1:]}")  # this name only
    assert all(len(line) <= 80 for line in lines), lines
    assert "samples/" not in "\n".join(lines)
    script = "\n".join(lines)[len("  command: "):]
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    done = subprocess.run(["bash", "-eu", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    actual = np.load(io.BytesIO(done.stdout), allow_pickle=False)
    expected = case.expected[0]
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)
