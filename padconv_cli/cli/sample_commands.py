"""The ``padconv`` command that reproduces a built-in verify case (the operator's
``sample_arguments``): its data inputs are the sample files of ``folder`` (a clone's
``samples/``), else inline literals with ``--dtype``, which reproduce the case from any folder.
"""

from __future__ import annotations

import shlex

import numpy as np

from padconv_cli.ops import operator
from padconv_cli.verification.cases import Case

PLACEHOLDER_FOLDER = "\0samples"  # cannot occur in an argument the operator builds itself


def cli_arguments(case: Case, folder: str | None = None) -> list[str]:
    """Arguments after ``padconv`` that reproduce the built-in case's expected output: the
    sample files in ``folder``, or (``folder`` None) the inputs written as inline literals."""
    if folder is not None:
        return operator(case.op).sample_arguments(case, folder)
    arguments = operator(case.op).sample_arguments(case, PLACEHOLDER_FOLDER)
    literals = {f"{PLACEHOLDER_FOLDER}/{name}": tensor_literal(case.inputs[position])
                for position, name in case.samples.items()}
    dtypes = {str(case.inputs[position].dtype) for position in case.samples}
    arguments = [literals.get(argument, argument) for argument in arguments]
    if len(dtypes) == 1:
        arguments += ["--dtype", dtypes.pop()]
    return arguments


def tensor_literal(array: np.ndarray) -> str:
    """``array`` as an inline literal (nested lists) that reads back to the same values in
    the array's dtype: each float is written as the shortest decimal that rounds to it in
    that dtype (``str`` of a numpy scalar), NaN and infinities as ``nan``/``inf``/``-inf``."""
    if array.ndim > 0:
        return "[" + ", ".join(tensor_literal(item) for item in array) + "]"
    value = array[()]
    return str(int(value)) if isinstance(value, np.integer | np.bool_) else str(value)


def command_line(case: Case, folder: str | None = None, output: str | None = None) -> str:
    """The shell command (quoted) reproducing the case, optionally writing to ``output``."""
    arguments = ["padconv", *cli_arguments(case, folder)]
    if output is not None:
        arguments += ["-o", output]
    return shlex.join(arguments)
