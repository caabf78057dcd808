"""Pad and Conv nodes of real ONNX models (``--from-model MODEL.onnx --node NAME``).

Loading rules: the model must be a regular file under protobuf's 2 GiB limit that parses as a
``ModelProto`` with a graph and a default-domain opset.  External data is never loaded by onnx:
a tensor is converted only when it is needed, by :func:`padconv_cli.tensorio.protobuf.
tensor_from_proto`, which keeps external data inside the model's own folder (no absolute
path, no ``..``, no symlink leading out) and checks its size.

Nodes: every Pad and Conv of the default domain, in the main graph and in subgraphs (If, Loop,
Scan bodies), in graph order.  A node is selected by its name, by its label ``OpType#k`` (k-th
node of that type, from 0; the only handle of an unnamed node), or by the name of its output.

Constant inputs: initializers and outputs of ``Constant`` nodes, of the node's own graph and
of the graphs around it (before IR 4 an initializer may also be a graph input; its stored value
is used), and values computed from those alone (``Identity`` of an initializer, ``Cast`` of a
``Constant``...), folded by onnx.reference on that sub-graph (:mod:`padconv_cli.folding`).
Everything else is computed at run time and must come from the command line.

Merging (:func:`resolve_call`): the node's attributes and constant inputs are translated by
:mod:`padconv_cli.onnx_nodes` (any opset, Pad-2 attribute style included) into kernel
attributes; command-line flags then replace them one by one, after the operator's
``flag_rules`` dropped the model values a flag makes meaningless (Conv: replacing W drops the
model's kernel_shape; ``--pads`` without ``--auto-pad`` sets auto_pad to NOTSET, ``--auto-pad``
without ``--pads`` drops the model's pads).
"""

from __future__ import annotations

import functools
import os
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from padconv_cli.errors import AttributeValueError, InputError
from padconv_cli.folding import fold_loader, fold_specs, lazy, subgraphs
from padconv_cli.ops import OPERATORS, operator, plain_call
from padconv_cli.ops.protocol import KernelCall, ResolvedCall, dtype_of

if TYPE_CHECKING:
    from padconv_cli.tensorio.files import ReadPolicy

__all__ = ["ModelNode", "ResolvedCall", "find_node", "load_model", "model_initializers",
           "model_nodes", "model_opset", "resolve_call", "stored_tensor", "stored_values",
           "with_node_context"]

MODEL_OPS = tuple(OPERATORS)
LISTED_NODES = 12
SHORTHAND_CONSTANTS = (
    "value_float", "value_floats", "value_int", "value_ints", "value_string", "value_strings"
)


@dataclass(frozen=True)
class ModelNode:
    """One Pad or Conv node of a model, with loaders for the constants it can see."""

    path: str
    label: str
    node: Any
    opset: int
    constants: Mapping[str, Callable[[], np.ndarray]]

    @property
    def op_type(self) -> str:
        """``Pad`` or ``Conv``."""
        return self.node.op_type

    @property
    def version(self) -> int:
        """The operator version in force at the model's opset (11 for Pad at opset 13)."""
        from padconv_cli.onnx_nodes import operator_version

        return operator_version(self.op_type, self.opset)

    @property
    def operator(self) -> str:
        """``Pad-11``, ``Conv-1``: operator name and version."""
        return f"{self.op_type}-{self.version}"

    def describe(self) -> str:
        """``model.onnx node 'conv1' (Conv-11)``."""
        return f"{self.path} node {self.label!r} ({self.operator})"

    def input_name(self, index: int) -> str:
        """Name of input ``index`` ("" when the slot is absent or explicitly omitted)."""
        inputs = self.node.input
        return inputs[index] if index < len(inputs) else ""

    def constant(self, index: int) -> np.ndarray | None:
        """The stored value of input ``index``, or None when it is not a constant."""
        loader = self.constants.get(self.input_name(index))
        return None if loader is None else loader()

    def slot(self, index: int, given: np.ndarray | None, what: str, remedy: str,
             embedded: set[str], embed_as: str | None = None,
             param: str | None = None) -> np.ndarray | None:
        """Input ``index`` of the call: the command-line value ``given``, else the stored
        constant (its name added to ``embedded`` as ``embed_as``), else None for an omitted
        slot; an input computed at run time is an InputError naming ``remedy``."""
        if given is not None:
            return given
        if not self.input_name(index):
            return None
        stored = self.constant(index)
        if stored is None:
            raise InputError(
                f"{self.describe()}: {what} comes from {self.input_name(index)!r}, which is "
                f"computed at run time, not stored in the model; {remedy}",
                param=param,
            )
        if embed_as:
            embedded.add(embed_as)
        return stored


