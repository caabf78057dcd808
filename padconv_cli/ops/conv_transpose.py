"""ONNX ConvTranspose: every rule padconv applies to it, from the command line to the emitted
node.

Versions 1, 11, 22 (one rule set for all: docs/semantics-family.md); inputs ``X, W[, B]``
with W of shape ``C x M/group x k...``; Conv's attributes plus ``output_padding`` and
``output_shape``.  The kernel is :func:`padconv_cli.kernels.conv_transpose.conv_transpose`;
the plan (:func:`~padconv_cli.kernels.conv_transpose_plan.plan_conv_transpose`) carries the
rulings it applied, which ``--explain`` names.

Judging: the dot-product error bound ``c * n * eps * S`` with ``S = conv_transpose(|X|, |W|) +
|B|`` (:mod:`padconv_cli.kernels.conv_transpose_bound`); the float64 recomputation
decides who is right.

FLOPs: ``2 * N * C * prod(in_spatial) * M/group * prod(kernel)`` (each input element meets
each tap of its group's kernels once), plus ``N * M * prod(out_spatial)`` for a bias.

The emitted node writes the resolved pads (never auto_pad nor output_shape: the inputs have
fixed shapes, and runtimes split a derived padding differently); where a derived pad is
negative (the output reaches past the un-cropped result) it writes ``output_shape`` instead,
and ``auto_pad`` SAME_UPPER when that is the split padconv used.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import padconv_cli.ops.conv_family as conv_family
from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError
from padconv_cli.ops.conv import OPERATOR as CONV
from padconv_cli.ops.conv import output_dtype, typed  # the same rules as Conv's
from padconv_cli.ops.protocol import (
    INTS,
    ONNXRUNTIME_PEER,
    OPTIONAL,
    REFERENCE_PEER,
    UNLESS_MODEL,
    Attribute,
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

NAME = "ConvTranspose"
VERSIONS = (1, 11, 22)
FLOAT_TYPES = ("float16", "bfloat16", "float32", "float64")

INPUTS = (Input("X"), Input("W", required=UNLESS_MODEL), Input("B", required=OPTIONAL))
_CONV = {a.name: a for a in CONV.attributes}
ATTRIBUTES = (
    Attribute("auto_pad", "choice", "NOTSET", choices=_CONV["auto_pad"].choices,
              show_default=True,
              help="SAME_UPPER/SAME_LOWER: output = input * stride, odd padding at the "
              "begin/end; VALID: no padding; NOTSET: use --pads."),
    _CONV["dilations"],
    _CONV["group"],
    _CONV["kernel_shape"],
    Attribute("output_padding", "ints",
              help="Extra output elements at the end of each spatial axis, each below the "
              "stride or the dilation of its axis (default 0)."),
    Attribute("output_shape", "ints",
              help="Output spatial shape; the pads are derived from it (and --pads ignored)."),
    Attribute("pads", "ints", help="Output elements cropped [x1_begin, ..., x1_end, ...] "
              "(default 0)."),
    _CONV["strides"],
)
ATTRIBUTE_NAMES = tuple(a.name for a in ATTRIBUTES)
TEXTS = Command(
    summary="ONNX ConvTranspose: transposed convolution, plus bias B.",
    help="Transposed convolution of X (N x C x D1 x ... x Dn) with W (C x M/group x k1 x ... "
    """x kn), plus bias B (M).

    Each input is a .npy, .npz[:NAME] or .pb file, MODEL.onnx:NAME (a stored tensor), - for
    stdin, or an inline literal.  float16, bfloat16, float32 and float64.
    With --from-model, W, B and the attributes come from a ConvTranspose node of a model (any
    opset); tensors and flags given here override them.  --explain names the rulings applied
    where the ONNX text is ambiguous (docs/semantics-family.md).
    """,
    examples="""\b
