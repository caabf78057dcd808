"""ONNX models built with onnx.helper in the patterns real exporters write (no torch needed).

* :func:`resnet_block`: Conv with its bias routed through ``Identity`` of an initializer (the
  legacy PyTorch exporter), then Relu and a second such Conv.
* :func:`cast_pads_model`: Pad whose pads are ``Cast`` of an int32 ``Constant`` and whose
  constant_value is ``Cast`` of a float64 one.
* :func:`wrap_model`: Pad ``mode=wrap`` at opset 18 (the dynamo exporter's F.pad circular).
* :func:`same_dilated_model`: Conv ``auto_pad=SAME_UPPER`` with dilations 2.
Every builder takes the element type (float32 or float16) and the opset where it matters.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG_SEED = 1234


def weights(shape, dtype=np.float32, seed=RNG_SEED) -> np.ndarray:
    """Deterministic weights of ``shape``, roughly unit scale."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 0.5).astype(dtype)


def elem_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def make(nodes, inputs, outputs, initializers=(), *, opset=17, ir=8, name="exported"):
    """A model of ``nodes``; inputs/outputs are (name, dtype, shape) triples."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, elem_type(d), s) for n, d, s in inputs],
        [helper.make_tensor_value_info(n, elem_type(d), s) for n, d, s in outputs],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir
    return model


def resnet_block(dtype=np.float32, opset=17, channels=(3, 8, 8)):
    """x[1,3,10,10] -> conv1 (3x3 pads 1, bias via Identity) -> Relu -> conv2 (stride 2)."""
    c_in, c_mid, c_out = channels
    w1, b1 = weights((c_mid, c_in, 3, 3), dtype, 1), weights((c_mid,), dtype, 2)
    w2, b2 = weights((c_out, c_mid, 3, 3), dtype, 3), weights((c_out,), dtype, 4)
    nodes = [
        helper.make_node("Identity", ["conv1.bias"], ["onnx::Conv_b1"], name="Identity_0"),
        helper.make_node("Conv", ["x", "conv1.weight", "onnx::Conv_b1"], ["h"],
                         name="/conv1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Identity", ["conv2.bias"], ["onnx::Conv_b2"], name="Identity_1"),
        helper.make_node("Conv", ["r", "conv2.weight", "onnx::Conv_b2"], ["y"],
                         name="/conv2/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[2, 2]),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("conv1.weight", w1), ("conv1.bias", b1), ("conv2.weight", w2), ("conv2.bias", b2))]
    return make(nodes, [("x", dtype, [1, c_in, 10, 10])], [("y", dtype, [1, c_out, 5, 5])],
                inits, opset=opset)


def cast_pads_model(dtype=np.float32, opset=17, mode="constant"):
    """x[1,2,4,5] -> Pad(pads = Cast(Constant int32), value = Cast(Constant float64))."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int32), "pads32")
    value = numpy_helper.from_array(np.array(1.5, np.float64), "value64")
    nodes = [
        helper.make_node("Constant", [], ["c_pads"], value=pads, name="Constant_0"),
        helper.make_node("Cast", ["c_pads"], ["pads"], to=TensorProto.INT64, name="Cast_0"),
        helper.make_node("Constant", [], ["c_value"], value=value, name="Constant_1"),
        helper.make_node("Cast", ["c_value"], ["value"], to=elem_type(dtype), name="Cast_1"),
        helper.make_node("Pad", ["x", "pads", "value"], ["y"], name="/pad/Pad", mode=mode),
    ]
    return make(nodes, [("x", dtype, [1, 2, 4, 5])], [("y", dtype, [1, 2, 7, 8])], opset=opset)


