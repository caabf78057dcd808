"""Values a model computes from stored tensors only, folded without running the model.

Exporters route stored values through nodes: PyTorch's legacy exporter feeds Conv biases
through ``Identity`` of an initializer, pads reach Pad nodes through ``Cast`` of a
``Constant``.  Rule: a node output is *foldable* when the node is of the default domain, has
at least one input, no subgraph attribute, is not random, and every input it names is stored
(an initializer or a ``Constant`` output that is not also a graph input) or foldable itself.
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
from collections.abc import Callable, Mapping
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


def foldable(node: Any, known: Mapping[str, Any]) -> bool:
    """True when ``node`` computes only from names in ``known`` (module rule)."""
    from padconv_cli.models import has_subgraph

    if node.domain not in DEFAULT_DOMAINS or node.op_type in RANDOM_OPS:
        return False
    if node.op_type == "Constant" or has_subgraph(node):
        return False
    names = [name for name in node.input if name]
    return bool(names) and all(name in known for name in names)


class _Known(Mapping):
    """Names whose value is known without running the model: stored and not a graph input, or
    produced by a foldable node.  Membership only, never a copy of ``stored``: a subgraph sees
    every constant around it, and copying them per subgraph made model reading quadratic."""

    def __init__(self, stored: Mapping[str, Any], runtime: set[str]) -> None:
        self.stored, self.runtime, self.produced = stored, runtime, {}

    def is_leaf(self, name: str) -> bool:
        return name in self.stored and name not in self.runtime

    def __contains__(self, name: object) -> bool:
        return name in self.produced or self.is_leaf(name)  # type: ignore[arg-type]

    def __getitem__(self, name: str) -> bool:
        if name not in self:
            raise KeyError(name)
        return True

    def __iter__(self):
        return iter(self.produced)

    def __len__(self) -> int:
        return len(self.produced)


def fold_specs(graph: Any, stored: Mapping[str, Any], runtime: set[str]) -> dict[str, FoldSpec]:
    """Output name -> FoldSpec for every foldable node output of ``graph`` (module rule).

    ``stored`` are the names with a stored value visible in ``graph``; ``runtime`` the graph
    inputs (of this graph and the graphs around it), which are never stored.  Cost: linear in
    the nodes of ``graph`` and the nodes each spec needs, whatever the size of ``stored``.
    """
    known = _Known(stored, runtime)
    producers: dict[str, Any] = {}
    positions: dict[int, int] = {}
    for node in graph.node:
        if not foldable(node, known):
            continue
        positions[id(node)] = len(positions)
        for output in node.output:
            if output:
                producers[output] = node
                known.produced[output] = True
    return {name: _spec(name, producers, known, positions) for name in producers}


def _spec(name: str, producers: Mapping[str, Any], known: _Known,
          positions: Mapping[int, int]) -> FoldSpec:
    """The nodes computing ``name`` (ancestors among ``producers``, in graph order) and the
    leaves they read."""
    needed: dict[int, Any] = {}
    used: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        node = producers.get(current)
        if node is None:
            used.add(current)
            continue
        if id(node) in needed:
            continue
        needed[id(node)] = node
        pending.extend(i for i in node.input if i)
    order = sorted(needed.values(), key=lambda node: positions[id(node)])
    return FoldSpec(name, tuple(order), tuple(sorted(u for u in used if known.is_leaf(u))))


def fold_loader(spec: FoldSpec, loaders: Mapping[str, Callable[[], np.ndarray]],
                opsets: Any, path: str) -> Callable[[], np.ndarray]:
    """A function computing ``spec``'s value on first use (module rules)."""
    from padconv_cli.models import _lazy

    def compute() -> np.ndarray:
        feeds = {leaf: loaders[leaf]() for leaf in spec.leaves}
        return evaluate(spec, feeds, opsets, path)

    return _lazy(compute)


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
