"""Help: no arguments print it; short helps are whole (examples: see test_help_examples_*)."""

from __future__ import annotations

from pathlib import Path

from padconv_cli.cli.main import ALIASES, COMMANDS

REPO = Path(__file__).resolve().parents[2]


def test_no_arguments_prints_help_and_exits_0(run_cli):
    result = run_cli()
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: padconv")
    assert "Commands:" in result.stdout
    assert result.stderr == ""

def test_group_help_shows_whole_short_helps(run_cli):
    text = run_cli("--help").stdout
    commands = text.split("Commands:")[1].strip().splitlines()
    assert len(commands) == len(COMMANDS) + len(ALIASES)
    for line in commands:
        assert not line.rstrip().endswith("..."), line
