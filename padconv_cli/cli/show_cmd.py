"""The tensor file commands: ``padconv show`` (alias ``inspect``), what is in tensor files,
without changing anything; ``padconv convert IN OUT``, any tensor padconv reads written as
``.npy`` or ``.pb``."""

from __future__ import annotations

import math
import os
from collections import Counter
from typing import Any

import click

from padconv_cli.cli import options
from padconv_cli.errors import InputError, PadconvError
from padconv_cli.ops import find

EXAMPLES = """\b
Examples:
  padconv show '[1.0, nan, inf]'
  padconv pad '[[1, 2], [3, 4]]' --pads 1 1 1 1 -o y.npy
  padconv show y.npy --histogram --bins 4 --json
"""


def _not_negative(ctx: click.Context, param: click.Parameter, value: int) -> int:
    if value < 0:
        raise click.BadParameter(f"{value} is negative")
    return value


@options.command("show", "Show dtype, shape and statistics of tensors in files.", EXAMPLES)
@click.argument("sources", metavar="FILE...", nargs=-1, required=True,
                shell_complete=options.complete_path)
@click.option("--histogram", is_flag=True,
              help="Add a histogram of the finite values of each tensor.")
@click.option("--bins", type=click.IntRange(min=1, max=1000), default=10, show_default=True,
              help="Number of equal-width histogram bins between min and max.")
@click.option("--edge-items", type=int, default=3, show_default=True, callback=_not_negative,
              help="Values shown at each end of every axis of large tensors; 0 hides the values.")
