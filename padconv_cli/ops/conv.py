"""ONNX Conv: every rule padconv applies to it, from the command line to the emitted node.

Versions 1, 11, 22 (the kernel is Conv-22's); every version takes ``X, W[, B]`` and the
attributes auto_pad, dilations, group, kernel_shape, pads, strides, one to one the kernel's.
Conv sums products: results are judged within the dot-product error bound
``c * n * eps * sum(|x| * |w|)`` on top of the tolerance, the float64 recomputation decides.
FLOPs: ``2 * N * M * prod(out_spatial) * (C/group) * prod(kernel)``, plus ``N * M *
prod(out_spatial)`` for a bias.  The emitted node writes every attribute resolved; with a
dilation above 1 it writes the pads ``auto_pad`` resolves to (onnxruntime cannot run SAME_*
with dilations).  Conv-11 first defines ``SAME_*`` with a stride above 1 as ``ceil(in /
stride)``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from padconv_cli.errors import AttributeValueError, OutputTooLargeError
from padconv_cli.ops import (
    INT,
    INTS,
    OPTIONAL,
    STRING,
    UNLESS_MODEL,
    Attribute,
    Command,
    Input,
    KernelCall,
    Operator,
    dtype_of,
)

if TYPE_CHECKING:
    import numpy as np

    from padconv_cli.ops.onnx_graph import GraphParts, VersionChoice

NAME = "Conv"
VERSIONS = (1, 11, 22)
# the kernel's own list (kernels.conv.AUTO_PAD_VALUES), written here so that the command's
# help loads no kernel (start-up time); a test keeps the two equal
AUTO_PAD_VALUES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

INPUTS = (Input("X"), Input("W", required=UNLESS_MODEL), Input("B", required=OPTIONAL))
ATTRIBUTES = (
    Attribute("auto_pad", "choice", "NOTSET", choices=AUTO_PAD_VALUES, show_default=True,
              help="SAME_UPPER/SAME_LOWER: output = ceil(input / stride), odd padding at the "
              "end/begin; VALID: no padding; NOTSET: use --pads."),
    Attribute("dilations", "ints", help="Dilation per spatial axis (default 1)."),
    Attribute("group", "int", 1, show_default=True,
              help="Number of groups input and output channels are split into."),
    Attribute("kernel_shape", "ints",
              help="Kernel spatial shape; must match W (default: taken from W)."),
    Attribute("pads", "ints", help="Pads [x1_begin, x2_begin, ..., x1_end, x2_end] (default 0)."),
    Attribute("strides", "ints", help="Stride per spatial axis (default 1)."),
)
ATTRIBUTE_NAMES = tuple(a.name for a in ATTRIBUTES)
TEXTS = Command(
    summary="ONNX Conv: convolve X with W, plus optional bias B.",
    help="Convolve X (N x C x D1 x ... x Dn) with W (M x C/group x k1 x ... x kn), plus bias "
    """B (M).

    Each input is a .npy, .npz[:NAME] or .pb file, MODEL.onnx:NAME (a stored tensor), - for
    stdin, or an inline literal.
    With --from-model, W, B and the attributes come from a Conv node of a model (any opset);
    tensors and flags given here override them.
    """,
    examples="""\b
Examples:
  padconv conv '[[[[0, 1, 2], [3, 4, 5]]]]' '[[[[1, 1], [1, 1]]]]' \\
      --dtype float32 --pads 0 0 1 1 -o y.npy
  padconv conv y.npy '[[[[1, 1], [1, 1]]]]' --dtype float32 \\
      --emit-onnx m.onnx --emit-initializers -o z.npy
  padconv conv y.npy --from-model m.onnx --auto-pad SAME_UPPER --explain
  padconv pad y.npy --pads 0 0 1 1 0 0 1 1 | padconv conv - y.npy --check
""",
)


def plan(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    """``plan_conv`` from the shapes of X, W and B (nothing is read)."""
    from padconv_cli.kernels.conv import plan_conv

    shapes = list(shapes) + [None] * (3 - len(shapes))
    if shapes[1] is None:
        raise AttributeValueError("Conv needs W", param="W")
    return plan_conv(shapes[0], shapes[1], shapes[2], **attributes)


def kernel(*arrays: Any, **attributes: Any) -> np.ndarray:
    """The public kernel ``conv(X, W, B, **attributes)``."""
    from padconv_cli.kernels.conv import conv

    return conv(*arrays, **attributes)


def run(made: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    """``conv_planned`` on the plan."""
    from padconv_cli.kernels.conv import conv_planned

    x, w, *rest = arrays
    return conv_planned(made, x, w, rest[0] if rest else None)


def output_dtype(dtype: np.dtype, attributes: Mapping[str, Any], made: Any) -> np.dtype:
    """X's type."""
    import numpy as np

    return np.dtype(dtype)


