"""One error style for every command: ``padconv CMD: error: MESSAGE``, whether click or padconv
found the problem, the library's parameter names rendered as the flags and files the user typed.

Rule for a library error: the one table is the command's own parameters
(``ctx.command.params``: name -> label, the long flag of an option, the metavar of an
argument).  Every name in the error's ``param`` (a name or a tuple, the first the one the
message is about; without ``param``, the message's first word when it names a parameter) is
rendered as its label wherever it stands as a word of the message.  When the message does not
name the first one, the label goes in front (``--memory-limit: ...``; an argument: the file
the user gave for it).  ``source`` goes in front when the message does not name it; without
a source, the files of the arguments the message names are added (``(W is w.npy)``).  No
message text is parsed beyond its words; the line is escaped once, where it is printed.
"""

from __future__ import annotations

import click

# what each required argument takes, by the name the help shows
ARGUMENT_KINDS = {
    "MODEL.onnx": "an ONNX model file",
    "FILE": "a tensor file or an ONNX model",
}
TENSOR_ARGUMENT = "a tensor file, '-' for stdin, or a literal"
# the reading-policy flags: a refusal of theirs points at them where the command lacks them
POLICY_FLAGS = ("max_input_bytes", "allow_hardlinks")
_PUNCTUATION = ",;:)."


def _label(param: click.Parameter) -> str:
    """How the user names a parameter: the long flag of an option, the metavar of an argument."""
    if isinstance(param, click.Option):
        longs = [opt for opt in param.opts if opt.startswith("--")]
        return (longs or param.opts)[0]
    return (param.metavar or (param.name or "").upper()).strip("[].")


def labels(ctx: click.Context | None) -> dict[str, click.Parameter]:
    """The table: each parameter of the command by its name and by its long flags' names
    (``fmt`` and ``format`` both name ``--format``); an argument also by its label, the
    library's name for that input (``W`` names the argument ``w``)."""
    table: dict[str, click.Parameter] = {}
    for param in ctx.command.params if ctx is not None else ():
        for opt in param.opts if isinstance(param, click.Option) else ():
            if opt.startswith("--"):
                table.setdefault(opt[2:].replace("-", "_"), param)
        table.setdefault(param.name or "", param)
        if isinstance(param, click.Argument):
            table.setdefault(_label(param), param)
    return table


def _typed_file(ctx: click.Context | None, param: click.Parameter) -> str | None:
    """The file the user gave for an argument (not an inline literal), when given."""
    value = ctx.params.get(param.name or "") if ctx is not None else None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    literal = text[0] in "[('\"-+.0123456789" and not text.endswith(
        (".npy", ".npz", ".pb", ".onnx"))
    return None if literal else value


def _render_words(message: str, table: dict[str, click.Parameter], names: list[str]) -> str:
    """``message`` with each word that is one of ``names`` (trailing punctuation aside)
    replaced by its label."""
    words = message.split(" ")
    for index, word in enumerate(words):
        core = word.rstrip(_PUNCTUATION)
        if core in names and isinstance(table.get(core), click.Option):
            words[index] = _label(table[core]) + word[len(core):]
    return " ".join(words)


def _argument_files(ctx: click.Context | None, message: str) -> str:
    """`` (X is x.npy, W is w.npy)`` for the arguments the message names by their label (as a
    name of its own: ``W`` in ``W.shape[1]``, not in ``Wx``), without naming the file the user
    gave for them."""
    words = set("".join(c if c.isalnum() or c == "_" else " " for c in message).split())
    named = [f"{_label(param)} is {typed}" for param in (ctx.command.params if ctx else ())
             if isinstance(param, click.Argument) and _label(param) in words
             and (typed := _typed_file(ctx, param)) and typed not in message]
    return f" ({', '.join(named)})" if named else ""


def render_library_error(error: Exception, ctx: click.Context | None) -> str:
    """The one-line message of a library error for the CLI (module docstring)."""
    first, *_ = str(error).strip().splitlines() or [""]
    table = labels(ctx)
    param = getattr(error, "param", None)
    if param is None and first.split(" ")[0] in table:
        param = first.split(" ")[0]
    names = list(param) if isinstance(param, tuple) else [param] if param else []
    source = getattr(error, "source", None)
    message = _render_words(first, table, names)
    main = table.get(names[0]) if names else None
    if isinstance(main, click.Option) and _label(main) not in message:
        message = f"{_label(main)}: {message}"
    elif main is not None and source is None:
        source = _typed_file(ctx, main)
    if source and str(source) not in message:
        message = f"{source}: {message}"
    elif not source:
        message += _argument_files(ctx, message)
    if main is None and names and names[0] in POLICY_FLAGS:
        message += f" (see --{names[0].replace('_', '-')})"
    return message


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
        return f"{str(label).strip(chr(39) + chr(34))}: {error.message}"
    return error.format_message()
