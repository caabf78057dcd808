"""Nodes of real ONNX models of the operators padconv implements (``--from-model M --node N``).

Loading: a regular file under protobuf's 2 GiB limit that parses as a ``ModelProto`` with a
graph and a default-domain opset; local functions are expanded.  A tensor is converted when
needed, by ``tensorio.protobuf.tensor_from_proto`` (external data inside the model's folder).

Nodes: every default-domain node of an implemented operator, subgraphs (If, Loop, Scan bodies)
included, in graph order; selected by name, by label ``OpType#k`` (k-th of its type, from 0)
or by output name.

Constant inputs: initializers and ``Constant`` outputs of the node's graph and the graphs
around it (an initializer also listed as a graph input counts as stored), and the values
folded from those alone.  A node output is *foldable* when the node is of the default domain,
has an input, no subgraph, is not random, and every input it names is stored or foldable.
Its value is onnx.reference's output on that sub-graph, after shape inference bounded every
value of it by :data:`FOLD_LIMIT` bytes (else it must come from the command line).

Merging (:func:`resolve_call`): the node's values, translated by :mod:`padconv_cli.onnx_nodes`,
then the flags one by one, after the operator's ``flag_rules`` dropped what a flag overrides.
"""

from __future__ import annotations

import functools
import math
import os
from collections import ChainMap, Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from padconv_cli.dtypes import onnx_elem_type
from padconv_cli.errors import AttributeValueError, InputError, PadconvError
from padconv_cli.messages import bounded_list
from padconv_cli.onnx_nodes import (
    CONSTANT_ATTRIBUTE_TYPES,
    DEFAULT_DOMAINS,
    call_for_node,
    check_attribute_type,
    check_node_input_count,
    decode_attribute_text,
    default_opset,
    operator_version,
)
from padconv_cli.ops import ATTRIBUTE, OPERATORS, operator, plain_call
from padconv_cli.ops.protocol import KernelCall, ResolvedCall, dtype_of
from padconv_cli.tensorio.files import check_input_size, one_line, open_regular_file, read_exact
from padconv_cli.tensorio.protobuf import PROTOBUF_LIMIT, tensor_from_proto

if TYPE_CHECKING:
    from padconv_cli.tensorio.files import ReadPolicy

LISTED_NODES = 12
SHORTHAND_CONSTANTS = tuple(name for name in CONSTANT_ATTRIBUTE_TYPES if name.startswith("value_"))
GRAPH, GRAPHS = 5, 10  # AttributeProto types of a subgraph attribute
FOLD_LIMIT = 2**31 - 1  # protobuf's limit on a stored tensor: no folded value is larger
NOT_FOLDED = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                        "Multinomial", "Bernoulli", "Dropout", "Constant"})  # random, or stored
Loader = Callable[[], np.ndarray]


@dataclass(frozen=True)
class ModelNode:
    """One node of a model, with loaders for the constants it can see."""

    path: str
    label: str
    node: Any
    opset: int
    constants: Mapping[str, Loader]
    index_label: str = ""  # ``OpType#k``
    graph: str = "main"  # or the body holding the node: ``If 'cond' then_branch``

    @property
    def op_type(self) -> str:
        """``Pad``, ``Conv``...: the node's operator."""
        return self.node.op_type

    @property
    def version(self) -> int:
        """The operator version in force at the model's opset (11 for Pad at opset 13)."""
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
        """Input ``index``: ``given``, else the stored constant (``embed_as`` added to
        ``embedded``), else None when omitted; a value computed at run time is refused."""
        if given is not None:
            return given
        if not self.input_name(index):
            return None
        stored = self.constant(index)
        if stored is None:
            raise InputError(f"{self.describe()}: {what} comes from {self.input_name(index)!r}, "
                             f"which is computed at run time, not stored in the model; {remedy}",
                             param=param)
        if embed_as:
            embedded.add(embed_as)
        return stored


# --- loading ---------------------------------------------------------------------------------


def load_model(path: str, policy: ReadPolicy | None = None) -> Any:
    """Parse ``path`` as a ModelProto without loading external data (module rules), within
    the input limit of ``policy`` (None: the default ``ReadPolicy()``)."""
    from google.protobuf.message import DecodeError
    from onnx import ModelProto

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
    if not model.functions:
        return model
    from onnx.inliner import inline_local_functions

    try:  # a node inside a function becomes a node of the graph (``__k`` suffixed names)
        return inline_local_functions(model)
    except Exception as error:  # the inliner raises the C++ layer's exception types
        raise InputError(f"{path}: its local functions cannot be expanded "
                         f"({one_line(error, 120)})") from None


