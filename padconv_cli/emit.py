"""The single-node ONNX model equivalent to a padconv call (``--emit-onnx``).

Rules:

* Operator version: the oldest version of Pad or Conv that has every feature the call uses —
  the element type (read from the operator schemas of the installed onnx), ``axes``
  (Pad-18), ``mode="wrap"`` (Pad-19), a ``constant_value`` that a float32 ``value``
  attribute cannot hold exactly (Pad-11), ``auto_pad=SAME_*`` with a stride above 1 (Conv-11,
  the first version that defines it as ``ceil(in / stride)``) when auto_pad is written.
* The model's opset is that version, raised to :data:`MIN_RUNTIME_OPSET` (the oldest opset
  onnxruntime guarantees to load; Pad and Conv do not change between their version and it).
  The IR version is the oldest one that has this opset.
* Data tensors (``data``; ``X``, ``W``, ``B``) are graph inputs, typed and shaped, except those
  named in ``embedded`` (tensors taken from a model), which become initializers.  ``pads``,
  ``constant_value`` and ``axes`` are initializers (Pad-11+) or attributes (Pad-2).
  Conv's kernel_shape, strides, dilations and group are written resolved, as are its pads
  (or ``auto_pad``), so no runtime default is relied upon.  With a dilation above 1 the pads
  that ``auto_pad`` resolves to are written instead of ``auto_pad`` (``NOTSET``): the inputs
  have fixed shapes, and onnxruntime cannot run SAME_* with dilations.
* The model passes ``onnx.checker.check_model(model, full_check=True)``, which also runs
  strict shape inference against the declared output shape.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import OutputError, UnsupportedDtypeError
from padconv_cli.onnx_nodes import CONV_INPUT_NAMES, PAD_INPUT_NAMES
from padconv_cli.operators import CONV, PAD, operator

MIN_RUNTIME_OPSET = 7
PROTOBUF_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class VersionChoice:
    """The operator version an emitted model uses, and the feature that forced it."""

    op_type: str
    version: int
    reason: str

    @property
    def opset(self) -> int:
        """Opset of the model: ``max(version, MIN_RUNTIME_OPSET)``."""
        return max(self.version, MIN_RUNTIME_OPSET)


def onnx_type_string(dtype: np.dtype) -> str:
    """``tensor(float)``, ``tensor(bfloat16)``, ``tensor(string)``: the schema spelling."""
    from onnx import TensorProto

    from padconv_cli.dtypes import onnx_elem_type

    return f"tensor({TensorProto.DataType.Name(onnx_elem_type(dtype)).lower()})"


def _schema_allows(op_type: str, version: int, type_string: str) -> bool:
    """True when the schema of ``op_type``-``version`` lists ``type_string`` for its T."""
    import onnx.defs

    schema = onnx.defs.get_schema(op_type, version)
    for constraint in schema.type_constraints:
        if constraint.type_param_str == "T":
            return type_string in constraint.allowed_type_strs
    return False


def _first_version_for_type(op_type: str, versions: Sequence[int], dtype: np.dtype) -> int:
    """Oldest version in ``versions`` whose type constraint T admits ``dtype``."""
    type_string = onnx_type_string(dtype)
    for version in versions:
        if _schema_allows(op_type, version, type_string):
            return version
    raise UnsupportedDtypeError(f"{op_type}: no ONNX version accepts {type_string}")


def _fits_float_attribute(value: Any) -> bool:
    """True when ``value`` is a real number that a float32 attribute stores exactly."""
    if value is None:
        return True
    number = np.asarray(value)
    if number.dtype.kind not in "fiub":
        return False
    as_float = float(number)
    return bool(np.isnan(as_float) or float(np.float32(as_float)) == as_float)


def pad_version(dtype: np.dtype, attributes: dict[str, Any]) -> VersionChoice:
    """The oldest Pad version (2 and later) with the call's features (module rules)."""
    from padconv_cli.operators import PAD_VERSIONS

    versions = [v for v in PAD_VERSIONS if v >= 2]
    needs = [(_first_version_for_type(PAD.name, versions, dtype), f"{onnx_type_string(dtype)}")]
    if attributes.get("axes") is not None:
        needs.append((18, "the axes input"))
    if attributes.get("mode") == "wrap":
        needs.append((19, "mode wrap"))
    if not _fits_float_attribute(attributes.get("constant_value")):
        needs.append((11, "a constant_value a float32 attribute cannot hold"))
    version, reason = max(needs, key=lambda need: need[0])
    if version == versions[0]:
        reason = "the oldest Pad with pads as an attribute"
    return VersionChoice(PAD.name, version, reason)


