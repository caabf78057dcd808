"""ONNX ConvInteger: every rule padconv applies to it, from the command line to the emitted node.

Version 10, inputs ``x, w[, x_zero_point[, w_zero_point]]`` (int8/uint8 in any combination;
``w_zero_point`` a scalar or one value per output channel), Conv's attributes (declared once,
in :mod:`padconv_cli.ops.conv`), an int32 result.  The kernel is
:func:`padconv_cli.kernels.integer_conv.conv_integer`: exact sums, wrapped modulo 2**32
(ruling ``conv-integer-int32-wraps``); the padding holds ``x_zero_point`` (ruling
``integer-padding-is-zero-point``).

Judging: exactly (no error bound); the reference recomputes the sums as float64 Conv of the
zero-point-shifted values (every partial sum an integer below 2**53, so exact) and wraps them.

FLOPs: Conv's, ``2 * N * M * prod(out_spatial) * (C/group) * prod(kernel)``.  The emitted node
writes every attribute resolved, with explicit pads.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import padconv_cli.ops.conv_family as conv_family
from padconv_cli.ops.conv import OPERATOR as CONV
from padconv_cli.ops.protocol import (
    ONNXRUNTIME_PEER,
    OPTIONAL,
    UNLESS_MODEL,
    Command,
    Input,
    KernelCall,
    Operator,
    dtype_of,
    shape_of,
)

if TYPE_CHECKING:
    import numpy as np

    from padconv_cli.ops.onnx_graph import GraphParts, VersionChoice

NAME = "ConvInteger"
VERSIONS = (10,)

INPUTS = (Input("x"), Input("w", required=UNLESS_MODEL),
          Input("x_zero_point", required=OPTIONAL, literal_type="x"),
          Input("w_zero_point", required=OPTIONAL, literal_type="w"))
ATTRIBUTES = CONV.attributes
ATTRIBUTE_NAMES = tuple(a.name for a in ATTRIBUTES)
TEXTS = Command(
    summary="ONNX ConvInteger: x convolved with w, exact int32 sums.",
    help="Integer convolution of x (N x C x D1 x ... x Dn, int8/uint8) with w (M x C/group x "
    """k1 x ... x kn, int8/uint8), each shifted by its zero point; an int32 result.

    x_zero_point is a scalar of x's type, w_zero_point a scalar or one value per output
    channel of w's type (both default 0).  The padding holds x_zero_point (it adds nothing);
    the int32 sums wrap modulo 2**32, as the operator text says.
    Each input is a .npy, .npz[:NAME] or .pb file, MODEL.onnx:NAME (a stored tensor) or - for
    stdin.  With --from-model, w, the zero points and the attributes come from a ConvInteger
    node of a model; tensors and flags given here override them.
    """,
    examples="""\b
Examples:
  padconv conv-integer '[[[[1, 2, 3], [4, 5, 6]]]]' '[[[[1, 2]]]]' 1 2 \\
      --dtype uint8 --pads 0 1 0 1 -o y.npy
  padconv conv-integer '[[[[1, 2, 3]]]]' '[[[[1, -1]]]]' --dtype int8 \\
      --emit-onnx ci.onnx --emit-initializers --explain
""",
)


def max_inputs(version: int) -> int:
    """x, w, x_zero_point, w_zero_point."""
    return 4


def _operands(arrays: Sequence[Any]) -> list[Any]:
    """Shape and element type of each given input (nothing is read)."""
    from padconv_cli.kernels.quantized_plan import Operand

    return [None if a is None else Operand(shape_of(a), dtype_of(a)) for a in arrays]


# --- plan, kernel, needs -----------------------------------------------------------------------


def plan_arrays(arrays: Sequence[Any], attributes: Mapping[str, Any]) -> Any:
    """``plan_conv_integer`` from the inputs' shapes and element types."""
    from padconv_cli.errors import AttributeValueError
    from padconv_cli.kernels.quantized_plan import plan_conv_integer

    operands = (_operands(arrays) + [None] * 4)[:4]
    if operands[1] is None:
        raise AttributeValueError("ConvInteger needs w", param="w")
    return plan_conv_integer(*operands, **attributes)


