"""Write the inputs of padconv's built-in verification cases as sample files, and print the
``padconv`` command that reproduces each case's documented output.

Usage (from the repository root)::

    python samples/make_samples.py            # (re)write samples/*.npy and samples/*.pb
    python samples/make_samples.py --commands # only print the commands

The arrays come from ``padconv_cli/verification/data/*.json``, the single source of truth;
files are written with padconv's own writer (``.npy``, or ONNX TensorProto for ``.pb``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from padconv_cli.cli.sample_commands import command_line
from padconv_cli.tensorio import write_tensor
from padconv_cli.verification.cases import builtin_cases
from padconv_cli.verification.samples import has_command, sample_arrays

SAMPLES = Path(__file__).resolve().parent


def collect_samples() -> dict[str, np.ndarray]:
    """File name -> array over all built-in cases; a name shared by cases must hold one array."""
    files: dict[str, np.ndarray] = {}
    for case in builtin_cases():
        for name, array in sample_arrays(case).items():
            known = files.get(name)
            if known is not None and not np.array_equal(known, array, equal_nan=True):
                raise SystemExit(f"sample {name}: cases disagree about its content")
            files[name] = array
    return files


def write_samples() -> None:
    """Write every sample file next to this script."""
    for name, array in sorted(collect_samples().items()):
        write_tensor(array, str(SAMPLES / name))
        print(f"wrote samples/{name}  {array.dtype} {list(array.shape)}")


def print_commands() -> None:
    """One line per built-in case with sample files: the case name and its command."""
    for case in builtin_cases():
        if has_command(case):
            print(f"{case.name}: {command_line(case, 'samples', output='out.npy')}")


if __name__ == "__main__":
    if "--commands" not in sys.argv[1:]:
        write_samples()
    print_commands()