@click.option("--initializers", "every_initializer", is_flag=True,
              help="For a model: describe every initializer in full, not its nodes.")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list, one object per tensor (a model's initializers).")
@click.option("--png", "png", metavar="FILE.png",
              help="Also draw the tensor (one only) as a picture: a 2-D slice, or a grid of "
              "channels; needs padconv[png].")
@options.shared("dtype")
@options.shared("input")
def show_command(sources: tuple[str, ...], histogram: bool, bins: int, edge_items: int,
                 as_json: bool, dtype: str | None, png: str | None,
                 every_initializer: bool) -> None:
    """Show name, dtype, shape, min/max/mean/std, NaN/Inf counts and a preview of each tensor.

    FILE is a .npy, .npz (every array, or FILE.npz:NAME), .pb file, polygraphy .json file
    (every array, or FILE.json:NAME), - for stdin, or an inline literal. Statistics are over
    the finite values; complex tensors are summarised by |x|.

    A model (.onnx) is listed node by node: operator, name, key attributes (Conv's kernel,
    strides, pads, dilations, group; Pad's mode and pads), input and output shapes, with its
    initializers summarised on the last lines; MODEL.onnx:NAME describes one of them,
    --initializers (or --json) every one.
    """
    from padconv_cli.stats import describe_tensor, format_description, named_tensors

    options.refuse_output_onto_inputs("--png", png, sources)
    if sum(source == "-" or source.startswith("-:") for source in sources) > 1:
        raise click.UsageError("only one FILE can be - (stdin)")
    descriptions, drawn = [], []  # drawn: the tensors read, for --png (read once: stdin too)
    policy, width = options.read_policy_of(), options.output_width()
    for source in sources:
        if _is_model_file(source) and not (as_json or every_initializer or histogram):
            click.echo("\n".join(model_lines(source, width, policy)))
            if png is not None:
                drawn += [array for _, array in named_tensors(source, dtype=dtype, policy=policy)]
            continue
        try:
            for label, array in named_tensors(source, dtype=dtype, policy=policy):
                if png is not None:
                    drawn.append(array)
                descriptions.append(describe_tensor(label, array, bins=bins if histogram else None,
                                                    edge_items=edge_items, width=width))
                quantization = _quantization(label, array, descriptions[-1])
                if not as_json:
                    click.echo(format_description(descriptions[-1]))
                    if quantization is not None:
                        click.echo(quantization)
        except MemoryError:
            raise InputError(f"{source}: out of memory while reading it or computing its "
                             "statistics (they need about one more copy of the tensor)") from None
    if as_json:
        options.print_json(descriptions)
    if png is not None:
        from padconv_cli.images import tensor_picture, write_png

        if len(drawn) != 1:
            raise InputError(f"--png draws one tensor; these sources hold {len(drawn)}")
        write_png(tensor_picture(drawn[0]), png)


def _quantization(label: str, array, description: dict) -> str | None:
    """For a tensor a model stores (``MODEL.onnx:NAME``) that a node quantizes: its scale and
    zero point added to ``description``, and the line that shows them (None otherwise)."""
    path, separator, name = label.rpartition(":")
    if not separator or not path.lower().endswith(".onnx") or array.dtype.kind not in "iu":
        return None
    from padconv_cli.quantization import quantization_line, quantization_of

    quantization = quantization_of(path, name, options.read_policy_of())
    if quantization is None:
        return None
    description["quantization"] = quantization
    return quantization_line(array, quantization)


def _is_model_file(source: str) -> bool:
    """An existing ``.onnx`` file named whole (not ``MODEL.onnx:NAME``)."""
    return source.lower().endswith(".onnx") and os.path.isfile(source)


CONVERT_EXAMPLES = """\b
Examples:
  padconv convert '[[1, 2], [3, 4]]' x.pb --dtype float16 --name x
  padconv convert x.pb x.npy
  padconv conv '[[[[1, 2], [3, 4]]]]' '[[[[1]]]]' --dtype float32 \\
      --emit-onnx m.onnx --emit-initializers -o y.npy
  padconv convert m.onnx:W w.npy                  # a tensor the model stores
"""


@options.command("convert", "Write any tensor padconv reads as .npy or .pb.",
                 CONVERT_EXAMPLES)
@click.argument("source", metavar="IN", shell_complete=options.complete_path)
@click.argument("target", metavar="OUT", shell_complete=options.complete_path)
@click.option("--format", "fmt", type=click.Choice(["npy", "pb"]),
              help="Output format (default: from OUT's suffix, else npy).")
@click.option("--name", help="Name of the TensorProto in a .pb (default: the name IN stores, "
              "else OUT's file name without suffix).")
@options.shared("dtype")
@options.shared("input")
def convert_command(source: str, target: str, fmt: str | None, name: str | None,
                    dtype: str | None) -> None:
    """Read tensor IN and write it to OUT, unchanged: same element type, same shape.

    IN is any tensor source: .npy, .npz (FILE.npz:NAME), .pb, a model's stored tensor
    (MODEL.onnx:NAME), polygraphy's .json (FILE.json:NAME), - for stdin, or an inline
    literal. OUT is a .npy or .pb path (written atomically), or - for stdout. One line says
    what was written (nothing when OUT is -).
    """
    from padconv_cli.tensor_sources import read_named_tensor
    from padconv_cli.tensorio import resolve_format, write_tensor

    options.refuse_output_onto_inputs("OUT", target, (source,))
    resolved = resolve_format(target, fmt)
    if target == "-":
        options.refuse_binary_to_terminal(target, resolved)
    stored, array = read_named_tensor(source, dtype=dtype, policy=options.read_policy_of())
    proto_name = name or stored or os.path.splitext(os.path.basename(target))[0] or None
    write_tensor(array, target, fmt=resolved, name=proto_name if resolved == "pb" else None)
    if target != "-":
        named = f" (TensorProto {proto_name!r})" if resolved == "pb" and proto_name else ""
        click.echo(f"wrote {target}: {options.tensor_text(array)}{named}")


# --- ``padconv show MODEL.onnx``: the model in a screenful, nodes first, initializers
# summarised.
# Layout (aligned columns when they fit the width, else one unaligned line per node; a node's
# name is never cut, its details go to the next line when the name leaves them no room)::
#
#     m.onnx: opset 18, 2 nodes (1 Pad, 1 Conv)
#       input   x float32[1, 1, 4, 4]
#       output  y float32[1, 2, 4, 4]
#       Pad   pad0   constant pads=[0,0,1,1,0,0,1,1]  [1,1,4,4]->[1,1,6,6]
#       Conv  conv0  k=3x3                            [1,1,6,6]->[1,2,4,4]
#     2 initializers (136 B): w float32[2,1,3,3], pads int64[8]; MODEL.onnx:NAME shows one,
#       --initializers every one
#
# Key attributes: Conv's kernel (``k=3x3``), and strides, pads, dilations, group and auto_pad
# when not their defaults; Pad's mode and pads (from the attribute or a stored input); any other
# operator's attributes whose values are short.  Shapes are those of the node's first input and
# first output after onnx's shape inference (``?`` where it leaves one unknown).

SHORT_VALUE = 16
MAX_ATTRIBUTES = 3
LISTED_INITIALIZERS = 6


def model_lines(path: str, width: int, policy: Any = None) -> list[str]:
    """The summary of the model at ``path`` (module layout), fitted to ``width`` columns."""
    from padconv_cli.models import load_model

    model = load_model(path, policy)
    graph = model.graph
    shapes = _inferred_shapes(model)
    stored = {init.name: init for init in graph.initializer}
    lines = _wrapped(_heading(path, model), width)
    feeds = [value for value in graph.input if value.name not in stored]
    lines += [f"  input   {value.name} {_type_text(value)}" for value in feeds]
    lines += [f"  output  {value.name} {_type_text(value)}" for value in graph.output]
    rows = [_node_row(node, index, shapes, stored) for index, node in enumerate(graph.node)]
    lines += _node_lines(rows, width)
    if stored:
        lines += _wrapped(_initializer_line(list(stored.values())), width)
    return lines


def _wrapped(text: str, width: int) -> list[str]:
    """``text`` wrapped at spaces to ``width``, continuation lines indented by 2."""
    import textwrap

    return textwrap.wrap(text, width, subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


def _heading(path: str, model: Any) -> str:
    counts = Counter(node.op_type for node in model.graph.node)
    common = ", ".join(f"{n} {op}" for op, n in counts.most_common(4))
    more = ", ..." if len(counts) > 4 else ""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), "?")
    nodes = len(model.graph.node)
    return (f"{path}: opset {opset}, {nodes} node{'s' * (nodes != 1)}"
            f"{f' ({common}{more})' if nodes else ''}")


