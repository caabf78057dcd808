"""An ONNX Pad or Conv node of any opset turned into a call of padconv's own kernels.

The operator version in force is the newest one whose ``since_version`` is <= the model's
opset. Each version's way of passing arguments is mapped onto the one kernel signature:

* Pad-1: attributes ``paddings``, ``value``, ``mode``.
* Pad-2..10: attributes ``pads``, ``value``, ``mode``.
* Pad-11+: inputs ``data, pads[, constant_value]``, attribute ``mode``; Pad-18+ adds the input
  ``axes``; Pad-19+ adds ``mode="wrap"``.  Exporters write ``wrap`` at older opsets (PyTorch's
  dynamo exporter at opset 18), and onnxruntime and onnx.reference run it: such a node is
  computed as Pad-19 does, with a note saying the model is off-spec.
* Conv-1/11/22: inputs ``X, W[, B]``, attributes auto_pad, dilations, group, kernel_shape, pads,
  strides.

Attribute values then go through the kernels' own validation, exactly as the ``padconv pad`` and
``padconv conv`` flags do. Only :func:`node_attributes` and :func:`call_for_node` touch onnx
objects; everything else works on plain dicts and numpy arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.errors import AttributeValueError, InputError
from padconv_cli.operators import CONV, OPERATORS, PAD, operator

OPERATOR_VERSIONS = {name: entry.versions for name, entry in OPERATORS.items()}
DEFAULT_DOMAINS = ("", "ai.onnx")
CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
PAD_INPUT_NAMES = ("data",)  # the data inputs of padconv's own calls (the rest are attributes)
CONV_INPUT_NAMES = ("X", "W", "B")


@dataclass(frozen=True)
class KernelCall:
    """A resolved kernel invocation: ``kernel(*arrays, **attributes)``."""

    op_type: str
    version: int
    arrays: tuple[np.ndarray | None, ...]
    attributes: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # one-line remarks for the user (an off-spec node computed)

    @property
    def operator(self) -> str:
        """``"Pad-2"``, ``"Conv-22"``: operator name and the version whose rules applied."""
        return f"{self.op_type}-{self.version}"

    def run(self) -> np.ndarray:
        """Run the kernel and return its single output."""
        return operator(self.op_type).kernel(*self.arrays, **self.attributes)

    def describe(self) -> str:
        """The attributes that were given, as ``name=value`` words (``mode=reflect pads=[0,2]``)."""
        defaults = {"auto_pad": "NOTSET", "group": 1}
        words = []
        for name, value in self.attributes.items():
            if value is None or defaults.get(name, object()) == value:
                continue
            words.append(f"{name}={_short(value, quote=name == 'constant_value')}")
        return " ".join(words)


def _short(value: Any, *, quote: bool = False) -> str:
    """Compact text of an attribute value: lists without spaces, numpy scalars as Python,
    strings quoted when ``quote`` (a string constant_value, unlike a mode name)."""
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_)):
        return str(value)  # shortest text that round-trips in the value's own type
    if isinstance(value, str) and not quote:
        return value
    return repr(value)


def is_supported_op(op_type: str, domain: str = "") -> bool:
    """True for Pad and Conv of the default ONNX domain."""
    return domain in DEFAULT_DOMAINS and op_type in OPERATOR_VERSIONS


def operator_version(op_type: str, opset: int) -> int:
    """The operator version in force at ``opset``: max(v in versions of op_type, v <= opset)."""
    versions = OPERATOR_VERSIONS.get(op_type)
    if versions is None:
        raise AttributeValueError(f"operator {op_type!r} is not supported (only Pad and Conv)")
    usable = [v for v in versions if v <= opset]
    if not usable:
        raise AttributeValueError(
            f"{op_type}: opset {opset} is older than the first version {versions[0]}"
        )
    return usable[-1]


def kernel_call(
    op_type: str,
    attributes: Mapping[str, Any],
    inputs: Sequence[np.ndarray | None],
    *,
    opset: int,
    domain: str = "",
) -> KernelCall:
    """Map a node (op_type, attribute dict, input arrays with None for omitted ones) of the
    given default-domain opset onto the kernel call its version defines."""
    if not is_supported_op(op_type, domain):
        raise AttributeValueError(
            f"operator {domain + '.' if domain else ''}{op_type} is not supported "
            "(only Pad and Conv of the default ONNX domain)"
        )
    version = operator_version(op_type, opset)
    attributes = {
        name: _plain(value, f"{op_type}: attribute {name!r}") for name, value in attributes.items()
    }
    return _NODE_CALLS[operator(op_type).name](version, attributes, list(inputs))


def run_node(
    op_type: str,
    attributes: Mapping[str, Any],
    inputs: Sequence[np.ndarray | None],
    *,
    opset: int,
) -> np.ndarray:
    """Shortcut: ``kernel_call(...).run()``."""
    return kernel_call(op_type, attributes, inputs, opset=opset).run()


def decode_attribute_text(raw: bytes, where: str) -> str:
    """The text of an ONNX string (stored as UTF-8 bytes); ``where`` names it in the error.

    Bytes that are not valid UTF-8 raise :class:`InputError` ``"<where> is not valid UTF-8"``.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where} is not valid UTF-8") from None