Examples:
  padconv conv-transpose '[[[[1, 2], [3, 4]]]]' '[[[[1, 1], [1, 1]]]]' \\
      --dtype float32 --strides 2 2 --output-padding 1 1 -o y.npy
  padconv conv-transpose '[[[[1, 2]]]]' '[[[[1, 1]]]]' '[0.5]' \\
      --dtype float32 --strides 2 2 --output-shape 2 5 --explain
  padconv conv-transpose y.npy '[[[[1]], [[2]]]]' --dtype float32 \\
      --emit-onnx ct.onnx --emit-initializers -o z.npy
  padconv conv-transpose y.npy --from-model ct.onnx --group 1 --check
""",
)


def max_inputs(version: int) -> int:
    """X, W, B in every version."""
    return 3


# --- plan, kernel, needs -----------------------------------------------------------------------


def _check_types(arrays: Sequence[Any]) -> None:
    """X, W and B share one of ConvTranspose's float types (from the declared types)."""
    named = [(d.name, a) for d, a in zip(INPUTS, arrays, strict=False) if a is not None]
    for name, array in named:
        dtype = dtype_of(array)
        if dtype.name not in FLOAT_TYPES:
            shown = "string" if dtype.kind in "USO" else dtype.name
            raise UnsupportedDtypeError(f"ConvTranspose takes float tensors "
                                        f"({', '.join(FLOAT_TYPES)}); got {shown} {name}",
                                        param=name)
    if len({dtype_of(a).name for _, a in named}) > 1:
        listing = ", ".join(f"{name} {dtype_of(a).name}" for name, a in named)
        raise UnsupportedDtypeError(f"ConvTranspose inputs must share one dtype; got {listing}",
                                    param="W")


