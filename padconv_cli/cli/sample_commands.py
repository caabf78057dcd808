"""The ``padconv`` command that reproduces a built-in verify case from its sample files.

The sample inputs are file arguments; the other inputs and the attributes become flags
(``kernel_shape`` -> ``--kernel-shape``), by the operator's ``sample_arguments``.
"""

from __future__ import annotations

import shlex

from padconv_cli.ops import operator
from padconv_cli.verification.cases import Case


def cli_arguments(case: Case, folder: str = "samples") -> list[str]:
    """Arguments after ``padconv`` that reproduce the built-in case's expected output."""
    return operator(case.op).sample_arguments(case, folder)


def command_line(case: Case, folder: str = "samples", output: str | None = None) -> str:
    """The shell command (quoted) reproducing the case, optionally writing to ``output``."""
    arguments = ["padconv", *cli_arguments(case, folder)]
    if output is not None:
        arguments += ["-o", output]
    return shlex.join(arguments)
