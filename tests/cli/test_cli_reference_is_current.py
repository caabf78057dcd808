"""docs/cli.md is every command's ``--help`` as it is now: regenerated and compared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_cli_reference_matches_every_commands_help():
    done = subprocess.run([sys.executable, "scripts/make_cli_reference.py", "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + (
        "\nRegenerate it: python scripts/make_cli_reference.py")


def test_cli_reference_has_a_section_per_command():
    from padconv_cli.cli.main import COMMANDS

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"## padconv {name}\n" in text
        assert f"Usage: padconv {name} [OPTIONS]" in text
