"""The sample files of the built-in cases.

A built-in case input with a ``"sample"`` entry is written to that file name (``.npy`` or
``.pb``) by ``samples/make_samples.py``; the ``padconv`` command that reproduces the case is
built by :mod:`padconv_cli.cli.sample_commands`.
"""

from __future__ import annotations

import numpy as np

from padconv_cli.ops import operator
from padconv_cli.verification.cases import Case


def sample_arrays(case: Case) -> dict[str, np.ndarray]:
    """File name -> array for each input of ``case`` that has a sample file."""
    return {name: case.inputs[position] for position, name in case.samples.items()}


def has_command(case: Case) -> bool:
    """True when every tensor argument of the case's command has a sample file."""
    return all(position in case.samples
               for position in range(operator(case.op).required_inputs))
