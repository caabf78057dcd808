"""The registry imports an operator's module only when that operator is asked for: a Conv
call loads Conv's module alone, and listing the operators' names loads none."""

from __future__ import annotations

import ast
import subprocess
import sys


def _operator_modules_after(code: str) -> list[str]:
    report = ("\nimport sys\n"
              "print(sorted(m for m in sys.modules if m.startswith('padconv_cli.ops.')))")
    done = subprocess.run([sys.executable, "-c", code + report], capture_output=True, text=True,
                          check=True)
    return ast.literal_eval(done.stdout)


def test_a_conv_call_loads_only_convs_module():
    code = ("import numpy as np\n"
            "from padconv_cli.pipeline import Request, run\n"
            "x, w = np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 2, 2), np.float32)\n"
            "assert run(Request('conv', (x, w))).result.shape == (1, 1, 2, 2)")
    assert _operator_modules_after(code) == ["padconv_cli.ops.conv"]


def test_listing_the_operators_loads_none_and_a_lookup_loads_one():
    code = ("from padconv_cli.ops import COMMANDS, OPERATORS, find\n"
            "assert list(OPERATORS) == ['Pad', 'Conv', 'ConvTranspose', 'ConvInteger',"
            " 'QLinearConv']\n"
            "assert 'qlinear-conv' in COMMANDS and find('Nope') is None")
    assert _operator_modules_after(code) == []
    assert _operator_modules_after(code + "\nfind('pad')") == ["padconv_cli.ops.pad"]
