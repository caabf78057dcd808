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
        from padconv_cli.cli.options import read_policy_of
        from padconv_cli.models import find_node

        return find_node(self.from_model, self.node, op_type, read_policy_of())


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
