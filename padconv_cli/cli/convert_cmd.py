"""``padconv convert IN OUT``: any tensor padconv reads, written as ``.npy`` or ``.pb``."""

from __future__ import annotations

import click

from padconv_cli.cli import options

EXAMPLES = """\b
Examples:
  padconv convert '[[1, 2], [3, 4]]' x.pb --dtype float16 --name x
  padconv convert x.pb x.npy
  padconv conv '[[[[1, 2], [3, 4]]]]' '[[[[1]]]]' --dtype float32 \\
      --emit-onnx m.onnx --emit-initializers -o y.npy
  padconv convert m.onnx:W w.npy                  # a tensor the model stores
"""


@options.command("convert", "Write any tensor padconv reads as .npy or .pb.", EXAMPLES)
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
