"""One error style for every command: ``padconv CMD: error: MESSAGE``, whether click or padconv
found the problem, with the library's parameter names rendered as the flags and arguments the
user typed, the file named, and the fix where it is clear."""

from __future__ import annotations

import re
from typing import Any

import click

# what each required argument takes, by the name the help shows
ARGUMENT_KINDS = {
    "MODEL.onnx": "an ONNX model file",
    "FILE": "a tensor file or an ONNX model",
}
TENSOR_ARGUMENT = "a tensor file, '-' for stdin, or a literal"

# (command, parameter, pattern in the message) -> what to do
HINTS: tuple[tuple[str, str, str, str], ...] = (
    ("pad", "pads", r"2 \* rank", "give --axes to pad fewer axes"),
    ("conv", "kernel_shape", r"W\.shape", "drop --kernel-shape: it comes from W"),
    ("conv", "", r"share one dtype", "convert the inputs to one dtype"),
)


def _label(param: click.Parameter) -> str:
    """How the user names a parameter: the long flag of an option, the metavar of an argument."""
    if isinstance(param, click.Option):
        longs = [opt for opt in param.opts if opt.startswith("--")]
        return (longs or param.opts)[0]
    metavar = param.metavar or (param.name or "").upper()
    return metavar.strip("[].")


def find_parameter(ctx: click.Context | None, name: str | None) -> click.Parameter | None:
    """The command parameter a library parameter name (``pads``, ``X``) refers to."""
    if ctx is None or not name:
        return None
    wanted = name.lower().replace("-", "_")
    for param in ctx.command.params:
        if (param.name or "").lower() == wanted:
            return param
    for param in ctx.command.params:  # a parameter stored under another name (fmt: --format)
        longs = [opt[2:].replace("-", "_") for opt in param.opts if opt.startswith("--")]
        if isinstance(param, click.Option) and wanted in longs:
            return param
    return None


def _leading_parameter(ctx: click.Context | None, message: str) -> str | None:
    """A parameter named by the message's first word, or by ``attribute NAME`` (older
    library messages carry no ``param``)."""
    match = re.match(r"(?:\w+ attribute )?([a-z_]+)\b", message)
    if match and find_parameter(ctx, match.group(1)) is not None:
        return match.group(1)
    return None


def _typed_value(ctx: click.Context | None, param: click.Parameter) -> str | None:
    """What the user gave for an argument (its file name), when it was given."""
    if ctx is None or not isinstance(param, click.Argument):
        return None
    value = ctx.params.get(param.name or "")
    if not isinstance(value, str) or _looks_literal(value):
        return None
    return value


def _looks_literal(value: str) -> bool:
    """An inline tensor literal (``[1, 2]``, ``3.5``, ``'a'``) rather than a file name."""
    text = value.strip()
    return not text or text[0] in "[('\"-+.0123456789" and not text.endswith(
        (".npy", ".npz", ".pb", ".onnx")
    )


def _argument_files(ctx: click.Context | None, message: str) -> str:
    """`` (X is x.npy, W is w.npy)`` for the arguments a message names without their file."""
    if ctx is None:
        return ""
    named = []
    for param in ctx.command.params:
        if not isinstance(param, click.Argument):
            continue
        label, value = _label(param), _typed_value(ctx, param)
        if value and value not in message and re.search(rf"\b{re.escape(label)}\b", message):
            named.append(f"{label} is {value}")
    return f" ({', '.join(named)})" if named else ""


def _with_label(message: str, name: str, label: str) -> str:
    """``pads has 2 values`` (or ``Conv attribute pads ...``) -> ``--pads has 2 values``; a
    distinctive name (``max_input_bytes``) is replaced wherever it stands, any name in the
    remedy after the first ``; `` (``...; give pads``); else the message is prefixed with
    ``--pads: ``."""
    leading = rf"^((?:\w+ attribute )?){re.escape(name)}\b"
    anywhere = rf"(?<![\w-]){re.escape(name)}\b"
    in_remedy = rf"(?<![\w'.-]){re.escape(name)}\b(?!['.])"  # not a quoted input name
    head, separator, remedy = message.partition("; ")
    if separator and re.search(in_remedy, remedy):
        message = head + separator + re.sub(in_remedy, lambda m: label, remedy)
    if re.match(leading, message):
        message = re.sub(leading, lambda m: label, message, count=1)
    elif not ("_" in name and re.search(anywhere, message)):
        if re.search(rf"(?<![\w-]){re.escape(label)}\b", message):
            return message
        return f"{label}: {message}"
    return re.sub(anywhere, lambda m: label, message) if "_" in name else message


def hint_for(command: str, name: str | None, message: str) -> str | None:
    """The fix for a known problem of ``command``, or None."""
    for hint_command, hint_param, pattern, hint in HINTS:
        if hint_command != command or (hint_param and hint_param != name):
            continue
        if re.search(pattern, message) and hint not in message:
            return hint
    return None


def render_library_error(error: Exception, ctx: click.Context | None) -> str:
    """The one-line message of a library error for the CLI.

    Rule: ``param`` becomes the flag (``pads`` -> ``--pads``) or argument the user typed
    (``X`` -> its file, as a ``FILE: `` prefix); ``source`` is added as a prefix when the
    message does not name it; a known fix is appended after ``;``.
    """
    first, *_ = str(error).strip().splitlines() or [""]
    message = first
    name = getattr(error, "param", None) or _leading_parameter(ctx, message)
    source = getattr(error, "source", None)
    if isinstance(name, tuple):  # a message naming several parameters: all but the first here
        for other in name[1:]:
            option = find_parameter(ctx, other)
            if isinstance(option, click.Option):
                message = _with_label(message, other, _label(option))
        name = name[0]
    param = find_parameter(ctx, name)
    if param is not None and isinstance(param, click.Option):
        message = _with_label(message, name, _label(param))
    elif param is not None and source is None:
        source = _typed_value(ctx, param)
    if source and str(source) not in message:
        message = f"{source}: {message}"
    elif not source:
        message += _argument_files(ctx, message)
    command = ctx.command.name if ctx is not None else ""
    hint = hint_for(command or "", name, message)
    message = f"{message}; {hint}" if hint else message
    flag = {"max_input_bytes": "--max-input-bytes", "allow_hardlinks": "--allow-hardlinks"}.get(
        name or "")
    return f"{message} (see {flag})" if flag and flag not in message else message


def render_usage_error(error: click.ClickException) -> str:
    """click's message in padconv's words, the same for every click version:
    ``--pads: 'x' is not an integer``, ``No such option '--bogus'``."""
    if isinstance(error, click.NoSuchOption):
        close = ", ".join(error.possibilities or [])
        hint = f"; did you mean {close}?" if close else ""
        return f"No such option {error.option_name!r}{hint}"
    if isinstance(error, click.MissingParameter) and isinstance(error.param, click.Argument):
        label = _label(error.param)
        return f"missing argument {label}: {ARGUMENT_KINDS.get(label, TENSOR_ARGUMENT)}"
    if isinstance(error, click.BadParameter) and error.param is not None:
        label = error.param_hint or _label(error.param)
        if isinstance(label, (list, tuple)):
            label = label[0]
        label = str(label).strip("'\"")
        return f"{label}: {error.message}"
    return error.format_message()


def suggestion(word: str, choices: Any) -> str | None:
    """The closest choice to a mistyped ``word`` (difflib), or None."""
    import difflib

    lowered = {str(choice).lower(): str(choice) for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None