def _plain(value: Any, where: str) -> Any:
    """Attribute values as the kernels take them: bytes -> str, lists -> tuples of ints/floats."""
    if isinstance(value, bytes):
        return decode_attribute_text(value, where)
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v, where) for v in value)
    return value


# --- Pad -------------------------------------------------------------------------------------


def _pad_call(version: int, attributes: dict[str, Any], inputs: list) -> KernelCall:
    """Pad of any version -> ``pad(data, pads, constant_value, axes, mode)``."""
    operator = f"Pad-{version}"
    mode = _pad_mode(operator, version, attributes.get("mode", "constant"))
    notes = _wrap_note(operator, version, mode)
    if version < 11:
        pads_name = "paddings" if version == 1 else "pads"
        _check_attribute_names(operator, attributes, ("mode", pads_name, "value"))
        _check_input_count(operator, inputs, 1, 1)
        pads = _required_attribute(operator, attributes, pads_name)
        value = attributes.get("value")  # absent: the kernel's default 0, as Pad-1/2 define
        return _pad_kernel_call(version, inputs[0], pads, value, None, mode, notes)
    _check_attribute_names(operator, attributes, ("mode",))
    _check_input_count(operator, inputs, 2, 4 if version >= 18 else 3)
    data, pads_tensor, constant_tensor, axes_tensor = (inputs + [None, None])[:4]
    pads = _int_vector(operator, "pads", pads_tensor, required=True)
    axes = _int_vector(operator, "axes", axes_tensor, required=False)
    value = _constant_value(operator, constant_tensor, data)
    return _pad_kernel_call(version, data, pads, value, axes, mode, notes)


def _pad_kernel_call(version: int, data, pads, value, axes, mode: str,
                     notes: tuple[str, ...] = ()) -> KernelCall:
    """KernelCall with the attribute names of ``padconv_cli.kernels.pad.pad``."""
    if data is None:
        raise AttributeValueError(f"Pad-{version}: input 'data' is missing")
    attributes = {
        "mode": mode,
        "pads": pads,  # validated by the kernel, like the --pads flag
        "constant_value": value,
        "axes": axes,
    }
    return KernelCall(PAD.name, version, (data,), attributes, notes)


def _pad_mode(operator: str, version: int, mode: Any) -> str:
    """The mode string (the kernel validates it); ``wrap`` before Pad-19 is accepted."""
    return str(mode)


def _wrap_note(operator: str, version: int, mode: str) -> tuple[str, ...]:
    """The note for ``wrap`` before Pad-19: defined only from Pad-19 (opset 19), computed as
    Pad-19 does (what onnxruntime and onnx.reference run)."""
    if mode != "wrap" or version >= 19:
        return ()
    return (
        f"mode 'wrap' needs Pad-19 (opset 19), this node is {operator}: the model is "
        "off-spec; computed as Pad-19 does, as onnxruntime does",
    )