# --- loading ---------------------------------------------------------------------------------


def load_model(path: str, policy: ReadPolicy | None = None) -> Any:
    """Parse ``path`` as a ModelProto without loading external data (module rules), its size
    within the input limit of ``policy`` (None: the default ``ReadPolicy()``)."""
    from google.protobuf.message import DecodeError
    from onnx import ModelProto

    from padconv_cli.tensorio.files import check_input_size, one_line, open_regular_file, read_exact
    from padconv_cli.tensorio.protobuf import PROTOBUF_LIMIT

    stream, size = open_regular_file(path)
    with stream:
        if size > PROTOBUF_LIMIT:
            raise InputError(f"{path}: {size} bytes is over protobuf's 2 GiB model limit")
        check_input_size(size, path, policy=policy)
        data = read_exact(stream, size)
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as error:
        raise InputError(f"{path}: not an ONNX model ({one_line(error, 120)})") from None
    if not model.HasField("graph") or not model.opset_import:
        raise InputError(f"{path}: not an ONNX model (no graph or no opset_import)")
    _check_names_are_text(model.graph, path)
    return _with_functions_inlined(model, path)


def _check_names_are_text(graph: Any, path: str) -> None:
    """Refuse a model whose tensor or node names are not UTF-8 (protobuf hands them over as
    ``bytes``, which no name lookup, message or rebuilt model can take)."""
    from padconv_cli.folding import subgraphs

    def names(g: Any) -> Iterator[Any]:
        for listing in (g.input, g.output, g.initializer, g.value_info):
            yield from (item.name for item in listing)
        for node in g.node:
            yield node.name
            yield from node.input
            yield from node.output
            for inner in subgraphs(node):
                yield from names(inner)

    for name in names(graph):
        if isinstance(name, bytes):
            shown = name[:40].decode("utf-8", "backslashreplace")
            raise InputError(f"{path}: the name {shown!r} is not UTF-8 text; ONNX names are "
                             "UTF-8 strings")


def _with_functions_inlined(model: Any, path: str) -> Any:
    """``model`` with its model-local functions expanded at their call sites.

    A Pad or Conv inside a function is then a node of the graph like any other, with the
    call's arguments as its inputs (inlined nodes get a ``__k`` suffix on their names).
    """
    if not model.functions:
        return model
    from onnx.inliner import inline_local_functions

    from padconv_cli.tensorio.files import one_line

    try:
        return inline_local_functions(model)
    except Exception as error:  # the inliner raises the C++ layer's exception types
        raise InputError(f"{path}: its local functions cannot be expanded "
                         f"({one_line(error, 120)})") from None


def model_opset(model: Any, path: str) -> int:
    """Version of the default ONNX domain the model imports."""
    from padconv_cli.onnx_nodes import default_opset

    try:
        return default_opset(model.opset_import)
    except AttributeValueError:
        raise InputError(f"{path}: the model imports no default-domain (ai.onnx) opset") from None


# --- constants and nodes ---------------------------------------------------------------------


def _tensor_loader(tensor: Any, label: str, base_dir: str,
                   policy: ReadPolicy | None) -> Callable[[], np.ndarray]:
    """A function converting ``tensor`` on first use (through tensorio's checks)."""

    def convert() -> np.ndarray:
        from padconv_cli.tensorio.protobuf import tensor_from_proto

        return tensor_from_proto(tensor, label, base_dir, policy)

    return lazy(convert)


def _constant_loader(node: Any, path: str, base_dir: str,
                     policy: ReadPolicy | None) -> Callable[[], np.ndarray] | None:
    """Loader of a Constant node's value (``value`` tensor or the value_* shorthands)."""
    label = f"{path}: Constant {node.output[0]!r}"
    for attribute in node.attribute:
        where = f"{path}: attribute {attribute.name!r} of node {node.name or node.output[0]!r}"
        if attribute.name == "value":
            return lazy(functools.partial(_tensor_value, attribute, label, base_dir, where,
                                          policy))
        if attribute.name in SHORTHAND_CONSTANTS:
            return lazy(functools.partial(_shorthand_value, attribute, where))
    return None  # sparse_value: not a dense constant


def _tensor_value(attribute: Any, label: str, base_dir: str, where: str,
                  policy: ReadPolicy | None) -> np.ndarray:
    """The array of a Constant's ``value`` attribute, which must be typed TENSOR."""
    from padconv_cli.onnx_nodes import check_attribute_type
    from padconv_cli.tensorio.protobuf import tensor_from_proto

    check_attribute_type(attribute, "Constant", where)
    return tensor_from_proto(attribute.t, label, base_dir, policy)