def wrap_model(dtype=np.float32, opset=18):
    """x[1,2,4,5] -> Pad(mode=wrap, pads from an initializer) at ``opset``."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64), "pads")
    nodes = [helper.make_node("Pad", ["x", "pads"], ["y"], name="/pad/Pad", mode="wrap")]
    return make(nodes, [("x", dtype, [1, 2, 4, 5])], [("y", dtype, [1, 2, 7, 8])], [pads],
                opset=opset)


def same_dilated_model(dtype=np.float32, opset=17):
    """x[1,2,9,9] -> Conv(SAME_UPPER, dilations 2, 3x3)."""
    w = weights((4, 2, 3, 3), dtype, 5)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="dilated", auto_pad="SAME_UPPER",
                              dilations=[2, 2], kernel_shape=[3, 3])]
    return make(nodes, [("x", dtype, [1, 2, 9, 9])], [("y", dtype, [1, 4, 9, 9])],
                [numpy_helper.from_array(w, "w")], opset=opset)


def save(model, path, *, external=False) -> str:
    """Write ``model`` to ``path`` (initializers as external data next to it when asked)."""
    path = str(path)
    if external:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="weights.bin", size_threshold=0)
    else:
        onnx.save_model(model, path)
    return path


def reference_outputs(model, feeds) -> dict[str, np.ndarray]:
    """Every node output of ``model`` computed by onnx.reference."""
    from onnx.reference import ReferenceEvaluator

    names = [o for node in model.graph.node for o in node.output]
    values = ReferenceEvaluator(model).run(names, feeds)
    return dict(zip(names, values, strict=True))


def if_model(dtype=np.float32, opset=17):
    """cond, x[1,2,6,6] -> If(cond): then Conv 'then_conv' (outer W), else Pad 'else_pad'."""
    w = weights((3, 2, 3, 3), dtype, 6)
    conv_node = helper.make_node("Conv", ["x", "w"], ["t"], name="then_conv",
                                 pads=[1, 1, 1, 1])
    then_graph = helper.make_graph([conv_node], "then", [],
                                   [helper.make_tensor_value_info("t", elem_type(dtype), None)])
    pads = numpy_helper.from_array(np.array([0, 1, 0, 0, 0, 0, 0, 0], np.int64), "else_pads")
    pad_node = helper.make_node("Pad", ["x", "else_pads"], ["e"], name="else_pad")
    else_graph = helper.make_graph([pad_node], "else", [],
                                   [helper.make_tensor_value_info("e", elem_type(dtype), None)],
                                   [pads])
    nodes = [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_graph,
                              else_branch=else_graph)]
    return make(nodes, [("cond", np.bool_, []), ("x", dtype, [1, 2, 6, 6])],
                [("y", dtype, None)], [numpy_helper.from_array(w, "w")], opset=opset)


def loop_model(dtype=np.float32, opset=17, trips=2):
    """x[1,2,5,5] -> Loop(trips) whose body applies Conv 'body_conv' (1x1, 2->2) to the
    carried value."""
    w = weights((2, 2, 1, 1), dtype, 7)
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Conv", ["carried", "w"], ["next"], name="body_conv")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("carried", elem_type(dtype), None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("next", elem_type(dtype), None)],
    )
    trip = numpy_helper.from_array(np.array(trips, np.int64), "trips")
    keep_going = numpy_helper.from_array(np.array(True), "keep_going")
    nodes = [helper.make_node("Loop", ["trips", "keep_going", "x"], ["y"], name="loop",
                              body=body)]
    return make(nodes, [("x", dtype, [1, 2, 5, 5])], [("y", dtype, None)],
                [trip, keep_going, numpy_helper.from_array(w, "w")], opset=opset)


def symbolic_batch_model(dtype=np.float32, opset=17):
    """x[batch,2,5,5] -> Pad (edge, attribute pads before opset 11) -> Conv 3x3."""
    w = weights((4, 2, 3, 3), dtype, 8)
    if opset < 11:
        pad = helper.make_node("Pad", ["x"], ["p"], name="pad", mode="edge",
                               pads=[0, 0, 1, 1, 0, 0, 1, 1])
        inits = []
    else:
        pad = helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode="edge")
        inits = [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")]
    conv_node = helper.make_node("Conv", ["p", "w"], ["y"], name="conv")
    return make([pad, conv_node], [("x", dtype, ["batch", 2, 5, 5])],
                [("y", dtype, ["batch", 4, 5, 5])], inits + [numpy_helper.from_array(w, "w")],
                opset=opset)


def demo_model(opset=18):
    """The README's audit example: x[batch,3,16,16] -> Pad (Cast-ed pads) -> Conv (bias
    through Identity) -> Relu -> Pad wrap (opset 18) -> Conv SAME_UPPER dilations 2."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int32), "pads32")
    wrap = numpy_helper.from_array(np.array([0, 0, 2, 2, 0, 0, 2, 2], np.int64), "wrap_pads")
    w1, b1 = weights((16, 3, 3, 3), np.float32, 11), weights((16,), np.float32, 12)
    w2 = weights((8, 16, 3, 3), np.float32, 13)
    nodes = [
        helper.make_node("Constant", [], ["c_pads"], value=pads),
        helper.make_node("Cast", ["c_pads"], ["pads"], to=TensorProto.INT64),
        helper.make_node("Pad", ["x", "pads"], ["p"], name="/pad/Pad"),
        helper.make_node("Identity", ["conv1.bias"], ["b1"]),
        helper.make_node("Conv", ["p", "conv1.weight", "b1"], ["h"], name="/conv1/Conv",
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Pad", ["r", "wrap_pads"], ["q"], name="/circular/Pad", mode="wrap"),
        helper.make_node("Conv", ["q", "conv2.weight"], ["y"], name="/dilated/Conv",
                         auto_pad="SAME_UPPER", dilations=[2, 2], kernel_shape=[3, 3]),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("conv1.weight", w1), ("conv1.bias", b1), ("conv2.weight", w2))] + [wrap]
    return make(nodes, [("x", np.float32, ["batch", 3, 16, 16])],
                [("y", np.float32, ["batch", 8, 20, 20])], inits, opset=opset)


