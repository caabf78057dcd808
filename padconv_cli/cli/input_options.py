"""``--max-input-bytes`` and ``--allow-hardlinks``: the read policy of one command run.

Every command that reads tensors takes them (see :class:`padconv_cli.tensorio.files.ReadPolicy`
for the rules).  They are eager, so that they are set before any other option reads a file
(``--pads @-``); they are kept in the run's click context, and the command passes
:func:`padconv_cli.cli.options.read_policy_of` to every reader it calls: nothing outlives the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from padconv_cli.cli.options import READ_POLICY_KEY, SizeType

INPUT_FLAGS = {"max_input_bytes": "--max-input-bytes", "allow_hardlinks": "--allow-hardlinks"}


def _set_policy(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        ctx.meta.setdefault(READ_POLICY_KEY, {})[field] = value

    return callback


def input_options(f: Callable) -> Callable:
    """Add ``--max-input-bytes SIZE`` and ``--allow-hardlinks`` to a command."""
    f = click.option(
        "--allow-hardlinks", is_flag=True, default=False, is_eager=True, expose_value=False,
        callback=_set_policy("allow_hardlinks"),
        help="Read external data from a file that has several hard links (refused by "
        "default: a hard link can lead outside the tensor's folder).",
    )(f)
    f = click.option(
        "--max-input-bytes", type=SizeType(), default=None, metavar="SIZE", is_eager=True,
        expose_value=False, callback=_set_policy("max_input_bytes"),
        help="Refuse an input (file, stdin, external data, model) that would bring more than "
        "this into memory (e.g. 512M, 8G). Default: half of the memory available.",
    )(f)
    return f


def flag_hint(error: Exception, line: str) -> str:
    """``line`` plus ``(see --max-input-bytes)`` when the error is about one of these options
    and the line does not name the flag yet."""
    flag = INPUT_FLAGS.get(getattr(error, "param", None) or "")
    if flag is None or flag in line:
        return line
    return f"{line} (see {flag})"
