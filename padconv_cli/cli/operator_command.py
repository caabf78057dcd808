"""The operators' commands (``pad``, ``conv``), built from their declarations, and their run.

:func:`operator_command` makes the click command of an operator from what its module declares
(:mod:`padconv_cli.ops.protocol`): one argument per data input (``X``, ``[W]``, ``[B]``), one
flag per attribute (``--kernel-shape``: its kind gives the type, ``choices`` a choice with
suggestions, ``help`` the help), the command's summary, help and examples (shown right after
the summary), then the options every operator command shares (``--dtype``, ``-o``/``--format``,
``--from-model``/``--explain``/``--check``..., the engine and input options).  The command
checks what the declarations require (an input or attribute needed unless ``--from-model`` gives
it, at most one ``-`` for stdin), prints the operator's notes on the flags given, and runs
:func:`run_operator`: the library pipeline, then the result, the ``--explain`` text or the
``--check`` report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from padconv_cli.cli import options
from padconv_cli.cli.options import (
    CONTEXT_SETTINGS,
    ChoiceWithSuggestion,
    Command,
    EngineSettings,
    ExtraOptions,
    Int64Type,
    complete_path,
    dtype_option,
    engine_options,
    input_options,
    int_list_option,
    model_options,
    output_options,
    with_examples_first,
)
from padconv_cli.ops.protocol import ALWAYS, DATA, UNLESS_MODEL, Attribute, Operator

EXIT_CHECK_FAILED = 1
FROM_MODEL_HINT = "(or take it from a model with --from-model)"


def operator_command(entry: Operator) -> click.Command:
    """The click command of ``entry`` (module docstring)."""
    inputs = [i for i in entry.inputs if i.role == DATA]

    def command(extras: ExtraOptions, engine_settings: EngineSettings, **values: Any) -> None:
        sources = tuple(values.pop(i.name.lower()) for i in inputs)
        attributes = {a.name: values.pop(a.name) for a in entry.attributes}
        if extras.from_model is None:
            _require_declared(entry, sources, attributes)
        if [s for s in sources if s is not None].count("-") > 1:
            names = ", ".join(i.name for i in inputs)
            raise click.UsageError(f"only one of {names} can be - (stdin)")
        if not engine_settings.quiet:
            for note in entry.notes(explicit_flags(**attributes)):
                click.echo(f"padconv {entry.command}: note: {note}", err=True)
        request = OutputRequest(values["output"], values["fmt"], values["max_output_bytes"],
                                values["dtype"])
        run_operator(entry, sources, attributes, request, extras, engine_settings)

    for shared in (input_options, engine_options, model_options, output_options, dtype_option):
        command = shared(command)
    for attribute in reversed(entry.attributes):
        command = _attribute_option(attribute)(command)
    for declared in reversed(inputs):
        command = click.argument(declared.name.lower(), metavar=declared.metavar,
                                 required=declared.required == ALWAYS,
                                 shell_complete=complete_path)(command)
    return click.command(entry.command, cls=Command, context_settings=CONTEXT_SETTINGS,
                         help=with_examples_first(entry.texts.help, entry.texts.examples),
                         short_help=entry.texts.summary)(command)


def _attribute_option(attribute: Attribute) -> Callable:
    """The flag of one declared attribute."""
    settings: dict[str, Any] = {"default": attribute.default, "help": attribute.help}
    if attribute.kind == "ints":
        return int_list_option(attribute.flag, **settings)
    if attribute.kind == "choice":
        settings["type"] = ChoiceWithSuggestion(attribute.choices)
    elif attribute.kind == "int":
        settings["type"] = Int64Type()
    if attribute.metavar is not None:
        settings["metavar"] = attribute.metavar
    if attribute.show_default:
        settings["show_default"] = True
    return click.option(attribute.flag, **settings)


def _require_declared(entry: Operator, sources: tuple[Any, ...],
                      attributes: dict[str, Any]) -> None:
    """A usage error for an input or attribute needed when no model node gives it."""
    data = [i for i in entry.inputs if i.role == DATA]
    for declared, source in zip(data, sources, strict=True):
        if declared.required == UNLESS_MODEL and source is None:
            raise click.UsageError(f"Missing argument '{declared.name}' {FROM_MODEL_HINT}")
    for attribute in entry.attributes:
        if attribute.required and attributes[attribute.name] is None:
            raise click.UsageError(f"Missing option '{attribute.flag}' {FROM_MODEL_HINT}")


def explicit_flags(**values: Any) -> dict[str, Any]:
    """The values among ``values`` (keyed by parameter name) that the user actually gave."""
    from click.core import ParameterSource

    context = click.get_current_context()
    given = {}
    for name, value in values.items():
        source = context.get_parameter_source(name)
        if value is not None and source not in (None, ParameterSource.DEFAULT):
            given[name] = value
    return given


def _print_json(data: Any, err: bool = False) -> None:
    from padconv_cli.json_output import dumps

    click.echo(dumps(data, indent=2), err=err)


@dataclass(frozen=True)
class OutputRequest:
    """Where and how the result of one run goes: -o, --format, --max-output-bytes, --dtype."""

    output: str | None
    fmt: str | None
    max_output_bytes: int | None
    dtype: str | None = None


def run_operator(
    entry: Operator,
    sources: tuple[str | None, ...],
    attributes: dict[str, Any],
    request: OutputRequest,
    extras: ExtraOptions,
    engine_settings: Any,
) -> None:
    """Build the library request of an operator's command line and take it through the
    pipeline (:mod:`padconv_cli.pipeline`): plan, then --explain (no gate: it reports the
    figures), else the gate, --emit-onnx, the run, the --check report and the result.

    A refused run writes nothing: the targets are checked, the call planned once and the
    resource gate passed before --emit-onnx is written or anything computed.  explain, check
    and emit run in memory.
    """
    from padconv_cli.outofcore.progress import stderr_is_terminal
    from padconv_cli.pipeline import Request, plan

    _check_output_targets(request.output, extras.emit_onnx)
    options.refuse_output_onto_inputs("--emit-onnx", extras.emit_onnx,
                                      (*sources, extras.from_model))
    in_memory = extras.check or extras.emit_onnx is not None  # they need the inputs read
    call = Request(
        entry.name, tuple(sources), explicit_flags(**attributes),
        model=extras.from_model, node=extras.node,
        engine="memory" if in_memory else engine_settings.engine,
        output=request.output, fmt=request.fmt, dtype=request.dtype,
        max_output_bytes=request.max_output_bytes, memory_limit=engine_settings.memory_limit,
        scheduler=engine_settings.scheduler, verbose=engine_settings.verbose,
        show_progress=_progress(engine_settings.quiet, stderr_is_terminal()),
    )
    planned = plan(call, note=None if extras.explain else _print_note)
    if not extras.explain:
        planned.gate()
    if extras.emit_onnx is not None:
        planned.emit(extras.emit_onnx, extras.emit_initializers)
    if extras.explain:
        _print_explanation(planned.explain(frozenset(_flag_names())), extras)
        return
    outcome = planned.execute(write=False)
    if outcome.tiled is not None:
        _note_inexact(outcome.tiled, engine_settings)
        return
    report = None
    if extras.check:
        report = planned.check(outcome.result, extras.check_rtol, extras.check_atol)
    options.emit_result(outcome.result, request.output, request.fmt, outcome.string_dtype)
    finish(report, extras, request.output, request.fmt)


def _progress(quiet: bool, terminal: bool) -> bool | str:
    """The progress display of the out-of-core engines (:func:`options.progress_display`);
    the colour of a terminal is asked only for a terminal."""
    if quiet or not terminal:
        return options.progress_display(quiet, terminal)
    from padconv_cli.cli.style import color_enabled

    return options.progress_display(quiet, terminal, color_enabled(err=True))


def _print_note(text: str) -> None:
    click.echo(f"padconv: note: {text}", err=True)


def _note_inexact(result: Any, settings: Any) -> None:
    """Tell when the tiles had to be smaller than the kernel's own blocks."""
    if not result.exact and not settings.quiet:
        _print_note(
            "--memory-limit is below one of the Conv kernel's own blocks; tiles were made "
            "smaller, so the sums may differ from --engine memory in the last bits"
        )


