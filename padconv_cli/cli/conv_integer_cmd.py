"""``padconv conv-integer``: the ONNX ConvInteger operator on files or a model node."""

from __future__ import annotations

from padconv_cli.cli.operator_command import operator_command
from padconv_cli.ops.conv_integer import OPERATOR

conv_integer_command = operator_command(OPERATOR)