def writes_auto_pad(auto_pad: Any, dilations: Any) -> bool:
    """True when the emitted Conv keeps ``auto_pad``: it is not NOTSET and no dilation is above
    1 (otherwise the resolved pads are written, module rules)."""
    return str(auto_pad or "NOTSET") != "NOTSET" and not any(d > 1 for d in dilations or ())


def conv_version(dtype: np.dtype, attributes: dict[str, Any]) -> VersionChoice:
    """The oldest Conv version with the call's element type and auto_pad semantics."""
    from padconv_cli.operators import CONV_VERSIONS

    needs = [(_first_version_for_type(CONV.name, CONV_VERSIONS, dtype), onnx_type_string(dtype))]
    strides = attributes.get("strides") or ()
    auto_pad = attributes.get("auto_pad", "NOTSET")
    if (
        writes_auto_pad(auto_pad, attributes.get("dilations"))
        and str(auto_pad).startswith("SAME")
        and any(s > 1 for s in strides)
    ):
        needs.append((11, "auto_pad SAME with a stride above 1"))
    version, reason = max(needs, key=lambda need: need[0])
    if version == CONV_VERSIONS[0]:
        reason = "Conv-1 has every feature used"
    return VersionChoice(CONV.name, version, reason)


def operator_version(call: Any) -> VersionChoice:
    """The :class:`VersionChoice` of a :class:`padconv_cli.onnx_nodes.KernelCall`."""
    dtype = np.asarray(call.arrays[0]).dtype
    return _VERSION_CHOICES[operator(call.op_type).name](dtype, call.attributes)


def _value_info(name: str, dtype: np.dtype, shape: Sequence[int]) -> Any:
    from onnx import helper

    from padconv_cli.dtypes import onnx_elem_type

    return helper.make_tensor_value_info(name, onnx_elem_type(dtype), [int(d) for d in shape])


def _initializer(array: Any, name: str) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(array), name=name)


def _scalar_of(value: Any, dtype: np.dtype) -> np.ndarray:
    """A 0-d array holding ``value`` as ``dtype`` (strings as a python ``str`` object array)."""
    if dtype.kind in "OU":
        return np.array(str(value), dtype=object)
    return np.asarray(value).astype(dtype).reshape(())


@dataclass
class _GraphParts:
    """Inputs, initializers and the node being assembled."""

    inputs: list
    initializers: list
    node_inputs: list
    attributes: dict


def _pad_parts(call: Any, choice: VersionChoice, embedded: Collection[str],
               plan: Any = None) -> _GraphParts:
    """Pad-2 (attributes) or Pad-11+ (initializer inputs) node parts."""
    data = np.asarray(call.arrays[0])
    parts = _GraphParts([], [], [], {"mode": call.attributes.get("mode", "constant")})
    _add_data_input(parts, PAD_INPUT_NAMES[0], data, embedded)
    pads = [int(p) for p in call.attributes["pads"]]
    value = call.attributes.get("constant_value")
    if choice.version < 11:
        parts.attributes["pads"] = pads
        if value is not None:
            parts.attributes["value"] = float(np.asarray(value))
        return parts
    parts.initializers.append(_initializer(np.array(pads, dtype=np.int64), "pads"))
    parts.node_inputs.append("pads")
    axes = call.attributes.get("axes")
    if value is not None or axes is not None:
        name = "constant_value" if value is not None else ""
        if value is not None:
            parts.initializers.append(_initializer(_scalar_of(value, data.dtype), name))
        parts.node_inputs.append(name)
    if axes is not None:
        parts.initializers.append(_initializer(np.array(axes, dtype=np.int64), "axes"))
        parts.node_inputs.append("axes")
    return parts


def _conv_graph_parts(call: Any, choice: VersionChoice, embedded: Collection[str],
                      plan: Any) -> _GraphParts:
    """:func:`_conv_parts` in the graph-parts signature of the operator table."""
    return _conv_parts(call, plan, embedded)


