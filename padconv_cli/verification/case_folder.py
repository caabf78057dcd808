"""Writing one node as an ONNX backend-test case folder, the layout ``padconv verify DIR`` reads:

    NAME/model.onnx                       one node; its inputs are graph inputs, in node order
    NAME/test_data_set_0/input_<i>.pb     the node's i-th present input (TensorProto)
    NAME/test_data_set_0/output_0.pb      the node's expected output

Omitted optional inputs stay empty; every present input is a graph input (as onnx's cases do
for Pad's ``pads``).  A folder is written into a temporary sibling, then renamed into place; an
existing one is replaced only once the new one is complete.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from padconv_cli.errors import OutputError

MODEL_FILE = "model.onnx"
DATA_SET = "test_data_set_0"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_NAME = 120


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
        data = temp / DATA_SET
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
