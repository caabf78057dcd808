"""``padconv pad``: the ONNX Pad operator on a tensor file, or a Pad node of a model."""

from __future__ import annotations

from padconv_cli.cli.operator_command import operator_command
from padconv_cli.ops.pad import OPERATOR

pad_command = operator_command(OPERATOR)