def _shorthand_value(attribute: Any, where: str) -> np.ndarray:
    """The array of a Constant's value_* attribute: float32, int64 or strings (UTF-8 text)."""
    from onnx import helper

    from padconv_cli.onnx_nodes import check_attribute_type, decode_attribute_text

    check_attribute_type(attribute, "Constant", where)
    value = helper.get_attribute_value(attribute)
    if "string" not in attribute.name:
        return np.array(value, dtype=np.float32 if "float" in attribute.name else np.int64)
    if isinstance(value, bytes):
        return np.array(decode_attribute_text(value, where), dtype=object)
    return np.array([decode_attribute_text(text, where) for text in value], dtype=object)


def _graph_constants(graph: Any, path: str, base_dir: str,
                     policy: ReadPolicy | None) -> dict[str, Callable]:
    """Loaders of the initializers and Constant outputs defined in ``graph`` itself."""
    constants: dict[str, Callable] = {}
    for tensor in graph.initializer:
        label = f"{path}: initializer {tensor.name!r}"
        constants[tensor.name] = _tensor_loader(tensor, label, base_dir, policy)
    for node in graph.node:
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or not node.output:
            continue
        loader = _constant_loader(node, path, base_dir, policy)
        if loader is not None:
            constants[node.output[0]] = loader
    return constants


def _folded(graph: Any, visible: dict[str, Callable], runtime: set[str], opsets: Any,
            path: str) -> dict[str, Callable]:
    """Loaders of the values ``graph`` computes from stored values only (see folding)."""

    found = fold_specs(graph, visible, runtime)
    return {name: fold_loader(found, name, visible, opsets, path) for name in found.producers}


def _walk(graph: Any, outer: Mapping[str, Callable], path: str, base_dir: str,
          opsets: Any, policy: ReadPolicy | None, outer_runtime: frozenset[str] = frozenset()):
    """(node, visible constants) for every node, subgraphs included, in graph order.

    Visible constants: the stored values of this graph and the graphs around it, then the
    values folded from them (:mod:`padconv_cli.folding`; never from a graph input).  A subgraph
    sees its own constants over those of the graphs around it: a ChainMap layer, not a copy, so
    that reading a model stays linear in its size however many subgraphs it has (a copy per
    subgraph was quadratic: 40k Constant + 40k If nodes took minutes).
    """
    if not graph.node:  # an empty branch: no node to yield, nothing for a node to see
        return
    runtime = set(outer_runtime) | _runtime_inputs(graph)
    own = dict(_graph_constants(graph, path, base_dir, policy))
    layered = ChainMap(own, *_layers(outer))
    own.update(_folded(graph, layered, runtime, opsets, path))
    visible = layered if own else outer
    for node in graph.node:
        yield node, visible
        for subgraph in subgraphs(node):
            yield from _walk(subgraph, visible, path, base_dir, opsets, policy,
                             frozenset(runtime))


def _runtime_inputs(graph: Any) -> set[str]:
    """The graph inputs only a caller can give: those without an initializer.  An initializer
    that is also a graph input (required before IR 4, a default the caller may replace from
    IR 4 on) counts as stored, as it does for a node's own inputs."""
    return {value.name for value in graph.input} - {t.name for t in graph.initializer}


def _layers(mapping: Mapping[str, Callable]) -> list[Mapping[str, Callable]]:
    """The maps of a ChainMap (flattened, so that lookups do not nest), or the mapping itself."""
    return list(mapping.maps) if isinstance(mapping, ChainMap) else [mapping]


def model_nodes(path: str, op_types: tuple[str, ...] = MODEL_OPS,
                policy: ReadPolicy | None = None) -> list[ModelNode]:
    """Every default-domain node of ``op_types`` in the model at ``path`` (module rules), read
    under ``policy``."""
    model = load_model(path, policy)
    opset = model_opset(model, path)
    base_dir = os.path.dirname(os.path.abspath(path))
    counters: dict[str, int] = {}
    nodes = []
    for node, constants in _walk(model.graph, {}, path, base_dir, model.opset_import, policy):
        if node.op_type not in op_types or node.domain not in ("", "ai.onnx"):
            continue
        index = counters.get(node.op_type, 0)
        counters[node.op_type] = index + 1
        label = node.name or f"{node.op_type}#{index}"
        nodes.append(ModelNode(path, label, node, opset, constants))
    return nodes


