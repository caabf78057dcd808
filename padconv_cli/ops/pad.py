"""ONNX Pad: every rule padconv applies to it, from the command line to the emitted node.

Versions 1, 2, 11, 13, 18, 19, 21, 23, 24, 25 (the kernel is Pad-25's).  A node's arguments:

* Pad-1: attributes ``paddings``, ``value``, ``mode``; Pad-2..10: ``pads``, ``value``, ``mode``;
* Pad-11+: inputs ``data, pads[, constant_value]``, attribute ``mode``; Pad-18+ adds the input
  ``axes``; Pad-19+ adds ``mode="wrap"``.  Exporters write ``wrap`` at older opsets (PyTorch's
  dynamo exporter at opset 18), and onnxruntime and onnx.reference run it: such a node is
  computed as Pad-19 does, with a note saying the model is off-spec.

All of them become one kernel call ``pad(data, pads, constant_value, axes, mode)``.  Pad copies
elements: audit and check compare it exactly, against :func:`reference` (its index definition).
The emitted node is the oldest version (2 and later) with the call's features: the element type
(the installed onnx's schemas), ``axes`` (Pad-18), ``wrap`` (Pad-19), a constant_value a
float32 ``value`` attribute cannot hold (Pad-11).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from padconv_cli.errors import AttributeValueError
from padconv_cli.ops.protocol import (
    ATTRIBUTE,
    FLOAT,
    INTS,
    ONNXRUNTIME_PEER,
    OPTIONAL,
    REFERENCE_PEER,
    STRING,
    Attribute,
    Command,
    Input,
    KernelCall,
    Operator,
    dtype_of,
    no_flag_rules,
)

if TYPE_CHECKING:
    import numpy as np

    from padconv_cli.ops.onnx_graph import GraphParts, VersionChoice

NAME = "Pad"
VERSIONS = (1, 2, 11, 13, 18, 19, 21, 23, 24, 25)
# the kernel's own list (kernels.pad_plan.PAD_MODES), written here so that the command's help
# loads no kernel (start-up time); a test keeps the two equal
MODES = ("constant", "reflect", "edge", "wrap")

INPUTS = (
    Input("data"),
    Input("pads", ATTRIBUTE),
    Input("constant_value", ATTRIBUTE, OPTIONAL),
    Input("axes", ATTRIBUTE, OPTIONAL),
)
ATTRIBUTES = (
    Attribute("pads", "ints", required=True,
              help="Pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over the axes; negative "
              "values crop. Words, commas or @FILE. Required unless --from-model gives them."),
    Attribute("mode", "choice", "constant", choices=MODES, show_default=True,
              help="How new elements are filled."),
    Attribute("constant_value", "text", metavar="VALUE",
              help='Fill value for constant mode, typed like DATA (default 0, "" or false).'),
    Attribute("axes", "ints",
              help="Axes the pads apply to (default: all; negative counts from the back)."),
)
TEXTS = Command(
    summary="ONNX Pad: pad or crop DATA (constant, reflect, edge, wrap).",
    help="""Pad (or crop, with negative pads) DATA as ONNX Pad does.

    DATA is a .npy, .npz[:NAME] or .pb file, MODEL.onnx:NAME (a stored tensor), - for stdin,
    or an inline literal.
    With --from-model the attributes come from a Pad node of a model (any opset); flags
    given here override them.
    """,
    examples="""\b
Examples:
  padconv pad '[[1, 2, 3], [4, 5, 6]]' --pads 0 2 0 1 --mode reflect -o y.npy
  padconv pad y.npy --pads 1 0 1 0 --mode edge --explain   # begins, then ends
  padconv pad '[[1, 2], [3, 4]]' --dtype int8 --pads 1 -1 --axes 1 \\
      --constant-value 7
  padconv pad y.npy --pads 0 1 0 1 --emit-onnx pad.onnx -o z.npy
  padconv pad '[[5, 6]]' --from-model pad.onnx --mode wrap --check
""",
)


def max_inputs(version: int) -> int:
    """Pad-1/2: 1 (data), Pad-11..13: 3, Pad-18+: 4 (axes)."""
    return 1 if version < 11 else (4 if version >= 18 else 3)


# --- plan, kernel, needs -----------------------------------------------------------------------


def plan(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    """``plan_pad`` from the data's shape (nothing is read)."""
    from padconv_cli.kernels.pad_plan import plan_pad

    return plan_pad(shapes[0], attributes["pads"], attributes.get("axes"),
                    attributes.get("mode", "constant"), dtype=dtype)


