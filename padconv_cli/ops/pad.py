"""ONNX Pad: every rule padconv applies to it, from the command line to the emitted node.

Versions 1, 2, 11, 13, 18, 19, 21, 23, 24, 25 (the kernel is Pad-25's).  Pad-1 has attributes
``paddings``, ``value``, ``mode``; Pad-2..10 ``pads``, ``value``, ``mode``; Pad-11+ inputs
``data, pads[, constant_value]`` and attribute ``mode``; Pad-18+ adds the input ``axes``,
Pad-19+ ``mode="wrap"``.  Exporters write ``wrap`` at older opsets, and onnxruntime and
onnx.reference run it: such a node is computed as Pad-19 does, with a note (off-spec model).
All become one kernel call ``pad(data, pads, constant_value, axes, mode)``, compared exactly.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from padconv_cli.errors import AttributeValueError
from padconv_cli.ops import (
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
)

if TYPE_CHECKING:
    import numpy as np

    from padconv_cli.ops.onnx_graph import GraphParts, VersionChoice

NAME = "Pad"
VERSIONS = (1, 2, 11, 13, 18, 19, 21, 23, 24, 25)
# the kernel's own list (kernels.pad.PAD_MODES), written here so that the command's help
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

POINTER_BYTES = 8
STR_OBJECT_BYTES = 64  # a python str's header, over its characters
UTF32 = 4
UTF8_MAX = 4
PB_TAG = 1  # the field tag byte of each string_data element
# memory per string while a TensorProto is built and serialised (about 58 bytes measured)
PB_STRING_HELD = 64
UTF8_PIECE = 2**20  # characters encoded at a time to count a long string's UTF-8 bytes


def max_inputs(version: int) -> int:
    """Pad-1/2: 1 (data), Pad-11..13: 3, Pad-18+: 4 (axes)."""
    return 1 if version < 11 else (4 if version >= 18 else 3)


def plan(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    """``plan_pad`` from the data's shape (nothing is read)."""
    from padconv_cli.kernels.pad import plan_pad

    return plan_pad(shapes[0], attributes["pads"], attributes.get("axes"),
                    attributes.get("mode", "constant"), dtype=dtype)


def fill(dtype: np.dtype, attributes: Mapping[str, Any], made: Any) -> Any:
    """The element new border cells get (``fill_value``)."""
    from padconv_cli.kernels.pad import fill_value

    return fill_value(attributes.get("constant_value"), dtype, made)


def kernel(*arrays: Any, **attributes: Any) -> np.ndarray:
    """The public kernel ``pad(data, pads, constant_value, axes, mode)``."""
    from padconv_cli.kernels.pad import pad  # the kernels load on use (start-up time)

    return pad(*arrays, **attributes)


