"""``padconv compare``: are two tensors equal within tolerance? Exit 0 yes, 1 no (for scripts)."""

from __future__ import annotations

import click

from padconv_cli.cli import options
from padconv_cli.errors import PadconvError
from padconv_cli.ops import error_bound, operator, plan_call
from padconv_cli.ops.conv import ATTRIBUTE_NAMES, AUTO_PAD_VALUES

EXIT_DIFFERENT = 1

EXAMPLES = """\b
Examples:
  padconv pad '[[1.0, 2.0]]' --pads 0 1 0 1 -o a.npy
  padconv compare a.npy '[[0.0, 1.0, 2.0, 0.0]]' && echo same
  padconv compare a.npy '[[0.0, 1.0, 2.001, 0.0]]' --atol 1e-2 --json
"""


@options.command("compare", "Are two tensors equal within tolerance? Exit 0 yes, 1 no.", EXAMPLES)
@click.argument("expected", metavar="A", shell_complete=options.complete_path)
@click.argument("actual", metavar="B", shell_complete=options.complete_path)
@options.shared("tolerance")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--png", "png", metavar="FILE.png",
              help="Also draw a heatmap of |B - A|: black where equal, red to yellow by size; "
              "needs padconv[png].")
@options.shared("dtype")
@options.shared("input")
@click.option("--conv-x", metavar="X", shell_complete=options.complete_path,
              help="A and B are Conv outputs of this X: allow each element the dot-product "
              "error bound c*n*eps*sum(|x|*|w|) too (needs W: --conv-w or --from-model).")
@click.option("--conv-w", metavar="W", shell_complete=options.complete_path,
              help="The W of that Conv.")
@click.option("--conv-b", metavar="B", shell_complete=options.complete_path,
              help="The bias B of that Conv, if it has one.")
@click.option("--auto-pad", type=click.Choice(AUTO_PAD_VALUES),
              help="auto_pad of that Conv (as padconv conv).")
@options.int_list_option("--dilations", help="dilations of that Conv.")
@click.option("--group", type=options.Int64Type(), help="group of that Conv.")
@options.int_list_option("--kernel-shape", help="kernel_shape of that Conv.")
@options.int_list_option("--pads", help="pads of that Conv.")
@options.int_list_option("--strides", help="strides of that Conv.")
@click.option("--from-model", metavar="MODEL.onnx", shell_complete=options.complete_path,
              help="Take that Conv's W, B and attributes from a node of this model (Conv, or "
              "ConvTranspose/ConvInteger/QLinearConv: --conv-x is then its first input).")
@click.option("--node", metavar="NAME",
              help="The node of --from-model (name, Conv#k or output name). A QLinearConv "
              "difference of one unit is then classified (rounding tie, float32 "
              "requantization, 16-bit saturation).")
def compare_command(expected: str, actual: str, rtol: float | None, atol: float | None,
                    as_json: bool, dtype: str | None, **conv_options) -> None:
    """Compare tensor B with tensor A by padconv verify's rule; exit 0 if they match, 1 if not.

    Shapes and dtypes must be equal; integers, bools and strings exactly; floats must satisfy
    |B - A| <= atol + rtol * |A| (A is the reference), NaN matching only NaN. A and B are files
    (.npy, .npz[:NAME], .pb, MODEL.onnx:NAME), - for stdin (one of them), or inline literals.
    With --conv-x (and W from --conv-w or --from-model), A and B are taken as outputs of that
    Conv and each element may also differ by c*n*eps*sum(|x|*|w|) over its receptive field.
    """
    from padconv_cli.tensor_sources import read_tensor
    from padconv_cli.verification.compare import compare_arrays

    png = conv_options.pop("png", None)
    if expected == "-" and actual == "-":
        raise click.UsageError("only one of A and B can be - (stdin)")
    sources = [expected, actual] + [conv_options[k] for k in ("conv_x", "conv_w", "conv_b")]
    if sources.count("-") > 1:
        raise click.UsageError("only one of A, B and the Conv inputs can be - (stdin)")
    options.refuse_output_onto_inputs("--png", png, (*sources, conv_options.get("from_model")))
    reference = read_tensor(expected, dtype=dtype, policy=options.read_policy_of())
    candidate = read_tensor(actual, dtype=dtype, policy=options.read_policy_of())
    bound, call = _conv_bound(conv_options, reference.shape, dtype)
    comparison = compare_arrays(reference, candidate, rtol=rtol, atol=atol, bound=bound)
    known = None if comparison.passed else _classified(call, reference, candidate)
    if as_json:
        options.print_json(_record(comparison, (expected, reference), (actual, candidate), known))
    else:
        lines = _lines(comparison, (expected, reference), (actual, candidate))
        if known is not None:
            lines.insert(1, f"  known deviation: {known}")
        click.echo("\n".join(lines))
    if png is not None:
        from padconv_cli.images import difference_picture, write_png

        write_png(difference_picture(reference, candidate), png)
    if not comparison.passed:
        raise click.exceptions.Exit(EXIT_DIFFERENT)


def _classified(call, reference, candidate) -> str | None:
    """How the node's operator explains B's difference from A (A taken as padconv's exact
    result: a QLinearConv rounding tie, float32 requantization, 16-bit saturation), or None."""
    classify = call and operator(call.op_type).classify_difference
    if not classify or reference.shape != candidate.shape:
        return None
    return classify(call, reference, candidate)


