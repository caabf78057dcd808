"""Small models of the convolution family, shaped like real exports: a decoder's ConvTranspose,
a dynamically quantized ConvInteger (uint8 activations, int8 weights, the float rescale after
it) and a statically quantized QLinearConv between QuantizeLinear and DequantizeLinear."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG_SEED = 11


def _save(path, nodes, inits, x_type, x_shape, y_type, opset=13):
    graph = helper.make_graph(
        nodes, "family", [helper.make_tensor_value_info("x", x_type, x_shape)],
        [helper.make_tensor_value_info("y", y_type, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def conv_transpose_model(path, group=1):
    """x (1x4x6x6) -> Conv 3x3 -> ConvTranspose k4 s2 p1 (``up``) -> y (1x2x12x12)."""
    rng = np.random.default_rng(RNG_SEED)
    w0 = (rng.standard_normal((4, 4, 3, 3)) / 3).astype(np.float32)
    w1 = (rng.standard_normal((4, 2 // group, 4, 4)) / 3).astype(np.float32)
    b1 = rng.standard_normal(2).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["h"], pads=[1, 1, 1, 1], name="enc"),
        helper.make_node("ConvTranspose", ["h", "w1", "b1"], ["y"], strides=[2, 2],
                         pads=[1, 1, 1, 1], group=group, name="up"),
    ]
    inits = [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w1, "w1"),
             numpy_helper.from_array(b1, "b1")]
    return _save(path, nodes, inits, TensorProto.FLOAT, [1, 4, 6, 6], TensorProto.FLOAT)


def conv_integer_model(path):
    """Dynamic quantization as exporters write it: x (float) -> DynamicQuantizeLinear ->
    ConvInteger (``qconv``, int8 weights, pads 1) -> Cast -> Mul by the scales -> y."""
    rng = np.random.default_rng(RNG_SEED)
    w = rng.integers(-127, 128, (3, 2, 3, 3)).astype(np.int8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"], pads=[1, 1, 1, 1],
                         name="qconv"),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["accf", "xs"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0, np.int8),
                                                                      "wz")]
    return _save(path, nodes, inits, TensorProto.FLOAT, [1, 2, 5, 5], TensorProto.FLOAT)


def qlinear_conv_model(path, per_channel=True):
    """x (float) -> QuantizeLinear -> QLinearConv (``qlconv``, uint8 x, int8 w per channel,
    int32 bias, pads 1) -> DequantizeLinear -> y."""
    rng = np.random.default_rng(RNG_SEED)
    # w within [-64, 63]: onnxruntime's AVX2 kernel (a CPU without AVX-512) adds pairs of
    # uint8 x int8 products in int16 and saturates beyond that (onnxruntime#16105), and the
    # tests that use this model take onnxruntime's result as right
    w = rng.integers(-64, 64, (4, 3, 3, 3)).astype(np.int8)
    w_scale = (np.array([0.01, 0.02, 0.015, 0.03], np.float32) if per_channel
               else np.array(0.02, np.float32))
    values = {
        "x_scale": np.array(0.05, np.float32), "x_zero_point": np.array(128, np.uint8),
        "w": w, "w_scale": w_scale, "w_zero_point": np.zeros(4 if per_channel else (),
                                                              np.int8),
        "y_scale": np.array(0.25, np.float32), "y_zero_point": np.array(120, np.uint8),
        "B": rng.integers(-500, 500, 4).astype(np.int32),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero_point"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "x_scale", "x_zero_point", "w", "w_scale",
                                         "w_zero_point", "y_scale", "y_zero_point", "B"],
                         ["yq"], pads=[1, 1, 1, 1], name="qlconv"),
        helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zero_point"], ["y"]),
    ]
    inits = [numpy_helper.from_array(v, k) for k, v in values.items()]
    return _save(path, nodes, inits, TensorProto.FLOAT, [1, 3, 6, 6], TensorProto.FLOAT)


def no_operator_model(path):
    """x -> Relu -> y: no node padconv implements."""
    return _save(path, [helper.make_node("Relu", ["x"], ["y"])], [], TensorProto.FLOAT,
                 [1, 2, 4, 4], TensorProto.FLOAT)
