"""Small models shaped like real exports, for show and audit: symbolic and -1 input dims, and
YOLOv8-like node names that differ only in their middle."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

YOLO_NAMES = [f"/model.22/cv{branch}.{level}/cv{branch}.{level}.0/conv/Conv"
              for branch in (2, 3) for level in range(3)]


def exported_model(path, input_dims=(-1, 3, "?", "?"), names=YOLO_NAMES, channels=4,
                   with_pad=True, stride_first=1):
    """Conv(3->channels, 3x3, pads 1, strides ``stride_first``), then a Sigmoid*Mul (SiLU)
    and a Conv for each further name, a reflect Pad before the last Conv when ``with_pad``;
    the input is ``x`` with ``input_dims`` (ints, -1 or names such as ``?``)."""
    rng = np.random.default_rng(7)
    nodes, inits, source, c_in = [], [], "x", 3
    for index, name in enumerate(names):
        if with_pad and index == len(names) - 1:
            inits.append(numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
                                                 "pads"))
            nodes.append(helper.make_node("Pad", [source, "pads"], ["padded"], mode="reflect",
                                          name="/model.22/Pad"))
            source = "padded"
        w = (rng.standard_normal((channels, c_in, 3, 3)) / 3).astype(np.float32)
        b = (rng.standard_normal(channels) / 10).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{index}"), numpy_helper.from_array(b, f"b{index}")]
        pads = [0, 0, 0, 0] if source == "padded" else [1, 1, 1, 1]
        stride = stride_first if index == 0 else 1
        out = f"{name}_output_0"
        nodes.append(helper.make_node("Conv", [source, f"w{index}", f"b{index}"], [out],
                                      name=name, kernel_shape=[3, 3], pads=pads,
                                      strides=[stride, stride]))
        nodes.append(helper.make_node("Sigmoid", [out], [f"{out}_sig"], name=f"{name}_sig"))
        nodes.append(helper.make_node("Mul", [out, f"{out}_sig"], [f"{out}_act"],
                                      name=f"{name}_mul"))
        source, c_in = f"{out}_act", channels
    nodes.append(helper.make_node("Identity", [source], ["y"], name="out"))
    dims = [d if isinstance(d, str) else d for d in input_dims]
    graph = helper.make_graph(
        nodes, "exported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)
