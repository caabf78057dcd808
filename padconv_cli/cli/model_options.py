"""Options that ``pad`` and ``conv`` share beyond the operator's own attributes.

``--from-model/--node`` take a node of a model; ``--explain`` (with ``--json``) describes the call
without computing; ``--emit-onnx`` writes the single-node model; ``--check`` compares the
result with onnx.reference and onnxruntime.  The decorator :func:`model_options` adds them and
hands them to the command as one :class:`ExtraOptions` argument named ``extras``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

EXIT_CHECK_FAILED = 1
_EXTRA_NAMES = (
    "from_model", "node", "explain", "as_json", "emit_onnx", "check", "check_rtol", "check_atol",
    "emit_initializers",
)


@dataclass(frozen=True)
class ExtraOptions:
    """The values of the shared options of one command run."""

    from_model: str | None = None
    node: str | None = None
    explain: bool = False
    as_json: bool = False
    emit_onnx: str | None = None
    check: bool = False
    check_rtol: float | None = None
    check_atol: float | None = None
    emit_initializers: bool = False

    def origin(self, op_type: str) -> Any:
        """The model node named by --from-model/--node, or None without --from-model."""
        if self.from_model is None:
            return None
        from padconv_cli.models import find_node

        return find_node(self.from_model, self.node, op_type)


def _check_combination(extras: ExtraOptions) -> None:
    """Refuse option combinations that cannot mean anything."""
    if extras.node is not None and extras.from_model is None:
        raise click.UsageError("--node needs --from-model MODEL.onnx")
    if extras.explain and extras.check:
        raise click.UsageError("--check computes the result; --explain does not compute")
    if extras.as_json and not (extras.explain or extras.check):
        raise click.UsageError("--json changes the output of --explain or --check; give one")
    if extras.emit_initializers and extras.emit_onnx is None:
        raise click.UsageError("--emit-initializers changes the model of --emit-onnx; give it")
    if extras.emit_onnx == "-":
        raise click.UsageError("--emit-onnx needs a file path (stdout carries the tensor)")
    for name, value in (("--check-rtol", extras.check_rtol), ("--check-atol", extras.check_atol)):
        if value is not None and not value >= 0:
            raise click.UsageError(f"{name} {value} is not a tolerance (needs a number >= 0)")
    if (extras.check_rtol is not None or extras.check_atol is not None) and not extras.check:
        raise click.UsageError("--check-rtol/--check-atol need --check")


def complete_path(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of a tensor or model argument: file names."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def complete_node(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of --node: the labels of the --from-model model's nodes of the
    command's operator (nothing when the model cannot be read)."""
    from padconv_cli.errors import PadconvError

    model = ctx.params.get("from_model")
    if not model:
        return []
    from padconv_cli.models import model_nodes
    from padconv_cli.ops import OPERATORS, find

    entry = find(ctx.info_name or "")
    try:
        nodes = model_nodes(model, (entry.name,) if entry else tuple(OPERATORS))
    except PadconvError:
        return []
    return [n.label for n in nodes if n.label.startswith(incomplete)]


_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--from-model",), dict(metavar="MODEL.onnx", default=None, shell_complete=complete_path,
                             help="Take the attributes and stored inputs (W, B, pads, ...) of a "
                             "node of this model; flags given here override them.")),
    (("--node",), dict(metavar="NAME", default=None, shell_complete=complete_node,
                       help="The node of --from-model: its name, OpType#k (k-th node of that "
                       "type) or its output name. Optional when the model has one such node.")),
    (("--explain",), dict(is_flag=True, default=False,
                          help="Print the resolved attributes, each output dimension with its "
                          "formula, FLOPs and memory; compute nothing.")),
    (("--json", "as_json"), dict(is_flag=True, default=False,
                                 help="Print --explain or --check output as JSON.")),
    (("--emit-onnx",), dict(metavar="FILE.onnx", default=None, shell_complete=complete_path,
                            help="Also write the equivalent single-node ONNX model to FILE.onnx.")),
    (("--emit-initializers",), dict(is_flag=True, default=False,
                                    help="Store the given tensors (DATA, or X, W, B) in the "
                                    "--emit-onnx model as initializers: it runs without inputs.")),
    (("--check",), dict(is_flag=True, default=False,
                        help="After computing, run the same node through onnx.reference and "
                        "onnxruntime; exit 1 when they disagree beyond tolerance.")),
    (("--check-rtol",), dict(type=float, default=None, metavar="RTOL",
                             help="Relative tolerance of --check (default: by dtype).")),
    (("--check-atol",), dict(type=float, default=None, metavar="ATOL",
                             help="Absolute tolerance of --check (default: by dtype).")),
)