def _int_vector(
    operator: str, name: str, tensor: np.ndarray | None, *, required: bool
) -> tuple[int, ...] | None:
    """A 1-D integer tensor input as a tuple of ints (None when optional and omitted)."""
    if tensor is None:
        if required:
            raise AttributeValueError(f"{operator}: input {name!r} is missing")
        return None
    tensor = np.asarray(tensor)
    if tensor.dtype.kind not in "iu" or tensor.ndim != 1:
        raise AttributeValueError(
            f"{operator}: input {name!r} must be a 1-D integer tensor, "
            f"got {tensor.dtype.name} of shape {tuple(tensor.shape)}"
        )
    return tuple(int(v) for v in tensor)


def _constant_value(operator: str, tensor: np.ndarray | None, data: np.ndarray | None) -> Any:
    """The constant_value input as a scalar of data's type (None when omitted or empty).

    An empty tensor is treated as omitted, as onnxruntime does; otherwise it must hold exactly
    one element of the same type T as data.
    """
    if tensor is None:
        return None
    tensor = np.asarray(tensor)
    if tensor.size == 0:
        return None
    if tensor.size != 1:
        raise AttributeValueError(
            f"{operator}: input 'constant_value' must be a scalar, got shape {tuple(tensor.shape)}"
        )
    if data is not None and tensor.dtype != np.asarray(data).dtype:
        raise AttributeValueError(
            f"{operator}: constant_value type {tensor.dtype.name} != data type "
            f"{np.asarray(data).dtype.name} (both are T)"
        )
    return tensor.reshape(())[()]


# --- Conv ------------------------------------------------------------------------------------


def _conv_call(version: int, attributes: dict[str, Any], inputs: list) -> KernelCall:
    """Conv of any version -> ``conv(X, W, B, auto_pad=..., dilations=..., ...)``."""
    operator = f"Conv-{version}"
    _check_attribute_names(operator, attributes, CONV_ATTRIBUTES)
    _check_input_count(operator, inputs, 2, 3)
    x, w, b = (inputs + [None])[:3]
    for name, array in (("X", x), ("W", w)):
        if array is None:
            raise AttributeValueError(f"{operator}: input {name!r} is missing")
    kwargs = {name: attributes.get(name) for name in CONV_ATTRIBUTES}
    kwargs["auto_pad"] = str(kwargs["auto_pad"] or "NOTSET")
    kwargs["group"] = int(1 if kwargs["group"] is None else kwargs["group"])
    return KernelCall(CONV.name, version, (x, w, b), kwargs)


# --- shared checks ---------------------------------------------------------------------------


def _check_attribute_names(operator: str, attributes: Mapping[str, Any], allowed) -> None:
    """Every attribute must be defined by this operator version."""
    for name in attributes:
        if name not in allowed:
            raise AttributeValueError(
                f"{operator}: attribute {name!r} is not defined for this version "
                f"(allowed: {', '.join(allowed)})"
            )


def _check_input_count(operator: str, inputs: Sequence, low: int, high: int) -> None:
    """low <= number of inputs (trailing omitted ones dropped) <= high."""
    count = len(inputs)
    while count and inputs[count - 1] is None:
        count -= 1
    if not low <= count <= high:
        raise AttributeValueError(
            f"{operator}: takes {low} to {high} inputs, got {count}"
            if low != high
            else f"{operator}: takes {low} input(s), got {count}"
        )


def _required_attribute(operator: str, attributes: Mapping[str, Any], name: str) -> Any:
    """The attribute's value, or an error naming it when absent."""
    if name not in attributes:
        raise AttributeValueError(f"{operator}: required attribute {name!r} is missing")
    return attributes[name]


# --- onnx objects ----------------------------------------------------------------------------


# AttributeProto.AttributeType numbers (onnx.proto) and the type each attribute must have.
ATTRIBUTE_TYPE_NAMES = (
    "UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS", "STRINGS",
    "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS",
)
_FLOAT, _INT, _STRING, _TENSOR, _FLOATS, _INTS, _STRINGS, _SPARSE = 1, 2, 3, 4, 6, 7, 8, 11
ATTRIBUTE_TYPES = {
    CONV.name: {"auto_pad": _STRING, "dilations": _INTS, "group": _INT, "kernel_shape": _INTS,
             "pads": _INTS, "strides": _INTS},
    PAD.name: {"mode": _STRING, "pads": _INTS, "paddings": _INTS, "value": _FLOAT},
    "Constant": {"value": _TENSOR, "value_float": _FLOAT, "value_floats": _FLOATS,
                 "value_int": _INT, "value_ints": _INTS, "value_string": _STRING,
                 "value_strings": _STRINGS, "sparse_value": _SPARSE},
}


