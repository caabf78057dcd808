"""``padconv conv``: the ONNX Conv operator on tensor files or a model's Conv node."""

from __future__ import annotations

from padconv_cli.cli.operator_command import operator_command
from padconv_cli.ops.conv import AUTO_PAD_VALUES, OPERATOR

__all__ = ["AUTO_PAD_VALUES", "conv_command"]

conv_command = operator_command(OPERATOR)
