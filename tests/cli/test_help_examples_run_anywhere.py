"""Every ``--help`` shows its examples first, and they run as shown after a plain install,
from an empty folder: they use inline literals and files an earlier example of the same help
wrote, nothing from a clone, and they fit 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from padconv_cli.cli.help_examples import example_commands
from padconv_cli.cli.main import COMMANDS

EVERY_HELP = [[], *([name] for name in sorted(COMMANDS))]


def _help(run_cli, command: list[str]) -> str:
    return run_cli(*command, "--help", env={"COLUMNS": "80"}).stdout


@pytest.mark.parametrize("command", EVERY_HELP, ids=lambda c: " ".join(["padconv", *c]))
def test_help_shows_examples_after_the_summary_within_80_columns(run_cli, command):
    output = _help(run_cli, command)
    examples = output.index("Examples:")
    assert examples < output.index("Options:")
    usage, summary, after_summary, *_ = output.split("\n\n")
    assert after_summary.strip().startswith("Examples:"), "examples are not after the summary"
    assert "samples/" not in output
    assert len(example_commands(output)) >= 2
    too_wide = [line for line in output.splitlines() if len(line) > 80]
    assert not too_wide, too_wide


@pytest.mark.parametrize("command", EVERY_HELP, ids=lambda c: " ".join(["padconv", *c]))
def test_help_examples_run_from_an_empty_folder(run_cli, tmp_path, command):
    examples = example_commands(_help(run_cli, command))
    installed = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": installed + os.pathsep + os.environ["PATH"]}
    for example in examples:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", example], cwd=tmp_path, env=env,
                              capture_output=True, timeout=300)
        assert done.returncode == 0, f"{example}: {done.stderr.decode(errors='replace')}"
