"""An operator's command comes from what its module declares: each declared input is an
argument, each attribute a flag with its kind, choices and help, the texts are the help; what
the declarations require is refused when missing, and the call runs through the pipeline."""

from __future__ import annotations

import dataclasses

import numpy as np
from click.testing import CliRunner

from padconv_cli.cli.operator_command import operator_command
from padconv_cli.ops.conv import OPERATOR as CONV
from padconv_cli.ops.protocol import OPTIONAL, UNLESS_MODEL, Attribute, Command, Input


def _invoke(command, *args):
    return CliRunner().invoke(command, list(args), catch_exceptions=False)


def _with_extra_declarations():
    """Conv declared with one more optional input and a choice attribute it ignores."""
    extra_input = Input("Z", required=OPTIONAL)
    extra = Attribute("rounding", "choice", "even", choices=("even", "away"),
                      show_default=True, help="How halfway values round.")
    texts = Command("ONNX Conv, declared anew.", "Convolve X with W.", "Examples:\n  here")
    return dataclasses.replace(CONV, inputs=(*CONV.inputs, extra_input),
                               attributes=(*CONV.attributes, extra), texts=texts,
                               typed=lambda attributes, dtype: {
                                   k: v for k, v in attributes.items() if k != "rounding"})


def test_declared_inputs_attributes_and_texts_make_the_help():
    result = _invoke(operator_command(_with_extra_declarations()), "--help")
    assert result.exit_code == 0
    assert "[W] [B] [Z]" in result.output
    assert "--rounding [even|away]" in result.output
    assert "How halfway values round." in result.output and "[default: even]" in result.output
    assert "Convolve X with W." in result.output and "Examples:" in result.output


def test_a_choice_outside_the_declared_ones_is_refused_with_a_suggestion():
    result = _invoke(operator_command(_with_extra_declarations()), "x.npy", "w.npy",
                     "--rounding", "evn")
    assert result.exit_code == 2
    assert "did you mean 'even'?" in result.output


def test_what_the_declarations_require_is_refused_when_missing(tmp_path):
    declared = dataclasses.replace(
        CONV, attributes=(*CONV.attributes[:-1],
                          dataclasses.replace(CONV.attributes[-1], required=True)))
    command = operator_command(declared)
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3, 3), np.float32))
    missing_w = _invoke(command, str(tmp_path / "x.npy"))
    assert missing_w.exit_code == 2
    assert "Missing argument 'W' (or take it from a model with --from-model)" in missing_w.output
    missing_flag = _invoke(command, str(tmp_path / "x.npy"), str(tmp_path / "x.npy"))
    assert missing_flag.exit_code == 2
    assert "Missing option '--strides'" in missing_flag.output
    assert CONV.inputs[1].required == UNLESS_MODEL


def test_the_built_command_runs_the_call(tmp_path, monkeypatch):
    from padconv_cli import ops

    declared = _with_extra_declarations()
    monkeypatch.setitem(ops.OPERATORS, CONV.name, declared)  # the pipeline looks it up by name
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 3, 3), np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    result = _invoke(operator_command(declared), str(tmp_path / "x.npy"),
                     str(tmp_path / "w.npy"), "--rounding", "away", "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 0, result.output
    window_sums = [[x[0, 0, i:i + 3, j:j + 3].sum() for j in range(2)] for i in range(2)]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy")[0, 0], window_sums)


def test_the_declared_choices_are_the_values_the_kernels_accept():
    from padconv_cli.kernels.conv_plan import AUTO_PAD_VALUES
    from padconv_cli.kernels.pad_plan import PAD_MODES
    from padconv_cli.ops.pad import OPERATOR as PAD

    declared = {a.name: a.choices for a in (*PAD.attributes, *CONV.attributes) if a.choices}
    assert declared == {"mode": PAD_MODES, "auto_pad": AUTO_PAD_VALUES}


def test_the_commands_help_loads_no_numpy():
    import subprocess
    import sys

    code = ("import sys; from padconv_cli.cli.main import cli\n"
            "try:\n    cli(['conv', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('numpy' in sys.modules, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stderr.strip().splitlines()[-1] == "False", result.stderr