def _check_names_are_text(graph: Any, path: str) -> None:
    """Refuse names that are not UTF-8 (protobuf hands them over as ``bytes``)."""
    for inner in all_graphs(graph):
        listings = (inner.input, inner.output, inner.initializer, inner.value_info)
        names = [item.name for listing in listings for item in listing]
        names += [name for node in inner.node for name in (node.name, *node.input, *node.output)]
        for name in filter(lambda name: isinstance(name, bytes), names):
            shown = name[:40].decode("utf-8", "backslashreplace")
            raise InputError(f"{path}: the name {shown!r} is not UTF-8 text; ONNX names are "
                             "UTF-8 strings")


def model_opset(model: Any, path: str) -> int:
    """Version of the default ONNX domain the model imports."""
    try:
        return default_opset(model.opset_import)
    except AttributeValueError:
        raise InputError(f"{path}: the model imports no default-domain (ai.onnx) opset") from None


def named_subgraphs(node: Any) -> Iterator[tuple[str, Any]]:
    """(attribute name, graph) of each graph a node holds (If/Loop/Scan bodies)."""
    for attribute in node.attribute:
        if attribute.type == GRAPH:
            yield attribute.name, attribute.g
        elif attribute.type == GRAPHS:
            yield from ((attribute.name, graph) for graph in attribute.graphs)


def all_graphs(graph: Any) -> Iterator[Any]:
    """``graph`` and every graph its nodes hold, at any depth."""
    yield graph
    for node in graph.node:
        for _, inner in named_subgraphs(node):
            yield from all_graphs(inner)


# --- stored constants ------------------------------------------------------------------------


def _constant_value(attribute: Any, label: str, base_dir: str, where: str,
                    policy: ReadPolicy | None) -> np.ndarray:
    """The array of a Constant's attribute, of the type Constant defines for it: ``value``
    a tensor; value_float(s) float32, value_int(s) int64, value_string(s) UTF-8 text."""
    from onnx import helper

    check_attribute_type(attribute, "Constant", where)
    if attribute.name == "value":
        return tensor_from_proto(attribute.t, label, base_dir, policy)
    value = helper.get_attribute_value(attribute)
    if "string" not in attribute.name:
        return np.array(value, dtype=np.float32 if "float" in attribute.name else np.int64)
    if isinstance(value, bytes):
        return np.array(decode_attribute_text(value, where), dtype=object)
    return np.array([decode_attribute_text(text, where) for text in value], dtype=object)


def graph_constants(graph: Any, path: str, base_dir: str | None,
                     policy: ReadPolicy | None) -> dict[str, Loader]:
    """Loaders of the initializers and Constant outputs defined in ``graph`` itself, each
    converted on first use only (a bad constant no chosen node reads breaks nothing); a
    sparse_value is not a dense constant."""
    constants: dict[str, Loader] = {
        tensor.name: functools.cache(functools.partial(
            tensor_from_proto, tensor, f"{path}: initializer {tensor.name!r}", base_dir, policy))
        for tensor in graph.initializer
    }
    for node in graph.node:
        if node.op_type != "Constant" or node.domain not in DEFAULT_DOMAINS or not node.output:
            continue
        for attribute in node.attribute:
            if attribute.name == "value" or attribute.name in SHORTHAND_CONSTANTS:
                where = (f"{path}: attribute {attribute.name!r} of node "
                         f"{node.name or node.output[0]!r}")
                label = f"{path}: Constant {node.output[0]!r}"
                constants[node.output[0]] = functools.cache(functools.partial(
                    _constant_value, attribute, label, base_dir, where, policy))
                break
    return constants


# --- folding ---------------------------------------------------------------------------------


def _foldable(node: Any, is_known: Callable[[str], bool]) -> bool:
    """True when ``node`` computes only from names ``is_known`` accepts (module rule)."""
    if node.domain not in DEFAULT_DOMAINS or node.op_type in NOT_FOLDED or any(
            named_subgraphs(node)):
        return False
    names = [name for name in node.input if name]
    return bool(names) and all(is_known(name) for name in names)


