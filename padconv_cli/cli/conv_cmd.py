"""``padconv conv``: the ONNX Conv operator (opset 22) on tensor files or a model's Conv node."""

from __future__ import annotations

import click

from padconv_cli.cli.engine_options import EngineSettings, engine_options
from padconv_cli.cli.input_options import input_options
from padconv_cli.cli.main import CONTEXT_SETTINGS
from padconv_cli.cli.model_options import (
    ExtraOptions,
    OutputRequest,
    complete_path,
    model_options,
    require,
    run_operator,
)
from padconv_cli.cli.options import (
    ChoiceWithSuggestion,
    Int64Type,
    dtype_option,
    int_list_option,
    output_options,
)

AUTO_PAD_VALUES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

EXAMPLES = """\b
Examples:
  padconv conv samples/conv_basic_x.npy samples/conv_basic_w.npy \\
      --pads 1 1 1 1
  padconv conv x.npy --from-model model.onnx --node conv1 \\
      --auto-pad SAME_UPPER --explain
  padconv pad x.npy --pads 0 0 1 1 0 0 1 1 | padconv conv - w.npy --check
"""


@click.command(
    "conv",
    context_settings=CONTEXT_SETTINGS,
    epilog=EXAMPLES,
    short_help="ONNX Conv: convolve X with W, plus optional bias B.",
)
@click.argument("x", metavar="X", shell_complete=complete_path)
@click.argument("w", metavar="[W]", required=False, shell_complete=complete_path)
@click.argument("b", metavar="[B]", required=False, shell_complete=complete_path)
@click.option(
    "--auto-pad",
    type=ChoiceWithSuggestion(AUTO_PAD_VALUES),
    default="NOTSET",
    show_default=True,
    help="SAME_UPPER/SAME_LOWER: output = ceil(input / stride), odd padding at the end/begin; "
    "VALID: no padding; NOTSET: use --pads.",
)
@int_list_option("--dilations", default=None, help="Dilation per spatial axis (default 1).")
@click.option(
    "--group",
    type=Int64Type(),
    default=1,
    show_default=True,
    help="Number of groups input and output channels are split into.",
)
@int_list_option(
    "--kernel-shape",
    default=None,
    help="Kernel spatial shape; must match W (default: taken from W).",
)
@int_list_option(
    "--pads", default=None, help="Pads [x1_begin, x2_begin, ..., x1_end, x2_end] (default 0)."
)
@int_list_option("--strides", default=None, help="Stride per spatial axis (default 1).")
@dtype_option
@output_options
@model_options
@engine_options
@input_options
def conv_command(
    x: str,
    w: str,
    b: str | None,
    auto_pad: str,
    dilations: tuple[int, ...] | None,
    group: int,
    kernel_shape: tuple[int, ...] | None,
    pads: tuple[int, ...] | None,
    strides: tuple[int, ...] | None,
    dtype: str | None,
    output: str | None,
    fmt: str | None,
    max_output_bytes: int | None,
    extras: ExtraOptions,
    engine_settings: EngineSettings,
) -> None:
    """Convolve X (N x C x D1 x ... x Dn) with W (M x C/group x k1 x ... x kn), plus bias B (M).

    Each input is a .npy, .npz[:NAME] or .pb file, MODEL.onnx:NAME (a stored tensor), - for
    stdin, or an inline literal.
    With --from-model, W, B and the attributes come from a Conv node of a model (any opset);
    tensors and flags given here override them.
    """
    if extras.from_model is None:
        require(w, "Missing argument 'W' (or take it from a model with --from-model)")
    if [x, w, b].count("-") > 1:
        raise click.UsageError("only one of X, W, B can be - (stdin)")
    attributes = dict(
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        kernel_shape=kernel_shape,
        pads=pads,
        strides=strides,
    )
    request = OutputRequest(output, fmt, max_output_bytes, dtype)
    run_operator("conv", (x, w, b), attributes, request, extras, engine_settings)