def model_options(f: Callable) -> Callable:
    """Add the shared options to a command; it receives them as ``extras: ExtraOptions``."""

    @functools.wraps(f)
    def command(*args: Any, **kwargs: Any) -> Any:
        extras = ExtraOptions(**{name: kwargs.pop(name) for name in _EXTRA_NAMES})
        _check_combination(extras)
        return f(*args, extras=extras, **kwargs)

    for declarations, settings in reversed(_OPTIONS):
        command = click.option(*declarations, **settings)(command)
    return command


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


def require(value: Any, message: str) -> None:
    """A usage error (exit 2) when a required value is missing."""
    if value is None:
        raise click.UsageError(message)


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
    command: str,
    sources: tuple[str | None, ...],
    attributes: dict[str, Any],
    request: OutputRequest,
    extras: ExtraOptions,
    engine_settings: Any,
) -> None:
    """Build the library request of a ``pad``/``conv`` command line, run the pipeline
    (:func:`padconv_cli.pipeline.run`), and render what it gives: the result (file, stdout
    bytes or terminal), the --explain text or JSON, the --check report and exit code.

    A refused run writes nothing: the pipeline checks the targets, plans once and passes the
    resource gate before it writes --emit-onnx or computes.
    """
    from padconv_cli.cli.engine_options import progress_display
    from padconv_cli.cli.style import color_enabled
    from padconv_cli.ops import operator
    from padconv_cli.outofcore.progress import stderr_is_terminal
    from padconv_cli.pipeline import Request, run

    _check_output_targets(request.output, extras.emit_onnx)
    from padconv_cli.cli.output import refuse_output_onto_inputs

    refuse_output_onto_inputs("--emit-onnx", extras.emit_onnx, (*sources, extras.from_model))
    call = Request(
        operator(command).name, tuple(sources), explicit_flags(**attributes),
        model=extras.from_model, node=extras.node, engine=engine_settings.engine,
        output=request.output, fmt=request.fmt, dtype=request.dtype,
        max_output_bytes=request.max_output_bytes, memory_limit=engine_settings.memory_limit,
        scheduler=engine_settings.scheduler, verbose=engine_settings.verbose,
        show_progress=progress_display(engine_settings.quiet, stderr_is_terminal(),
                                       color_enabled(err=True)),
        emit_onnx=extras.emit_onnx, emit_initializers=extras.emit_initializers,
        explain=extras.explain, check=extras.check,
        check_rtol=extras.check_rtol, check_atol=extras.check_atol,
        given=frozenset(_flag_names()),
    )
    outcome = run(call, write=False, note=_print_note)
    if outcome.tiled is not None:
        _note_inexact(outcome.tiled, engine_settings)
    elif outcome.explanation is not None:
        _print_explanation(outcome.explanation, extras)
    else:
        from padconv_cli.cli.output import emit_result

        emit_result(outcome.result, request.output, request.fmt, outcome.string_dtype)
        finish(outcome.report, extras, request.output, request.fmt)


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
    from padconv_cli.cli.output import same_file

    if output not in (None, "-") and emit_onnx is not None and same_file(output, emit_onnx):
        from padconv_cli.tensorio.files import printable

        raise click.UsageError(
            f"-o and --emit-onnx both name {printable(output)}; give two different files"
        )


def _print_explanation(info: dict[str, Any], extras: ExtraOptions) -> None:
    """``--explain``: the resolved call as text or, with --json, as JSON."""
    from padconv_cli.explain import format_explanation

    if extras.as_json:
        _print_json(info)
    else:
        click.echo(format_explanation(info))


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
    from padconv_cli.cli.output import stdout_is_terminal

    if output not in (None, "-"):
        return False
    return not (output is None and fmt is None and stdout_is_terminal())


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