def run(made: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    """``pad_planned`` on the plan; a wide string result is computed on python strings."""
    import numpy as np

    from padconv_cli.kernels.pad import pad_planned

    data = np.asarray(arrays[0])
    value = fill(data.dtype, attributes, made)
    if strings_as_objects(output_dtype(data.dtype, attributes, made), made):
        data = data.astype(object)
    return pad_planned(data, made, value)


def typed(attributes: Mapping[str, Any], dtype: np.dtype) -> dict[str, Any]:
    """The attributes with a text constant_value read as an element of the data's type."""
    from padconv_cli.kernels.pad import typed_attributes

    return typed_attributes(attributes, dtype)


def output_dtype(dtype: np.dtype, attributes: Mapping[str, Any], made: Any) -> np.dtype:
    """The data's type, or the type that holds both data and the fill (strings widen)."""
    from padconv_cli.kernels.pad import output_dtype as widened

    return widened(dtype, fill(dtype, attributes, made))


def strings_as_objects(dtype: np.dtype, made: Any) -> bool:
    """True when a fixed-width string result of ``dtype`` over ``STRING_CHUNK_BYTES`` is
    computed on Python strings (and written in pieces) because that holds less:
    ``8 * prod(shape) + prod(input shape) * (64 + itemsize) < prod(shape) * itemsize``."""
    if dtype.kind not in "US":
        return False
    from padconv_cli.tensorio.npy import STRING_CHUNK_BYTES

    count = math.prod(made.output_shape)
    whole = count * dtype.itemsize
    held = count * POINTER_BYTES + math.prod(made.input_shape) * (STR_OBJECT_BYTES + dtype.itemsize)
    return whole > STRING_CHUNK_BYTES and held < whole


def _utf8_length(item: Any) -> int:
    """UTF-8 bytes of one element, encoded ``UTF8_PIECE`` characters at a time."""
    if isinstance(item, bytes):
        return len(item)
    text = item if isinstance(item, str) else str(item)
    if text.isascii():
        return len(text)
    return sum(len(text[start:start + UTF8_PIECE].encode("utf-8", "surrogatepass"))
               for start in range(0, len(text), UTF8_PIECE))


def _characters(item: Any) -> int:
    return len(item) if isinstance(item, (str, bytes)) else len(str(item))


def string_lengths(data: Any, dtype: np.dtype, *, utf8: bool = False) -> tuple[int, int]:
    """``(longest, total)`` characters of string data (UTF-8 bytes when ``utf8``): an object
    array element by element; a fixed-width one is not read, each element counts its width."""
    import numpy as np

    if dtype.kind == "O":
        measure = _utf8_length if utf8 else _characters
        longest = total = 0
        for item in np.asarray(data).flat:
            length = measure(item)
            longest, total = max(longest, length), total + length
        return longest, total
    width = dtype.itemsize // (UTF32 if dtype.kind == "U" else 1)
    if utf8 and dtype.kind == "U":
        width *= UTF8_MAX
    return width, width * math.prod(np.shape(data))


def written_bytes(data: Any, made: Any, dtype: np.dtype, value: Any, fmt: str) -> int:
    """Bytes of the result as written in ``fmt``: ``prod(shape) * itemsize`` for fixed-size
    types; strings to ``.npy`` ``prod(shape) * 4 * longest`` (UTF-32, characters of the input
    or the fill); to ``.pb`` ``text + prod(shape) * (1 + varint(longest))``, ``text`` the kept
    input's UTF-8 bytes plus the fill's (constant mode) or ``prod(shape) * longest``.  Exact
    for an object input under 128 UTF-8 bytes an element, upper bounds otherwise (a
    fixed-width input is not read: 4 UTF-8 bytes a character)."""
    import numpy as np

    count = math.prod(made.output_shape)
    if dtype.kind not in "OUS" or (dtype.kind in "US" and fmt != "pb"):
        return count * dtype.itemsize
    pb = fmt == "pb"
    longest, total = string_lengths(data, np.dtype(getattr(data, "dtype", dtype)), utf8=pb)
    fill_length = 0
    if isinstance(value, (str, bytes)):
        fill_length = _utf8_length(value) if pb else _characters(value)
    longest = max(longest, fill_length)
    if not pb:
        return count * UTF32 * max(longest, 1)
    if made.mode == "constant":
        text = total + (count - math.prod(made.cropped_shape)) * fill_length
    else:
        text = count * longest
    varint = max(1, (longest.bit_length() + 6) // 7)
    return text + count * (PB_TAG + varint)


def needs(arrays: Sequence[Any], made: Any, dtype: np.dtype, attributes: Mapping[str, Any],
          fmt: str) -> Any:
    """Output bytes as written and working memory: a string result's strings made from the
    input plus the piece being written, or for ``.pb`` the whole message plus
    ``PB_STRING_HELD`` bytes an element."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.resources import Needs, nbytes
    from padconv_cli.tensorio.npy import STRING_CHUNK_BYTES

    data, value = arrays[0], fill(dtype, attributes, made)
    dtype = output_dtype(dtype, attributes, made)
    output = written_bytes(data, made, dtype, value, fmt)
    shape, count = tuple(made.output_shape), math.prod(made.output_shape)
    converted = strings_as_objects(dtype, made)
    objects = dtype.kind == "O" or converted
    serialised = fmt == "pb" and dtype.kind in "OUS"
    if not (objects or serialised):
        return Needs(nbytes(data), output, 0, shape, dtype_name(dtype), dtype.itemsize)
    made_strings = 0
    if converted:
        made_strings = math.prod(made.input_shape) * (STR_OBJECT_BYTES + dtype.itemsize)
    written = output + count * PB_STRING_HELD if serialised else min(output, STRING_CHUNK_BYTES)
    itemsize = POINTER_BYTES if objects else dtype.itemsize
    return Needs(nbytes(data), output, made_strings + written, shape, dtype_name(dtype), itemsize,
                 held=count * itemsize)


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


def explain(call: KernelCall, made: Any, source_of: Any) -> dict[str, Any]:
    """The resolved attributes, where each came from, every output dimension's formula
    ``out = dim + begin + end``; Pad does no arithmetic (0 FLOPs)."""
    import numpy as np

    from padconv_cli.kernels.pad import default_constant

    dtype = dtype_of(call.arrays[0])  # a declared input (out of core) is not read
    value = call.attributes.get("constant_value")
    if value is None:  # what the kernel fills with (float8e8m0, which has no 0: its zero bits)
        value = default_constant(dtype)
    pads = [int(p) for p in call.attributes["pads"]]
    count = len(made.axes)
    by_axis = {axis: (pads[i], pads[count + i]) for i, axis in enumerate(made.axes)}
    dims = []
    for axis, ax in enumerate(made.per_axis):
        begin, end = (f"({p})" if p < 0 else str(p) for p in by_axis.get(axis, (0, 0)))
        formula = f"{ax.dim} + {begin} + {end} = {ax.out_dim}"
        dims.append({"axis": axis, "size": ax.out_dim, "formula": formula})
    attributes = {
        "mode": made.mode,
        "pads": pads,
        "axes": list(made.axes),
        "constant_value": value.item() if isinstance(value, np.generic) else value,
    }
    return {
        "attributes": attributes,
        "sources": {name: source_of(name) for name in attributes},
        "dims": dims,
        "flops": 0,
        "flops_formula": "0 (Pad copies elements, no arithmetic)",
    }


def version_choice(dtype: np.dtype, attributes: Mapping[str, Any]) -> VersionChoice:
    """The oldest Pad version (2 and later) with the call's features: the element type (the
    installed schemas), ``axes`` (Pad-18), ``wrap`` (Pad-19), a constant_value a float32
    ``value`` attribute cannot hold (Pad-11)."""
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
        parts.add_constant_input("constant_value",
                                 None if value is None else scalar_of(value, data.dtype))
    if axes is not None:
        parts.add_constant_input("axes", np.array(axes, dtype=np.int64))
    return parts


def reference(call: KernelCall) -> np.ndarray:
    """Pad recomputed by ``numpy.pad``, independent of the kernel: negative pads crop the
    input first, then each axis gets ``begin`` and ``end`` elements (``out_dim = dim + begin
    + end``) by the mode, reflect and wrap repeating past the axis length."""
    import numpy as np

    from padconv_cli.kernels.pad import plan_pad

    data = np.asarray(call.arrays[0])
    attributes = call.attributes
    made = plan_pad(data.shape, attributes["pads"], attributes["axes"], attributes["mode"])
    widths = [(ax.pad_begin, ax.pad_end) for ax in made.per_axis]
    kept = data[(*made.crop_slices, ...)]  # a view, also of rank-0 data
    if not widths:
        return kept.copy()
    if made.mode == "reflect":  # by its formula: numpy < 2 breaks the period of long pads
        for axis, (begin, end) in enumerate(widths):
            n, period = kept.shape[axis], 2 * max(kept.shape[axis] - 1, 1)
            index = np.arange(-begin, n + end) % period
            kept = np.take(kept, np.minimum(index, period - index) if n > 1 else 0 * index, axis)
        return kept
    if made.mode != "constant":
        return np.pad(kept, widths, mode=made.mode)
    value = attributes.get("constant_value")
    if value is None:
        value = "" if data.dtype.kind in "OU" else np.zeros((), data.dtype)[()]
    return np.pad(kept, widths, constant_values=value)


def known_deviation(peer: str, call: KernelCall, made: Any) -> str | None:
    """Both runtimes refuse rank-0 data; onnxruntime refuses reflect pads longer than
    ``axis length - 1``; onnx.reference refuses negative pads (it calls numpy.pad, which
    cannot crop) and fills strings with 0 instead of ""."""
    if len(made.input_shape) == 0:
        return f"{peer} refuses rank-0 data (the spec allows it: pads is then empty)"
    if peer == ONNXRUNTIME_PEER and made.mode == "reflect":
        for axis, ax in enumerate(made.per_axis):
            longest = max(ax.pad_begin, ax.pad_end)
            if longest > ax.cropped_dim - 1 and longest > 0:
                return (f"onnxruntime refuses reflect pads longer than the axis minus one (pad "
                        f"{longest} on axis {axis} of length {ax.cropped_dim}); the spec sets "
                        "no such limit and padconv reflects again, as numpy.pad does")
        return None
    if peer == REFERENCE_PEER and any(int(p) < 0 for p in call.attributes["pads"]):
        return "onnx.reference refuses negative pads (numpy.pad cannot crop)"
    default_string_fill = (dtype_of(call.arrays[0]).kind in "OU" and made.mode == "constant"
                           and call.attributes.get("constant_value") is None
                           and made.adds_elements)
    if peer == REFERENCE_PEER and default_string_fill:
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


def node_call(version: int, attributes: dict[str, Any], inputs: list) -> KernelCall:
    """Pad of any version -> ``pad(data, pads, constant_value, axes, mode)``; ``wrap`` before
    Pad-19 is computed as Pad-19 does (what onnxruntime and onnx.reference run), with a note."""
    from padconv_cli.ops.node_rules import (
        check_attribute_names,
        check_input_count,
        int_vector,
        require_inputs,
        required_attribute,
    )

    operator = f"Pad-{version}"
    mode = str(attributes.get("mode", "constant"))  # the kernel validates it
    notes = ()
    if mode == "wrap" and version < 19:
        notes = (f"mode 'wrap' needs Pad-19 (opset 19), this node is {operator}: the model is "
                 "off-spec; computed as Pad-19 does, as onnxruntime does",)
    if version < 11:
        pads_name = "paddings" if version == 1 else "pads"
        check_attribute_names(operator, attributes, ("mode", pads_name, "value"))
        check_input_count(operator, inputs, 1, 1)
        data, axes = inputs[0], None
        pads = required_attribute(operator, attributes, pads_name)
        value = attributes.get("value")  # absent: the kernel's default 0, as Pad-1/2 define
    else:
        check_attribute_names(operator, attributes, ("mode",))
        check_input_count(operator, inputs, 2, max_inputs(version))
        data, pads_tensor, constant_tensor, axes_tensor = (inputs + [None, None])[:4]
        pads = int_vector(operator, "pads", pads_tensor, required=True)
        axes = int_vector(operator, "axes", axes_tensor, required=False)
        value = _constant_value(operator, constant_tensor, data)
    require_inputs(operator, ("data",), (data,))
    attributes = {"mode": mode, "pads": pads, "constant_value": value, "axes": axes}
    return KernelCall(NAME, version, (data,), attributes, notes)


def _constant_value(operator: str, tensor: np.ndarray | None, data: np.ndarray | None) -> Any:
    """The constant_value input as a scalar of data's type: None when omitted or empty (as
    onnxruntime does), else exactly one element of data's type T."""
    import numpy as np

    if tensor is None or np.asarray(tensor).size == 0:
        return None
    tensor = np.asarray(tensor)
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
    for index, declared in enumerate(INPUTS[1:len(origin.node.input)], 1):
        name = declared.name
        if name not in flags:
            slots.append(origin.slot(index, None, name, f"give {name}", embedded, param=name))
        elif name == "constant_value" or flags[name] is None:
            slots.append(None)
        else:
            slots.append(np.array(flags[name], dtype=np.int64))
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
    plan=plan, kernel=kernel, run=run, typed=typed,
    output_dtype=output_dtype, needs=needs, plan_tiles=plan_tiles, run_engine=run_engine,
    explain=explain, version_choice=version_choice, graph_parts=graph_parts,
    reference=reference, known_deviation=known_deviation,
    sample_arguments=sample_arguments, node_call=node_call, model_slots=model_slots,
    notes=notes,
)