def plan(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    """``plan_conv_transpose`` from the shapes of X, W and B (nothing is read)."""
    from padconv_cli.kernels.conv_transpose_plan import plan_conv_transpose

    shapes = list(shapes) + [None] * (3 - len(shapes))
    if shapes[1] is None:
        raise AttributeValueError("ConvTranspose needs W", param="W")
    return plan_conv_transpose(shapes[0], shapes[1], shapes[2], **attributes)


def plan_arrays(arrays: Sequence[Any], attributes: Mapping[str, Any]) -> Any:
    """The element types of X, W, B checked, then :func:`plan` (nothing is read)."""
    _check_types(arrays)
    return plan([shape_of(a) for a in arrays], dtype_of(arrays[0]), attributes)


def kernel(*arrays: Any, **attributes: Any) -> np.ndarray:
    """The public kernel ``conv_transpose(X, W, B, **attributes)``."""
    from padconv_cli.kernels.conv_transpose import conv_transpose

    return conv_transpose(*arrays, **attributes)


def run(made: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    """``conv_transpose_planned`` on the plan."""
    from padconv_cli.kernels.conv_transpose import conv_transpose_planned

    x, w, *rest = arrays
    return conv_transpose_planned(made, x, w, rest[0] if rest else None)


def needs(arrays: Sequence[Any], made: Any, dtype: np.dtype, attributes: Mapping[str, Any],
          fmt: str) -> Any:
    """Inputs, the output, and the stride-phase kernel's working memory
    (:func:`padconv_cli.kernels.conv_transpose.working_bytes`)."""
    import numpy as np

    from padconv_cli.dtypes import dtype_name
    from padconv_cli.kernels.conv_transpose import working_bytes
    from padconv_cli.resources import Needs

    dtype = np.dtype(dtype)
    inputs = sum(math.prod(shape_of(a)) * dtype_of(a).itemsize for a in arrays if a is not None)
    output = math.prod(made.output_shape) * dtype.itemsize
    return Needs(inputs, output, working_bytes(made, dtype), tuple(made.output_shape),
                 dtype_name(dtype), dtype.itemsize)


def plan_tiles(call: KernelCall, made: Any, limit: int) -> Any:
    """The tiled engine's tiles within ``limit`` bytes, W and B held whole besides them."""
    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.outofcore import conv_transpose_tiles as tiles

    x, w, b = (list(call.arrays) + [None])[:3]
    held = tiles.fixed_bytes(w, b)
    if limit - held <= 0:
        raise OutputTooLargeError("W and B alone exceed the limit", param="memory_limit")
    return tiles.plan_tiles(made, dtype_of(x).itemsize, limit - held, held)


def run_engine(engine: str, source: Any, others: Sequence[Any], made: Any,
               attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    """The tiled engine (:mod:`padconv_cli.outofcore.conv_transpose_tiles`) or the dask
    engine (:mod:`padconv_cli.engines.family_dask`), bit-identical to the in-memory result."""
    import numpy as np

    from padconv_cli.outofcore.conv_transpose_tiles import tiled_conv_transpose

    _check_types([source, *others])
    w, b = (list(others) + [None, None])[:2]
    w, b = np.asarray(w), None if b is None else np.asarray(b)
    if engine == "dask":
        from padconv_cli.engines.family_dask import conv_transpose_dask, run_family_dask

        def blocks(x: Any, block_bytes: int) -> Any:
            return conv_transpose_dask(x, w, b, made, block_bytes)

        return run_family_dask("conv-transpose", blocks, settings)
    return tiled_conv_transpose(source, w, b, settings["output"], plan=made,
                                memory_limit=settings["memory_limit"],
                                show_progress=settings["show_progress"])


# --- explain -----------------------------------------------------------------------------------


def _dims(made: Any) -> list[dict[str, Any]]:
    """N, M = W.shape[1] * group, then one spatial formula per axis (from the plan)."""
    n, m, *spatial = made.output_shape
    dims = [
        {"axis": 0, "size": n, "formula": f"N = X.shape[0] = {n}"},
        {"axis": 1, "size": m, "formula": f"M = W.shape[1] * group = {m}"},
    ]
    for index, (size, formula) in enumerate(zip(spatial, made.formulas, strict=True)):
        dims.append({"axis": index + 2, "size": size, "formula": formula})
    return dims


def explain(call: KernelCall, made: Any, source_of: Any) -> dict[str, Any]:
    """The resolved attributes (pads derived from auto_pad or output_shape), each output
    dimension's formula, the FLOPs (module docstring) and the rulings applied."""
    has_bias = len(call.arrays) > 2 and call.arrays[2] is not None
    attributes = {
        "auto_pad": made.auto_pad,
        "kernel_shape": list(made.kernel_shape),
        "strides": list(made.strides),
        "dilations": list(made.dilations),
        "group": made.group,
        "pads": list(made.pads),
        "output_padding": list(made.output_padding),
        "output_shape": list(made.output_shape[2:]),
    }
    sources = conv_family.attribute_sources(attributes, made.auto_pad, source_of)
    if call.attributes.get("output_shape") is not None:
        sources["pads"] = "output_shape"
    elif sources["output_shape"] == "default":
        sources["output_shape"] = "computed"
    bias_adds = math.prod(made.output_shape) if has_bias else 0
    formula = "2 * N * C * prod(in_spatial) * (M/group) * prod(kernel_shape)"
    return {
        "attributes": attributes,
        "sources": sources,
        "dims": _dims(made),
        "flops": made.flops + bias_adds,
        "flops_formula": formula + (" + N * M * prod(out_spatial) (bias)" if has_bias else ""),
        "rulings": conv_family.ruling_lines(made.rulings),
    }


# --- the emitted node --------------------------------------------------------------------------


def version_choice(dtype: np.dtype, attributes: Mapping[str, Any]) -> VersionChoice:
    """The oldest ConvTranspose version with the call's element type (bfloat16: 22)."""
    import numpy as np

    from padconv_cli.ops.onnx_graph import VersionChoice, first_version_for_type

    version = first_version_for_type(NAME, VERSIONS, dtype)
    reason = (f"ConvTranspose-{version} is the first to accept {np.dtype(dtype).name}"
              if version != VERSIONS[0] else "ConvTranspose-1 has every feature used")
    return VersionChoice(NAME, version, reason)


def node_attributes(made: Any) -> dict[str, Any]:
    """The emitted node's attributes (module docstring)."""
    attributes: dict[str, Any] = {
        "kernel_shape": list(made.kernel_shape),
        "strides": list(made.strides),
        "dilations": list(made.dilations),
        "group": int(made.group),
    }
    if any(made.output_padding):
        attributes["output_padding"] = list(made.output_padding)
    if all(p >= 0 for p in made.pads):
        attributes["pads"] = list(made.pads)
        return attributes
    attributes["output_shape"] = list(made.output_shape[2:])
    if made.auto_pad == "SAME_UPPER":  # the split of a derived padding follows SAME_UPPER
        attributes["auto_pad"] = "SAME_UPPER"
    return attributes


def graph_parts(call: KernelCall, choice: VersionChoice, embedded: Collection[str],
                made: Any) -> GraphParts:
    """ConvTranspose node parts with every attribute written out as resolved by the plan."""
    from padconv_cli.ops.onnx_graph import GraphParts

    parts = GraphParts(attributes=node_attributes(made))
    for declared, array in zip(INPUTS, call.arrays, strict=False):
        if array is not None:
            parts.add_data_input(declared.name, array, embedded)
    return parts


# --- judging -----------------------------------------------------------------------------------


def reference(call: KernelCall) -> np.ndarray:
    """ConvTranspose recomputed in float64 from the same inputs and attributes."""
    import numpy as np

    from padconv_cli.kernels.conv_transpose import conv_transpose

    x, w, b = (None if a is None else np.asarray(a).astype(np.float64)
               for a in (list(call.arrays) + [None])[:3])
    return conv_transpose(x, w, b, **call.attributes)


def error_bound(call: KernelCall, made: Any = None) -> np.ndarray:
    """The dot-product error bound per output element (module docstring); ``made``: the
    call's plan, when it was made already."""
    from padconv_cli.kernels.conv_transpose_bound import conv_transpose_error_bound

    x, w, b = (list(call.arrays) + [None])[:3]
    attributes = call.attributes if made is None else {}
    return conv_transpose_error_bound(x, w, b, plan=made, **attributes)


def _derived_from_output_shape(call: KernelCall, made: Any) -> bool:
    """The node the peer runs derives its pads from output_shape (the call gives it, or the
    emitted node writes it because a derived pad is negative)."""
    return call.attributes.get("output_shape") is not None or any(p < 0 for p in made.pads)


def _reference_deviation(call: KernelCall, made: Any) -> str | None:
    """onnx.reference 1.23's ConvTranspose deviations, as observed in single-node runs."""
    if made.group > 1:
        return ("onnx.reference 1.23 mishandles grouped ConvTranspose (it raises, or adds B[0] "
                "to every group)")
    if any(p >= s for p, s in zip(made.output_padding, made.strides, strict=True)):
        return "onnx.reference refuses an output_padding >= stride (allowed below the dilation)"
    if _derived_from_output_shape(call, made):
        return "onnx.reference 1.23 raises on pads derived from output_shape"
    return None


def _totals(made: Any) -> list[int]:
    """The total padding of each spatial axis (begin + end; negative: the output extends)."""
    rank = made.spatial_rank
    return [b + e for b, e in zip(made.pads[:rank], made.pads[rank:], strict=True)]


def _onnxruntime_deviation(call: KernelCall, made: Any) -> str | None:
    """onnxruntime 1.32's ConvTranspose deviations, as observed in single-node runs."""
    dtype = dtype_of(call.arrays[0])
    if dtype.name in ("float64", "bfloat16"):
        return f"onnxruntime has no {dtype.name} ConvTranspose"
    if any(p >= s for p, s in zip(made.output_padding, made.strides, strict=True)):
        return ("onnxruntime refuses an output_padding >= stride but below the dilation "
                "(onnxruntime#14208)")
    totals = _totals(made)
    if made.auto_pad.startswith("SAME") and any(t < 0 for t in totals):
        return ("onnxruntime returns the un-cropped length where SAME asks for in*stride "
                "beyond it (padconv extends the output with the bias)")
    if any(t < -1 for t in totals):
        return ("onnxruntime refuses an output_shape more than one element past the "
                "un-cropped output (padconv extends it with the bias)")
    return None


def known_deviation(peer: str, call: KernelCall, made: Any) -> str | None:
    """Why onnx.reference or onnxruntime is expected to refuse or differ on this call."""
    if peer == REFERENCE_PEER:
        return _reference_deviation(call, made)
    if peer == ONNXRUNTIME_PEER:
        return _onnxruntime_deviation(call, made)
    return None


def sample_arguments(case: Any, folder: str) -> list[str]:
    """``conv-transpose X W [B] --strides ... --output-padding ...`` of a verify case."""
    tensors = [f"{folder}/{case.samples[p]}" for p in sorted(case.samples)]
    arguments = ["conv-transpose", *tensors]
    for name in ("kernel_shape", "pads", "strides", "dilations", "output_padding",
                 "output_shape"):
        if name in case.attributes:
            arguments += ["--" + name.replace("_", "-"),
                          *(str(v) for v in case.attributes[name])]
    if "group" in case.attributes:
        arguments += ["--group", str(case.attributes["group"])]
    if "auto_pad" in case.attributes:
        arguments += ["--auto-pad", str(case.attributes["auto_pad"])]
    return arguments


# --- model nodes -------------------------------------------------------------------------------


def node_call(version: int, attributes: dict[str, Any], inputs: list) -> KernelCall:
    """ConvTranspose of any version -> ``conv_transpose(X, W, B, auto_pad=..., ...)``."""
    return conv_family.node_call(NAME, version, attributes, inputs, ATTRIBUTE_NAMES, 2, 3,
                                 ("X", "W"))


def model_slots(origin: Any, arrays: tuple, flags: Mapping[str, Any],
                embedded: set[str]) -> list[Any]:
    """Input arrays of a ConvTranspose node: the command line's, else the stored ones."""
    return conv_family.model_slots(INPUTS, origin, arrays, embedded)


def flag_rules(model_attributes: dict[str, Any], flags: Mapping[str, Any],
               arrays: Sequence[Any]) -> None:
    """Conv's rules (a new W drops kernel_shape; --pads resets auto_pad, --auto-pad drops the
    pads); ``--pads`` or ``--auto-pad`` also drops the model's output_shape (which would
    override them)."""
    CONV.flag_rules(model_attributes, flags, arrays)
    if ("pads" in flags or "auto_pad" in flags) and "output_shape" not in flags:
        model_attributes["output_shape"] = None


OPERATOR = Operator(
    name=NAME, command="conv-transpose", versions=VERSIONS, inputs=INPUTS,
    attributes=ATTRIBUTES, texts=TEXTS, max_inputs=max_inputs, output_name="Y",
    onnx_attribute_types={**CONV.onnx_attribute_types, "output_padding": INTS,
                          "output_shape": INTS},
    plan=plan, kernel=kernel, run=run, typed=typed,
    output_dtype=output_dtype, needs=needs, plan_tiles=plan_tiles, run_engine=run_engine,
    explain=explain, version_choice=version_choice, graph_parts=graph_parts,
    reference=reference, error_bound=error_bound, known_deviation=known_deviation,
    sample_arguments=sample_arguments, node_call=node_call, model_slots=model_slots,
    flag_rules=flag_rules, plan_arrays=plan_arrays,
)
