"""The operators padconv implements, one module each, and their one registry.

Each operator module (:mod:`.pad`, :mod:`.conv`) provides ``OPERATOR``, an
:class:`~padconv_cli.ops.protocol.Operator` holding every rule of that operator.  This
registry is the only place keyed by operator names: :func:`operator` finds an entry by its
ONNX name (``Conv``) or its command (``conv``); everything above looks the operator up once
and calls the protocol.
"""

from __future__ import annotations

from typing import Any

from padconv_cli.errors import AttributeValueError
from padconv_cli.ops import conv, conv_integer, conv_transpose, pad, qlinear_conv
from padconv_cli.ops.protocol import KernelCall, Operator, ResolvedCall, dtype_of, shape_of

OPERATORS: dict[str, Operator] = {
    entry.name: entry
    for entry in (pad.OPERATOR, conv.OPERATOR, conv_transpose.OPERATOR, conv_integer.OPERATOR,
                  qlinear_conv.OPERATOR)
}
COMMANDS: dict[str, Operator] = {entry.command: entry for entry in OPERATORS.values()}

__all__ = ["COMMANDS", "OPERATORS", "KernelCall", "Operator", "ResolvedCall", "compute", "dtype_of",
           "error_bound", "find", "operator", "plain_call", "plan_call", "shape_of"]


def find(name: str) -> Operator | None:
    """The operator called ``name`` (ONNX name or command), None for one padconv lacks."""
    return OPERATORS.get(name) or COMMANDS.get(name)


def operator(name: str) -> Operator:
    """The operator called ``name`` (``Pad``/``Conv``, or the command ``pad``/``conv``)."""
    entry = find(name)
    if entry is None:
        raise AttributeValueError(
            f"padconv implements {', '.join(OPERATORS)}, not {name!r}", param="operator"
        )
    return entry


def plain_call(op_type: str, arrays: tuple[Any, ...], flags: dict[str, Any]) -> ResolvedCall:
    """A call built from flags alone: the operator's defaults, then ``flags`` (read in the
    data's element type), by the newest version padconv implements."""
    entry = operator(op_type)
    attributes = {**entry.defaults, **flags}
    if arrays and arrays[0] is not None:
        attributes = entry.typed(attributes, dtype_of(arrays[0]))
    call = KernelCall(entry.name, entry.newest_version, tuple(arrays), attributes)
    return ResolvedCall(call, frozenset(flags))


def plan_call(call: KernelCall) -> Any:
    """The plan of ``call`` from its inputs' shapes and its attributes, by its operator's
    planner."""
    entry = operator(call.op_type)
    if entry.plan_arrays is not None:
        return entry.plan_arrays(call.arrays, call.attributes)
    shapes = [shape_of(a) for a in call.arrays]
    return entry.plan(shapes, dtype_of(call.arrays[0]), call.attributes)


def error_bound(call: KernelCall, plan: Any = None) -> Any:
    """The per-element error bound ``call``'s result is judged by (None: compared exactly);
    ``plan``: the call's plan, when it was made already."""
    return operator(call.op_type).error_bound(call, plan)


def compute(call: KernelCall) -> Any:
    """Run ``call``'s kernel (it plans and computes) and return its single output."""
    return operator(call.op_type).kernel(*call.arrays, **call.attributes)
