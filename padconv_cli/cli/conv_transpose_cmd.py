"""``padconv conv-transpose``: the ONNX ConvTranspose operator on files or a model node."""

from __future__ import annotations

from padconv_cli.cli.operator_command import operator_command
from padconv_cli.ops.conv_transpose import OPERATOR

conv_transpose_command = operator_command(OPERATOR)