def _index_labels(nodes: list[ModelNode]) -> dict[int, str]:
    """id(node) -> ``OpType#k``, k counting the nodes of that type from 0."""
    counters: dict[str, int] = {}
    labels = {}
    for node in nodes:
        index = counters.get(node.op_type, 0)
        counters[node.op_type] = index + 1
        labels[id(node)] = f"{node.op_type}#{index}"
    return labels


def _matches(name: str, node: ModelNode, labels: dict[int, str]) -> bool:
    return name in (node.node.name, labels[id(node)]) or name in node.node.output


def _node_list(nodes: list[ModelNode], op_type: str) -> str:
    """``a, b, c ... and 9 more``: the first LISTED_NODES labels of one operator type."""
    from padconv_cli.messages import bounded_list

    return bounded_list((n.label for n in nodes if n.op_type == op_type), LISTED_NODES)


def find_node(path: str, name: str | None, op_type: str,
              policy: ReadPolicy | None = None) -> ModelNode:
    """The ``op_type`` node called ``name`` (name, ``OpType#k`` label or output name).

    With ``name`` None the model must have exactly one such node.  A missing or wrong name is
    an :class:`InputError` listing the model's nodes of that type (and close matches).
    """
    nodes = model_nodes(path, policy=policy)
    candidates = [n for n in nodes if n.op_type == op_type]
    if not candidates:
        raise InputError(f"{path}: the model has no {op_type} node{_other_op_hint(nodes)}")
    if name is None:
        if len(candidates) == 1:
            return candidates[0]
        raise InputError(
            f"{path}: {len(candidates)} {op_type} nodes; choose one with node: "
            f"{_node_list(nodes, op_type)}",
            param="node",
        )
    labels = _index_labels(nodes)
    chosen = [n for n in candidates if _matches(name, n, labels)]
    if len(chosen) == 1:
        return chosen[0]
    if len(chosen) > 1:
        from padconv_cli.messages import bounded_list

        handles = bounded_list(labels[id(n)] for n in chosen)
        raise InputError(f"{path}: {len(chosen)} {op_type} nodes match {name!r}; use {handles}")
    raise InputError(f"{path}: no {op_type} node {name!r}{_hint(name, nodes, labels, op_type)}")


def _other_op_hint(nodes: list[ModelNode]) -> str:
    """`` (Pad/Conv nodes: none)`` or ``; its Conv nodes (a, b) are for `padconv conv```."""
    others = sorted({n.op_type for n in nodes})
    if not others:
        return f" ({'/'.join(OPERATORS)} nodes: none)"
    return "; " + "; ".join(
        f"its {op} nodes ({_node_list(nodes, op)}) are for `padconv {operator(op).command}`"
        for op in others
    )


def with_node_context(origin: ModelNode | None, error: Exception) -> Exception:
    """``error`` with the model and the node named in front (same type, param and source),
    for errors about a node's values raised where the node is not known."""
    from padconv_cli.errors import PadconvError

    if origin is None or not isinstance(error, PadconvError) or origin.path in str(error):
        return error
    renamed = type(error)(f"{origin.describe()}: {error}", param=error.param,
                          source=error.source or origin.path)
    return renamed


def _hint(name: str, nodes: list[ModelNode], labels: dict[int, str], op_type: str) -> str:
    """``; did you mean 'conv1'? Conv nodes: ...`` for an unknown node name."""
    wrong_type = [n for n in nodes if n.op_type != op_type and _matches(name, n, labels)]
    if wrong_type:
        other = wrong_type[0].op_type
        return (f" ({name!r} is a {other} node: use `padconv {operator(other).command}`); "
                f"{op_type} nodes: " + (_node_list(nodes, op_type) or "none"))
    labels = [n.label for n in nodes if n.op_type == op_type]
    import difflib  # only for this error message

    close = difflib.get_close_matches(name, labels, n=3)
    guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"{guess} {op_type} nodes: {_node_list(nodes, op_type)}"


# --- merging model and flags -----------------------------------------------------------------


def _model_call(origin: ModelNode, slots: list) -> Any:
    """Translate the node (its own opset rules) with ``slots`` as its inputs."""
    from padconv_cli.onnx_nodes import call_for_node

    try:
        return call_for_node(
            origin.node, slots, opset=origin.opset, source=origin.path, label=origin.label
        )
    except AttributeValueError as error:
        raise AttributeValueError(f"{origin.describe()}: {error}") from None