def _folded(graph: Any, visible: Mapping[str, Loader], runtime: set[str], opsets: Any,
            path: str) -> dict[str, Loader]:
    """Loaders of the values ``graph`` computes from stored values only (module rules); a
    value's sub-graph is traced when it is loaded: linear in the graph's own size."""

    def is_leaf(name: str) -> bool:
        return name in visible and name not in runtime

    producers: dict[str, Any] = {}
    positions: dict[int, int] = {}  # id(node) -> its index in the graph
    for index, node in enumerate(graph.node):
        if _foldable(node, lambda name: name in producers or is_leaf(name)):
            positions[id(node)] = index
            producers.update((output, node) for output in node.output if output)

    def fold(name: str) -> np.ndarray:
        needed: dict[int, Any] = {}
        leaves: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            node = producers.get(current)
            if node is None:
                leaves.add(current)
            elif id(node) not in needed:
                needed[id(node)] = node
                pending.extend(i for i in node.input if i)
        nodes = sorted(needed.values(), key=lambda node: positions[id(node)])
        feeds = {leaf: visible[leaf]() for leaf in sorted(leaves) if is_leaf(leaf)}
        return _evaluate(name, nodes, feeds, opsets, path)

    return {name: functools.cache(functools.partial(fold, name)) for name in producers}


def _evaluate(name: str, nodes: list, feeds: Mapping[str, np.ndarray], opsets: Any,
              path: str) -> np.ndarray:
    """The value ``name`` computed by ``nodes`` from ``feeds`` with onnx.reference, after
    shape inference bounded every value of the sub-graph by FOLD_LIMIT bytes."""
    from onnx import helper, numpy_helper, shape_inference

    from padconv_cli.runtimes import onnx_array, quiet_reference

    def refused(why: str) -> InputError:
        return InputError(f"{path}: {name!r} is computed from stored values but cannot be "
                          f"folded ({one_line(why, 160)}); give it on the command line")

    stored = [numpy_helper.from_array(onnx_array(array), leaf) for leaf, array in feeds.items()]
    graph = helper.make_graph(nodes, "fold", [],
                              [helper.make_value_info(name, helper.TypeProto())], stored)
    model = helper.make_model(graph, opset_imports=list(opsets))
    model.ir_version = 8
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as error:  # onnx raises several types for an inconsistent graph
        raise refused(f"shape inference failed: {error}") from None
    infos = {info.name: info.type.tensor_type
             for info in [*inferred.graph.value_info, *inferred.graph.output]}
    for output in (output for node in nodes for output in node.output if output):
        tensor_type = infos.get(output)
        dims = tensor_type.shape.dim if tensor_type and tensor_type.HasField("shape") else None
        if dims is None or any(not d.HasField("dim_value") for d in dims):
            raise refused(f"the size of {output!r} is not known before running")
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)).itemsize
        nbytes = math.prod(d.dim_value for d in dims) * itemsize
        if nbytes > FOLD_LIMIT:
            raise refused(f"{output!r} would take {nbytes} bytes (over 2 GiB)")
    del model.graph.initializer[:]  # the run takes the leaves as inputs: strings stay str
    model.graph.input.extend(helper.make_tensor_value_info(leaf, onnx_elem_type(array.dtype),
                                                           list(array.shape))
                             for leaf, array in feeds.items())
    try:
        feeds = {leaf: onnx_array(array) for leaf, array in feeds.items()}
        return np.asarray(quiet_reference(model).run(None, feeds)[0])
    except Exception as error:  # the evaluator raises many types
        raise refused(f"onnx.reference: {type(error).__name__}: {error}") from None


# --- nodes -----------------------------------------------------------------------------------


def _walk(graph: Any, outer: Mapping[str, Loader], path: str, base_dir: str, opsets: Any,
          policy: ReadPolicy | None, outer_runtime: frozenset[str] = frozenset(),
          where: str = "main"):
    """(node, visible constants, ``where``: ``main`` or the body holding the node, ``If 'cond'
    then_branch``) for every node, subgraphs included, in graph order.  A subgraph sees its
    own constants over those around it: a ChainMap layer, not a copy (linear in the size)."""
    if not graph.node:  # an empty branch: no node to yield, nothing for a node to see
        return
    # an initializer that is also a graph input counts as stored, as for a node's inputs
    runtime = set(outer_runtime) | ({value.name for value in graph.input}
                                    - {t.name for t in graph.initializer})
    own = graph_constants(graph, path, base_dir, policy)
    layered = ChainMap(own, *(outer.maps if isinstance(outer, ChainMap) else [outer]))
    own.update(_folded(graph, layered, runtime, opsets, path))
    visible = layered if own else outer
    for node in graph.node:
        yield node, visible, where
        holder = f"{node.op_type} {node.name or (node.output[0] if node.output else '')!r}"
        for name, subgraph in named_subgraphs(node):
            yield from _walk(subgraph, visible, path, base_dir, opsets, policy,
                             frozenset(runtime), f"{holder} {name}")


