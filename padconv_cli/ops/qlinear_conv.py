"""ONNX QLinearConv: every rule padconv applies to it, from the command line to the emitted node.

Version 10, inputs ``x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
y_zero_point[, B]``: x, w and y int8/uint8 (y's type is ``y_zero_point``'s), positive finite
float32 scales, ``w_scale``/``w_zero_point`` scalars or one per output channel, an int32
bias; Conv's attributes (declared once, in :mod:`padconv_cli.ops.conv`).  The kernel is
:func:`padconv_cli.kernels.integer_conv.qlinear_conv`: exact sums plus the bias, requantized
exactly rounded (rulings ``qlinear-exact-accumulation``, ``qlinear-exactly-rounded``).

Judging: exactly (no error bound); the reference recomputes the sums as float64 Conv of the
shifted values (exact) and requantizes in exact rational arithmetic.  A peer that differs by
one unit is classified (:func:`classify_difference`): a tie of the exact value, onnxruntime's
float32 requantization, or 16-bit saturation of a pair of products.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import padconv_cli.ops.conv_family as conv_family
from padconv_cli.ops.conv import OPERATOR as CONV
from padconv_cli.ops.conv_integer import add_inputs, exact_sums, integer_needs
from padconv_cli.ops.protocol import (
    OPTIONAL,
    REFERENCE_PEER,
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

NAME = "QLinearConv"
VERSIONS = (10,)

INPUTS = (
    Input("x"), Input("x_scale", required=UNLESS_MODEL, literal_type="float32"),
    Input("x_zero_point", required=UNLESS_MODEL, literal_type="x"),
    Input("w", required=UNLESS_MODEL),
    Input("w_scale", required=UNLESS_MODEL, literal_type="float32"),
    Input("w_zero_point", required=UNLESS_MODEL, literal_type="w"),
    Input("y_scale", required=UNLESS_MODEL, literal_type="float32"),
    Input("y_zero_point", required=UNLESS_MODEL, literal_type="x"),
    Input("B", required=OPTIONAL, literal_type="int32"),
)
W_INDEX = 3
ATTRIBUTES = CONV.attributes
ATTRIBUTE_NAMES = tuple(a.name for a in ATTRIBUTES)
TEXTS = Command(
    summary="ONNX QLinearConv: quantized Conv, exactly rounded.",
    help="Quantized convolution of x (N x C x D1 x ... x Dn) with w (M x C/group x k1 x ... x "
    """kn), int8/uint8, plus the int32 bias B (M); the result has y_zero_point's type.

    y = saturate(round_half_to_even(acc * x_scale * w_scale[m] / y_scale) + y_zero_point),
    acc = B[m] + sum (x - x_zero_point) * (w - w_zero_point[m]) exactly, the quotient rounded
    once from its real value.  Scales are positive finite float32; w_scale and w_zero_point
    may hold one value per output channel.  Each input is a .npy, .npz[:NAME] or .pb file,
    MODEL.onnx:NAME (a stored tensor) or - for stdin.  With --from-model, every input but x
    and the attributes come from a QLinearConv node of a model; tensors and flags given here
    override them.
    """,
    examples="""\b
Examples:
  padconv convert '[[[[1, 2], [3, 4]]]]' x.npy --dtype uint8
  padconv convert 0.5 s.npy --dtype float32
  padconv convert 0 z.npy --dtype uint8
  padconv qlinear-conv x.npy s.npy z.npy x.npy s.npy z.npy s.npy z.npy \\
      --pads 1 1 1 1 -o y.npy
  padconv qlinear-conv x.npy s.npy z.npy x.npy s.npy z.npy s.npy z.npy \\
      --emit-onnx q.onnx --emit-initializers --check
""",
)


def max_inputs(version: int) -> int:
    """Eight inputs and the optional bias."""
    return 9


# --- plan, kernel, needs -----------------------------------------------------------------------


def plan_arrays(arrays: Sequence[Any], attributes: Mapping[str, Any]) -> Any:
    """``plan_qlinear_conv`` from the inputs' shapes and element types (nothing is read)."""
    from padconv_cli.errors import AttributeValueError
    from padconv_cli.kernels.quantized_plan import Operand, plan_qlinear_conv

    operands = [None if a is None else Operand(shape_of(a), dtype_of(a))
                for a in (list(arrays) + [None] * 9)[:9]]
    for declared, operand in zip(INPUTS[:8], operands[:8], strict=True):
        if operand is None:
            raise AttributeValueError(f"QLinearConv needs {declared.name}", param=declared.name)
    return plan_qlinear_conv(*operands, **attributes)


