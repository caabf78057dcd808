"""Lists inside one-line error messages, cut to a readable length.

A message may quote names taken from the input (archive members, node labels, dimensions).  An
input can hold a hundred thousand of them; the message must stay one short line.  Rule: at most
:data:`LISTED_ITEMS` entries are shown, followed by ``... and N more``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

LISTED_ITEMS = 12


def bounded_list(items: Iterable[object], limit: int = LISTED_ITEMS, *,
                 empty: str = "(none)") -> str:
    """``a, b, c ... and N more``: the first ``limit`` items joined by ``", "``.

    Rule: shown = items[:limit]; when len(items) > limit the text ends with
    ``" ... and {len(items) - limit} more"``; no items gives ``empty``.  Each item is shown
    with the characters ``str.isprintable`` rejects escaped (``\\n``, ``\\x01``): names from
    the input may hold them, and the message stays one line.
    """
    rest = iter(items)
    shown = [escaped(str(item)) for item in itertools.islice(rest, limit)]
    hidden = sum(1 for _ in rest)
    if not shown:
        return empty
    text = ", ".join(shown)
    return f"{text} ... and {hidden} more" if hidden else text


def bounded_sequence(values: Iterable[object], limit: int = LISTED_ITEMS) -> str:
    """``[2, 3, 4]`` or ``[1, 1, 1 ... and 99997 more]``: a shape or dims list for a message."""
    return "[" + bounded_list(values, limit, empty="") + "]"


def escaped(text: str) -> str:
    """``text`` with each character ``str.isprintable`` rejects written as its escape
    (``\\x1b``, ``\\n``, ``\\u2028``): one line, no terminal control."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