def _check_output_targets(output: str | None, emit_onnx: str | None) -> None:
    """Refuse an empty ``-o``/``--emit-onnx`` path and both naming the same file.

    Rule: ``-o ''`` is a usage error (not stdout: that is ``-o -``); ``--emit-onnx`` must name
    a file other than ``-o``'s, else one of the two results would silently replace the other.
    """
    for flag, value in (("-o/--output", output), ("--emit-onnx", emit_onnx)):
        if value is not None and not value.strip():
            raise click.UsageError(f"{flag} is empty; give a file path (or - for stdout)"
                                   if flag == "-o/--output" else f"{flag} is empty; give a path")
    if output not in (None, "-") and emit_onnx is not None and options.same_file(output,
                                                                                 emit_onnx):
        from padconv_cli.tensorio.files import printable

        raise click.UsageError(
            f"-o and --emit-onnx both name {printable(output)}; give two different files"
        )


def _print_explanation(info: dict[str, Any], extras: ExtraOptions) -> None:
    """``--explain``: the resolved call as text or, with --json, as JSON.  On a terminal the
    text's long lines are wrapped to its width at token boundaries (piped, it is unchanged)."""
    from padconv_cli.cli.style import output_width, wrap_at_tokens
    from padconv_cli.explain import format_explanation

    if extras.as_json:
        _print_json(info)
        return
    text = format_explanation(info)
    if options.stdout_is_terminal():
        text = wrap_at_tokens(text, output_width())
    click.echo(text)


def _flag_names() -> set[str]:
    """Parameters of the current command that were given on the command line."""
    from click.core import ParameterSource

    context = click.get_current_context()
    return {
        name
        for name in context.params
        if context.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)
    }


def _result_on_stdout(output: str | None, fmt: str | None) -> bool:
    """True when the tensor bytes went to stdout (then reports go to stderr)."""
    if output not in (None, "-"):
        return False
    return not (output is None and fmt is None and options.stdout_is_terminal())


def finish(report: Any, extras: ExtraOptions, output: str | None, fmt: str | None) -> None:
    """``--check``: print the report, exit 1 on a failed check."""
    if not extras.check or report is None:
        return
    from padconv_cli.crosscheck import format_report, report_dict

    to_stderr = _result_on_stdout(output, fmt)
    if extras.as_json:
        _print_json(report_dict(report), err=to_stderr)
    else:
        click.echo(format_report(report), err=to_stderr)
    if not report.passed:
        raise click.exceptions.Exit(EXIT_CHECK_FAILED)
