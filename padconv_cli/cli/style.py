"""Terminal presentation shared by every command: colour on or off, the width to fit, lines
wrapped at tokens, and tensors pretty-printed (a header line, then the values).

Rule for colour: on only when the stream is a terminal, ``NO_COLOR`` is unset or empty and
``--no-color`` was not given (https://no-color.org). Rule for width: ``COLUMNS`` when it is a
number of at least 40, else the terminal's width on a terminal, else 80 (a CI log).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

DEFAULT_WIDTH = 80
PREVIEW_THRESHOLD = 1000
EDGE_ITEMS = 3


def is_terminal(err: bool = False) -> bool:
    """True when stdout (or stderr) is an interactive terminal."""
    try:
        return (sys.stderr if err else sys.stdout).isatty()
    except (AttributeError, ValueError):
        return False


def color_enabled(err: bool = False) -> bool:
    """Colour and bold on this stream? Only on a terminal, without NO_COLOR or --no-color."""
    ctx = click.get_current_context(silent=True)
    if (ctx is not None and ctx.meta.get("padconv.no_color")) or os.environ.get("NO_COLOR"):
        return False
    return is_terminal(err)


def output_width() -> int:
    """Columns of stdout to fit (module docstring: COLUMNS wins, as shutil reads it)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    if is_terminal():
        try:
            return max(os.get_terminal_size(sys.stdout.fileno()).columns, 40)
        except (OSError, ValueError):
            pass
    return DEFAULT_WIDTH


def styled(text: str, **style: Any) -> str:
    """``text`` with click's style (fg=..., bold=...) when colour is on for stdout."""
    return click.style(text, **style) if color_enabled() else text


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


def print_tensor(array: Any) -> None:
    """Show a tensor on the terminal: ``dtype[d0, d1, ...] (size elements)`` in bold (the
    dtype as ONNX spells it), then numpy's text form in lines of the terminal's width, elided
    with ``...`` past PREVIEW_THRESHOLD elements."""
    import numpy as np

    from padconv_cli.dtypes import dtype_name

    shape = ", ".join(str(d) for d in array.shape)
    click.echo(styled(f"{dtype_name(array.dtype)}[{shape}] ({array.size} elements)", bold=True))
    click.echo(np.array2string(array, threshold=PREVIEW_THRESHOLD, edgeitems=EDGE_ITEMS,
                               max_line_width=output_width()))
