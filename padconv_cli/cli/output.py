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


def emit_result(array: np.ndarray, output: str | None, fmt: str | None,
                string_dtype: np.dtype | None = None) -> None:
    """Send ``array`` to ``output`` (``string_dtype``: the fixed width a string object array
    is written at, :func:`padconv_cli.tensorio.write_tensor`).

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
    write_tensor(array, output or "-", fmt=fmt or ("npy" if output in (None, "-") else None),
                 string_dtype=string_dtype)


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


def _source_files(source: str) -> list[str]:
    """The existing files a tensor source names: the path itself, or the part before a
    ``:NAME`` suffix (``x.npz:a``, ``m.onnx:W``, ``outputs.json:y``)."""
    import os

    if not source or source == "-":
        return []
    candidates = [source] + [source[:i] for i, ch in enumerate(source) if ch == ":" and i]
    return [path for path in candidates if os.path.isfile(path)]


def same_file(first: str, second: str) -> bool:
    """True when two paths name one file (one real path, or one existing inode)."""
    import os

    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):
        return False


def refuse_output_onto_inputs(flag: str, target: str | None, sources) -> None:
    """Rule: an extra output (``--emit-onnx``, ``--junit-xml``, ``--png``) never names one of
    the run's input files (a tensor, a model, ``FILE.npz`` of ``FILE.npz:NAME``), by any
    spelling or hard link: writing it would destroy that input. A usage error, before anything
    is read or written."""
    import click

    if target is None or target == "-" or not target.strip():
        return
    for source in sources:
        for path in _source_files(source or ""):
            if same_file(path, target):
                from padconv_cli.tensorio.files import printable

                raise click.UsageError(
                    f"{flag} {printable(target)} is also an input ({printable(source)}); "
                    "writing it would destroy that input: give another file"
                )