def _base_dir(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


def model_nodes(path: str, op_types: tuple[str, ...] = tuple(OPERATORS),
                policy: ReadPolicy | None = None) -> list[ModelNode]:
    """Every default-domain node of ``op_types`` in the model at ``path`` (module rules), read
    under ``policy``."""
    model = load_model(path, policy)
    opset = model_opset(model, path)
    walk = _walk(model.graph, {}, path, _base_dir(path), model.opset_import, policy)
    counters: Counter[str] = Counter()
    nodes = []
    for node, constants, where in walk:
        if node.op_type not in op_types or node.domain not in DEFAULT_DOMAINS:
            continue
        handle = f"{node.op_type}#{counters[node.op_type]}"
        counters[node.op_type] += 1
        nodes.append(ModelNode(path, node.name or handle, node, opset, constants, handle, where))
    return nodes


def _matches(name: str, node: ModelNode) -> bool:
    return name in (node.node.name, node.index_label) or name in node.node.output


def _node_list(nodes: list[ModelNode], op_type: str) -> str:
    """``a, b, c ... and 9 more``: the first LISTED_NODES labels of one operator type."""
    return bounded_list((n.label for n in nodes if n.op_type == op_type), LISTED_NODES)


def find_node(path: str, name: str | None, op_type: str,
              policy: ReadPolicy | None = None) -> ModelNode:
    """The ``op_type`` node called ``name`` (name, ``OpType#k`` label or output name); with
    ``name`` None the model's only such node.  Else an :class:`InputError` listing the
    model's nodes of that type (and close matches, or the command of another type's node)."""
    nodes = model_nodes(path, policy=policy)
    candidates = [n for n in nodes if n.op_type == op_type]
    if not candidates:
        hints = [f"its {op} nodes ({_node_list(nodes, op)}) are for "
                 f"`padconv {operator(op).command}`" for op in sorted({n.op_type for n in nodes})]
        hint = "; " + "; ".join(hints) if hints else f" ({'/'.join(OPERATORS)} nodes: none)"
        raise InputError(f"{path}: the model has no {op_type} node{hint}")
    listed = _node_list(nodes, op_type)
    if name is None:
        if len(candidates) == 1:
            return candidates[0]
        raise InputError(f"{path}: {len(candidates)} {op_type} nodes; choose one with node: "
                         f"{listed}", param="node")
    chosen = [n for n in candidates if _matches(name, n)]
    if len(chosen) == 1:
        return chosen[0]
    if chosen:
        handles = bounded_list(n.index_label for n in chosen)
        raise InputError(f"{path}: {len(chosen)} {op_type} nodes match {name!r}; use {handles}")
    other = next((n.op_type for n in nodes if n.op_type != op_type and _matches(name, n)), None)
    hint = (f" ({name!r} is a {other} node: use `padconv {operator(other).command}`);" if other
            else _close_matches(name, [n.label for n in candidates]))
    raise InputError(f"{path}: no {op_type} node {name!r}{hint} {op_type} nodes: {listed}")


def _close_matches(name: str, names: list[str], **options: Any) -> str:
    """``; did you mean 'a' or 'b'?`` for the names close to ``name``, or ""."""
    import difflib  # only for an error message

    close = difflib.get_close_matches(name, names, n=3, **options)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def with_node_context(origin: ModelNode | None, error: Exception,
                      overridden: tuple[str, ...] = ()) -> Exception:
    """``error`` with the model and the node named in front (same type and source), for errors
    about a node's values raised where the node is not known.  ``param`` is dropped when its
    (first) name is a value the node gave and no flag replaced (``overridden``): the user typed
    no flag for it."""
    if origin is None or not isinstance(error, PadconvError) or origin.path in str(error):
        return error
    node = origin.node
    from_node = {attribute.name for attribute in node.attribute} | {
        entry.name for index, entry in enumerate(operator(origin.op_type).inputs)
        if entry.role == ATTRIBUTE and index < len(node.input) and node.input[index]}
    main = error.param[0] if isinstance(error.param, tuple) else error.param
    typed = main not in from_node or main in overridden
    return type(error)(f"{origin.describe()}: {error}", param=error.param if typed else None,
                       source=error.source or origin.path)


# --- merging model and flags -----------------------------------------------------------------


def resolve_call(op_type: str, arrays: tuple[np.ndarray | None, ...], flags: Mapping[str, Any],
                 origin: ModelNode | None = None) -> ResolvedCall:
    """The kernel call for ``op_type``: defaults, then the model node's values, then ``flags``
    (the attributes given on the command line, in kernel terms); ``arrays`` are the
    command-line tensors in node order, None where not given."""
    if origin is None:
        return plain_call(op_type, arrays, dict(flags))
    check_node_input_count(origin.node, opset=origin.opset, source=origin.path, label=origin.label)
    entry = operator(op_type)
    embedded: set[str] = set()
    slots = entry.model_slots(origin, arrays, flags, embedded)
    try:
        model_call = call_for_node(origin.node, slots, opset=origin.opset, source=origin.path,
                                   label=origin.label)
    except AttributeValueError as error:
        raise AttributeValueError(f"{origin.describe()}: {error}") from None
    attributes = dict(model_call.attributes)
    entry.flag_rules(attributes, flags, arrays)
    from_model = {name for name, value in attributes.items()  # set to other than the default
                  if value is not None and entry.defaults.get(name, object()) != value}
    overridden = tuple(sorted(name for name in flags if name in from_model))
    attributes.update(flags)
    notes = (tuple(f"{origin.describe()}: {note}" for note in model_call.notes)
             if attributes.get("mode") == "wrap" else ())  # else --mode replaced the off-spec wrap
    arrays = model_call.arrays
    if arrays[0] is not None:  # attributes given as text read in the data's element type
        attributes = entry.typed(attributes, dtype_of(arrays[0]))
    call = KernelCall(op_type, model_call.version, arrays, attributes, notes)
    return ResolvedCall(call, frozenset(from_model | set(flags)), frozenset(embedded), origin,
                        overridden)


# --- stored tensors --------------------------------------------------------------------------


def stored_values(path: str, policy: ReadPolicy | None = None) -> dict[str, Loader]:
    """Name -> loader of every tensor the model stores: initializers and Constant outputs of
    every graph (subgraphs included, main graph first), and the values folded from them."""
    model = load_model(path, policy)
    walk = _walk(model.graph, {}, path, _base_dir(path), model.opset_import, policy)
    values: dict[str, Loader] = {}
    seen: set[int] = set()
    for _node, visible, _where in walk:
        own = visible.maps[0] if isinstance(visible, ChainMap) else visible
        if id(own) not in seen:  # each graph's own layer once: linear in the model's size
            seen.add(id(own))
            for name, loader in own.items():
                values.setdefault(name, loader)
    if not seen:  # a graph without nodes: its initializers only
        values = graph_constants(model.graph, path, _base_dir(path), policy)
    return values


def stored_tensor(path: str, name: str, policy: ReadPolicy | None = None) -> np.ndarray:
    """The tensor ``name`` stored in the model at ``path`` (``model.onnx:NAME``); an unknown
    name is an :class:`InputError` naming the model, with close matches."""
    values = stored_values(path, policy)
    if name in values:
        return values[name]()
    names = list(values)
    if not names:
        hint = " (the model stores no tensors)"
    else:
        more = f" (+{len(names) - LISTED_NODES} more)" if len(names) > LISTED_NODES else ""
        hint = (f"{_close_matches(name, names, cutoff=0.5)} stored tensors: "
                f"{', '.join(names[:LISTED_NODES])}{more}")
    raise InputError(f"{path}: no stored tensor {name!r}{hint}", source=path)


def model_initializers(path: str, policy: ReadPolicy | None = None
                       ) -> Iterator[tuple[str, np.ndarray]]:
    """(name, array) of every initializer of the model's main graph, converted one at a time
    (external data under the same rules as the nodes' inputs)."""
    for tensor in load_model(path, policy).graph.initializer:
        label = f"{path}: initializer {tensor.name!r}"
        yield tensor.name, tensor_from_proto(tensor, label, _base_dir(path), policy)
