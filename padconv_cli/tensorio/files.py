"""Opening input files safely and reading exact byte counts.

Inputs must be regular files: a FIFO would block, a device could stream forever, a directory
has no bytes.  The type is checked with ``os.stat`` before opening (opening a device can have
side effects) and again with ``os.fstat`` on the opened descriptor (the path may have been
swapped in between); ``O_NONBLOCK`` keeps that open from hanging on a FIFO.
"""

from __future__ import annotations

import os
import re
import stat
from typing import BinaryIO

from padconv_cli.errors import InputError

_KIND_NAMES = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISFIFO, "is a FIFO/pipe, not a regular file (use - to read stdin)"),
    (stat.S_ISCHR, "is a character device, not a regular file"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: object) -> str:
    """``text`` with control characters and line separators escaped (``\\n``, ``\\x01``).

    File names, archive member names and external-data locations come from the user or from
    the file itself; escaping them keeps every message on one line and the terminal safe.
    """
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode(), str(text))


def one_line(text: object, limit: int = 300) -> str:
    """A foreign error message as one printable line of at most ``limit`` characters."""
    flat = printable(" ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _refuse_non_regular(label: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    for predicate, description in _KIND_NAMES:
        if predicate(mode):
            raise InputError(f"{label}: {description}")
    raise InputError(f"{label}: not a regular file")


def _stat(path: str, label: str) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except NotADirectoryError:
        raise InputError(f"{label}: no such file (a parent is not a folder)") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot access ({one_line(exc.strerror or exc)})") from None
    except ValueError:  # the path holds a NUL byte
        raise InputError(f"{label}: not a valid path (it contains a NUL byte)") from None


def open_regular_file(path: str, label: str | None = None) -> tuple[BinaryIO, int]:
    """Open ``path`` for binary reading and return (file, size in bytes).

    Rule: the path must name an existing regular file (symlinks to one are fine); anything else
    is an :class:`InputError` naming ``label`` (default: the path).
    """
    label = printable(path) if label is None else label
    _refuse_non_regular(label, _stat(path, label).st_mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{label}: no such file") from None
    except PermissionError:
        raise InputError(f"{label}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot open ({one_line(exc.strerror or exc)})") from None
    try:
        info = os.fstat(fd)
        _refuse_non_regular(label, info.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb"), info.st_size


def read_exact(stream: BinaryIO, count: int) -> bytes:
    """Read up to ``count`` bytes, looping over short reads; fewer only at end of stream."""
    chunks = []
    remaining = count
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


READ_PIECE = 16 * 2**20


def read_into(stream: BinaryIO, buffer: memoryview) -> int:
    """Fill ``buffer`` from ``stream``; return the number of bytes read (short only at EOF).

    Read in pieces of at most READ_PIECE bytes: a decompressing stream (a zip member) serves
    ``readinto`` through a ``bytes`` of the requested size, which would double the memory.
    """
    filled = 0
    total = len(buffer)
    while filled < total:
        count = stream.readinto(buffer[filled : filled + READ_PIECE])
        if not count:
            break
        filled += count
    return filled
