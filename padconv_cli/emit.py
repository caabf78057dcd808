"""The single-node ONNX model equivalent to a padconv call (``--emit-onnx``).

Rules:

* Operator version: the oldest version of the operator that has every feature the call uses,
  chosen by the operator's ``version_choice`` (the rules are in :mod:`padconv_cli.ops.pad`
  and :mod:`padconv_cli.ops.conv`); its ``graph_parts`` give the node's inputs, initializers
  and attributes, written resolved so that no runtime default is relied upon.
* The model's opset is that version, raised to :data:`MIN_RUNTIME_OPSET` (the oldest opset
  onnxruntime guarantees to load; Pad and Conv do not change between their version and it).
  The IR version is the oldest one that has this opset.
* Data tensors are graph inputs, typed and shaped, except those named in ``embedded``
  (tensors taken from a model, or all of them with ``--emit-initializers``), which become
  initializers.  The output is typed by the operator's ``output_dtype``.
* The model passes ``onnx.checker.check_model(model, full_check=True)``, which also runs
  strict shape inference against the declared output shape.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from padconv_cli.errors import OutputError
from padconv_cli.ops import dtype_of, operator
from padconv_cli.ops.onnx_graph import (
    MIN_RUNTIME_OPSET,
    GraphParts,
    VersionChoice,
    onnx_type_string,
    value_info,
)

__all__ = ["MIN_RUNTIME_OPSET", "VersionChoice", "check_emitted", "onnx_type_string",
           "operator_version", "save_model", "single_node_model"]

PROTOBUF_LIMIT = 2**31 - 1


def operator_version(call: Any) -> VersionChoice:
    """The :class:`VersionChoice` of a :class:`padconv_cli.onnx_nodes.KernelCall`."""
    return operator(call.op_type).version_choice(dtype_of(call.arrays[0]), call.attributes)


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
    parts = entry.graph_parts(call, choice, embedded, plan)
    output_name = entry.output_name
    node = helper.make_node(
        call.op_type, parts.node_inputs, [output_name], name=node_name or call.op_type.lower()
    )
    node.attribute.extend(_attribute(name, value) for name, value in parts.attributes.items())
    output_dtype = entry.output_dtype(np.asarray(call.arrays[0]).dtype, call.attributes, plan)
    graph = helper.make_graph(
        [node],
        f"padconv_{call.op_type.lower()}",
        _with_legacy_inputs(parts, choice.opset),
        [value_info(output_name, output_dtype, plan.output_shape)],
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


def _with_legacy_inputs(parts: GraphParts, opset: int) -> list:
    """Graph inputs; before IR 4 every initializer must be listed as an input too."""
    from onnx import helper

    if helper.find_min_ir_version_for([helper.make_opsetid("", opset)]) >= 4:
        return parts.inputs
    from onnx import numpy_helper

    legacy = [
        value_info(t.name, numpy_helper.to_array(t).dtype, t.dims) for t in parts.initializers
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
    from padconv_cli.tensorio.files import atomic_write

    data = model.SerializeToString()
    atomic_write(path, lambda stream: stream.write(data))

