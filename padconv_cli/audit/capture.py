"""Running the model once and capturing every audited node's inputs and output.

* The runtimes get a copy of the model with its external data read by padconv's rules and
  stored inline.
* onnxruntime: the copy outputs every input and output of each audited main-graph node and
  runs once.  Nodes in ``If``/``Loop``/``Scan`` bodies, and all when onnxruntime refuses the
  model, take their inputs from an onnx.reference run and their output from onnxruntime
  running the node alone.
* onnx.reference: audited nodes record their first call, at any depth; one that never ran
  was not reached.
* Both run only the nodes the audited nodes depend on (:func:`dependencies_only`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.errors import InputError
from padconv_cli.onnx_nodes import is_supported_op
from padconv_cli.ops.protocol import ONNXRUNTIME_PEER as ONNXRUNTIME
from padconv_cli.ops.protocol import REFERENCE_PEER as REFERENCE
from padconv_cli.runtimes import (
    first_line,
    onnxruntime_installed,
    ort_run,
    ort_session,
    quiet_reference,
)


@dataclass
class NodeCapture:
    """What one node received and produced in the run (``output`` None: not computed)."""

    inputs: list[np.ndarray | None]
    output: np.ndarray | None = None
    refused: str = ""  # the runtime's message when it refused the node
    runtime: str = ""  # which runtime produced ``output``


@dataclass
class Capture:
    """Node key (first output name) -> NodeCapture; ``error`` when the model run failed."""

    runtime: str
    nodes: dict[str, NodeCapture] = field(default_factory=dict)
    error: str = ""


def node_key(node: Any) -> str:
    """A node's key: its first output name (unique in a valid model)."""
    return node.output[0] if node.output else ""


def audited(node: Any) -> bool:
    """True for a node of an operator padconv implements, of the default domain."""
    return is_supported_op(node.op_type, node.domain)


def inline_model(model: Any, path: str) -> Any:
    """A copy of ``model`` with external data read by padconv's rules and stored inline."""
    import os

    from onnx import numpy_helper

    from padconv_cli.models import all_graphs
    from padconv_cli.tensorio.protobuf import tensor_from_proto

    copy = deepcopy(model)
    base_dir = os.path.dirname(os.path.abspath(path))
    for graph in all_graphs(copy.graph):
        for tensor in graph.initializer:
            if tensor.data_location == tensor.EXTERNAL:
                label = f"{path}: initializer {tensor.name!r}"
                array = tensor_from_proto(tensor, label, base_dir)
                tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return copy


def _recording(run: Callable, key: str, nodes: dict[str, NodeCapture]) -> Callable:
    """``run`` of an op implementation, recording the first call's inputs and output."""

    def recorded(*inputs: Any, **kwargs: Any) -> Any:
        if key in nodes:
            return run(*inputs, **kwargs)
        arrays = [None if a is None else np.asarray(a) for a in inputs]
        capture = nodes[key] = NodeCapture(arrays, runtime=REFERENCE)
        try:
            outputs = run(*inputs, **kwargs)
        except Exception as error:  # the evaluator's refusal of this node
            capture.refused = first_line(error)
            raise
        capture.output = np.asarray(outputs[0] if isinstance(outputs, (tuple, list))
                                    else outputs)
        return outputs

    return recorded


def run_reference(model: Any, feeds: Mapping[str, np.ndarray]) -> Capture:
    """Run ``model`` with onnx.reference, recording every audited node's first call."""
    from onnx.reference import ReferenceEvaluator

    capture = Capture(REFERENCE)

    class CapturingEvaluator(ReferenceEvaluator):
        def _init(self) -> None:
            super()._init()
            for implementation in self.rt_nodes_:
                node = implementation.onnx_node
                if audited(node):
                    implementation.run = _recording(implementation.run, node_key(node),
                                                    capture.nodes)

    try:
        quiet_reference(model, CapturingEvaluator).run(None, dict(feeds))
    except Exception as error:  # the evaluator raises many types
        capture.error = first_line(error)
    return capture


def run_onnxruntime(model: Any, feeds: Mapping[str, np.ndarray]) -> Capture:
    """Run ``model`` once with onnxruntime, the main graph's audited values as outputs."""
    from onnx import helper, numpy_helper

    capture = Capture(ONNXRUNTIME)
    nodes = [node for node in model.graph.node if audited(node)]
    stored = {t.name: t for t in model.graph.initializer}
    present = {o.name for o in model.graph.output}
    wanted = dict.fromkeys(n for node in nodes for n in [*node.input, node_key(node)]
                           if n and n not in stored and n not in feeds and n not in present)
    copy = deepcopy(model)
    copy.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in wanted)
    try:
        session = ort_session(copy)
        values = ort_run(session, feeds)
    except Exception as error:  # onnxruntime raises its own exception types
        capture.error = first_line(error)
        return capture
    known: dict[str, Any] = dict(feeds)
    known.update(zip([o.name for o in session.get_outputs()], values, strict=True))
    for node in nodes:
        inputs = [None if not n else np.asarray(known[n]) if n in known
                  else numpy_helper.to_array(stored[n]) for n in node.input]
        capture.nodes[node_key(node)] = NodeCapture(inputs, np.asarray(known[node_key(node)]),
                                                    runtime=ONNXRUNTIME)
    return capture


def _nested(node: Any) -> list[Any]:
    """``node`` and every node of its subgraphs, at any depth."""
    from padconv_cli.models import named_subgraphs

    return [node, *(inner for _, graph in named_subgraphs(node) for child in graph.node
                    for inner in _nested(child))]


def dependencies_only(model: Any) -> Any:
    """``model`` reduced to the main-graph nodes its audited nodes depend on.  Targets (the
    new graph outputs): the outputs of every main-graph node that is or holds an audited node;
    a node is kept when a kept node (or its subgraphs, over-approximated) reads one of its
    outputs, or one is a target."""
    from onnx import helper

    graph = model.graph
    targets = [name for node in graph.node if any(audited(n) for n in _nested(node))
               for name in node.output if name]
    if not targets:
        return model
    needed, kept = set(targets), []
    for node in reversed(graph.node):  # nodes are in topological order in a valid model
        if any(name in needed for name in node.output):
            kept.append(node)
            needed.update(name for inner in _nested(node) for name in inner.input if name)
    if len(kept) == len(graph.node) and [o.name for o in graph.output] == targets:
        return model
    copy = deepcopy(model)
    del copy.graph.node[:]
    copy.graph.node.extend(reversed(kept))
    del copy.graph.output[:]
    copy.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in targets)
    return copy


def capture_model(model: Any, feeds: Mapping[str, np.ndarray], runtime: str,
                  needs_reference: bool) -> tuple[Capture, Capture | None]:
    """(runtime capture, reference capture or None) by the module rules."""
    model = dependencies_only(model)
    if runtime == REFERENCE:
        capture = run_reference(model, feeds)
        return capture, capture
    if not onnxruntime_installed():
        raise InputError("onnxruntime is not installed; use runtime onnx.reference",
                         param="runtime")
    capture = run_onnxruntime(model, feeds)
    reference = run_reference(model, feeds) if needs_reference or capture.error else None
    return capture, reference
