"""Atomic file replacement: readers see the old file or the complete new one, never a part.

The data goes to a temporary file in the target's own folder (so that the final rename stays on
one file system), is flushed and fsynced, gets the permissions the target should have, and is
renamed over the target with ``os.replace``.  On any failure the temporary file is removed and
an existing target is left untouched.

Permissions: an existing target keeps its mode; a new file gets ``0o666 & ~umask`` like any file
created by ``open`` (``mkstemp`` alone would leave it ``0o600``).  A symlink target is followed:
the file it points to is replaced, the link stays.  An existing character device or FIFO
(``-o /dev/null``) is written straight through; other special files are refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from typing import BinaryIO

from padconv_cli.errors import OutputError
from padconv_cli.tensorio.files import one_line, printable


def temp_name(folder: str, prefix: str, suffix: str) -> str:
    """A fresh name ``folder/prefix<12 random hex digits>suffix`` (nothing is created)."""
    prefix = fitting_prefix(folder, prefix, len(suffix) + 12)
    return os.path.join(folder, f"{prefix}{os.urandom(6).hex()}{suffix}")


def create_exclusive(path: str) -> int:
    """Create the file ``path``, mode 0600, open for reading and writing; ``O_EXCL``: never an
    existing file or a symlink (FileExistsError then)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o600)


def make_temp_file(folder: str, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file made by :func:`create_exclusive` under a :func:`temp_name`: ``(descriptor,
    path)``, as ``tempfile.mkstemp`` makes it, without importing tempfile (start-up time).

    A caller that must remove the file whatever happens (a Ctrl-C may land right after the
    creation) chooses the name with :func:`temp_name` before its ``try`` instead."""
    for _ in range(100):
        path = temp_name(folder, prefix, suffix)
        try:
            return create_exclusive(path), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", folder)


def fitting_prefix(folder: str, prefix: str, rest: int) -> str:
    """``prefix`` cut (at a character) so that it and ``rest`` more bytes make a name the
    folder's file system takes: at most NAME_MAX bytes (255 when the system does not say).
    A target whose own name is near that limit still gets a temporary file beside it."""
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        name_max = 255
    name_max = name_max if name_max and name_max > 0 else 255
    while prefix and len(os.fsencode(prefix)) + rest > name_max:
        prefix = prefix[:-1]
    return prefix


def _current_umask() -> int:
    """The process umask, read from /proc where possible (setting it is not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _stat_target(path: str) -> os.stat_result | None:
    """The target's status, following symlinks; None when it does not exist yet."""
    label = printable(path)
    if path.endswith((os.sep, "/")):
        raise OutputError(f"{label}: names a folder, not a file")
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OutputError(f"{label}: cannot access ({one_line(exc.strerror or exc)})") from None


def is_stream_device(mode: int) -> bool:
    """True for a character device (``/dev/null``, a terminal) or a FIFO: written in place."""
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _resolve_target(path: str, info: os.stat_result | None) -> tuple[str, int | None]:
    """(real path to replace, mode to give it); refuses folders and special files.

    Messages name ``path`` as given, never where a link leads (``/dev/stdout`` resolves into
    ``/proc``, which would only confuse).
    """
    label = printable(path)
    real = os.path.realpath(path)
    if info is None:
        if real.startswith("/proc/"):
            raise OutputError(f"{label}: cannot create a file there; write to - instead")
        return real, 0o666 & ~_current_umask()
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{label}: is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise OutputError(
            f"{label}: exists and is not a regular file, a character device or a FIFO; "
            "write to - for stdout instead"
        )
    return real, stat.S_IMODE(info.st_mode)


class _WriteOnly:
    """Exposes only ``write``: pipes and terminals have no file position, which numpy's
    ``tofile`` fast path asks for."""

    def __init__(self, stream: BinaryIO) -> None:
        self.write = stream.write


def _open_for_writing_now(path: str) -> BinaryIO:
    """Open without blocking: a FIFO that nobody reads is an error (ENXIO), not a hang."""
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        os.set_blocking(fd, True)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def _write_through(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Write straight into an existing character device or FIFO (no temporary file)."""
    try:
        with _open_for_writing_now(path) as stream:
            write(_WriteOnly(stream))
            stream.flush()
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        if exc.errno == errno.ENXIO:
            raise OutputError(f"{printable(path)}: is a FIFO that nobody reads") from None
        raise OutputError(
            f"{printable(path)}: write failed ({one_line(exc.strerror or exc)})"
        ) from None


def _check_folder(path: str, folder: str) -> None:
    if not os.path.isdir(folder):
        raise OutputError(f"{printable(path)}: folder {printable(folder)} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{printable(path)}: folder {printable(folder)} is not writable")


def _temp_for(path: str, real: str) -> str:
    """A temporary name beside ``real`` (module docstring), its folder checked."""
    folder = os.path.dirname(real) or "."
    _check_folder(path, folder)
    return temp_name(folder, f".{os.path.basename(real)}.", ".tmp")


class _NameTaken(OutputError):
    """The temporary name was taken already (by another file, which is not ours to remove)."""


def _create_temp(path: str, temp: str) -> int:
    """Create ``temp`` (:func:`create_exclusive`); OutputError naming ``path`` when it cannot."""
    try:
        return create_exclusive(temp)
    except OSError as exc:
        failure = _NameTaken if isinstance(exc, FileExistsError) else OutputError
        raise failure(
            f"{printable(path)}: cannot create a file in {printable(os.path.dirname(temp))} "
            f"({one_line(exc.strerror or exc)})"
        ) from None


def _fsync_folder(folder: str) -> None:
    """Make the rename durable; not every platform/file system allows it, hence best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Run ``write(stream)`` into a temporary file, then rename it over ``path``.

    Rule: either ``path`` ends up holding exactly what ``write`` produced, or it is unchanged and
    no temporary file remains; OS failures become :class:`OutputError`, other exceptions (for
    example a dtype the format cannot hold) propagate unchanged after the clean-up.
    An existing character device or FIFO (``/dev/null``, a named pipe) cannot be replaced by
    a rename and has no partial state to protect: it is written straight through.
    """
    info = _stat_target(path)
    if info is not None and is_stream_device(info.st_mode):
        _write_through(path, write)
        return
    real, mode = _resolve_target(path, info)
    # The name is chosen before the ``try``: a Ctrl-C right after the file's creation still
    # removes it.  (A name taken already is refused by O_EXCL, so the file removed is ours.)
    temp = _temp_for(path, real)
    try:
        with os.fdopen(_create_temp(path, temp), "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, real)
    except BaseException as exc:
        if not isinstance(exc, _NameTaken):
            with contextlib.suppress(OSError):
                os.unlink(temp)
        if isinstance(exc, OSError):
            raise OutputError(
                f"{printable(path)}: write failed ({one_line(exc.strerror or exc)})"
            ) from None
        raise
    _fsync_folder(os.path.dirname(real) or ".")
