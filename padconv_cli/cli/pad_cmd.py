"""``padconv pad``: the ONNX Pad operator (opset 25) on a tensor file, or a Pad node of a model."""

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
    dtype_option,
    int_list_option,
    output_options,
)

PAD_MODES = ("constant", "reflect", "edge", "wrap")

EXAMPLES = """\b
Examples:
  padconv pad samples/pad_reflect_data.npy --pads 0 2 0 0
  padconv pad samples/pad_reflect_data.npy --pads 0 2 0 0 --mode reflect \\
      -o padded.npy
  padconv pad '[[1, 2], [3, 4]]' --dtype int8 --pads 1 -1 --axes 1 \\
      --constant-value 7
  padconv pad x.npy --from-model model.onnx --node pad1 --explain
"""


def note_ignored_constant(constant_value: str | None, mode: str) -> None:
    """A note on stderr when --constant-value is given with a mode that does not use it
    (ONNX Pad fills only in constant mode; the value is accepted and ignored)."""
    from click.core import ParameterSource

    from padconv_cli.cli.style import SETTINGS

    context = click.get_current_context()
    mode_given = context.get_parameter_source("mode") not in (None, ParameterSource.DEFAULT)
    quiet = SETTINGS["quiet"] or context.params.get("quiet")
    if constant_value is None or mode == "constant" or not mode_given or quiet:
        return
    click.echo(
        f"padconv pad: note: --constant-value {constant_value} is ignored: --mode {mode} "
        "fills from the data, only --mode constant uses it",
        err=True,
    )


@click.command(
    "pad",
    context_settings=CONTEXT_SETTINGS,
    epilog=EXAMPLES,
    short_help="ONNX Pad: pad or crop DATA (constant, reflect, edge, wrap).",
)
@click.argument("data", metavar="DATA", shell_complete=complete_path)
@int_list_option(
    "--pads",
    default=None,
    help="Pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over the axes; negative values "
    "crop. Words, commas or @FILE. Required unless --from-model gives them.",
)
@click.option(
    "--mode",
    type=ChoiceWithSuggestion(PAD_MODES),
    default="constant",
    show_default=True,
    help="How new elements are filled.",
)
@click.option(
    "--constant-value",
    metavar="VALUE",
    default=None,
    help='Fill value for constant mode, typed like DATA (default 0, "" or false).',
)
@int_list_option(
    "--axes",
    default=None,
    help="Axes the pads apply to (default: all; negative counts from the back).",
)
@dtype_option
@output_options
@model_options
@engine_options
@input_options
def pad_command(
    data: str,
    pads: tuple[int, ...] | None,
    mode: str,
    constant_value: str | None,
    axes: tuple[int, ...] | None,
    dtype: str | None,
    output: str | None,
    fmt: str | None,
    max_output_bytes: int | None,
    extras: ExtraOptions,
    engine_settings: EngineSettings,
) -> None:
    """Pad (or crop, with negative pads) DATA as ONNX Pad does.

    DATA is a .npy, .npz[:NAME] or .pb file, MODEL.onnx:NAME (a stored tensor), - for stdin,
    or an inline literal.
    With --from-model the attributes come from a Pad node of a model (any opset); flags
    given here override them.
    """
    if extras.from_model is None:
        require(pads, "Missing option '--pads' (or take it from a model with --from-model)")
    note_ignored_constant(constant_value, mode)
    attributes = {"pads": pads, "constant_value": constant_value, "axes": axes, "mode": mode}
    request = OutputRequest(output, fmt, max_output_bytes, dtype)
    run_operator("pad", (data,), attributes, request, extras, engine_settings)
