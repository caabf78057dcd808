"""``padconv qlinear-conv``: the ONNX QLinearConv operator on files or a model node."""

from __future__ import annotations

from padconv_cli.cli.operator_command import operator_command
from padconv_cli.ops.qlinear_conv import OPERATOR

qlinear_conv_command = operator_command(OPERATOR)
