"""Terminal presentation shared by every command: colour on or off, the width to fit, and the
global flags (``--no-color``, ``-q``, ``-v``) that may be given before or after the command.

Rule for colour: on only when the stream is a terminal, ``NO_COLOR`` is unset or empty and
``--no-color`` was not given (https://no-color.org). Rule for width: the terminal's width when
the stream is a terminal, else ``COLUMNS`` when it is a number, else 80 (a CI log).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

import click

DEFAULT_WIDTH = 80
SETTINGS: dict[str, Any] = {
    "no_color": False, "quiet": False, "verbose": 0, "context": None, "force_binary": False,
}


def reset_settings() -> None:
    """Forget the global flags of an earlier run (one process may run several commands)."""
    SETTINGS.update(no_color=False, quiet=False, verbose=0, context=None, force_binary=False)


def _stream(err: bool) -> TextIO:
    return sys.stderr if err else sys.stdout


def is_terminal(err: bool = False) -> bool:
    """True when stdout (or stderr) is an interactive terminal."""
    try:
        return _stream(err).isatty()
    except (AttributeError, ValueError):
        return False


def color_enabled(err: bool = False) -> bool:
    """Colour and bold on this stream? Only on a terminal, without NO_COLOR or --no-color."""
    if SETTINGS["no_color"] or os.environ.get("NO_COLOR"):
        return False
    return is_terminal(err)


def output_width(err: bool = False) -> int:
    """Columns to fit: COLUMNS when set (as shutil reads it: the user's word wins), else the
    terminal's width on a terminal, else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    if is_terminal(err):
        try:
            return max(os.get_terminal_size(_stream(err).fileno()).columns, 40)
        except (OSError, ValueError):
            pass
    return DEFAULT_WIDTH


def styled(text: str, err: bool = False, **style: Any) -> str:
    """``text`` with click's style (fg=..., bold=...) when colour is on for that stream."""
    return click.style(text, **style) if color_enabled(err) else text


def rich_console(err: bool = False) -> Any:
    """A rich Console for stdout (or stderr) that writes no style at all when colour is off
    (rich alone keeps bold under NO_COLOR)."""
    from rich.console import Console

    if color_enabled(err):
        return Console(stderr=err, highlight=False)
    return Console(stderr=err, highlight=False, color_system=None, no_color=True)


def _set_flag(name: str) -> Any:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        SETTINGS["context"] = ctx  # the innermost command seen: errors name its flags
        if value:
            SETTINGS[name] = value if name == "verbose" else True
        return value

    return callback


GLOBAL_FLAGS = {
    "no_color": (("--no-color",), "Plain text: no colour or bold (also when NO_COLOR is set)."),
    "verbose": (("-v", "--verbose"), "More detail (verify: every case's details)."),
}


def global_options() -> list[click.Option]:
    """Fresh ``--no-color`` and ``-v`` options, accepted by the group and every command."""
    options = [
        click.Option(["--no-color", "global_no_color"], is_flag=True, expose_value=False,
                     is_eager=True, callback=_set_flag("no_color"),
                     help=GLOBAL_FLAGS["no_color"][1]),
        click.Option(["-v", "--verbose", "global_verbose"], count=True, expose_value=False,
                     is_eager=True, callback=_set_flag("verbose"),
                     help=GLOBAL_FLAGS["verbose"][1]),
    ]
    return options


def quiet_option() -> click.Option:
    """A fresh ``-q/--quiet`` option for commands that do not have one of their own."""
    return click.Option(["-q", "--quiet", "global_quiet"], is_flag=True, expose_value=False,
                        is_eager=True, callback=_set_flag("quiet"),
                        help="Print less: no progress bar, no notes (verify: failures only).")


def add_global_options(command: click.Command) -> click.Command:
    """Give ``command`` the global flags it does not declare itself (once)."""
    if getattr(command, "_padconv_globals", False):
        return command
    taken = {opt for param in command.params for opt in getattr(param, "opts", [])}
    for option in [*global_options(), quiet_option()]:
        if not taken.intersection(option.opts):
            command.params.append(option)
    command._padconv_globals = True  # type: ignore[attr-defined]
    return command


# A line may break after a space, after "=", after "+" (not the exponent sign of 1e+05) and
# after "," (not a digit group such as 1,000): never inside a number or a name.
_BREAK_AFTER = r"(?<= )|(?<==)|(?<=,)(?!\d)|(?<=\+)(?<![0-9.][eE]\+)"
HANGING_INDENT = 4


def wrap_at_tokens(text: str, width: int) -> str:
    """``text`` with each line longer than ``width`` broken at token boundaries (after a space,
    ``=``, ``+`` or ``,``), continuation lines indented by the line's own indent plus
    ``HANGING_INDENT``; a single token longer than a line stays whole on a line of its own.
    Lines that fit are unchanged."""
    return "\n".join(
        wrapped for line in text.split("\n") for wrapped in _wrap_line(line, width)
    )


def _wrap_line(line: str, width: int) -> list[str]:
    import re

    if len(line) <= width:
        return [line]
    own_indent = len(line) - len(line.lstrip(" "))
    indent = " " * (own_indent + HANGING_INDENT)
    pieces = [piece for piece in re.split(_BREAK_AFTER, line[own_indent:]) if piece]
    lines: list[str] = []
    current = line[:own_indent]
    for piece in pieces:
        if len(current + piece.rstrip(" ")) > width and current.strip():
            lines.append(current.rstrip(" "))
            current = indent + piece.lstrip(" ")
        else:
            current += piece
    return [*lines, current.rstrip(" ")]
