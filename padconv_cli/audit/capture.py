"""Running the model once and capturing every Pad and Conv node's inputs and output.

* The model is loaded by padconv's safe loader; external data is read under the usual rules
  (inside the model's folder, sizes checked) and placed inline in an in-memory copy, which
  is what the runtimes get.
* onnxruntime: the copy lists, as extra graph outputs, every input and the output of each
  Pad/Conv node of the main graph, and runs once.  Nodes inside ``If``/``Loop``/``Scan``
  bodies, and every node when onnxruntime refuses the whole model, take their inputs from an
  onnx.reference run and their runtime output from onnxruntime running that node alone.
* onnx.reference: an evaluator whose Pad/Conv implementations record their first call, at any
  depth of subgraphs; a node that never ran was not reached.
* Both run only the nodes the Pad/Conv nodes depend on (:func:`dependencies_only`): a node
  after the last of them, one that a runtime does not know say, cannot stop the audit.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.errors import InputError
from padconv_cli.ops import OPERATORS

REFERENCE = "onnx.reference"
ONNXRUNTIME = "onnxruntime"
AUDITED_OPS = tuple(OPERATORS)


@dataclass
class NodeCapture:
    """What one node received and produced in the run (``output`` None: not computed)."""

    inputs: list[np.ndarray | None]
    output: np.ndarray | None = None
    calls: int = 1
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


def runtime_available(name: str) -> bool:
    """True when ``name`` (onnxruntime) can be imported; onnx.reference always is."""
    if name == REFERENCE:
        return True
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def inline_model(model: Any, path: str) -> Any:
    """A copy of ``model`` with external data read by padconv's rules and stored inline."""
    import os

    from onnx import ModelProto, numpy_helper

    from padconv_cli.folding import subgraphs
    from padconv_cli.tensorio.protobuf import tensor_from_proto

    copy = ModelProto()
    copy.CopyFrom(model)
    base_dir = os.path.dirname(os.path.abspath(path))

    def fix(graph: Any) -> None:
        for index, tensor in enumerate(graph.initializer):
            if tensor.data_location == tensor.EXTERNAL:
                array = tensor_from_proto(tensor, f"{path}: initializer {tensor.name!r}",
                                          base_dir)
                graph.initializer[index].CopyFrom(numpy_helper.from_array(array, tensor.name))
        for node in graph.node:
            for subgraph in subgraphs(node):
                fix(subgraph)

    fix(copy.graph)
    return copy


def _first_line(error: BaseException) -> str:
    from padconv_cli.crosscheck import _first_line as first_line

    return first_line(error)


# --- onnx.reference ----------------------------------------------------------------------------


def _recording(run: Callable, node: Any, nodes: dict[str, NodeCapture]) -> Callable:
    """``run`` of an op implementation, recording the first call's inputs and output."""
    key = node_key(node)

    def recorded(*inputs: Any, **kwargs: Any) -> Any:
        if key in nodes:
            nodes[key].calls += 1
            return run(*inputs, **kwargs)
        arrays = [None if a is None else np.asarray(a) for a in inputs]
        capture = nodes[key] = NodeCapture(arrays, None, runtime=REFERENCE)
        try:
            outputs = run(*inputs, **kwargs)
        except Exception as error:  # the evaluator's refusal of this node
            capture.refused = _first_line(error)
            raise
        first = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
        capture.output = np.asarray(first)
        return outputs

    return recorded


def _capturing_evaluator(nodes: dict[str, NodeCapture]) -> type:
    """A ReferenceEvaluator class whose Pad/Conv nodes (subgraphs included) record calls."""
    from onnx.reference import ReferenceEvaluator

    class CapturingEvaluator(ReferenceEvaluator):
        def _init(self) -> None:
            super()._init()
            for implementation in self.rt_nodes_:
                node = implementation.onnx_node
                if node.op_type in AUDITED_OPS and node.domain in ("", "ai.onnx"):
                    implementation.run = _recording(implementation.run, node, nodes)

    return CapturingEvaluator


def run_reference(model: Any, feeds: Mapping[str, np.ndarray]) -> Capture:
    """Run ``model`` with onnx.reference, recording every Pad/Conv node's first call."""
    capture = Capture(REFERENCE)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            evaluator = _capturing_evaluator(capture.nodes)(model)
            evaluator.run(None, dict(feeds))
    except Exception as error:  # the evaluator raises many types
        capture.error = _first_line(error)
    return capture


# --- onnxruntime -------------------------------------------------------------------------------


def _session(model_bytes: bytes) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    return onnxruntime.InferenceSession(model_bytes, options,
                                        providers=["CPUExecutionProvider"])


def _ort_run(session: Any, feeds: Mapping[str, np.ndarray]) -> list:
    import onnxruntime

    run_options = onnxruntime.RunOptions()
    run_options.log_severity_level = 4
    return session.run(None, dict(feeds), run_options)


