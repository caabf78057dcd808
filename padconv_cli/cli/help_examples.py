"""Examples first in ``--help``: a command's examples right after its one-line summary, and
read back from the rendered help."""

from __future__ import annotations

from padconv_cli.cli.options import examples_first, with_examples_first

__all__ = ["example_commands", "examples_first", "with_examples_first"]


def example_commands(help_output: str) -> list[str]:
    """The commands of the ``Examples:`` section of a rendered ``--help``: one string per
    example, continuation lines (ending in a backslash) joined, trailing comments kept."""
    lines = help_output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "Examples:")
    commands: list[str] = []
    pending = ""
    for line in lines[start + 1:]:
        text = line.strip()
        if not text:
            break
        pending = f"{pending} {text}".strip()
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        commands.append(pending)
        pending = ""
    return commands
