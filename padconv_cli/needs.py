"""What a planned Pad or Conv call needs: its output's bytes as written and its working memory.

Output bytes as written (:func:`pad_written_bytes`): ``prod(shape) * itemsize`` for
fixed-size types written to ``.npy``; a string result held as Python objects is written to
``.npy`` at fixed width, ``prod(shape) * 4 * longest`` (UTF-32, ``longest`` the longest string
of the input or the fill value); a string result goes to ``.pb`` at most at
``4 * (characters of the kept input + fill characters) + 8 * prod(shape)`` (UTF-8 at most 4
bytes per character, plus each element's framing; a fixed-width input counts its width).

Strings held as objects (:func:`strings_as_objects`): a fixed-width string result (``<U``,
``|S``) larger than ``STRING_CHUNK_BYTES`` is computed on Python strings when that holds less,
``8 * prod(shape) + prod(input shape) * (64 + itemsize) < prod(shape) * itemsize`` (one
pointer per element, the input's strings made once), and written at its width in pieces of
at most ``STRING_CHUNK_BYTES`` (:func:`padconv_cli.tensorio.npy.write_npy`): padding a few
wide strings then never holds the wide result.

Working memory: Conv's is the formula of its compute path
(:func:`padconv_cli.kernels.conv_paths.working_bytes`).  Pad holds its result; one held as
objects is its pointers, plus the strings made from the input, plus the piece being written
(``.npy``) or the whole message (``.pb``, which is serialised at once).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from padconv_cli.resources import Needs

POINTER_BYTES = 8
STR_OBJECT_BYTES = 64  # a python str's header, over its characters
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


def strings_as_objects(dtype: np.dtype, plan: Any) -> bool:
    """True when a fixed-width string result of ``dtype`` is computed on Python strings and
    written in pieces (module docstring)."""
    if dtype.kind not in "US":
        return False
    from padconv_cli.tensorio.npy import STRING_CHUNK_BYTES

    count = math.prod(plan.output_shape)
    whole = count * dtype.itemsize
    held = count * POINTER_BYTES + math.prod(plan.input_shape) * (STR_OBJECT_BYTES + dtype.itemsize)
    return whole > STRING_CHUNK_BYTES and held < whole


def _fixed_string_lengths(data: Any, dtype: np.dtype) -> tuple[int, int]:
    """``(longest, total)`` characters of a fixed-width string input, at most its width."""
    width = dtype.itemsize // (UTF32 if dtype.kind == "U" else 1)
    return width, width * math.prod(np.shape(data))


def pad_written_bytes(data: np.ndarray, plan: Any, dtype: np.dtype, fill: Any, fmt: str) -> int:
    """Bytes of a Pad result as written (module docstring)."""
    count = math.prod(plan.output_shape)
    if dtype.kind not in "OUS" or (dtype.kind in "US" and fmt != "pb"):
        return count * dtype.itemsize
    if dtype.kind == "O":
        longest, total = _string_lengths(np.asarray(data))
    else:
        longest, total = _fixed_string_lengths(data, dtype)
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
    converted = strings_as_objects(dtype, plan)
    if dtype.kind != "O" and not converted:
        return Needs(_nbytes(data), output, 0, tuple(plan.output_shape),
                     dtype_name(dtype), dtype.itemsize)
    from padconv_cli.tensorio.npy import STRING_CHUNK_BYTES

    made = math.prod(plan.input_shape) * (STR_OBJECT_BYTES + dtype.itemsize) if converted else 0
    written = output if fmt == "pb" else min(output, STRING_CHUNK_BYTES)
    return Needs(_nbytes(data), output, made + written, tuple(plan.output_shape),
                 dtype_name(dtype), POINTER_BYTES, held=count * POINTER_BYTES)


def conv_needs(arrays: tuple[Any, ...], plan: Any, dtype: np.dtype) -> Needs:
    """:class:`~padconv_cli.resources.Needs` of ``conv(*arrays)`` with ``plan``."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.kernels.conv_paths import working_bytes

    inputs = sum(_nbytes(a) for a in arrays if a is not None)
    output = math.prod(plan.output_shape) * dtype.itemsize
    return Needs(inputs, output, working_bytes(plan, dtype), tuple(plan.output_shape),
                 dtype_name(dtype), dtype.itemsize)
