"""Cases from ONNX models: backend-test folders and the conformance data of the installed onnx;
one node written as such a folder.

A case folder holds ``model.onnx`` and ``test_data_set_*/input_<i>.pb``, ``output_<i>.pb``;
the inputs feed, in order, the graph inputs that are not initializers.  A model of one node
padconv implements and Constant nodes is runnable; any other is an *unsupported* case.

A folder written (:func:`write_case_folder`) holds one node, its present inputs as graph inputs
in node order (as onnx's cases do for Pad's ``pads``; omitted optional inputs stay empty) and
one data set ``test_data_set_0``; it is written into a temporary sibling, then renamed into
place; an existing one is replaced only once the new one is complete.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from padconv_cli import ops
from padconv_cli.errors import InputError, OutputError, PadconvError
from padconv_cli.messages import bounded_list
from padconv_cli.onnx_nodes import DEFAULT_DOMAINS
from padconv_cli.verification.cases import Case

NODE_SOURCE = "onnx-node"
DIR_SOURCE = "dir"
DATA_SET_PREFIX = "test_data_set_"
MODEL_FILE = "model.onnx"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_NAME = 120

# Conformance folders of the installed onnx package, in the order they are reported; a folder
# not listed here is scanned after them. Cases are picked by the model's node, not by name.
SUITE_ORDER = ("node", "pytorch-converted", "pytorch-operator", "simple")
OPERATORS = tuple(ops.OPERATORS)
# Modules of onnx.backend.test.case.node whose import generates the node cases of the operators.
NODE_CASE_MODULES = ("pad", "conv", "convtranspose", "convinteger", "qlinearconv")


def _index_of(path: Path) -> int:
    """Trailing number of ``input_12.pb`` / ``test_data_set_3`` (for numeric ordering)."""
    match = re.search(r"(\d+)(\.pb)?$", path.name)
    return int(match.group(1)) if match else -1


def case_from_model(model: Any, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], *,
                    name: str, source: str, location: str, base_dir: str | None = None,
                    policy: Any = None) -> Case:
    """A Case from a ModelProto and one data set (arrays for the non-initializer graph inputs,
    in graph order, and the expected graph outputs). ``base_dir``: the model's folder, the only
    place its external data may come from (None: no external data), read under ``policy``."""
    from padconv_cli.models import SHORTHAND_CONSTANTS, graph_constants
    from padconv_cli.onnx_nodes import default_opset, node_attributes

    base = Case(name=name, source=source, op="?", opset=0, location=location)
    node = _operator_node(model.graph)
    if node is None:
        kinds = bounded_list((n.op_type for n in model.graph.node if not _is_constant(n)),
                             empty="none")
        base.unsupported = (f"graph computes with {kinds}; only one Pad or Conv node (fed by "
                            "inputs, initializers or Constant nodes) is supported")
        return base
    base.op = node.op_type
    try:
        base.opset = default_opset(model.opset_import)
    except PadconvError as exc:
        base.unsupported = str(exc)
        return base
    for constant in filter(_is_constant, model.graph.node):
        if len(constant.attribute) != 1 or not constant.output or \
                constant.attribute[0].name not in ("value", *SHORTHAND_CONSTANTS):
            raise InputError(f"{location}: a Constant node needs one output and one dense value "
                             "attribute (value, value_float(s), value_int(s), value_string(s))")
    known = {name: load() for name, load in  # every one, used or not, as a case is checked whole
             graph_constants(model.graph, location, base_dir, policy).items()}
    feeds = _feeds(model.graph, inputs, location)
    missing = [n for n in node.input if n and n not in feeds and n not in known]
    if missing:
        raise InputError(f"{location}: no value for node input(s) {bounded_list(missing)}")
    base.inputs = [None if not n else feeds[n] if n in feeds else known[n] for n in node.input]
    base.attributes = node_attributes(node, source=location)
    base.expected = list(outputs)
    if len(base.expected) != 1:
        raise InputError(f"{location}: expected 1 output tensor, found {len(base.expected)}")
    return base


def _is_constant(node: Any) -> bool:
    return node.op_type == "Constant" and node.domain in DEFAULT_DOMAINS


def _operator_node(graph: Any) -> Any:
    """The graph's one node of an operator padconv implements (default domain, any opset) when
    every other node is a Constant; else None."""
    from padconv_cli.onnx_nodes import is_supported_op

    computing = [n for n in graph.node if not _is_constant(n)]
    if len(computing) == 1 and is_supported_op(computing[0].op_type, computing[0].domain):
        return computing[0]
    return None


def _feeds(graph: Any, inputs: Sequence[Any], location: str) -> dict[str, Any]:
    """Data-set arrays by graph input name: positional over inputs that are not initializers."""
    initializers = {tensor.name for tensor in graph.initializer}
    names = [vi.name for vi in graph.input if vi.name not in initializers]
    if len(inputs) != len(names):
        raise InputError(f"{location}: {len(inputs)} input tensor(s) for the {len(names)} graph "
                         f"input(s) {bounded_list(names)}")
    return dict(zip(names, map(_as_array, inputs), strict=True))


def _as_array(value: Any) -> np.ndarray:
    """A data-set value (array, numpy scalar or TensorProto, read by padconv's validating
    reader without external data) as an array."""
    from onnx import TensorProto

    from padconv_cli.tensorio.protobuf import tensor_from_proto

    if isinstance(value, TensorProto):
        return tensor_from_proto(value, f"tensor {value.name!r}", None)
    return np.asarray(value)


def _case_folders(root: Path) -> list[Path]:
    """The sub-folders of ``root`` holding ``model.onnx``, sorted (none when it is no folder)."""
    return sorted(p for p in root.iterdir() if (p / MODEL_FILE).is_file()) if root.is_dir() else []


def cases_from_dir(path: Path, *, source: str = DIR_SOURCE, policy: Any = None) -> list[Case]:
    """One Case per ``test_data_set_*`` of a backend-test case folder, named after the folder
    (``folder:test_data_set_N`` when there are several data sets), read under ``policy``."""
    from padconv_cli.models import load_model  # --from-model's reader: no external data
    from padconv_cli.tensor_sources import read_tensor

    model = load_model(str(path / MODEL_FILE), policy)
    data_sets = sorted(path.glob(DATA_SET_PREFIX + "*"), key=_index_of)
    data_sets = [d for d in data_sets if d.is_dir()]
    if not data_sets:
        raise InputError(f"{path}: no {DATA_SET_PREFIX}* folder next to {MODEL_FILE}")
    cases = []
    for data_set in data_sets:
        inputs, outputs = ([read_tensor(str(file), policy=policy) for file in
                            sorted(data_set.glob(f"{prefix}_*.pb"), key=_index_of)]
                           for prefix in ("input", "output"))
        if not outputs:
            raise InputError(f"{data_set}: no output_*.pb file")
        case_name = path.name if len(data_sets) == 1 else f"{path.name}:{data_set.name}"
        cases.append(case_from_model(model, inputs, outputs, name=case_name, source=source,
                                     location=str(data_set), base_dir=str(path), policy=policy))
    return cases


def cases_from_user_dir(path_text: str, policy: Any = None) -> list[Case]:
    """Cases of a user-given DIR: a case folder, or a folder whose sub-folders are case
    folders; anything else is an InputError."""
    path = Path(path_text)
    if not path.is_dir():
        raise InputError(f"DIR {path_text}: not a folder")
    if (path / MODEL_FILE).is_file():
        return cases_from_dir(path, policy=policy)
    children = _case_folders(path)
    if not children:
        raise InputError(f"DIR {path_text}: not an ONNX backend-test case folder (no {MODEL_FILE}, "
                         "and no sub-folder with one)")
    return [case for child in children for case in cases_from_dir(child, policy=policy)]


def onnx_data_root() -> Path:
    """``backend/test/data`` inside the installed onnx package."""
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def suite_dirs(root: Path | None = None) -> list[tuple[str, Path]]:
    """(source, folder) of every conformance folder whose model is one node padconv implements,
    picked by the node's op type (:func:`_operator_node`), never by the folder's name."""
    root = onnx_data_root() if root is None else root
    if not root.is_dir():
        return []
    subs = sorted(
        (p for p in root.iterdir() if p.is_dir()),
        key=lambda p: (SUITE_ORDER.index(p.name) if p.name in SUITE_ORDER else len(SUITE_ORDER),
                       p.name),
    )
    return [(folder.name if folder.name != "node" else NODE_SOURCE, child) for folder in subs
            for child in _case_folders(folder)
            if _model_file_is_single_operator(child / MODEL_FILE)]


def _model_file_is_single_operator(path: Path) -> bool:
    """True when the model file at ``path`` is one node padconv implements and Constant nodes
    (a cheap byte test first: the op type's name must appear in the file)."""
    import onnx

    try:
        payload = path.read_bytes()
    except OSError:
        return False
    if not any(op.encode() in payload for op in OPERATORS):
        return False
    try:
        return _operator_node(onnx.ModelProto.FromString(payload).graph) is not None
    except Exception:  # a corrupt model is not a Pad or Conv case
        return False


def shipped_cases(policy: Any = None) -> list[Case]:
    """padconv's own cases in the backend-test layout, shipped as package data
    (``verification/family_cases``: one folder per ruling of the convolution family, made by
    ``scripts/make_family_cases.py`` from independent oracles); source ``builtin``."""
    from importlib import resources

    from padconv_cli.verification.cases import BUILTIN_SOURCE

    root = Path(str(resources.files("padconv_cli.verification").joinpath("family_cases")))
    return [case for folder in _case_folders(root)
            for case in cases_from_dir(folder, source=BUILTIN_SOURCE, policy=policy)]


def suite_cases(policy: Any = None) -> list[Case]:
    """All conformance cases: generated Pad/Conv node cases, then the on-disk folders (a node
    folder whose name a generated case already has is skipped)."""
    cases = generated_node_cases()
    seen = {case.name for case in cases}
    for source, folder in suite_dirs():
        if source == NODE_SOURCE and folder.name in seen:
            continue
        cases.extend(cases_from_dir(folder, source=source, policy=policy))
    return cases


def generated_node_cases() -> list[Case]:
    """The node test cases onnx generates for Pad and Conv (onnx.backend.test.case.node)."""
    return [case_from_model(test.model, list(test.data_sets[0][0]),
                            [_as_array(value) for value in test.data_sets[0][1]],
                            name=test.name, source=NODE_SOURCE,
                            location=f"onnx.backend.test.case.node:{test.name}")
            for test in _onnx_node_test_cases()]


@lru_cache(maxsize=1)
def _onnx_node_test_cases() -> tuple[Any, ...]:
    """onnx's TestCase objects whose model is a single node padconv implements: importing the
    case modules of those operators runs their exporters, which fill the package's case list
    (``collect_testcases()`` would import every operator's module, about ten seconds)."""
    import importlib
    import warnings

    package_name = "onnx.backend.test.case.node"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        package = importlib.import_module(package_name)
        for module in NODE_CASE_MODULES:
            importlib.import_module(f"{package_name}.{module}")
    return tuple(case for case in package._NodeTestCases
                 if _operator_node(case.model.graph) is not None)


def case_folder_name(node_name: str, index: int) -> str:
    """``test_<node name>``: runs of characters other than letters, digits, ``_ . -`` become
    ``_``; a node without a name is ``test_node<index>``; at most :data:`MAX_NAME` characters
    (the end kept: it tells similar names apart)."""
    stem = _UNSAFE.sub("_", node_name).strip("_.") or f"node{index}"
    return "test_" + stem[-(MAX_NAME - 5):]


def single_node_model(node: Any, inputs: Sequence[np.ndarray | None],
                      output: np.ndarray | None, opset: int) -> Any:
    """A ModelProto holding ``node`` alone: its present inputs are graph inputs typed and
    shaped as ``inputs``; its first output is the graph output, typed and shaped as ``output``
    (untyped when None)."""
    import onnx
    from onnx import helper

    from padconv_cli.dtypes import onnx_elem_type

    graph_inputs = [helper.make_tensor_value_info(name, onnx_elem_type(array.dtype), array.shape)
                    for name, array in zip(node.input, inputs, strict=False)
                    if name and array is not None]
    graph_output = helper.make_empty_tensor_value_info(node.output[0]) if output is None else \
        helper.make_tensor_value_info(node.output[0], onnx_elem_type(output.dtype), output.shape)
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    del copy.output[1:]
    graph = helper.make_graph([copy], "case", graph_inputs, [graph_output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="padconv")
    model.ir_version = min(model.ir_version, 10)
    return model


def write_case_folder(parent: str | os.PathLike[str], name: str, node: Any,
                      inputs: Sequence[np.ndarray | None], output: np.ndarray,
                      opset: int) -> Path:
    """Write the case folder ``parent/name`` (module layout) whole; returns its path."""
    from onnx import numpy_helper

    from padconv_cli.tensorio.files import replace_folder

    model = single_node_model(node, inputs, output, opset)
    target = Path(parent) / name
    try:
        Path(parent).mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=f".{name[:40]}.", dir=parent))
    except OSError as exc:
        raise OutputError(f"{parent}: cannot create the case folder ({exc.strerror})") from None
    try:
        (temp / MODEL_FILE).write_bytes(model.SerializeToString())
        data = temp / f"{DATA_SET_PREFIX}0"
        data.mkdir()
        present = [(n, a) for n, a in zip(node.input, inputs, strict=False)
                   if n and a is not None]
        for index, (input_name, array) in enumerate(present):
            tensor = numpy_helper.from_array(np.asarray(array), input_name)
            (data / f"input_{index}.pb").write_bytes(tensor.SerializeToString())
        tensor = numpy_helper.from_array(np.asarray(output), node.output[0])
        (data / "output_0.pb").write_bytes(tensor.SerializeToString())
        replace_folder(str(temp), str(target))
    except BaseException as exc:
        shutil.rmtree(temp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise OutputError(f"{target}: write failed ({exc.strerror or exc})") from None
        raise
    return target