def needs(arrays: Sequence[Any], made: Any, dtype: np.dtype, attributes: Mapping[str, Any],
          fmt: str) -> Any:
    """Inputs, output ``prod(shape) * itemsize``, the working memory of the compute path that
    will run (:func:`padconv_cli.kernels.conv.working_bytes`)."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.kernels.conv import working_bytes
    from padconv_cli.resources import Needs, nbytes

    inputs = sum(nbytes(a) for a in arrays if a is not None)
    output = math.prod(made.output_shape) * dtype.itemsize
    return Needs(inputs, output, working_bytes(made, dtype), tuple(made.output_shape),
                 dtype_name(dtype), dtype.itemsize)


def plan_tiles(call: KernelCall, made: Any, limit: int) -> Any:
    """The tiled engine's tiles within ``limit`` bytes, W and B held whole besides them."""
    import numpy as np

    from padconv_cli.outofcore.conv_tiles import fixed_bytes, plan_conv_tiles

    x, w, b = call.arrays
    budget = limit - fixed_bytes(np.asarray(w), None if b is None else np.asarray(b))
    if budget <= 0:
        raise OutputTooLargeError("W and B alone exceed the limit", param="memory_limit")
    return plan_conv_tiles(made, dtype_of(x).itemsize, budget)


def run_engine(engine: str, source: Any, others: Sequence[Any], made: Any,
               attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    """The tiled or dask engine on the call's plan (W, required by the plan, and B held whole)."""
    w, b = (list(others) + [None, None])[:2]
    if engine == "tiled":
        from padconv_cli.outofcore.conv_tiles import tiled_conv

        return tiled_conv(source, w, b, settings["output"], plan=made,
                          memory_limit=settings["memory_limit"],
                          show_progress=settings["show_progress"], **attributes)
    from padconv_cli.engines.dask_engine import dask_conv

    return dask_conv(settings["source_path"], w, b, settings["output"], plan=made,
                     **settings["dask"], **attributes)


def explain(call: KernelCall, made: Any, source_of: Any) -> dict[str, Any]:
    """The resolved attributes (kernel_shape from W, pads from auto_pad), each output
    dimension's formula (N, M, then the plan's spatial ones), the FLOPs (module docstring)."""
    has_bias = len(call.arrays) > 2 and call.arrays[2] is not None
    attributes = {name: list(v) if isinstance(v := getattr(made, name), tuple) else v for name in
                  ("auto_pad", "kernel_shape", "strides", "dilations", "group", "pads")}
    sources = {name: source_of(name) for name in attributes}
    if sources["kernel_shape"] == "default":
        sources["kernel_shape"] = "W.shape[2:]"
    if made.auto_pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        sources["pads"] = f"auto_pad {made.auto_pad}"
    n, m, *spatial = made.output_shape
    dims = [{"axis": 0, "size": n, "formula": f"N = X.shape[0] = {n}"},
            {"axis": 1, "size": m, "formula": f"M = W.shape[0] = {m}"}]
    dims += [{"axis": index + 2, "size": size, "formula": formula}
             for index, (size, formula) in enumerate(zip(spatial, made.formulas, strict=True))]
    bias_adds = math.prod(made.output_shape) if has_bias else 0
    formula = "2 * N * M * prod(out_spatial) * (C/group) * prod(kernel_shape)"
    return {
        "attributes": attributes,
        "sources": sources,
        "dims": dims,
        "flops": made.flops + bias_adds,
        "flops_formula": formula + (" + N * M * prod(out_spatial) (bias)" if has_bias else ""),
    }


def writes_auto_pad(auto_pad: Any, dilations: Any) -> bool:
    """True when the emitted Conv keeps ``auto_pad``: it is not NOTSET and no dilation is above
    1 (otherwise the resolved pads are written, module docstring)."""
    return str(auto_pad or "NOTSET") != "NOTSET" and not any(d > 1 for d in dilations or ())


def version_choice(dtype: np.dtype, attributes: Mapping[str, Any]) -> VersionChoice:
    """The oldest Conv version with the call's element type and auto_pad semantics (SAME
    with a stride above 1: Conv-11)."""
    from padconv_cli.ops import onnx_graph

    needed = [(onnx_graph.first_version_for_type(NAME, VERSIONS, dtype),
               onnx_graph.onnx_type_string(dtype))]
    auto_pad = attributes.get("auto_pad", "NOTSET")
    if (writes_auto_pad(auto_pad, attributes.get("dilations")) and str(auto_pad).startswith("SAME")
            and any(s > 1 for s in attributes.get("strides") or ())):
        needed.append((11, "auto_pad SAME with a stride above 1"))
    version, reason = max(needed, key=lambda need: need[0])
    if version == VERSIONS[0]:
        reason = "Conv-1 has every feature used"
    return onnx_graph.VersionChoice(NAME, version, reason)


def graph_parts(call: KernelCall, choice: VersionChoice, embedded: Collection[str],
                made: Any) -> GraphParts:
    """Conv node parts with every attribute written out as resolved by the plan."""
    from padconv_cli.ops.onnx_graph import GraphParts

    attributes: dict[str, Any] = {name: list(getattr(made, name))
                                  for name in ("kernel_shape", "strides", "dilations")}
    attributes["group"] = int(made.group)
    if writes_auto_pad(made.auto_pad, made.dilations):
        attributes["auto_pad"] = made.auto_pad
    else:
        attributes["pads"] = list(made.pads)
    parts = GraphParts(attributes=attributes)
    for declared, array in zip(INPUTS, call.arrays, strict=False):
        if array is not None:
            parts.add_data_input(declared.name, array, embedded)
    return parts


def reference(call: KernelCall) -> np.ndarray:
    """Conv recomputed in float64 from the same inputs and attributes."""
    import numpy as np

    x, w, b = (None if a is None else np.asarray(a).astype(np.float64) for a in call.arrays)
    return kernel(x, w, b, **call.attributes)


def error_bound(call: KernelCall, made: Any = None) -> np.ndarray | None:
    """The dot-product error bound per output element for floating inputs, None (exact
    comparison) for any other; ``made``: the call's plan, when it was made already (its
    attributes are then not read)."""
    import numpy as np

    from padconv_cli.dtypes import element_kind
    from padconv_cli.kernels.conv_bound import conv_error_bound

    if element_kind(np.asarray(call.arrays[0]).dtype) not in ("float", "complex"):
        return None
    attributes = call.attributes if made is None else {}
    x, w, b = call.arrays
    return conv_error_bound(x, w, b, plan=made, **attributes)


def sample_arguments(case: Any, folder: str) -> list[str]:
    """``conv X W [B] --kernel-shape ... --group G --auto-pad A`` of a verify case."""
    arguments = ["conv", *(f"{folder}/{case.samples[p]}" for p in sorted(case.samples))]
    for name in ("kernel_shape", "pads", "strides", "dilations", "group", "auto_pad"):
        value = case.attributes.get(name)
        if value is not None:
            values = value if isinstance(value, (list, tuple)) else [value]
            arguments += ["--" + name.replace("_", "-"), *(str(v) for v in values)]
    return arguments


def node_call(version: int, attributes: dict[str, Any], inputs: list) -> KernelCall:
    """Conv of any version -> ``conv(X, W, B, auto_pad=..., dilations=..., ...)``."""
    from padconv_cli.ops import node_rules

    operator = f"Conv-{version}"
    node_rules.check_attribute_names(operator, attributes, ATTRIBUTE_NAMES)
    node_rules.check_input_count(operator, inputs, 2, 3)
    x, w, b = (inputs + [None])[:3]
    node_rules.require_inputs(operator, ("X", "W"), (x, w))
    kwargs = {name: attributes.get(name) for name in ATTRIBUTE_NAMES}
    kwargs["auto_pad"] = str(kwargs["auto_pad"] or "NOTSET")
    kwargs["group"] = int(1 if kwargs["group"] is None else kwargs["group"])
    return KernelCall(NAME, version, (x, w, b), kwargs)


def model_slots(origin: Any, arrays: tuple, flags: Mapping[str, Any],
                embedded: set[str]) -> list[Any]:
    """Input arrays of a Conv node: the command line's, else the stored ones (flags do not
    stand in for inputs)."""
    return [origin.slot(index, given, declared.name, f"give {declared.name} on the command line",
                        embedded, declared.name)
            for index, (declared, given) in enumerate(zip(INPUTS, arrays, strict=True))]


def flag_rules(model_attributes: dict[str, Any], flags: Mapping[str, Any],
               arrays: Sequence[Any]) -> None:
    """Replacing W drops the model's kernel_shape (it belongs to the model's W); ``--pads``
    without ``--auto-pad`` sets auto_pad to NOTSET and ``--auto-pad`` without ``--pads`` drops
    the model's pads."""
    if arrays[1] is not None and "kernel_shape" not in flags:
        model_attributes["kernel_shape"] = None
    if "pads" in flags and "auto_pad" not in flags:
        model_attributes["auto_pad"] = "NOTSET"
    if "auto_pad" in flags and "pads" not in flags:
        model_attributes["pads"] = None


OPERATOR = Operator(
    name=NAME, command="conv", versions=VERSIONS, inputs=INPUTS, attributes=ATTRIBUTES,
    texts=TEXTS, max_inputs=lambda version: len(INPUTS), output_name="Y",  # X, W, B: any version
    onnx_attribute_types={"auto_pad": STRING, "dilations": INTS, "group": INT,
                          "kernel_shape": INTS, "pads": INTS, "strides": INTS},
    plan=plan, kernel=kernel, run=run, output_dtype=output_dtype, needs=needs,
    plan_tiles=plan_tiles, run_engine=run_engine, explain=explain, version_choice=version_choice,
    graph_parts=graph_parts, reference=reference, error_bound=error_bound, flag_rules=flag_rules,
    sample_arguments=sample_arguments, node_call=node_call, model_slots=model_slots,
)
typed = OPERATOR.typed  # the protocol's default, attributes as given: ConvTranspose's rule too