def _node_operator(path: str, name: str | None) -> str:
    """The operator of the node ``name`` of the model (Conv when the name is not given or
    names no node of another operator padconv implements)."""
    from padconv_cli.models import model_nodes

    nodes = model_nodes(path, policy=options.read_policy_of()) if name is not None else ()
    return next((node.op_type for node in nodes if name in (node.node.name, node.label)
                 or name in node.node.output), "Conv")


def _conv_bound(conv: dict, shape: tuple[int, ...], dtype: str | None):
    """The error bound of the --conv-*/--from-model options and the node's call (None, None
    without --conv-x); with --from-model the node may be of any operator padconv implements
    (--conv-x is then its first input)."""
    given = [f"--{k.replace('_', '-')}" for k, v in conv.items() if v is not None]
    if conv["conv_x"] is None:
        if given:
            raise click.UsageError(f"{given[0]} describes the Conv of --conv-x; give --conv-x")
        return None, None
    if conv["conv_w"] is None and conv["from_model"] is None:
        raise click.UsageError("--conv-x needs the Conv's W: --conv-w W or --from-model")
    if conv["node"] is not None and conv["from_model"] is None:
        raise click.UsageError("--node needs --from-model MODEL.onnx")
    from padconv_cli.models import find_node, resolve_call, with_node_context
    from padconv_cli.tensor_sources import read_tensor

    model, node, policy = conv["from_model"], conv["node"], options.read_policy_of()
    name = "Conv" if model is None else _node_operator(model, node)
    arrays = tuple(None if conv[k] is None else read_tensor(conv[k], dtype=dtype, policy=policy)
                   for k in ("conv_x", "conv_w", "conv_b"))
    if name != "Conv":
        arrays = (arrays[0],) + (None,) * (len(operator(name).inputs) - 1)
    flags = {k: conv[k] for k in ATTRIBUTE_NAMES if conv[k] is not None}
    origin = None if model is None else find_node(model, node, name, policy)
    resolved = resolve_call(name, arrays, flags, origin)
    try:
        plan = plan_call(resolved.call)
    except PadconvError as error:
        raise with_node_context(origin, error, resolved.overridden) from None
    if tuple(plan.output_shape) != tuple(shape):
        raise click.UsageError(f"the {name} of --conv-x gives shape {list(plan.output_shape)}, "
                               f"A has shape {list(shape)}")
    return error_bound(resolved.call, plan), resolved.call


def _lines(comparison, first: tuple, second: tuple) -> list[str]:
    """Verdict, the two tensors, the error sizes, first mismatches and the passing tolerances."""
    from padconv_cli.verification.compare import display_value
    from padconv_cli.verification.report import format_error, tolerance_hint

    verdict = "PASS" if comparison.passed else "FAIL"
    bound = ", + c*n*eps*sum(|x|*|w|)" if comparison.bounded else ""
    lines = [f"{verdict} (rtol={comparison.rtol:g}, atol={comparison.atol:g}{bound})",
             f"  A {first[0]}: {options.tensor_text(first[1])}",
             f"  B {second[0]}: {options.tensor_text(second[1])}"]
    if comparison.max_abs is not None:
        lines.append(f"  max |B - A| {format_error(comparison.max_abs)}, "
                     f"max |B - A| / |A| {format_error(comparison.max_rel)}")
    if comparison.passed:
        return lines
    lines.append(f"  {comparison.reason}")
    lines += [f"  at {list(index)}: A {display_value(value_a)}, B {display_value(value_b)}"
              for index, value_a, value_b in comparison.mismatches]
    hidden = comparison.mismatch_count - len(comparison.mismatches)
    if hidden > 0:
        lines.append(f"  ... and {hidden} more")
    if _may_be_conv_output(comparison, first[1]):
        lines += CONV_BOUND_POINTER
    lines.append("  " + tolerance_hint(comparison, options.TOLERANCE_FLAGS))
    return lines


CONV_BOUND_POINTER = [
    "  Conv outputs? Sums in another order differ by up to c*n*eps*sum(|x|*|w|);",
    "  judge by that bound: --conv-x X --conv-w W [--conv-b B] and the Conv's flags,",
    "  or --conv-x X --from-model MODEL.onnx [--node NAME]",
]


def _may_be_conv_output(comparison, reference) -> bool:
    """A float failure of rank 3 or more (N, C, spatial...), judged without the Conv bound,
    that some tolerance would pass: it may be a correct Conv output summed in another order."""
    from padconv_cli.dtypes import element_kind

    return (not comparison.bounded and comparison.min_atol is not None
            and reference.ndim >= 3 and element_kind(reference.dtype) == "float")


def _record(comparison, first: tuple, second: tuple, known: str | None) -> dict:
    """The comparison as a strict-JSON object."""
    from padconv_cli.dtypes import dtype_name

    def tensor(source: str, array) -> dict:
        return {"source": source, "dtype": dtype_name(array.dtype), "shape": list(array.shape)}

    c = comparison
    return {"passed": c.passed, "reason": c.reason, "a": tensor(*first), "b": tensor(*second),
            "rtol": c.rtol, "atol": c.atol, "conv_bound": c.bounded, "max_abs": c.max_abs,
            "max_rel": c.max_rel, "mismatch_count": c.mismatch_count,
            "mismatches": [{"index": list(index), "a": a, "b": b} for index, a, b in c.mismatches],
            "min_atol": c.min_atol, "min_rtol": c.min_rtol, "known_deviation": known}
