"""The tensor file commands: ``padconv show`` (alias ``inspect``), what is in tensor files,
without changing anything; ``padconv convert IN OUT``, any tensor padconv reads written as
``.npy`` or ``.pb``."""

from __future__ import annotations

import click

from padconv_cli.cli import options

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
    from padconv_cli.errors import InputError
    from padconv_cli.stats import describe_tensor, format_description, named_tensors

    options.refuse_output_onto_inputs("--png", png, sources)
    if sum(source == "-" or source.startswith("-:") for source in sources) > 1:
        raise click.UsageError("only one FILE can be - (stdin)")
    descriptions, drawn = [], []  # drawn: the tensors read, for --png (read once: stdin too)
    policy, width = options.read_policy_of(), options.output_width()
    for source in sources:
        if _is_model_file(source) and not (as_json or every_initializer or histogram):
            from padconv_cli.cli.show_model import model_lines

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
    import os

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
    import os

    from padconv_cli.dtypes import dtype_name
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
        shape = ", ".join(str(d) for d in array.shape)
        named = f" (TensorProto {proto_name!r})" if resolved == "pb" and proto_name else ""
        click.echo(f"wrote {target}: {dtype_name(array.dtype)}[{shape}]{named}")