def torch_pad_chain_model(opset=17):
    """F.pad(x, [1, 2, 3, 4], mode="reflect") as the legacy exporter writes it: the torch-order
    pads turned into ONNX order by Concat, Reshape, Slice (step -1), Transpose, Reshape, Cast
    of stored values."""
    stored = {
        "tpads": [1, 2, 3, 4], "zeros": [0, 0, 0, 0], "shape": [-1, 2], "starts": [-1],
        "ends": [-(2**63) + 1], "axes": [0], "steps": [-1], "flat": [-1],
    }
    nodes = [
        helper.make_node("Concat", ["tpads", "zeros"], ["c"], axis=0),
        helper.make_node("Reshape", ["c", "shape"], ["r"]),
        helper.make_node("Slice", ["r", "starts", "ends", "axes", "steps"], ["s"]),
        helper.make_node("Transpose", ["s"], ["t"], perm=[1, 0]),
        helper.make_node("Reshape", ["t", "flat"], ["f"]),
        helper.make_node("Cast", ["f"], ["pads"], to=TensorProto.INT64),
        helper.make_node("Pad", ["x", "pads"], ["y"], name="/pad/Pad", mode="reflect"),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in stored.items()]
    return make(nodes, [("x", np.float32, [1, 2, 8, 8])], [("y", np.float32, [1, 2, 15, 11])],
                inits, opset=opset)


def resnet18_like(width=64, size=224, dtype=np.float32, opset=17, seed=0):
    """A model with resnet18's 20 Convs (7x7/2 stem, 8 basic blocks, 1x1/2 downsamples), its
    MaxPool, Adds and head, biases through Identity as the legacy exporter writes them; He
    initialised random weights."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    counter = [0]

    def conv(source, c_in, c_out, k, stride, name):
        w = (rng.standard_normal((c_out, c_in, k, k)) * np.sqrt(2 / (c_in * k * k)))
        b = rng.standard_normal(c_out) * 0.1
        inits.extend([numpy_helper.from_array(w.astype(dtype), f"{name}.weight"),
                      numpy_helper.from_array(b.astype(dtype), f"{name}.bias")])
        counter[0] += 1
        bias = f"onnx::Conv_{counter[0]}"
        nodes.append(helper.make_node("Identity", [f"{name}.bias"], [bias]))
        out = f"/{name}/Conv_output_0"
        nodes.append(helper.make_node("Conv", [source, f"{name}.weight", bias], [out],
                                      name=f"/{name}/Conv", kernel_shape=[k, k],
                                      pads=[k // 2] * 4, strides=[stride, stride]))
        return out

    def relu(source, name):
        nodes.append(helper.make_node("Relu", [source], [f"{name}_relu"]))
        return f"{name}_relu"

    h = relu(conv("x", 3, width, 7, 2, "conv1"), "stem")
    nodes.append(helper.make_node("MaxPool", [h], ["pool"], kernel_shape=[3, 3],
                                  pads=[1, 1, 1, 1], strides=[2, 2]))
    h, channels = "pool", width
    for stage in range(4):
        out_channels = width * 2**stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            name = f"layer{stage + 1}.{block}"
            a = relu(conv(h, channels, out_channels, 3, stride, f"{name}.conv1"), name + "a")
            b = conv(a, out_channels, out_channels, 3, 1, f"{name}.conv2")
            skip = h
            if stride != 1 or channels != out_channels:
                skip = conv(h, channels, out_channels, 1, stride, f"{name}.downsample.0")
            nodes.append(helper.make_node("Add", [b, skip], [f"{name}_sum"]))
            h, channels = relu(f"{name}_sum", name + "b"), out_channels
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    fc = rng.standard_normal((10, channels)) * np.sqrt(1 / channels)
    inits.append(numpy_helper.from_array(fc.astype(dtype), "fc.weight"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight"], ["logits"], transB=1))
    return make(nodes, [("x", dtype, ["batch", 3, size, size])], [("logits", dtype, None)],
                inits, opset=opset)