def _conv_parts(call: Any, plan: Any, embedded: Collection[str]) -> _GraphParts:
    """Conv node parts with every attribute written out as resolved by ``plan``."""
    attributes: dict[str, Any] = {
        "kernel_shape": list(plan.kernel_shape),
        "strides": list(plan.strides),
        "dilations": list(plan.dilations),
        "group": int(plan.group),
    }
    if writes_auto_pad(plan.auto_pad, plan.dilations):
        attributes["auto_pad"] = plan.auto_pad
    else:
        attributes["pads"] = list(plan.pads)
    parts = _GraphParts([], [], [], attributes)
    for name, array in zip(CONV_INPUT_NAMES, call.arrays, strict=False):
        if array is not None:
            _add_data_input(parts, name, np.asarray(array), embedded)
    return parts


def _add_data_input(parts: _GraphParts, name: str, array: np.ndarray, embedded) -> None:
    """A data tensor: an initializer when embedded, else a typed and shaped graph input."""
    if name in embedded:
        parts.initializers.append(_initializer(array, name))
    else:
        parts.inputs.append(_value_info(name, array.dtype, array.shape))
    parts.node_inputs.append(name)


def single_node_model(
    call: Any,
    plan: Any,
    *,
    embedded: Collection[str] = (),
    node_name: str | None = None,
) -> Any:
    """The ModelProto of ``call`` (a KernelCall) whose resolved plan is ``plan``.

    ``plan.output_shape`` types the output; ``embedded`` names the data tensors stored as
    initializers.  Raises :class:`OutputError` when onnx's full check refuses the model.
    """
    from onnx import helper

    from padconv_cli import __version__

    entry = operator(call.op_type)
    choice = operator_version(call)
    parts = _GRAPH_PARTS[entry.name](call, choice, embedded, plan)
    output_name = entry.output_name
    node = helper.make_node(
        call.op_type, parts.node_inputs, [output_name], name=node_name or call.op_type.lower()
    )
    node.attribute.extend(_attribute(name, value) for name, value in parts.attributes.items())
    output_dtype = np.asarray(call.arrays[0]).dtype
    graph = helper.make_graph(
        [node],
        f"padconv_{call.op_type.lower()}",
        _with_legacy_inputs(parts, choice.opset),
        [_value_info(output_name, output_dtype, plan.output_shape)],
        initializer=parts.initializers,
    )
    opset = helper.make_opsetid("", choice.opset)
    model = helper.make_model(graph, opset_imports=[opset], producer_name="padconv")
    model.producer_version = __version__
    model.ir_version = helper.find_min_ir_version_for([opset])
    model.doc_string = f"{choice.op_type}-{choice.version} ({choice.reason})"
    check_emitted(model)
    return model


def _attribute(name: str, value: Any) -> Any:
    """An AttributeProto with an explicit type (an empty list is still INTS)."""
    from onnx import AttributeProto, helper

    if isinstance(value, list):
        return helper.make_attribute(name, value, attr_type=AttributeProto.INTS)
    return helper.make_attribute(name, value)


def _with_legacy_inputs(parts: _GraphParts, opset: int) -> list:
    """Graph inputs; before IR 4 every initializer must be listed as an input too."""
    from onnx import helper

    if helper.find_min_ir_version_for([helper.make_opsetid("", opset)]) >= 4:
        return parts.inputs
    from onnx import numpy_helper

    legacy = [
        _value_info(t.name, numpy_helper.to_array(t).dtype, t.dims) for t in parts.initializers
    ]
    return parts.inputs + legacy


def check_emitted(model: Any) -> None:
    """Run ``onnx.checker.check_model(model, full_check=True)``; a refusal is an OutputError."""
    import onnx

    from padconv_cli.tensorio.files import one_line

    if model.ByteSize() > PROTOBUF_LIMIT:
        raise OutputError(
            f"the model would be {model.ByteSize()} bytes, over protobuf's 2 GiB limit"
        )
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        raise OutputError(f"the emitted model fails onnx's check: {one_line(error, 240)}") from None


def save_model(model: Any, path: str) -> None:
    """Write ``model`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    from padconv_cli.tensorio.atomic import atomic_write

    data = model.SerializeToString()
    atomic_write(path, lambda stream: stream.write(data))


_VERSION_CHOICES = {PAD.name: pad_version, CONV.name: conv_version}
_GRAPH_PARTS = {PAD.name: _pad_parts, CONV.name: _conv_graph_parts}
