"""What a planned Pad or Conv call needs: its output's bytes as written and its working memory.

Output bytes as written (:func:`pad_written_bytes`), in the format the writer will use
(:func:`written_format`): ``prod(shape) * itemsize`` for fixed-size types; a string result held
as Python objects is written to ``.npy`` at fixed width, ``prod(shape) * 4 * longest`` (UTF-32,
``longest`` the longest string of the input or the fill value, in characters); a string result
goes to ``.pb`` as each element's UTF-8 bytes plus its field framing (a tag byte and the
length's varint): ``text + prod(shape) * (1 + varint(longest))``, with ``text`` the UTF-8 bytes
of the kept input plus the fill's (constant mode) or ``prod(shape) * longest`` (edge, reflect,
wrap: any element may be copied anywhere), ``longest`` in UTF-8 bytes.  Both figures are
exact for an object input padded with a constant whose strings are all under 128 UTF-8 bytes,
and upper bounds otherwise; a fixed-width input (not read for this) counts its width, at most
4 UTF-8 bytes per character.  :func:`string_lengths` is the one count of string characters.

Strings held as objects (:func:`strings_as_objects`): a fixed-width string result (``<U``,
``|S``) larger than ``STRING_CHUNK_BYTES`` is computed on Python strings when that holds less,
``8 * prod(shape) + prod(input shape) * (64 + itemsize) < prod(shape) * itemsize`` (one
pointer per element, the input's strings made once), and written at its width in pieces of
at most ``STRING_CHUNK_BYTES`` (:func:`padconv_cli.tensorio.npy.write_npy`): padding a few
wide strings then never holds the wide result.

Working memory: Conv's is the formula of its compute path
(:func:`padconv_cli.kernels.conv_paths.working_bytes`).  Pad holds its result; one held as
objects is its pointers, plus the strings made from the input, plus the piece being written
(``.npy``); a string result written to ``.pb`` (serialised at once) needs the whole message
plus ``PB_STRING_HELD`` bytes an element.
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
PB_TAG = 1  # the field tag byte of each string_data element
PB_STRING_HELD = 64  # memory per string while a TensorProto is built and serialised (the
# encoded strings' list and protobuf's own copy of each: about 58 bytes measured)


def written_format(output: str | None, fmt: str | None) -> str:
    """``pb`` or ``npy``: the format the writer will use (``fmt`` as the writer reads it, else
    the ``.pb`` suffix; anything else, stdout and Zarr stores hold fixed-size elements)."""
    if fmt is not None:
        from padconv_cli.tensorio import STDOUT_TARGET, resolve_format

        return resolve_format(STDOUT_TARGET, fmt)
    if output not in (None, "-") and output.lower().endswith(".pb"):
        return "pb"
    return "npy"


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


UTF8_PIECE = 2**20  # characters encoded at a time to count a long string's UTF-8 bytes


def _utf8_length(item: Any) -> int:
    """UTF-8 bytes of one element (bytes count themselves), encoded in pieces of at most
    ``UTF8_PIECE`` characters so that a long string is never copied whole."""
    if isinstance(item, bytes):
        return len(item)
    text = item if isinstance(item, str) else str(item)
    if text.isascii():
        return len(text)
    return sum(len(text[start:start + UTF8_PIECE].encode("utf-8", "surrogatepass"))
               for start in range(0, len(text), UTF8_PIECE))


def _characters(item: Any) -> int:
    """Characters of one element (bytes count as characters)."""
    return len(item) if isinstance(item, (str, bytes)) else len(str(item))


def string_lengths(data: Any, dtype: np.dtype, *, utf8: bool = False) -> tuple[int, int]:
    """``(longest, total)`` characters of string data, or UTF-8 bytes when ``utf8``.

    An object array is counted element by element; a fixed-width array (``<U``, ``|S``) is
    not read: each element counts its width (at most ``UTF8_MAX`` bytes a ``<U`` character)."""
    if dtype.kind == "O":
        measure = _utf8_length if utf8 else _characters
        longest = total = 0
        for item in np.asarray(data).flat:
            length = measure(item)
            longest = max(longest, length)
            total += length
        return longest, total
    width = dtype.itemsize // (UTF32 if dtype.kind == "U" else 1)
    if utf8 and dtype.kind == "U":
        width *= UTF8_MAX
    return width, width * math.prod(np.shape(data))


def _varint_size(value: int) -> int:
    """Bytes of ``value`` as a protobuf varint (7 bits a byte)."""
    return max(1, (int(value).bit_length() + 6) // 7)


def pad_written_bytes(data: np.ndarray, plan: Any, dtype: np.dtype, fill: Any, fmt: str) -> int:
    """Bytes of a Pad result as written in ``fmt`` (module docstring)."""
    count = math.prod(plan.output_shape)
    if dtype.kind not in "OUS" or (dtype.kind in "US" and fmt != "pb"):
        return count * dtype.itemsize
    pb = fmt == "pb"
    longest, total = string_lengths(data, np.dtype(getattr(data, "dtype", dtype)), utf8=pb)
    fill_length = 0
    if isinstance(fill, (str, bytes)):
        fill_length = _utf8_length(fill) if pb else _characters(fill)
    longest = max(longest, fill_length)
    if not pb:
        return count * UTF32 * max(longest, 1)
    if plan.mode == "constant":
        kept = math.prod(plan.cropped_shape)
        text = total + (count - kept) * fill_length
    else:
        text = count * longest
    return text + count * (PB_TAG + _varint_size(longest))


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
    objects = dtype.kind == "O" or converted
    serialised = fmt == "pb" and dtype.kind in "OUS"
    if not (objects or serialised):
        return Needs(_nbytes(data), output, 0, tuple(plan.output_shape),
                     dtype_name(dtype), dtype.itemsize)
    from padconv_cli.tensorio.npy import STRING_CHUNK_BYTES

    made = math.prod(plan.input_shape) * (STR_OBJECT_BYTES + dtype.itemsize) if converted else 0
    if serialised:
        written = output + count * PB_STRING_HELD
    else:
        written = min(output, STRING_CHUNK_BYTES)
    itemsize = POINTER_BYTES if objects else dtype.itemsize
    return Needs(_nbytes(data), output, made + written, tuple(plan.output_shape),
                 dtype_name(dtype), itemsize, held=count * itemsize)


def conv_needs(arrays: tuple[Any, ...], plan: Any, dtype: np.dtype) -> Needs:
    """:class:`~padconv_cli.resources.Needs` of ``conv(*arrays)`` with ``plan``."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.kernels.conv import working_bytes

    inputs = sum(_nbytes(a) for a in arrays if a is not None)
    output = math.prod(plan.output_shape) * dtype.itemsize
    return Needs(inputs, output, working_bytes(plan, dtype), tuple(plan.output_shape),
                 dtype_name(dtype), dtype.itemsize)
