"""Hand-made ``.npy`` bytes: the format's layout written out, for inputs numpy would never save.

Layout (numpy's format spec): the magic ``\\x93NUMPY``, two version bytes, the header length
(``<H`` for version 1.x, ``<I`` for 2.x and later), the header text, then the data.  numpy pads
the header text with spaces and ends it with a newline so that the data starts at a multiple of
64 bytes; :func:`npy_image` does the same unless told not to.  Every piece can be given as
hostile text (a header that is code, a shape of ``2**40``, a length field beyond the file).
"""

from __future__ import annotations

import struct

MAGIC = b"\x93NUMPY"
ALIGNMENT = 64


def length_format(version: tuple[int, int]) -> str:
    """``<H`` (two bytes) for version 1.x, ``<I`` (four bytes) for any later one."""
    return "<H" if version[0] == 1 else "<I"


def npy_preamble(length: int, version: tuple[int, int] = (1, 0)) -> bytes:
    """Magic, version and a header-length field of ``length`` (any value, true or not)."""
    return MAGIC + bytes(version) + struct.pack(length_format(version), length)


def header_text(descr: str = "'<f8'", shape: str = "(2,)", fortran: str = "False") -> str:
    """The header dict with each value given as the source text that stands in it."""
    return f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"


def header_dict(descr: object, shape: object, fortran: object = False) -> str:
    """The header dict numpy writes for these values (each written with ``repr``)."""
    return header_text(repr(descr), repr(shape), repr(fortran))


def npy_image(header: str | bytes, data: bytes = b"", version: tuple[int, int] = (1, 0), *,
              aligned: bool = True) -> bytes:
    """A whole ``.npy``: preamble, ``header`` (text is latin-1, as numpy reads it), data.

    ``aligned``: pad the header with spaces and a newline so that the data starts at a
    multiple of 64 bytes, as numpy does; False writes the header exactly as given."""
    text = header.encode("latin1") if isinstance(header, str) else header
    if aligned:
        unpadded = len(MAGIC) + 2 + struct.calcsize(length_format(version)) + len(text) + 1
        text += b" " * (-unpadded % ALIGNMENT) + b"\n"
    return npy_preamble(len(text), version) + text + data
