"""The operators' commands (``pad``, ``conv``), built from their declarations
(:mod:`padconv_cli.ops`; docs/architecture.md, "The command"), and their run through the
pipeline: the result, the ``--explain`` text or the ``--check`` report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from padconv_cli.cli import options
from padconv_cli.ops import ALWAYS, UNLESS_MODEL, Attribute, Operator

EXIT_CHECK_FAILED = 1
FROM_MODEL_HINT = "(or take it from a model with --from-model)"


def operator_command(entry: Operator) -> click.Command:
    """The click command of ``entry``: an argument per data input, a flag per attribute, the
    shared options; it refuses what the declarations require unless ``--from-model`` gives it."""
    inputs = entry.data_inputs

    def command(engine_settings: options.EngineSettings, **values: Any) -> None:
        extras = options.ExtraOptions(*(values.pop(name) for name in options.ExtraOptions._fields))
        options.check_combination(extras)
        sources = tuple(values.pop(i.name.lower()) for i in inputs)
        attributes = {a.name: values.pop(a.name) for a in entry.attributes}
        if extras.from_model is None:
            _require_declared(entry, inputs, sources, attributes)
        if sources.count("-") > 1:
            names = ", ".join(i.name for i in inputs)
            raise click.UsageError(f"only one of {names} can be - (stdin)")
        if not engine_settings.quiet:
            for note in entry.notes(_given(attributes)):
                click.echo(f"padconv {entry.command}: note: {note}", err=True)
        run_operator(entry, sources, attributes, values, extras, engine_settings)

    for shared in (options.shared("input"), options.engine_options, options.shared("model"),
                   options.shared("output"), options.shared("dtype")):
        command = shared(command)
    for attribute in reversed(entry.attributes):
        command = _attribute_option(attribute)(command)
    for declared in reversed(inputs):  # metavar X when required, else [W]
        required, label = declared.required == ALWAYS, declared.name.upper()
        command = click.argument(declared.name.lower(), metavar=label if required else f"[{label}]",
                                 required=required, shell_complete=options.complete_path)(command)
    texts = entry.texts
    return options.command(entry.command, texts.summary, texts.examples, texts.help)(command)


def _attribute_option(attribute: Attribute) -> Callable:
    """The flag of one declared attribute, of the click type of its kind (``text``: a string)."""
    types = {"ints": options.IntListType(), "int": options.Int64Type(),
             "choice": options.ChoiceWithSuggestion(attribute.choices, case_sensitive=False)}
    return click.option(attribute.flag, default=attribute.default, help=attribute.help,
                        type=types.get(attribute.kind),
                        metavar="INT..." if attribute.kind == "ints" else attribute.metavar,
                        show_default=attribute.show_default)


def _require_declared(entry: Operator, inputs: list, sources: tuple[Any, ...],
                      attributes: dict[str, Any]) -> None:
    """A usage error for a data input or attribute needed when no model node gives it."""
    for declared, source in zip(inputs, sources, strict=True):
        if declared.required == UNLESS_MODEL and source is None:
            raise click.UsageError(f"Missing argument '{declared.name}' {FROM_MODEL_HINT}")
    for attribute in entry.attributes:
        if attribute.required and attributes[attribute.name] is None:
            raise click.UsageError(f"Missing option '{attribute.flag}' {FROM_MODEL_HINT}")


def _given_names() -> set[str]:
    """The parameters of the running command that were given on the command line."""
    ctx = click.get_current_context()
    return {name for name in ctx.params
            if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)}


def _given(values: dict[str, Any]) -> dict[str, Any]:
    """The values among ``values`` (keyed by parameter name) the user gave, not None."""
    given = _given_names()
    return {name: value for name, value in values.items() if value is not None and name in given}


def run_operator(entry: Operator, sources: tuple[str | None, ...], attributes: dict[str, Any],
                 values: dict[str, Any], extras: options.ExtraOptions,
                 engine: options.EngineSettings) -> None:
    """Take the command line through the pipeline: plan, then --explain (no gate), else the
    gate, --emit-onnx, the run, the --check report and the result (``values``: -o, --format,
    --max-output-bytes, --dtype).  A refused run writes nothing; check and emit run in memory.
    """
    from padconv_cli.pipeline import Request, plan

    output, fmt = values["output"], values["fmt"]
    _check_output_targets(output, extras.emit_onnx)
    options.refuse_output_onto_inputs("--emit-onnx", extras.emit_onnx,
                                      (*sources, extras.from_model))
    in_memory = extras.check or extras.emit_onnx is not None  # they need the inputs read
    call = Request(
        entry.name, tuple(sources), _given(attributes), model=extras.from_model,
        node=extras.node, engine="memory" if in_memory else engine.engine, output=output,
        fmt=fmt, dtype=values["dtype"], max_output_bytes=values["max_output_bytes"],
        memory_limit=engine.memory_limit, scheduler=engine.scheduler, verbose=engine.verbose,
        show_progress=options.progress_display(engine.quiet, options.is_terminal(err=True),
                                               options.color_enabled(err=True)),
        read_policy=options.read_policy_of(),
    )
    planned = plan(call, note=None if extras.explain else
                   lambda text: click.echo(f"padconv: note: {text}", err=True))
    if not extras.explain:
        planned.gate()
    if extras.emit_onnx is not None:
        planned.emit(extras.emit_onnx, extras.emit_initializers)
    if extras.explain:
        _print_explanation(planned.explain(frozenset(_given_names())), extras.as_json)
        return
    outcome = planned.execute(write=False)
    if outcome.tiled is not None:
        return
    report = (planned.check(outcome.result, extras.check_rtol, extras.check_atol)
              if extras.check else None)
    options.emit_result(outcome.result, output, fmt, outcome.string_dtype)
    if report is not None:
        _print_check(report, extras.as_json, output, fmt)


def _check_output_targets(output: str | None, emit_onnx: str | None) -> None:
    """Refuse an empty ``-o``/``--emit-onnx`` path (stdout is ``-o -``) and both naming the
    same file (one result would silently replace the other)."""
    if output is not None and not output.strip():
        raise click.UsageError("-o/--output is empty; give a file path (or - for stdout)")
    if emit_onnx is not None and not emit_onnx.strip():
        raise click.UsageError("--emit-onnx is empty; give a path")
    if output not in (None, "-") and emit_onnx and options.same_file(output, emit_onnx):
        raise click.UsageError(f"-o and --emit-onnx both name {output}; give two different files")


def _print_explanation(info: dict[str, Any], as_json: bool) -> None:
    """``--explain``: the resolved call as text or, with --json, as JSON.  On a terminal the
    text's long lines are wrapped to its width at token boundaries (piped, it is unchanged)."""
    from padconv_cli.explain import format_explanation

    if as_json:
        options.print_json(info)
        return
    text = format_explanation(info)
    if options.is_terminal():
        text = options.wrap_at_tokens(text, options.output_width())
    click.echo(text)


def _print_check(report: Any, as_json: bool, output: str | None, fmt: str | None) -> None:
    """``--check``: print the report (on stderr when the tensor bytes went to stdout), exit 1
    on a failed check."""
    from padconv_cli.crosscheck import format_report, report_dict

    shown = output is None and fmt is None and options.is_terminal()  # pretty-printed, not bytes
    to_stderr = output in (None, "-") and not shown
    if as_json:
        options.print_json(report_dict(report), err=to_stderr)
    else:
        click.echo(format_report(report), err=to_stderr)
    if not report.passed:
        raise click.exceptions.Exit(EXIT_CHECK_FAILED)