def plan(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    """The plan when every input has x's element type (:func:`plan_arrays` otherwise)."""
    return plan_arrays(conv_family.declared(shapes, dtype), attributes)


def kernel(*arrays: Any, **attributes: Any) -> np.ndarray:
    """The public kernel ``qlinear_conv(x, x_scale, ..., y_zero_point, B, **attributes)``."""
    from padconv_cli.kernels.integer_conv import qlinear_conv

    return qlinear_conv(*arrays, **attributes)


def run(made: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    """``qlinear_conv_planned`` on the plan (it checks the scale values first)."""
    import numpy as np

    from padconv_cli.kernels.integer_conv import qlinear_conv_planned

    return qlinear_conv_planned(made, *[None if a is None else np.asarray(a)
                                        for a in (list(arrays) + [None] * 9)[:9]])


def typed(attributes: Mapping[str, Any], dtype: np.dtype) -> dict[str, Any]:
    """The attributes do not depend on the data's type."""
    return dict(attributes)


def output_dtype(dtype: np.dtype, attributes: Mapping[str, Any], made: Any) -> np.dtype:
    """y_zero_point's type (int8 or uint8)."""
    import numpy as np

    return np.dtype(made.y_dtype)


def needs(arrays: Sequence[Any], made: Any, dtype: np.dtype, attributes: Mapping[str, Any],
          fmt: str) -> Any:
    """Inputs, the output, the exact sums' working memory plus the requantization's float64
    estimate, rounding and mask (about 4 float64 arrays of the output's size)."""
    import numpy as np

    base = integer_needs(arrays, made, np.dtype(made.y_dtype))
    return base._replace(working=base.working + 4 * 8 * math.prod(made.output_shape))


def plan_tiles(call: KernelCall, made: Any, limit: int) -> Any:
    """The tiled engine's tiles within ``limit`` bytes (every input but x held whole)."""
    return conv_family.integer_tiles(call, made, limit, 1)


def run_engine(engine: str, source: Any, others: Sequence[Any], made: Any,
               attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    """The tiled engine (:mod:`padconv_cli.outofcore.integer_tiles`) or the dask engine
    (:mod:`padconv_cli.engines.family_dask`): each tile's exact sums plus the bias,
    requantized with the channels' exact multipliers, bit-identical to the in-memory result."""
    import numpy as np

    from padconv_cli.engines.family_dask import Requantization, finish_sums
    from padconv_cli.kernels.integer_conv import _per_channel, _scalar
    from padconv_cli.kernels.quantized_plan import check_scale_values
    from padconv_cli.kernels.requantize import channel_multipliers
    from padconv_cli.outofcore.integer_tiles import fixed_bytes, tiled_integer_conv

    xs, xz, w, ws, wz, ys, yz, b = (list(others) + [None] * 8)[:8]
    w = np.asarray(w)
    multipliers = channel_multipliers(
        float(check_scale_values(NAME, "x_scale", xs).reshape(-1)[0]),
        check_scale_values(NAME, "w_scale", ws).reshape(-1),
        float(check_scale_values(NAME, "y_scale", ys).reshape(-1)[0]))
    step = Requantization(None if b is None else np.asarray(b), multipliers, _scalar(yz),
                          np.dtype(made.y_dtype))
    zero_points = _per_channel(wz, w.shape[0])
    if engine == "dask":
        from padconv_cli.engines.family_dask import integer_dask, run_family_dask

        def blocks(x: Any, block_bytes: int) -> Any:
            return integer_dask(x, made.conv, w, _scalar(xz), zero_points, step, step.y_dtype,
                                fixed_bytes(others), block_bytes)

        return run_family_dask("qlinear-conv", blocks, settings)

    def finish(sums: np.ndarray, m0: int, m1: int) -> np.ndarray:
        return finish_sums(sums, m0, m1, step)

    return tiled_integer_conv(source, made.conv, finish, step.y_dtype, w, _scalar(xz),
                              zero_points, settings["output"],
                              memory_limit=settings["memory_limit"], held=fixed_bytes(others),
                              show_progress=settings["show_progress"])


# --- explain -----------------------------------------------------------------------------------


def explain(call: KernelCall, made: Any, source_of: Any) -> dict[str, Any]:
    """Conv's resolved attributes and formulas, the FLOPs, and the rulings applied (the
    requantization formula among them)."""
    geometry = made.conv
    attributes = conv_family.conv_attributes(geometry)
    attributes["w_scale"] = "per channel" if made.w_scale_per_channel else "per tensor"
    attributes["w_zero_point"] = "per channel" if made.w_zero_point_per_channel else \
        "per tensor"
    sources = conv_family.attribute_sources(attributes, geometry.auto_pad, source_of)
    sources["w_scale"] = sources["w_zero_point"] = "input shape"
    bias_adds = math.prod(made.output_shape) if made.has_bias else 0
    formula = "2 * N * M * prod(out_spatial) * (C/group) * prod(kernel_shape)"
    return {
        "attributes": attributes,
        "sources": sources,
        "dims": conv_family.conv_dims(geometry),
        "flops": geometry.flops + bias_adds,
        "flops_formula": formula + (" + N * M * prod(out_spatial) (bias)" if made.has_bias
                                    else ""),
        "rulings": conv_family.ruling_lines(made.rulings),
    }


# --- the emitted node --------------------------------------------------------------------------


def version_choice(dtype: np.dtype, attributes: Mapping[str, Any]) -> VersionChoice:
    """QLinearConv-10, the only version."""
    from padconv_cli.ops.onnx_graph import VersionChoice

    return VersionChoice(NAME, 10, "QLinearConv-10 is the only version")


def graph_parts(call: KernelCall, choice: VersionChoice, embedded: Collection[str],
                made: Any) -> GraphParts:
    """QLinearConv node parts with every attribute written out as resolved by the plan."""
    from padconv_cli.ops.onnx_graph import GraphParts

    parts = GraphParts(attributes=conv_family.resolved_node_attributes(made.conv))
    add_inputs(parts, INPUTS, call.arrays, embedded)
    return parts


# --- judging -----------------------------------------------------------------------------------


def _unpack(call: KernelCall) -> list[Any]:
    import numpy as np

    return [None if a is None else np.asarray(a) for a in (list(call.arrays) + [None] * 9)[:9]]


def accumulators(call: KernelCall) -> np.ndarray:
    """int64 ``acc = B[m] + sum (x - xz) * (w - wz[m])``, exactly."""
    import numpy as np

    x, _xs, xz, w, _ws, wz, _ys, _yz, b = _unpack(call)
    acc = exact_sums(call.attributes, x, w, xz, wz)
    if b is not None:
        acc = acc + b.astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
    return acc


def exact_quotients(call: KernelCall, acc: np.ndarray) -> np.ndarray:
    """``acc * x_scale * w_scale[m] / y_scale`` in float64 (for classifying differences)."""
    import numpy as np

    _x, xs, _xz, _w, ws, _wz, ys, _yz, _b = _unpack(call)
    scale = (float(xs.reshape(-1)[0]) * ws.astype(np.float64).reshape(-1)
             / float(ys.reshape(-1)[0]))
    scale = np.broadcast_to(scale, (acc.shape[1],)).reshape((1, -1) + (1,) * (acc.ndim - 2))
    return acc.astype(np.float64) * scale


def reference(call: KernelCall) -> np.ndarray:
    """The exact accumulators requantized in exact rational arithmetic
    (:func:`padconv_cli.kernels.requantize.requantize`)."""
    import numpy as np

    from padconv_cli.kernels.requantize import channel_multipliers, requantize

    _x, xs, _xz, _w, ws, _wz, ys, yz, _b = _unpack(call)
    multipliers = channel_multipliers(float(xs.reshape(-1)[0]), ws.astype(np.float32),
                                      float(ys.reshape(-1)[0]))
    return requantize(accumulators(call), multipliers, int(yz.reshape(-1)[0]), yz.dtype)


def error_bound(call: KernelCall, made: Any = None) -> None:
    """None: integers are compared exactly."""
    return None


def float32_requantized(call: KernelCall, acc: np.ndarray) -> np.ndarray:
    """onnxruntime's way: ``float32(acc) * float32(x_scale * w_scale / y_scale)`` rounded half
    to even in float32, plus y_zero_point, saturated."""
    import numpy as np

    _x, xs, _xz, _w, ws, _wz, ys, yz, _b = _unpack(call)
    multiplier = (np.float32(xs.reshape(-1)[0]) * ws.astype(np.float32).reshape(-1)
                  / np.float32(ys.reshape(-1)[0])).astype(np.float32)
    multiplier = np.broadcast_to(multiplier, (acc.shape[1],)).reshape(
        (1, -1) + (1,) * (acc.ndim - 2))
    values = np.rint(acc.astype(np.float32) * multiplier) + np.float32(yz.reshape(-1)[0])
    info = np.iinfo(yz.dtype)
    return np.clip(values, info.min, info.max).astype(yz.dtype)


def classify_difference(call: KernelCall, ours: np.ndarray, theirs: np.ndarray) -> str | None:
    """Why a peer's result differs by one unit from the exactly rounded one, or None when
    some difference is larger or unexplained: every differing element is a tie of the exact
    value (``rounding tie``), or what float32 requantization gives (``float32 requantization``);
    with neither, a difference of one unit on a uint8 x with int8 w is named ``16-bit
    saturation`` only when the peer's values are all lower in magnitude (pairs of products
    saturated)."""
    import numpy as np

    ours, theirs = np.asarray(ours).astype(np.int64), np.asarray(theirs).astype(np.int64)
    if ours.shape != theirs.shape:
        return None
    differs = ours != theirs
    if not differs.any():
        return None
    if np.abs(ours - theirs).max() > 1:
        return _saturation(call, ours, theirs, differs)
    acc = accumulators(call)
    quotient = exact_quotients(call, acc)
    ties = np.abs(np.abs(quotient - np.floor(quotient)) - 0.5) < 1e-9
    float32 = float32_requantized(call, acc).astype(np.int64)
    kinds = []
    if (ties | ~differs).all():
        kinds.append("rounding tie")
    if (float32 == theirs)[differs].all():
        kinds.append("float32 requantization")
    if not kinds:
        return _saturation(call, ours, theirs, differs)
    count = int(differs.sum())
    return (f"{count} element{'s differ' if count != 1 else ' differs'} by 1: "
            f"{' and '.join(kinds)} (padconv rounds the exact value once)")


def _saturation(call: KernelCall, ours: np.ndarray, theirs: np.ndarray, differs: np.ndarray
                ) -> str | None:
    """``16-bit saturation`` when x is uint8 and w int8 and the peer's values are all nearer
    y_zero_point than padconv's (pairs of products clamped to int16 lose magnitude)."""
    import numpy as np

    x, _xs, _xz, w, _ws, _wz, _ys, yz, _b = _unpack(call)
    if (x.dtype, w.dtype) != (np.dtype(np.uint8), np.dtype(np.int8)):
        return None
    zero = int(yz.reshape(-1)[0])
    if not (np.abs(theirs - zero) < np.abs(ours - zero))[differs].all():
        return None
    count = int(differs.sum())
    return (f"{count} element{'s' if count != 1 else ''} nearer zero than the exact result: "
            "16-bit saturation of pairs of uint8 x int8 products (onnxruntime#16105)")


def known_deviation(peer: str, call: KernelCall, made: Any) -> str | None:
    """Known refusals and differences of the peers on QLinearConv: onnx.reference's
    per-channel scales in 1-D and 3-D (docs/semantics-family.md)."""
    if peer == REFERENCE_PEER and made.w_scale_per_channel and len(made.conv.kernel_shape) != 2:
        return "onnx.reference 1.23 gets per-channel QLinearConv wrong for 1-D and 3-D"
    return None  # onnxruntime's one-unit differences are classified by classify_difference


def sample_arguments(case: Any, folder: str) -> list[str]:
    """``qlinear-conv x x_scale ... [B] --pads ...`` of a verify case."""
    return ["qlinear-conv", *CONV.sample_arguments(case, folder)[1:]]


# --- model nodes -------------------------------------------------------------------------------


def node_call(version: int, attributes: dict[str, Any], inputs: list) -> KernelCall:
    """QLinearConv-10 -> ``qlinear_conv(x, x_scale, ..., y_zero_point, B, ...)``."""
    return conv_family.node_call(NAME, version, attributes, inputs, ATTRIBUTE_NAMES, 8, 9,
                                 tuple(i.name for i in INPUTS[:8]))


def model_slots(origin: Any, arrays: tuple, flags: Mapping[str, Any],
                embedded: set[str]) -> list[Any]:
    """Input arrays of a QLinearConv node: the command line's, else the stored ones."""
    return conv_family.model_slots(INPUTS, origin, arrays, embedded)


def flag_rules(model_attributes: dict[str, Any], flags: Mapping[str, Any],
               arrays: Sequence[Any]) -> None:
    """Conv's rules, with w in its place: a new w drops kernel_shape; --pads resets
    auto_pad, --auto-pad drops the pads."""
    w = arrays[W_INDEX] if len(arrays) > W_INDEX else None
    CONV.flag_rules(model_attributes, flags, (arrays[0], w))


OPERATOR = Operator(
    name=NAME, command="qlinear-conv", versions=VERSIONS, inputs=INPUTS, attributes=ATTRIBUTES,
    texts=TEXTS, max_inputs=max_inputs, output_name="y",
    onnx_attribute_types=CONV.onnx_attribute_types,
    plan=plan, kernel=kernel, run=run, typed=typed,
    output_dtype=output_dtype, needs=needs, plan_tiles=plan_tiles, run_engine=run_engine,
    explain=explain, version_choice=version_choice, graph_parts=graph_parts,
    reference=reference, error_bound=error_bound, known_deviation=known_deviation,
    sample_arguments=sample_arguments, node_call=node_call, model_slots=model_slots,
    flag_rules=flag_rules, plan_arrays=plan_arrays, classify_difference=classify_difference,
)