def plan_fits(made: Any, shapes: Sequence[Any]) -> bool:
    """True when ``made`` was planned for data of shape ``shapes[0]``."""
    return made.input_shape == shapes[0]


def fill(dtype: np.dtype, attributes: Mapping[str, Any], made: Any) -> Any:
    """The element new border cells get (``fill_value``)."""
    from padconv_cli.kernels.pad_plan import fill_value

    return fill_value(attributes.get("constant_value"), dtype, made)


def kernel(*arrays: Any, **attributes: Any) -> np.ndarray:
    """The public kernel ``pad(data, pads, constant_value, axes, mode)``."""
    from padconv_cli.kernels.pad import pad  # the kernels load on use (start-up time)

    return pad(*arrays, **attributes)


def run(made: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    """``pad_planned`` on the plan; a wide string result is computed on python strings."""
    import numpy as np

    from padconv_cli.kernels.pad import pad_planned
    from padconv_cli.needs import strings_as_objects

    data = np.asarray(arrays[0])
    value = fill(data.dtype, attributes, made)
    if strings_as_objects(output_dtype(data.dtype, attributes, made), made):
        data = data.astype(object)  # wide strings: held as python strings, written in pieces
    return pad_planned(data, made, value)


def typed(attributes: Mapping[str, Any], dtype: np.dtype) -> dict[str, Any]:
    """The attributes with a text constant_value read as an element of the data's type."""
    from padconv_cli.constant_text import typed_attributes

    return typed_attributes(attributes, dtype)


def output_dtype(dtype: np.dtype, attributes: Mapping[str, Any], made: Any) -> np.dtype:
    """The data's type, or the type that holds both data and the fill (strings widen)."""
    from padconv_cli.kernels.pad_values import output_dtype as widened

    return widened(dtype, fill(dtype, attributes, made))


def needs(arrays: Sequence[Any], made: Any, dtype: np.dtype, attributes: Mapping[str, Any],
          fmt: str) -> Any:
    """:func:`padconv_cli.needs.pad_needs`: output bytes as written, working memory."""
    from padconv_cli.needs import pad_needs

    value = fill(dtype, attributes, made)
    return pad_needs(arrays[0], made, output_dtype(dtype, attributes, made), value, fmt)


# --- engines -----------------------------------------------------------------------------------


def plan_tiles(call: KernelCall, made: Any, limit: int) -> Any:
    """The tiled engine's tiles within ``limit`` bytes."""
    from padconv_cli.outofcore.pad_tiles import plan_pad_tiles

    return plan_pad_tiles(made, dtype_of(call.arrays[0]).itemsize, limit)


def run_engine(engine: str, source: Any, others: Sequence[Any], made: Any,
               attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    """The tiled or dask engine on the call's plan."""
    arguments = (attributes["pads"], attributes.get("constant_value"), attributes.get("axes"),
                 attributes.get("mode", "constant"))
    if engine == "tiled":
        from padconv_cli.outofcore.pad_tiles import tiled_pad

        return tiled_pad(source, settings["output"], *arguments, plan=made,
                         memory_limit=settings["memory_limit"],
                         show_progress=settings["show_progress"])
    from padconv_cli.engines.dask_engine import dask_pad

    return dask_pad(settings["source_path"], settings["output"], *arguments, plan=made,
                    **settings["dask"])


# --- explain -----------------------------------------------------------------------------------


def _signed(value: int) -> str:
    return f"({value})" if value < 0 else str(value)


def _dims(made: Any, pads_by_axis: dict[int, tuple[int, int]]) -> list[dict[str, Any]]:
    """One entry per axis: ``out = dim + begin + end`` (negative pads crop first)."""
    dims = []
    for axis, ax in enumerate(made.per_axis):
        begin, end = pads_by_axis.get(axis, (0, 0))
        formula = f"{ax.dim} + {_signed(begin)} + {_signed(end)} = {ax.out_dim}"
        dims.append({"axis": axis, "size": ax.out_dim, "formula": formula})
    return dims


def explain(call: KernelCall, made: Any, source_of: Any) -> dict[str, Any]:
    """The resolved attributes, where each came from, every output dimension's formula;
    Pad does no arithmetic (0 FLOPs)."""
    import numpy as np

    from padconv_cli.kernels.pad import coerce_constant_value

    dtype = dtype_of(call.arrays[0])  # a declared input (out of core) is not read
    value = call.attributes.get("constant_value")
    if value is None:
        value = coerce_constant_value(0 if dtype.kind not in "OU" else "", dtype)
    pads = [int(p) for p in call.attributes["pads"]]
    count = len(made.axes)
    pads_by_axis = {axis: (pads[i], pads[count + i]) for i, axis in enumerate(made.axes)}
    attributes = {
        "mode": made.mode,
        "pads": pads,
        "axes": list(made.axes),
        "constant_value": value.item() if isinstance(value, np.generic) else value,
    }
    return {
        "attributes": attributes,
        "sources": {name: source_of(name) for name in attributes},
        "dims": _dims(made, pads_by_axis),
        "flops": 0,
        "flops_formula": "0 (Pad copies elements, no arithmetic)",
    }


# --- the emitted node --------------------------------------------------------------------------


def version_choice(dtype: np.dtype, attributes: Mapping[str, Any]) -> VersionChoice:
    """The oldest Pad version (2 and later) with the call's features (module rules)."""
    from padconv_cli.ops.onnx_graph import (
        VersionChoice,
        first_version_for_type,
        fits_float_attribute,
        onnx_type_string,
    )

    versions = [v for v in VERSIONS if v >= 2]
    needed = [(first_version_for_type(NAME, versions, dtype), f"{onnx_type_string(dtype)}")]
    if attributes.get("axes") is not None:
        needed.append((18, "the axes input"))
    if attributes.get("mode") == "wrap":
        needed.append((19, "mode wrap"))
    if not fits_float_attribute(attributes.get("constant_value")):
        needed.append((11, "a constant_value a float32 attribute cannot hold"))
    version, reason = max(needed, key=lambda need: need[0])
    if version == versions[0]:
        reason = "the oldest Pad with pads as an attribute"
    return VersionChoice(NAME, version, reason)


def graph_parts(call: KernelCall, choice: VersionChoice, embedded: Collection[str],
                made: Any = None) -> GraphParts:
    """Pad-2 (attributes) or Pad-11+ (initializer inputs) node parts."""
    import numpy as np

    from padconv_cli.ops.onnx_graph import GraphParts, scalar_of

    data = np.asarray(call.arrays[0])
    parts = GraphParts(attributes={"mode": call.attributes.get("mode", "constant")})
    parts.add_data_input("data", data, embedded)
    pads = [int(p) for p in call.attributes["pads"]]
    value = call.attributes.get("constant_value")
    if choice.version < 11:
        parts.attributes["pads"] = pads
        if value is not None:
            parts.attributes["value"] = float(np.asarray(value))
        return parts
    parts.add_constant_input("pads", np.array(pads, dtype=np.int64))
    axes = call.attributes.get("axes")
    if value is not None or axes is not None:
        stored = None if value is None else scalar_of(value, data.dtype)
        parts.add_constant_input("constant_value", stored)
    if axes is not None:
        parts.add_constant_input("axes", np.array(axes, dtype=np.int64))
    return parts


# --- judging: reference, deviations ------------------------------------------------------------


def reference(call: KernelCall) -> np.ndarray:
    """Pad by its index definition, independent of the kernel: output index ``i`` along an
    axis reads input ``i - begin`` (constant outside, or clipped / wrapped / reflected into
    the kept part), ``out_dim = dim + begin + end``."""
    import numpy as np

    from padconv_cli.kernels.pad import plan_pad

    data = np.asarray(call.arrays[0])
    attributes = call.attributes
    made = plan_pad(data.shape, attributes["pads"], attributes["axes"], attributes["mode"])
    out = data[made.crop_slices]
    value = _reference_fill(call, data)
    for axis, ax in enumerate(made.per_axis):
        n = ax.cropped_dim
        if n == 0:  # nothing kept (constant mode): the axis is all fill
            out = np.full(_with(out.shape, axis, ax.out_dim), value, dtype=out.dtype)
            continue
        index, inside = _axis_source(np.arange(ax.out_dim) - ax.pad_begin, n, made.mode)
        out = np.take(out, np.clip(index, 0, n - 1), axis=axis)
        if made.mode == "constant":
            out = np.where(inside.reshape(_with([1] * out.ndim, axis, ax.out_dim)), out, value)
    return np.asarray(out).astype(data.dtype, copy=False)


def _with(shape: Sequence[int], axis: int, value: int) -> tuple[int, ...]:
    shape = list(shape)
    shape[axis] = value
    return tuple(shape)


def _reference_fill(call: KernelCall, data: np.ndarray) -> Any:
    import numpy as np
    value = call.attributes.get("constant_value")
    if value is not None:
        return value
    return "" if data.dtype.kind in "OU" else np.zeros((), data.dtype)[()]


def _axis_source(j: np.ndarray, n: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Source index into the kept part for output offsets ``j`` and whether it is inside."""
    import numpy as np
    inside = (j >= 0) & (j < n)
    if mode == "constant" or n == 0:
        return j, inside
    if mode == "edge":
        return np.clip(j, 0, n - 1), inside
    if mode == "wrap":
        return j % n, inside
    if n == 1:
        return np.zeros_like(j), inside
    period = 2 * (n - 1)
    m = j % period
    return np.where(m < n, m, period - m), inside


def error_bound(call: KernelCall, made: Any = None) -> None:
    """None: Pad copies values, it is compared exactly."""
    return None


def _reflect_too_long(made: Any) -> str | None:
    for axis, ax in enumerate(made.per_axis):
        longest = max(ax.pad_begin, ax.pad_end)
        if longest > ax.cropped_dim - 1 and longest > 0:
            return (
                f"onnxruntime refuses reflect pads longer than the axis minus one (pad "
                f"{longest} on axis {axis} of length {ax.cropped_dim}); the spec sets no such "
                "limit and padconv reflects again, as numpy.pad does"
            )
    return None


def _default_string_fill(call: KernelCall, made: Any) -> bool:
    """A constant-mode pad of a string tensor without constant_value that adds elements."""
    return (
        dtype_of(call.arrays[0]).kind in "OU"
        and made.mode == "constant"
        and call.attributes.get("constant_value") is None
        and made.adds_elements
    )


def known_deviation(peer: str, call: KernelCall, made: Any) -> str | None:
    """Both runtimes refuse rank-0 data; onnxruntime refuses reflect pads longer than
    ``axis length - 1``; onnx.reference refuses negative pads (it calls numpy.pad, which
    cannot crop) and fills strings with 0 instead of ""."""
    if len(made.input_shape) == 0:
        return f"{peer} refuses rank-0 data (the spec allows it: pads is then empty)"
    if peer == ONNXRUNTIME_PEER and made.mode == "reflect":
        return _reflect_too_long(made)
    if peer == REFERENCE_PEER and any(int(p) < 0 for p in call.attributes["pads"]):
        return "onnx.reference refuses negative pads (numpy.pad cannot crop)"
    if peer == REFERENCE_PEER and _default_string_fill(call, made):
        return "onnx.reference fills strings with the integer 0, not the spec's empty string"
    return None


def sample_arguments(case: Any, folder: str) -> list[str]:
    """``pad DATA --pads ... --mode M [--axes ...] [--constant-value V]`` of a verify case."""
    arguments = ["pad", f"{folder}/{case.samples[0]}"]
    for position, flag in ((1, "--pads"), (3, "--axes")):
        tensor = case.inputs[position] if position < len(case.inputs) else None
        if tensor is not None:
            arguments += [flag, *(str(int(v)) for v in tensor)]
    arguments += ["--mode", case.attributes.get("mode", "constant")]
    constant = case.inputs[2] if len(case.inputs) > 2 else None
    if constant is not None:
        arguments += ["--constant-value", str(constant.reshape(())[()])]
    return arguments


# --- model nodes -------------------------------------------------------------------------------


def node_call(version: int, attributes: dict[str, Any], inputs: list) -> KernelCall:
    """Pad of any version -> ``pad(data, pads, constant_value, axes, mode)``."""
    from padconv_cli.ops.node_rules import (
        check_attribute_names,
        check_input_count,
        int_vector,
        required_attribute,
    )

    operator = f"Pad-{version}"
    mode = str(attributes.get("mode", "constant"))  # the kernel validates it
    notes = _wrap_note(operator, version, mode)
    if version < 11:
        pads_name = "paddings" if version == 1 else "pads"
        check_attribute_names(operator, attributes, ("mode", pads_name, "value"))
        check_input_count(operator, inputs, 1, 1)
        pads = required_attribute(operator, attributes, pads_name)
        value = attributes.get("value")  # absent: the kernel's default 0, as Pad-1/2 define
        return _call(version, inputs[0], pads, value, None, mode, notes)
    check_attribute_names(operator, attributes, ("mode",))
    check_input_count(operator, inputs, 2, max_inputs(version))
    data, pads_tensor, constant_tensor, axes_tensor = (inputs + [None, None])[:4]
    pads = int_vector(operator, "pads", pads_tensor, required=True)
    axes = int_vector(operator, "axes", axes_tensor, required=False)
    value = _constant_value(operator, constant_tensor, data)
    return _call(version, data, pads, value, axes, mode, notes)


def _call(version: int, data: Any, pads: Any, value: Any, axes: Any, mode: str,
          notes: tuple[str, ...] = ()) -> KernelCall:
    """KernelCall with the attribute names of ``padconv_cli.kernels.pad.pad``."""
    if data is None:
        raise AttributeValueError(f"Pad-{version}: input 'data' is missing")
    attributes = {
        "mode": mode,
        "pads": pads,  # validated by the kernel, like the --pads flag
        "constant_value": value,
        "axes": axes,
    }
    return KernelCall(NAME, version, (data,), attributes, notes)


def _wrap_note(operator: str, version: int, mode: str) -> tuple[str, ...]:
    """The note for ``wrap`` before Pad-19: defined only from Pad-19 (opset 19), computed as
    Pad-19 does (what onnxruntime and onnx.reference run)."""
    if mode != "wrap" or version >= 19:
        return ()
    return (
        f"mode 'wrap' needs Pad-19 (opset 19), this node is {operator}: the model is "
        "off-spec; computed as Pad-19 does, as onnxruntime does",
    )


def _constant_value(operator: str, tensor: np.ndarray | None, data: np.ndarray | None) -> Any:
    """The constant_value input as a scalar of data's type (None when omitted or empty).

    An empty tensor is treated as omitted, as onnxruntime does; otherwise it must hold exactly
    one element of the same type T as data.
    """
    import numpy as np
    if tensor is None:
        return None
    tensor = np.asarray(tensor)
    if tensor.size == 0:
        return None
    if tensor.size != 1:
        raise AttributeValueError(
            f"{operator}: input 'constant_value' must be a scalar, got shape {tuple(tensor.shape)}"
        )
    if data is not None and tensor.dtype != np.asarray(data).dtype:
        raise AttributeValueError(
            f"{operator}: constant_value type {tensor.dtype.name} != data type "
            f"{np.asarray(data).dtype.name} (both are T)"
        )
    return tensor.reshape(())[()]


def model_slots(origin: Any, arrays: tuple, flags: Mapping[str, Any],
                embedded: set[str]) -> list[Any]:
    """Input arrays of a Pad node.  Where a flag replaces an input, the stored value is not
    read: pads/axes flags stand in for it, a constant_value flag leaves the slot empty."""
    import numpy as np
    slots = [origin.slot(0, arrays[0], "data", "give DATA", embedded, "data")]
    if origin.version < 11:
        return slots
    for index, declared in enumerate(INPUTS[1:], 1):
        if index >= len(origin.node.input):
            break
        name = declared.name
        if name in flags:
            standin = flags[name] if name != "constant_value" else None
            slots.append(None if standin is None else np.array(standin, dtype=np.int64))
            continue
        slots.append(origin.slot(index, None, name, f"give {name}", embedded, param=name))
    return slots


def notes(given: Mapping[str, Any]) -> tuple[str, ...]:
    """A --constant-value given with a --mode that does not use it (ONNX Pad fills only in
    constant mode; the value is accepted and ignored)."""
    value, mode = given.get("constant_value"), given.get("mode")
    if value is None or mode is None or mode == "constant":
        return ()
    return (f"--constant-value {value} is ignored: --mode {mode} fills from the data, only "
            "--mode constant uses it",)


OPERATOR = Operator(
    name=NAME, command="pad", versions=VERSIONS, inputs=INPUTS, attributes=ATTRIBUTES,
    texts=TEXTS, max_inputs=max_inputs, output_name="output",
    onnx_attribute_types={"mode": STRING, "pads": INTS, "paddings": INTS, "value": FLOAT},
    plan=plan, plan_fits=plan_fits, kernel=kernel, run=run, typed=typed,
    output_dtype=output_dtype, needs=needs, plan_tiles=plan_tiles, run_engine=run_engine,
    explain=explain, version_choice=version_choice, graph_parts=graph_parts,
    reference=reference, error_bound=error_bound, known_deviation=known_deviation,
    sample_arguments=sample_arguments, node_call=node_call, model_slots=model_slots,
    flag_rules=no_flag_rules, notes=notes,
)
