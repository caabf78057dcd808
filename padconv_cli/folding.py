"""Values a model computes from stored tensors only, folded without running the model.

Exporters route stored values through nodes: PyTorch's legacy exporter feeds Conv biases
through ``Identity`` of an initializer, pads reach Pad nodes through ``Cast`` of a
``Constant``.  Rule: a node output is *foldable* when the node is of the default domain, has
at least one input, no subgraph attribute, is not random, and every input it names is stored
(an initializer, also one listed as a graph input with it as default, or a ``Constant``
output) or foldable itself; a graph input without an initializer never is.
Its value is the output of ``onnx.reference`` run on exactly that sub-graph, the stored leaves
fed as inputs after the same checks as any stored tensor (external data inside the model's
folder, sizes matching the shapes).

Size limit: before anything runs, ONNX shape inference (with the stored values as
initializers, so shapes computed from them are known) must give every value of the sub-graph
a static shape of at most :data:`FOLD_LIMIT` bytes; a value whose size it cannot bound is not
folded, and must be given on the command line like any value computed at run time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import InputError

FOLD_LIMIT = 2**31 - 1  # protobuf's limit on a stored tensor: no folded value is larger
RANDOM_OPS = frozenset({
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
    "Bernoulli", "Dropout",
})
DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class FoldSpec:
    """How to compute one foldable value: the nodes (in graph order) and the stored leaves."""

    name: str
    nodes: tuple[Any, ...]
    leaves: tuple[str, ...]


def foldable(node: Any, is_known: Callable[[str], bool]) -> bool:
    """True when ``node`` computes only from names ``is_known`` accepts (module rule)."""
    if node.domain not in DEFAULT_DOMAINS or node.op_type in RANDOM_OPS:
        return False
    if node.op_type == "Constant" or has_subgraph(node):
        return False
    names = [name for name in node.input if name]
    return bool(names) and all(is_known(name) for name in names)


@dataclass(frozen=True)
class Foldable:
    """The foldable values of one graph: producing node of each, and the stored leaves."""

    producers: Mapping[str, Any]
    positions: Mapping[int, int]  # id(node) -> its index in the graph
    is_leaf: Callable[[str], bool]

    def spec(self, name: str) -> FoldSpec:
        """The nodes computing ``name`` (its ancestors among the producers, in graph order)
        and the stored leaves they read."""
        needed: dict[int, Any] = {}
        used: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            node = self.producers.get(current)
            if node is None:
                used.add(current)
            elif id(node) not in needed:
                needed[id(node)] = node
                pending.extend(i for i in node.input if i)
        order = sorted(needed.values(), key=lambda node: self.positions[id(node)])
        return FoldSpec(name, tuple(order), tuple(sorted(n for n in used if self.is_leaf(n))))


def fold_specs(graph: Any, stored: Mapping[str, Any], runtime: set[str]) -> Foldable:
    """The foldable node outputs of ``graph`` (module rule).

    ``stored`` are the names with a stored value visible in ``graph``; ``runtime`` the graph
    inputs (of this graph and the graphs around it), which are never stored.  Only the names
    the graph's nodes read are looked up, and a value's sub-graph is only traced when it is
    needed, so the cost is linear in the graph's own size.
    """

    def is_leaf(name: str) -> bool:
        return name in stored and name not in runtime

    producers: dict[str, Any] = {}
    positions: dict[int, int] = {}
    for index, node in enumerate(graph.node):
        if foldable(node, lambda name: name in producers or is_leaf(name)):
            positions[id(node)] = index
            for output in node.output:
                if output:
                    producers[output] = node
    return Foldable(producers, positions, is_leaf)


def fold_loader(foldable_values: Foldable, name: str,
                loaders: Mapping[str, Callable[[], np.ndarray]], opsets: Any, path: str
                ) -> Callable[[], np.ndarray]:
    """A function computing the value ``name`` on first use (module rules)."""
    def compute() -> np.ndarray:
        spec = foldable_values.spec(name)
        feeds = {leaf: loaders[leaf]() for leaf in spec.leaves}
        return evaluate(spec, feeds, opsets, path)

    return lazy(compute)


def _sub_model(spec: FoldSpec, feeds: Mapping[str, np.ndarray], opsets: Any,
               as_initializers: bool) -> Any:
    from onnx import helper, numpy_helper

    outputs = [helper.make_value_info(spec.name, helper.TypeProto())]
    if as_initializers:
        inputs = []
        initializers = [numpy_helper.from_array(_storable(a), n) for n, a in feeds.items()]
    else:
        inputs = [_input_info(name, array) for name, array in feeds.items()]
        initializers = []
    graph = helper.make_graph(list(spec.nodes), "fold", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=list(opsets))
    model.ir_version = 8
    return model


def _storable(array: np.ndarray) -> np.ndarray:
    return array.astype(object) if array.dtype.kind == "U" else array


def _input_info(name: str, array: np.ndarray) -> Any:
    from onnx import helper

    from padconv_cli.dtypes import onnx_elem_type

    return helper.make_tensor_value_info(name, onnx_elem_type(array.dtype), list(array.shape))


def _check_sizes(spec: FoldSpec, feeds: Mapping[str, np.ndarray], opsets: Any, path: str) -> None:
    """Shape inference must bound every value of the sub-graph by FOLD_LIMIT bytes."""
    from onnx import shape_inference

    model = _sub_model(spec, feeds, opsets, as_initializers=True)
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as error:  # onnx raises several types for an inconsistent graph
        raise _fold_error(spec, path, f"shape inference failed: {error}") from None
    infos = {info.name: info for info in inferred.graph.value_info}
    infos.update({info.name: info for info in inferred.graph.output})
    for node in spec.nodes:
        for output in node.output:
            if output:
                _check_one(spec, path, output, infos.get(output))


def _check_one(spec: FoldSpec, path: str, name: str, info: Any) -> None:
    from onnx import helper

    tensor_type = info.type.tensor_type if info is not None else None
    dims = list(tensor_type.shape.dim) if tensor_type and tensor_type.HasField("shape") else None
    if dims is None or any(not d.HasField("dim_value") for d in dims):
        raise _fold_error(spec, path, f"the size of {name!r} is not known before running")
    itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)).itemsize
    nbytes = math.prod(d.dim_value for d in dims) * itemsize
    if nbytes > FOLD_LIMIT:
        raise _fold_error(spec, path, f"{name!r} would take {nbytes} bytes (over 2 GiB)")


def _fold_error(spec: FoldSpec, path: str, why: str) -> InputError:
    from padconv_cli.tensorio.files import one_line

    return InputError(
        f"{path}: {spec.name!r} is computed from stored values but cannot be folded "
        f"({one_line(why, 160)}); give it on the command line"
    )


def evaluate(spec: FoldSpec, feeds: Mapping[str, np.ndarray], opsets: Any, path: str
             ) -> np.ndarray:
    """Run ``spec``'s sub-graph with onnx.reference after the size check (module rules)."""
    import warnings

    from onnx.reference import ReferenceEvaluator

    _check_sizes(spec, feeds, opsets, path)
    model = _sub_model(spec, feeds, opsets, as_initializers=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ReferenceEvaluator(model).run(None, {k: _storable(v) for k, v in
                                                         feeds.items()})[0]
    except Exception as error:  # the evaluator raises many types
        raise _fold_error(spec, path, f"onnx.reference: {type(error).__name__}: {error}"
                          ) from None
    return np.asarray(value)


def lazy(compute: Callable[[], np.ndarray]) -> Callable[[], np.ndarray]:
    """A loader running ``compute`` on first use only, so that a bad constant that no chosen
    node reads cannot break the model for the others."""
    cache: list[np.ndarray] = []

    def load() -> np.ndarray:
        if not cache:
            cache.append(compute())
        return cache[0]

    return load


def has_subgraph(node: Any) -> bool:
    """True when one of the node's attributes is a graph (If, Loop, Scan bodies)."""
    return any(True for _ in subgraphs(node))


def subgraphs(node: Any) -> Iterator[Any]:
    """The graphs a node holds as attributes (If/Loop/Scan bodies)."""
    from onnx import AttributeProto

    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == AttributeProto.GRAPHS:
            yield from attribute.graphs