def plan(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    """The plan when every input has x's element type (:func:`plan_arrays` otherwise)."""
    return plan_arrays(conv_family.declared(shapes, dtype), attributes)


def kernel(*arrays: Any, **attributes: Any) -> np.ndarray:
    """The public kernel ``conv_integer(x, w, x_zero_point, w_zero_point, **attributes)``."""
    from padconv_cli.kernels.integer_conv import conv_integer

    return conv_integer(*arrays, **attributes)


def run(made: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    """``conv_integer_planned`` on the plan."""
    import numpy as np

    from padconv_cli.kernels.integer_conv import conv_integer_planned

    return conv_integer_planned(made, *[np.asarray(a) if a is not None else None
                                        for a in arrays])


def typed(attributes: Mapping[str, Any], dtype: np.dtype) -> dict[str, Any]:
    """The attributes do not depend on the data's type."""
    return dict(attributes)


def output_dtype(dtype: np.dtype, attributes: Mapping[str, Any], made: Any) -> np.dtype:
    """int32."""
    import numpy as np

    return np.dtype(np.int32)


def integer_needs(arrays: Sequence[Any], made: Any, dtype: np.dtype) -> Any:
    """Inputs, the output in ``dtype``, and the exact sums' working memory
    (:func:`padconv_cli.kernels.integer_conv.working_bytes`)."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.kernels.integer_conv import working_bytes
    from padconv_cli.resources import Needs

    inputs = sum(math.prod(shape_of(a)) * dtype_of(a).itemsize for a in arrays if a is not None)
    output = math.prod(made.output_shape) * dtype.itemsize
    working = working_bytes(made.conv, math.prod(made.conv.x_shape))
    return Needs(inputs, output, working, tuple(made.output_shape), dtype_name(dtype),
                 dtype.itemsize)


def needs(arrays: Sequence[Any], made: Any, dtype: np.dtype, attributes: Mapping[str, Any],
          fmt: str) -> Any:
    """:func:`integer_needs` for an int32 output."""
    import numpy as np

    return integer_needs(arrays, made, np.dtype(np.int32))


def plan_tiles(call: KernelCall, made: Any, limit: int) -> Any:
    """The tiled engine's tiles within ``limit`` bytes (w and the zero points held whole)."""
    return conv_family.integer_tiles(call, made, limit, 4)


def run_engine(engine: str, source: Any, others: Sequence[Any], made: Any,
               attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    """The tiled engine (:mod:`padconv_cli.outofcore.integer_tiles`) or the dask engine
    (:mod:`padconv_cli.engines.family_dask`), bit-identical to the in-memory result."""
    import numpy as np

    from padconv_cli.engines.family_dask import finish_sums
    from padconv_cli.kernels.integer_conv import _per_channel, _scalar
    from padconv_cli.outofcore.integer_tiles import fixed_bytes, tiled_integer_conv

    w, xz, wz = (list(others) + [None] * 3)[:3]
    w = np.asarray(w)
    int32 = np.dtype(np.int32)
    zero_points = _per_channel(wz, w.shape[0])
    if engine == "dask":
        from padconv_cli.engines.family_dask import integer_dask, run_family_dask

        def blocks(x: Any, block_bytes: int) -> Any:
            return integer_dask(x, made.conv, w, _scalar(xz), zero_points, None, int32,
                                fixed_bytes(others), block_bytes)

        return run_family_dask("conv-integer", blocks, settings)

    def finish(sums: np.ndarray, m0: int, m1: int) -> np.ndarray:
        return finish_sums(sums, m0, m1, None)  # the low 32 bits: modulo 2**32

    return tiled_integer_conv(source, made.conv, finish, int32, w, _scalar(xz), zero_points,
                              settings["output"], memory_limit=settings["memory_limit"],
                              held=fixed_bytes(others), show_progress=settings["show_progress"])


# --- explain -----------------------------------------------------------------------------------


def explain(call: KernelCall, made: Any, source_of: Any) -> dict[str, Any]:
    """Conv's resolved attributes and formulas, the FLOPs, and the rulings applied."""
    geometry = made.conv
    attributes = conv_family.conv_attributes(geometry)
    return {
        "attributes": attributes,
        "sources": conv_family.attribute_sources(attributes, geometry.auto_pad, source_of),
        "dims": conv_family.conv_dims(geometry),
        "flops": geometry.flops,
        "flops_formula": "2 * N * M * prod(out_spatial) * (C/group) * prod(kernel_shape)",
        "rulings": conv_family.ruling_lines(made.rulings),
    }


# --- the emitted node --------------------------------------------------------------------------


def version_choice(dtype: np.dtype, attributes: Mapping[str, Any]) -> VersionChoice:
    """ConvInteger-10, the only version."""
    from padconv_cli.ops.onnx_graph import VersionChoice

    return VersionChoice(NAME, 10, "ConvInteger-10 is the only version")


def add_inputs(parts: GraphParts, inputs: Sequence[Any], arrays: Sequence[Any],
               embedded: Collection[str]) -> None:
    """The given data inputs in node order; an omitted one before a given one is ``""``."""
    last = max((i for i, a in enumerate(arrays) if a is not None), default=-1)
    for declared, array in list(zip(inputs, arrays, strict=False))[: last + 1]:
        if array is None:
            parts.add_constant_input(declared.name, None)
        else:
            parts.add_data_input(declared.name, array, embedded)


def graph_parts(call: KernelCall, choice: VersionChoice, embedded: Collection[str],
                made: Any) -> GraphParts:
    """ConvInteger node parts with every attribute written out as resolved by the plan."""
    from padconv_cli.ops.onnx_graph import GraphParts

    parts = GraphParts(attributes=conv_family.resolved_node_attributes(made.conv))
    add_inputs(parts, INPUTS, call.arrays, embedded)
    return parts


# --- judging -----------------------------------------------------------------------------------


def exact_sums(call_attributes: Mapping[str, Any], x: Any, w: Any, x_zero_point: Any,
               w_zero_point: Any) -> np.ndarray:
    """int64 ``sum (Xpad - xz) * (W[m] - wz[m])``: float64 Conv of the shifted values, whose
    partial sums are integers below 2**53 (exact in any order)."""
    import numpy as np

    from padconv_cli.kernels.conv import conv

    x, w = np.asarray(x), np.asarray(w)
    xz = 0 if x_zero_point is None else int(np.asarray(x_zero_point).reshape(-1)[0])
    wz = np.zeros(w.shape[0]) if w_zero_point is None else np.broadcast_to(
        np.asarray(w_zero_point, np.float64).reshape(-1), (w.shape[0],))
    shifted_x = x.astype(np.float64) - xz
    shifted_w = w.astype(np.float64) - wz.reshape((-1,) + (1,) * (w.ndim - 1))
    attributes = {name: call_attributes.get(name) for name in ATTRIBUTE_NAMES}
    attributes["auto_pad"] = attributes["auto_pad"] or "NOTSET"
    attributes["group"] = attributes["group"] or 1
    return conv(shifted_x, shifted_w, None, **attributes).astype(np.int64)


def reference(call: KernelCall) -> np.ndarray:
    """The exact sums (:func:`exact_sums`) reduced modulo 2**32 to int32."""
    import numpy as np

    x, w, xz, wz = (list(call.arrays) + [None] * 4)[:4]
    return exact_sums(call.attributes, x, w, xz, wz).astype(np.int32)


def error_bound(call: KernelCall, made: Any = None) -> None:
    """None: integers are compared exactly."""
    return None


def known_deviation(peer: str, call: KernelCall, made: Any) -> str | None:
    """onnxruntime refuses a per-channel w_zero_point on ConvInteger (the text allows it)."""
    if peer == ONNXRUNTIME_PEER and made.w_zero_point_per_channel:
        return ("onnxruntime refuses a per-channel w_zero_point on ConvInteger, which the "
                "operator text allows")
    return None


def sample_arguments(case: Any, folder: str) -> list[str]:
    """``conv-integer x w [x_zero_point [w_zero_point]] --pads ...`` of a verify case."""
    return ["conv-integer", *CONV.sample_arguments(case, folder)[1:]]


# --- model nodes -------------------------------------------------------------------------------


def node_call(version: int, attributes: dict[str, Any], inputs: list) -> KernelCall:
    """ConvInteger-10 -> ``conv_integer(x, w, x_zero_point, w_zero_point, ...)``."""
    return conv_family.node_call(NAME, version, attributes, inputs, ATTRIBUTE_NAMES, 2, 4,
                                 ("x", "w"))


def model_slots(origin: Any, arrays: tuple, flags: Mapping[str, Any],
                embedded: set[str]) -> list[Any]:
    """Input arrays of a ConvInteger node: the command line's, else the stored ones."""
    return conv_family.model_slots(INPUTS, origin, arrays, embedded)


def flag_rules(model_attributes: dict[str, Any], flags: Mapping[str, Any],
               arrays: Sequence[Any]) -> None:
    """Conv's rules (a new w drops kernel_shape; --pads resets auto_pad)."""
    CONV.flag_rules(model_attributes, flags, arrays)


OPERATOR = Operator(
    name=NAME, command="conv-integer", versions=VERSIONS, inputs=INPUTS, attributes=ATTRIBUTES,
    texts=TEXTS, max_inputs=max_inputs, output_name="y",
    onnx_attribute_types=CONV.onnx_attribute_types,
    plan=plan, kernel=kernel, run=run, typed=typed,
    output_dtype=output_dtype, needs=needs, plan_tiles=plan_tiles, run_engine=run_engine,
    explain=explain, version_choice=version_choice, graph_parts=graph_parts,
    reference=reference, error_bound=error_bound, known_deviation=known_deviation,
    sample_arguments=sample_arguments, node_call=node_call, model_slots=model_slots,
    flag_rules=flag_rules, plan_arrays=plan_arrays,
)
