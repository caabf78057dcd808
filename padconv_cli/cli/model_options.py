"""Options that ``pad`` and ``conv`` share beyond the operator's own attributes.

``--from-model/--node`` take a node of a model; ``--explain`` (with ``--json``) describes the call
without computing; ``--emit-onnx`` writes the single-node model; ``--check`` compares the
result with onnx.reference and onnxruntime.  The decorator :func:`model_options` adds them and
hands them to the command as one :class:`ExtraOptions` argument named ``extras``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

EXIT_CHECK_FAILED = 1
_EXTRA_NAMES = (
    "from_model", "node", "explain", "as_json", "emit_onnx", "check", "check_rtol", "check_atol"
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

    op_type = {"pad": "Pad", "conv": "Conv"}.get(ctx.info_name or "", "")
    try:
        nodes = model_nodes(model, (op_type,) if op_type else ("Pad", "Conv"))
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
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str), err=err)


def prepare(resolved: Any, extras: ExtraOptions) -> Any:
    """Validate the call (the kernels' plan), write --emit-onnx, print --explain.

    Returns the plan, or None when --explain means nothing more is to be done.
    """
    from padconv_cli.explain import plan_call

    plan = plan_call(resolved.call)
    if extras.emit_onnx is not None:
        from padconv_cli.emit import save_model, single_node_model

        node_name = resolved.origin.node.name if resolved.origin is not None else None
        model = single_node_model(
            resolved.call, plan, embedded=resolved.embedded, node_name=node_name or None
        )
        save_model(model, extras.emit_onnx)
    if not extras.explain:
        return plan
    from padconv_cli.explain import explanation, format_explanation

    info = explanation(resolved, plan, _flag_names())
    if extras.as_json:
        _print_json(info)
    else:
        click.echo(format_explanation(info))
    return None


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


def finish(resolved: Any, plan: Any, result: Any, extras: ExtraOptions,
           output: str | None, fmt: str | None) -> None:
    """``--check``: compare with the peers, report, exit 1 on a failed check."""
    if not extras.check:
        return
    from padconv_cli.crosscheck import crosscheck, format_report, report_dict

    report = crosscheck(
        resolved.call, plan, result, rtol=extras.check_rtol, atol=extras.check_atol
    )
    to_stderr = _result_on_stdout(output, fmt)
    if extras.as_json:
        _print_json(report_dict(report), err=to_stderr)
    else:
        click.echo(format_report(report), err=to_stderr)
    if not report.passed:
        raise click.exceptions.Exit(EXIT_CHECK_FAILED)
