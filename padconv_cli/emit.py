"""The single-node ONNX model equivalent to a padconv call (``--emit-onnx``).

* Operator version: the oldest one with every feature the call uses (the operator's
  ``version_choice``); its ``graph_parts`` give the node's inputs, initializers and
  attributes, written resolved so that no runtime default is relied upon.
* The opset is that version raised to ``MIN_RUNTIME_OPSET`` (the oldest opset onnxruntime
  guarantees to load); the IR version is the oldest one that has this opset.
* Data tensors are typed, shaped graph inputs, except those named in ``embedded`` (taken from
  a model, or all with ``--emit-initializers``): initializers.  The output is typed by the
  operator's ``output_dtype``.
* The model passes ``onnx.checker.check_model(model, full_check=True)``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from padconv_cli import __version__
from padconv_cli.errors import OutputError
from padconv_cli.ops import dtype_of, operator
from padconv_cli.ops.onnx_graph import VersionChoice, value_info
from padconv_cli.tensorio.files import atomic_write, one_line

PROTOBUF_LIMIT = 2**31 - 1


def operator_version(call: Any) -> VersionChoice:
    """The :class:`VersionChoice` of a :class:`padconv_cli.ops.protocol.KernelCall`."""
    return operator(call.op_type).version_choice(dtype_of(call.arrays[0]), call.attributes)


def single_node_model(call: Any, plan: Any, *, embedded: Collection[str] = (),
                      node_name: str | None = None) -> Any:
    """The ModelProto of ``call`` (a KernelCall) whose resolved plan is ``plan`` (module
    rules); :class:`OutputError` when onnx's full check refuses it."""
    from onnx import AttributeProto, helper, numpy_helper

    entry = operator(call.op_type)
    choice = operator_version(call)
    parts = entry.graph_parts(call, choice, embedded, plan)
    node = helper.make_node(call.op_type, parts.node_inputs, [entry.output_name],
                            name=node_name or call.op_type.lower())
    node.attribute.extend(  # an explicit type: an empty list is still INTS
        helper.make_attribute(name, value, attr_type=AttributeProto.INTS)
        if isinstance(value, list) else helper.make_attribute(name, value)
        for name, value in parts.attributes.items())
    opset = helper.make_opsetid("", choice.opset)
    ir_version = helper.find_min_ir_version_for([opset])
    inputs = parts.inputs
    if ir_version < 4:  # before IR 4 every initializer is listed as a graph input too
        inputs = inputs + [value_info(t.name, numpy_helper.to_array(t).dtype, t.dims)
                           for t in parts.initializers]
    output_dtype = entry.output_dtype(dtype_of(call.arrays[0]), call.attributes, plan)
    graph = helper.make_graph(
        [node], f"padconv_{call.op_type.lower()}", inputs,
        [value_info(entry.output_name, output_dtype, plan.output_shape)],
        initializer=parts.initializers,
    )
    model = helper.make_model(graph, opset_imports=[opset], producer_name="padconv",
                              producer_version=__version__, ir_version=ir_version,
                              doc_string=f"{choice.op_type}-{choice.version} ({choice.reason})")
    check_emitted(model)
    return model


def check_emitted(model: Any) -> None:
    """Run ``onnx.checker.check_model(model, full_check=True)``; a refusal, or a model over
    protobuf's 2 GiB, is an OutputError."""
    import onnx

    if model.ByteSize() > PROTOBUF_LIMIT:
        raise OutputError(f"the model would be {model.ByteSize()} bytes, over protobuf's 2 GiB "
                          "limit")
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        raise OutputError(f"the emitted model fails onnx's check: {one_line(error, 240)}") from None


def save_model(model: Any, path: str) -> None:
    """Write ``model`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    data = model.SerializeToString()
    atomic_write(path, lambda stream: stream.write(data))
