"""An ONNX node of an operator padconv implements, of any opset, turned into a kernel call.

The version in force is the newest one <= the model's opset; the operator's ``node_call``
maps it onto the kernel call.  This module reads the node: the default domain only, at most
``max_inputs(version)`` inputs, attributes of the declared types, text as UTF-8; the values
then go through the kernels' own validation, as the commands' flags do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from padconv_cli.errors import AttributeValueError, InputError
from padconv_cli.ops import OPERATORS, find, operator
from padconv_cli.ops.protocol import (
    FLOAT,
    FLOATS,
    INT,
    INTS,
    SPARSE_TENSOR,
    STRING,
    STRINGS,
    TENSOR,
    KernelCall,
)

DEFAULT_DOMAINS = ("", "ai.onnx")
CONSTANT_ATTRIBUTE_TYPES = {"value": TENSOR, "value_float": FLOAT, "value_floats": FLOATS,
                            "value_int": INT, "value_ints": INTS, "value_string": STRING,
                            "value_strings": STRINGS, "sparse_value": SPARSE_TENSOR}


def _supported() -> str:
    """``Pad and Conv``: the operators padconv implements, in words."""
    *others, last = OPERATORS
    return f"{', '.join(others)} and {last}" if others else last


def is_supported_op(op_type: str, domain: str = "") -> bool:
    """True for an operator padconv implements, of the default ONNX domain."""
    return domain in DEFAULT_DOMAINS and op_type in OPERATORS


def operator_version(op_type: str, opset: int) -> int:
    """The operator version in force at ``opset``: max(v in versions of op_type, v <= opset)."""
    entry = OPERATORS.get(op_type)
    if entry is None:
        raise AttributeValueError(f"operator {op_type!r} is not supported (only {_supported()})")
    usable = [v for v in entry.versions if v <= opset]
    if not usable:
        raise AttributeValueError(f"{op_type}: opset {opset} is older than the first version "
                                  f"{entry.versions[0]}")
    return usable[-1]


def kernel_call(op_type: str, attributes: Mapping[str, Any],
                inputs: Sequence[np.ndarray | None], *, opset: int,
                domain: str = "") -> KernelCall:
    """Map a node (op_type, attribute dict, input arrays with None for omitted ones) of the
    given default-domain opset onto the kernel call its version defines."""
    if not is_supported_op(op_type, domain):
        raise AttributeValueError(f"operator {domain + '.' if domain else ''}{op_type} is not "
                                  f"supported (only {_supported()} of the default ONNX domain)")
    version = operator_version(op_type, opset)
    attributes = {name: _plain(value, f"{op_type}: attribute {name!r}")
                  for name, value in attributes.items()}
    return operator(op_type).node_call(version, attributes, list(inputs))


def decode_attribute_text(raw: bytes, where: str) -> str:
    """The text of an ONNX string (stored as UTF-8 bytes); bytes that are not valid UTF-8
    raise :class:`InputError` ``"<where> is not valid UTF-8"``."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where} is not valid UTF-8") from None


def _plain(value: Any, where: str) -> Any:
    """Attribute values as the kernels take them: bytes -> str, lists -> tuples."""
    if isinstance(value, bytes):
        return decode_attribute_text(value, where)
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v, where) for v in value)
    return value


def _type_name(number: int) -> str:
    """``INTS`` for 7; ``type 99`` for a number onnx.proto does not define."""
    from onnx import AttributeProto

    try:
        return AttributeProto.AttributeType.Name(number)
    except ValueError:
        return f"type {number}"


def check_attribute_type(attribute: Any, op_type: str, where: str) -> None:
    """Refuse a malformed attribute (:class:`InputError` starting with ``where``): its type is
    never UNDEFINED (nor a number onnx.proto lacks), and exactly the one the operator (or
    Constant) defines for its name (``group`` INT, a Constant's ``value`` TENSOR ...); onnx
    would otherwise hand back another field's value, or the default for UNDEFINED."""
    kind = attribute.type
    if kind == 0 or _type_name(kind).startswith("type "):
        raise InputError(f"{where} has {_type_name(kind)} as its type (malformed)")
    entry = find(op_type)
    declared = CONSTANT_ATTRIBUTE_TYPES if op_type == "Constant" else (
        entry.onnx_attribute_types if entry is not None else {})
    expected = declared.get(attribute.name)
    if expected is not None and kind != expected:
        raise InputError(f"{where} is typed {_type_name(kind)}; {op_type} defines it as "
                         f"{_type_name(expected)}")


def node_attributes(node: Any, *, source: str = "model",
                    label: str | None = None) -> dict[str, Any]:
    """A NodeProto's attributes as a dict of Python values (ints, floats, str, tuples);
    ``source`` (the model's path) and ``label`` (default: the node's name, else its op_type)
    name the attribute in errors."""
    from onnx import helper

    label = label or node.name or node.op_type
    attributes = {}
    for attr in node.attribute:
        where = f"{source}: attribute {attr.name!r} of node {label!r}"
        check_attribute_type(attr, node.op_type, where)
        attributes[attr.name] = _plain(helper.get_attribute_value(attr), where)
    return attributes


def check_node_input_count(node: Any, *, opset: int, source: str = "model",
                           label: str | None = None) -> None:
    """A node listing more inputs than ``max_inputs`` of its version (omitted "" slots
    included) is refused with :class:`InputError`: extra inputs would be silently ignored."""
    version = operator_version(node.op_type, opset)
    most = operator(node.op_type).max_inputs(version)
    if len(node.input) > most:
        label = label or node.name or node.op_type
        raise InputError(f"{source}: node {label!r} ({node.op_type}-{version}) lists "
                         f"{len(node.input)} inputs; {node.op_type}-{version} takes at most {most}")


def default_opset(opset_imports: Sequence[Any]) -> int:
    """The version of the default domain among a model's opset_import entries."""
    for entry in opset_imports:
        if entry.domain in DEFAULT_DOMAINS:
            return int(entry.version)
    raise AttributeValueError("model: no opset_import for the default ONNX domain")


def call_for_node(node: Any, inputs: Sequence[np.ndarray | None], *, opset: int,
                  source: str = "model", label: str | None = None) -> KernelCall:
    """``kernel_call`` for a NodeProto whose inputs are given as arrays (None where omitted);
    ``source`` and ``label`` name the model and the node in :class:`InputError` messages."""
    if is_supported_op(node.op_type, node.domain):
        check_node_input_count(node, opset=opset, source=source, label=label)
    attributes = node_attributes(node, source=source, label=label)
    return kernel_call(node.op_type, attributes, inputs, opset=opset, domain=node.domain)