def _main_nodes(model: Any) -> list[Any]:
    return [n for n in model.graph.node
            if n.op_type in AUDITED_OPS and n.domain in ("", "ai.onnx")]


def _with_outputs(model: Any, names: list[str]) -> Any:
    from onnx import ModelProto, helper

    copy = ModelProto()
    copy.CopyFrom(model)
    present = {o.name for o in copy.graph.output}
    for name in names:
        if name not in present:
            copy.graph.output.append(helper.make_empty_tensor_value_info(name))
            present.add(name)
    return copy


def run_onnxruntime(model: Any, feeds: Mapping[str, np.ndarray]) -> Capture:
    """Run ``model`` once with onnxruntime, the main graph's Pad/Conv values as outputs."""
    capture = Capture(ONNXRUNTIME)
    nodes = _main_nodes(model)
    stored = {t.name: t for t in model.graph.initializer}
    wanted = [n for node in nodes for n in list(node.input) + [node_key(node)]
              if n and n not in stored and n not in feeds]
    augmented = _with_outputs(model, wanted)
    try:
        session = _session(augmented.SerializeToString())
        values = _ort_run(session, feeds)
    except Exception as error:  # onnxruntime raises its own exception types
        capture.error = _first_line(error)
        return capture
    from onnx import numpy_helper

    known: dict[str, Any] = dict(feeds)
    known.update(zip([o.name for o in session.get_outputs()], values, strict=True))
    for node in nodes:
        inputs = [None if not n else _stored_or_known(n, stored, known, numpy_helper)
                  for n in node.input]
        capture.nodes[node_key(node)] = NodeCapture(inputs, np.asarray(known[node_key(node)]),
                                                    runtime=ONNXRUNTIME)
    return capture


def _stored_or_known(name: str, stored: Mapping, known: Mapping, numpy_helper: Any) -> Any:
    if name in known:
        return np.asarray(known[name])
    return numpy_helper.to_array(stored[name])


def single_node_output(node: Any, inputs: list[np.ndarray | None], opsets: Any
                       ) -> tuple[np.ndarray | None, str]:
    """(output, "") of ``node`` alone in onnxruntime with ``inputs``, or (None, its refusal)."""
    from onnx import helper

    from padconv_cli.dtypes import onnx_elem_type

    feeds, infos = {}, []
    for name, array in zip(node.input, inputs, strict=False):
        if name and array is not None and name not in feeds:
            feeds[name] = array
            infos.append(helper.make_tensor_value_info(name, onnx_elem_type(array.dtype),
                                                       list(array.shape)))
    graph = helper.make_graph([node], "audit_node", infos,
                              [helper.make_empty_tensor_value_info(node_key(node))])
    model = helper.make_model(graph, opset_imports=list(opsets))
    model.ir_version = 8
    try:
        return np.asarray(_ort_run(_session(model.SerializeToString()), feeds)[0]), ""
    except Exception as error:  # onnxruntime raises its own exception types
        return None, _first_line(error)


def _contains_audited(node: Any) -> bool:
    from padconv_cli.folding import subgraphs

    if node.op_type in AUDITED_OPS and node.domain in ("", "ai.onnx"):
        return True
    return any(_contains_audited(inner) for graph in subgraphs(node) for inner in graph.node)


def _names_read(node: Any) -> set[str]:
    """Every name ``node`` reads: its inputs and, over-approximated, those of its subgraphs."""
    from padconv_cli.folding import subgraphs

    names = {name for name in node.input if name}
    for graph in subgraphs(node):
        for inner in graph.node:
            names |= _names_read(inner)
    return names


def dependencies_only(model: Any) -> Any:
    """``model`` reduced to the main-graph nodes that its Pad/Conv nodes depend on.

    Targets: the outputs of every main-graph node that is, or holds in a subgraph, a Pad or
    Conv node; a node is kept when one of its outputs is read by a kept node or is a target
    (nodes are in topological order in a valid model).  The targets become the graph outputs.
    """
    from onnx import ModelProto, helper

    graph = model.graph
    targets = [name for node in graph.node if _contains_audited(node)
               for name in node.output if name]
    if not targets:
        return model
    needed, kept = set(targets), []
    for node in reversed(graph.node):
        if any(name in needed for name in node.output):
            kept.append(node)
            needed |= _names_read(node)
    if len(kept) == len(graph.node) and [o.name for o in graph.output] == targets:
        return model
    copy = ModelProto()
    copy.CopyFrom(model)
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
    if not runtime_available(ONNXRUNTIME):
        raise InputError("onnxruntime is not installed; use runtime onnx.reference",
                         param="runtime")
    capture = run_onnxruntime(model, feeds)
    reference = run_reference(model, feeds) if needs_reference or capture.error else None
    return capture, reference