def _element_name(elem_type: int) -> str:
    """``float32``, ``int64`` ... of an ONNX element type number; ``?`` when unknown."""
    from padconv_cli.dtypes import elem_type_info

    try:
        return elem_type_info(elem_type).name
    except PadconvError:
        return "?"


def _stored_bytes(tensor: Any) -> int:
    """Bytes of an initializer's values (numpy's item size; its raw bytes when numpy has
    none for the type)."""
    from padconv_cli.dtypes import numpy_dtype_of_elem_type

    try:
        return math.prod(map(int, tensor.dims)) * numpy_dtype_of_elem_type(
            tensor.data_type).itemsize
    except PadconvError:
        return len(tensor.raw_data)


def _inferred_shapes(model: Any) -> dict[str, str]:
    """Tensor name -> ``[1,3,?,?]`` of every value onnx's shape inference knows."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model inference rejects still lists its nodes, shapes unknown
        inferred = model
    graph = inferred.graph
    known = {value.name: shape for value in [*graph.input, *graph.value_info, *graph.output]
             if (shape := _shape_of(value)) is not None}
    return known | {init.name: "[" + ",".join(map(str, init.dims)) + "]"
                    for init in graph.initializer}


def _shape_of(value: Any) -> str | None:
    """``[1,3,h,?]``: a symbolic dim by its name, ``?`` for none or one inference invented."""
    tensor = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not tensor.HasField("shape"):
        return None
    dims = [str(d.dim_value) if d.HasField("dim_value") else d.dim_param
            if d.dim_param and not d.dim_param.startswith("unk__") else "?"
            for d in tensor.shape.dim]
    return "[" + ",".join(dims) + "]"


def _type_text(value: Any) -> str:
    name = _element_name(value.type.tensor_type.elem_type)
    shape = _shape_of(value)
    return name + (shape.replace(",", ", ") if shape else "[?]")


def _node_row(node: Any, index: int, shapes: dict, stored: dict) -> tuple[str, str, str, str]:
    """(op, name, key attributes, shapes) of one node."""
    name = node.name or f"#{index}"
    first_in = next((n for n in node.input if n), "")
    shape_in = shapes.get(first_in, "?") if first_in else ""
    shape_out = shapes.get(node.output[0], "?") if node.output else "?"
    flow = f"{shape_in}->{shape_out}" if shape_in else f"->{shape_out}"
    return node.op_type, name, _key_attributes(node, stored), flow


def _key_attributes(node: Any, stored: dict) -> str:
    """The attributes worth a glance, by what the operator declares: a convolution's kernel
    (from its stored W when the node has no ``kernel_shape``), strides, dilations, pads and
    group; a padding's mode and pads; the short values of any other node."""
    from onnx import helper

    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    declared = find(node.op_type)
    names = declared.attribute_names if declared is not None else ()
    if "kernel_shape" in names:
        if "kernel_shape" not in values and len(node.input) > 1 and node.input[1] in stored:
            values["kernel_shape"] = list(stored[node.input[1]].dims)[2:]
        return _conv_attributes(values)
    if "mode" in names:
        return _pad_attributes(node, values, stored)
    shown = [f"{key}={_short(value)}" for key, value in values.items()
             if len(_short(value)) <= SHORT_VALUE]
    return " ".join(shown[:MAX_ATTRIBUTES])


