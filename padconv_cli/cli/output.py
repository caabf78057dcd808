"""Where a result goes: a file (atomically), stdout bytes, or a pretty-print on a terminal."""

from __future__ import annotations

import sys

import numpy as np

from padconv_cli.errors import OutputError


def stdout_is_terminal() -> bool:
    """True when stdout is an interactive terminal (then results are shown, not written)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def emit_result(array: np.ndarray, output: str | None, fmt: str | None) -> None:
    """Send ``array`` to ``output``.

    Rule: ``-o PATH`` writes PATH (format from ``--format``, else the suffix); ``-o -`` writes
    the bytes to stdout; no ``-o`` pretty-prints on a terminal and writes ``.npy`` (or ``fmt``)
    bytes into a pipe, so that padconv commands chain with ``-``.
    """
    from padconv_cli.tensorio import write_tensor

    if output is None and stdout_is_terminal() and fmt is None:
        from padconv_cli.cli.render import print_tensor

        print_tensor(array)
        return
    refuse_binary_to_terminal(output, fmt)
    write_tensor(array, output or "-", fmt=fmt or ("npy" if output in (None, "-") else None))


def refuse_binary_to_terminal(output: str | None, fmt: str | None) -> None:
    """Refuse to write tensor bytes to stdout when it is a terminal (as gzip does), unless
    ``--force-binary`` was given: they would only garble the screen."""
    from padconv_cli.cli.style import SETTINGS

    if output not in (None, "-") or not stdout_is_terminal() or SETTINGS.get("force_binary"):
        return
    raise OutputError(
        f"refusing to write binary .{fmt or 'npy'} data to a terminal: redirect it "
        "(> y.npy), pipe it, give -o FILE, or add --force-binary"
    )