def attribute_type_name(number: int) -> str:
    """``INTS`` for 7; ``type 99`` for a number onnx.proto does not define."""
    if 0 <= number < len(ATTRIBUTE_TYPE_NAMES):
        return ATTRIBUTE_TYPE_NAMES[number]
    return f"type {number}"


def check_attribute_type(attribute: Any, op_type: str, where: str) -> None:
    """Refuse a malformed attribute (:class:`InputError` starting with ``where``).

    Rule: its type is never UNDEFINED (nor a number onnx.proto lacks), and for an attribute
    the operator defines it is exactly the defined type (``group`` INT, ``pads`` INTS,
    ``value_ints`` INTS, a Constant's ``value`` TENSOR ...): onnx would otherwise hand back
    the value of another field, or the default for UNDEFINED.
    """
    kind = attribute.type
    if kind == 0 or not 0 < kind < len(ATTRIBUTE_TYPE_NAMES):
        raise InputError(f"{where} has {attribute_type_name(kind)} as its type (malformed)")
    expected = ATTRIBUTE_TYPES.get(op_type, {}).get(attribute.name)
    if expected is not None and kind != expected:
        raise InputError(
            f"{where} is typed {attribute_type_name(kind)}; {op_type} defines it as "
            f"{attribute_type_name(expected)}"
        )


def node_attributes(
    node: Any, *, source: str = "model", label: str | None = None
) -> dict[str, Any]:
    """A NodeProto's attributes as a dict of Python values (ints, floats, str, tuples).

    ``source`` (the model's path) and ``label`` (default: the node's name, else its op_type)
    name the attribute in errors, e.g. text that is not UTF-8.
    """
    from onnx import helper

    label = label or node.name or node.op_type
    attributes = {}
    for attr in node.attribute:
        where = f"{source}: attribute {attr.name!r} of node {label!r}"
        check_attribute_type(attr, node.op_type, where)
        attributes[attr.name] = _plain(helper.get_attribute_value(attr), where)
    return attributes


def max_input_count(op_type: str, version: int) -> int:
    """Most inputs a node may list: Pad-1/2: 1, Pad-11..13: 3, Pad-18+: 4, Conv: 3."""
    return operator(op_type).max_inputs(version)


def check_node_input_count(
    node: Any, *, opset: int, source: str = "model", label: str | None = None
) -> None:
    """A node listing more inputs than its version defines (omitted "" slots included) is
    refused with :class:`InputError`: extra inputs would otherwise be silently ignored."""
    version = operator_version(node.op_type, opset)
    most = max_input_count(node.op_type, version)
    if len(node.input) > most:
        label = label or node.name or node.op_type
        raise InputError(
            f"{source}: node {label!r} ({node.op_type}-{version}) lists {len(node.input)} "
            f"inputs; {node.op_type}-{version} takes at most {most}"
        )


def default_opset(opset_imports: Sequence[Any]) -> int:
    """The version of the default domain among a model's opset_import entries."""
    for entry in opset_imports:
        if entry.domain in DEFAULT_DOMAINS:
            return int(entry.version)
    raise AttributeValueError("model: no opset_import for the default ONNX domain")


def call_for_node(
    node: Any,
    inputs: Sequence[np.ndarray | None],
    *,
    opset: int,
    source: str = "model",
    label: str | None = None,
) -> KernelCall:
    """``kernel_call`` for a NodeProto whose inputs are given as arrays (None where omitted).

    ``source`` and ``label`` name the model and the node in :class:`InputError` messages.
    """
    if is_supported_op(node.op_type, node.domain):
        check_node_input_count(node, opset=opset, source=source, label=label)
    attributes = node_attributes(node, source=source, label=label)
    return kernel_call(node.op_type, attributes, inputs, opset=opset, domain=node.domain)


_NODE_CALLS = {PAD.name: _pad_call, CONV.name: _conv_call}  # a node's attributes -> the kernel call
