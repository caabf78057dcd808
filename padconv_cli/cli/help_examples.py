"""Examples first in ``--help``: a command's examples right after its one-line summary, before
the longer description and the options, where a reader looking for how to start finds them.

Each command module keeps its ``EXAMPLES`` text (a ``\\b`` paragraph, so click keeps its line
breaks) and decorates the command with :func:`examples_first` instead of passing it as the
epilog, which click prints after every option.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import click


def with_examples_first(help_text: str, examples: str) -> str:
    """``help_text`` (a docstring: its indentation is removed first) with ``examples``
    inserted after its first paragraph (the summary)."""
    summary, _, rest = inspect.cleandoc(help_text).partition("\n\n")
    parts = [summary, examples.strip("\n"), rest.strip()]
    return "\n\n".join(part for part in parts if part) + "\n"


def examples_first(examples: str) -> Callable[[click.Command], click.Command]:
    """Decorator over ``@click.command``: the command's help shows ``examples`` right after
    its first paragraph."""

    def decorate(command: click.Command) -> click.Command:
        command.help = with_examples_first(command.help or "", examples)
        return command

    return decorate


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
        pending = f"{pending} {text}".strip() if pending else text
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        commands.append(pending)
        pending = ""
    return commands