def _conv_attributes(values: dict) -> str:
    parts = []
    if "kernel_shape" in values:
        parts.append("k=" + "x".join(str(k) for k in values["kernel_shape"]))
    for key, label in (("strides", "s"), ("dilations", "d")):
        if any(v != 1 for v in values.get(key, [])):
            parts.append(f"{label}={_short(values[key])}")
    pads = values.get("pads", [])
    if any(pads):
        parts.append(f"p={pads[0]}" if len(set(pads)) == 1 else f"p={_short(pads)}")
    if values.get("group", 1) != 1:
        parts.append(f"group={values['group']}")
    auto_pad = _short(values.get("auto_pad", b"NOTSET"))
    return " ".join(parts + [auto_pad] * (auto_pad != "NOTSET"))


def _pad_attributes(node: Any, values: dict, stored: dict) -> str:
    from onnx import numpy_helper

    parts = [_short(values.get("mode", b"constant"))]
    pads = values.get("pads")
    if pads is None and len(node.input) > 1 and node.input[1] in stored:
        try:
            pads = numpy_helper.to_array(stored[node.input[1]]).tolist()
        except Exception:
            pads = None
    if pads is not None:
        parts.append(f"pads={_short(pads)}")
    return " ".join(parts)


def _short(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_short(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (int, str)):
        return str(value)
    return "<" + type(value).__name__ + ">"


def _node_lines(rows: list[tuple[str, str, str, str]], width: int) -> list[str]:
    """One line per node: in aligned columns when every node fits ``width`` so; else each node
    on one unaligned line, or two (the name whole on the first) when even that is too wide,
    three (attributes, then shapes) when the details alone are."""
    if not rows:
        return []
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    aligned = ["  " + "  ".join([op.ljust(widths[0]), name.ljust(widths[1]),
                                 attrs.ljust(widths[2]), flow]) for op, name, attrs, flow in rows]
    if all(len(line) <= width for line in aligned):
        return [line.rstrip() for line in aligned]
    lines = []
    for op, name, attrs, flow in rows:
        details = f"{attrs}  {flow}".strip()
        line = f"  {op} {name}  {details}"
        if len(line) <= width:
            lines.append(line)
        elif len(details) + 6 <= width or not attrs:
            lines += [f"  {op} {name}", f"      {details}"]
        else:
            lines += [f"  {op} {name}", f"      {attrs}", f"      {flow}"]
    return lines


def _initializer_line(initializers: list) -> str:
    from padconv_cli.units import human_bytes

    listed = ", ".join(f"{t.name} {_element_name(t.data_type)}[{','.join(map(str, t.dims))}]"
                       for t in initializers[:LISTED_INITIALIZERS])
    hidden = len(initializers) - LISTED_INITIALIZERS
    more = f", ... {hidden} more" if hidden > 0 else ""
    size = human_bytes(sum(_stored_bytes(init) for init in initializers))
    return (f"{len(initializers)} initializers ({size}): {listed}{more}; MODEL.onnx:NAME "
            "shows one, --initializers every one")
