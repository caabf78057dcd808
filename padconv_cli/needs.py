"""What a planned Pad or Conv call needs: its output's bytes as written and its working memory.

Output bytes as written (:func:`written_bytes`): ``prod(shape) * itemsize`` for fixed-size
types; a string result held as Python objects is written to ``.npy`` at fixed width,
``prod(shape) * 4 * longest`` (UTF-32, ``longest`` the longest string of the input or the fill
value), and to ``.pb`` at about ``4 * (characters of the kept input + fill characters) +
8 * prod(shape)`` (UTF-8 at most 4 bytes per character, plus each element's framing).

Working memory: Conv's is the formula of its compute path
(:func:`padconv_cli.kernels.conv_paths.working_bytes`); Pad holds only its result, plus, for a
string result written at fixed width, its object array (8 bytes per element) next to the
written copy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from padconv_cli.resources import Needs

POINTER_BYTES = 8
UTF8_MAX = 4
UTF32 = 4
PB_FRAMING = 8


def written_format(output: str | None, fmt: str | None) -> str:
    """``pb`` or ``npy``: the format the writer will use (``--format``, else the suffix)."""
    if fmt is not None:
        return fmt
    if output not in (None, "-") and output.lower().endswith(".pb"):
        return "pb"
    return "npy"


def _string_lengths(array: np.ndarray) -> tuple[int, int]:
    """``(longest, total)`` characters of a string object array (bytes count as characters)."""
    longest = total = 0
    for item in array.flat:
        length = len(item) if isinstance(item, (str, bytes)) else len(str(item))
        longest = max(longest, length)
        total += length
    return longest, total


def pad_written_bytes(data: np.ndarray, plan: Any, dtype: np.dtype, fill: Any, fmt: str) -> int:
    """Bytes of a Pad result as written (module docstring)."""
    count = math.prod(plan.output_shape)
    if dtype.kind != "O":
        return count * dtype.itemsize
    longest, total = _string_lengths(np.asarray(data))
    fill_length = len(fill) if isinstance(fill, (str, bytes)) else 0
    if fmt != "pb":
        return count * UTF32 * max(longest, fill_length, 1)
    if plan.mode == "constant":
        kept = math.prod(plan.cropped_shape)
        text = total + (count - kept) * fill_length
    else:
        text = count * longest
    return UTF8_MAX * text + PB_FRAMING * count


def _nbytes(value: Any) -> int:
    """Bytes of an input as held (a memory-mapped or declared input is not read)."""
    nbytes = getattr(value, "nbytes", None)
    return int(nbytes) if nbytes is not None else int(np.asarray(value).nbytes)


def pad_needs(data: np.ndarray, plan: Any, dtype: np.dtype, fill: Any, fmt: str) -> Needs:
    """:class:`~padconv_cli.resources.Needs` of ``pad(data)`` with ``plan`` (module docstring)."""
    from padconv_cli.dtypes import dtype_name

    output = pad_written_bytes(data, plan, dtype, fill, fmt)
    count = math.prod(plan.output_shape)
    working = count * POINTER_BYTES if dtype.kind == "O" else 0
    return Needs(_nbytes(data), output, working, tuple(plan.output_shape),
                 dtype_name(dtype), dtype.itemsize)


def conv_needs(arrays: tuple[Any, ...], plan: Any, dtype: np.dtype) -> Needs:
    """:class:`~padconv_cli.resources.Needs` of ``conv(*arrays)`` with ``plan``."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.kernels.conv_paths import working_bytes

    inputs = sum(_nbytes(a) for a in arrays if a is not None)
    output = math.prod(plan.output_shape) * dtype.itemsize
    return Needs(inputs, output, working_bytes(plan, dtype), tuple(plan.output_shape),
                 dtype_name(dtype), dtype.itemsize)
