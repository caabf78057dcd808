"""The ``padconv`` command that reproduces a built-in verify case from its sample files.

The sample inputs are file arguments; the other inputs of Pad (pads, constant_value, axes) and
the Conv attributes become flags (``kernel_shape`` -> ``--kernel-shape``).
"""

from __future__ import annotations

import shlex

from padconv_cli.operators import CONV, PAD, operator
from padconv_cli.verification.cases import Case

PAD_INPUT_FLAGS = ((1, "--pads"), (3, "--axes"))
CONV_LIST_FLAGS = ("kernel_shape", "pads", "strides", "dilations")


def cli_arguments(case: Case, folder: str = "samples") -> list[str]:
    """Arguments after ``padconv`` that reproduce the built-in case's expected output."""
    return _ARGUMENTS[operator(case.op).name](case, folder)


def command_line(case: Case, folder: str = "samples", output: str | None = None) -> str:
    """The shell command (quoted) reproducing the case, optionally writing to ``output``."""
    arguments = ["padconv", *cli_arguments(case, folder)]
    if output is not None:
        arguments += ["-o", output]
    return shlex.join(arguments)


def _pad_arguments(case: Case, folder: str) -> list[str]:
    arguments = ["pad", f"{folder}/{case.samples[0]}"]
    for position, flag in PAD_INPUT_FLAGS:
        tensor = case.inputs[position] if position < len(case.inputs) else None
        if tensor is not None:
            arguments += [flag, *(str(int(v)) for v in tensor)]
    arguments += ["--mode", case.attributes.get("mode", "constant")]
    constant = case.inputs[2] if len(case.inputs) > 2 else None
    if constant is not None:
        arguments += ["--constant-value", str(constant.reshape(())[()])]
    return arguments


def _conv_arguments(case: Case, folder: str) -> list[str]:
    tensors = [f"{folder}/{case.samples[p]}" for p in sorted(case.samples)]
    arguments = ["conv", *tensors]
    for name in CONV_LIST_FLAGS:
        if name in case.attributes:
            arguments += [_flag(name), *(str(v) for v in case.attributes[name])]
    if "group" in case.attributes:
        arguments += ["--group", str(case.attributes["group"])]
    if "auto_pad" in case.attributes:
        arguments += ["--auto-pad", str(case.attributes["auto_pad"])]
    return arguments


def _flag(attribute: str) -> str:
    return "--" + attribute.replace("_", "-")


_ARGUMENTS = {PAD.name: _pad_arguments, CONV.name: _conv_arguments}