def _given_by_model(attributes: Mapping[str, Any], defaults: Mapping[str, Any]) -> set[str]:
    """Attributes the model sets to something other than the default."""
    return {
        name
        for name, value in attributes.items()
        if value is not None and defaults.get(name, object()) != value
    }


def _typed(call: KernelCall) -> KernelCall:
    """The call with its attributes read in the data's element type (a command-line
    constant_value text)."""
    if call.arrays[0] is None:
        return call
    attributes = operator(call.op_type).typed(call.attributes, dtype_of(call.arrays[0]))
    return KernelCall(call.op_type, call.version, call.arrays, attributes, call.notes)


def resolve_call(
    op_type: str,
    arrays: tuple[np.ndarray | None, ...],
    flags: Mapping[str, Any],
    origin: ModelNode | None = None,
) -> ResolvedCall:
    """The kernel call for ``op_type``: defaults, then the model node's values, then ``flags``.

    ``arrays`` are the command-line tensors (``(data,)`` or ``(X, W, B)``, None where not
    given); ``flags`` holds only the attributes given on the command line, in kernel terms.
    """
    if origin is None:
        return plain_call(op_type, arrays, dict(flags))
    from padconv_cli.onnx_nodes import check_node_input_count

    check_node_input_count(origin.node, opset=origin.opset, source=origin.path, label=origin.label)
    entry = operator(op_type)
    embedded: set[str] = set()
    slots = entry.model_slots(origin, arrays, flags, embedded)
    model_call = _model_call(origin, slots)
    attributes = dict(model_call.attributes)
    entry.flag_rules(attributes, flags, arrays)
    from_model = _given_by_model(attributes, entry.defaults)
    overridden = tuple(sorted(name for name in flags if name in from_model))
    attributes.update(flags)
    notes = tuple(f"{origin.describe()}: {note}" for note in model_call.notes)
    if attributes.get("mode") != "wrap":  # --mode replaced the off-spec wrap
        notes = ()
    call = _typed(KernelCall(op_type, model_call.version, model_call.arrays, attributes, notes))
    given = frozenset(from_model | set(flags))
    return ResolvedCall(call, given, frozenset(embedded), origin, overridden)


def stored_values(path: str, policy: ReadPolicy | None = None
                  ) -> dict[str, Callable[[], np.ndarray]]:
    """Name -> loader of every tensor the model stores: initializers and Constant outputs of
    every graph (subgraphs included, main graph first), and the values folded from them."""
    model = load_model(path, policy)
    base_dir = os.path.dirname(os.path.abspath(path))
    values: dict[str, Callable[[], np.ndarray]] = {}
    seen: set[int] = set()
    for _node, visible in _walk(model.graph, {}, path, base_dir, model.opset_import, policy):
        own = visible.maps[0] if isinstance(visible, ChainMap) else visible
        if id(own) not in seen:  # each graph's own layer once: linear in the model's size
            seen.add(id(own))
            for name, loader in own.items():
                values.setdefault(name, loader)
    if not seen:  # a graph without nodes: its initializers only
        values = _graph_constants(model.graph, path, base_dir, policy)
    return values


def stored_tensor(path: str, name: str, policy: ReadPolicy | None = None) -> np.ndarray:
    """The tensor ``name`` stored in the model at ``path`` (``model.onnx:NAME``).

    An unknown name is an :class:`InputError` naming the model, with close matches.
    """
    values = stored_values(path, policy)
    loader = values.get(name)
    if loader is None:
        raise InputError(f"{path}: no stored tensor {name!r}{_stored_hint(name, list(values))}",
                         source=path)
    return loader()


def _stored_hint(name: str, names: list[str]) -> str:
    """``; did you mean 'a'? stored tensors: a, b (+3 more)`` for an unknown stored name."""
    import difflib  # only for this error message

    if not names:
        return " (the model stores no tensors)"
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(names[:LISTED_NODES])
    more = f" (+{len(names) - LISTED_NODES} more)" if len(names) > LISTED_NODES else ""
    return f"{guess} stored tensors: {shown}{more}"


def model_initializers(path: str, policy: ReadPolicy | None = None
                       ) -> Iterator[tuple[str, np.ndarray]]:
    """(name, array) of every initializer of the model's main graph, converted one at a time
    (external data under the same rules as the nodes' inputs)."""
    model = load_model(path, policy)
    base_dir = os.path.dirname(os.path.abspath(path))
    for tensor in model.graph.initializer:
        yield tensor.name, _tensor_loader(tensor, f"{path}: initializer {tensor.name!r}",
                                          base_dir, policy)()

