"""Files read and written safely: regular inputs only, outputs replaced atomically.

Inputs must be regular files (a FIFO blocks, a device may never end), checked with ``os.stat``
before opening (opening a device can have side effects) and ``os.fstat`` after (the path may
have been swapped).  :func:`atomic_write`: readers see the old file or the whole new one.

:class:`ReadPolicy`, an argument of every reader (None: ``ReadPolicy()``, the safe default):
``max_input_bytes`` bounds the bytes of an input brought into memory at once, checked from
declared sizes before reading (a whole input, an out-of-core box, a Zarr chunk or shard, which
is decoded whole; default: half of the memory available now).  External data (``.pb``, model)
must stay in the tensor's folder, a Zarr entry in its store; a path check cannot see a hard
link to a file elsewhere, so ``st_nlink > 1`` is refused unless ``allow_hardlinks`` is set.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import types
from collections.abc import Callable
from typing import BinaryIO, NamedTuple

from padconv_cli.errors import InputError, OutputError
from padconv_cli.units import human_bytes

_KIND_NAMES = {
    stat.S_IFDIR: "is a directory",
    stat.S_IFIFO: "is a FIFO/pipe, not a regular file (use - to read stdin)",
    stat.S_IFCHR: "is a character device, not a regular file",
    stat.S_IFBLK: "is a block device, not a regular file",
    stat.S_IFSOCK: "is a socket, not a regular file",
}
_CONTROL = "[\x00-\x1f\x7f-\x9f\u2028\u2029]"  # what printable() escapes
READ_PIECE = 16 * 2**20


class ReadPolicy(NamedTuple):
    """The reading rules of one run (module docstring); ``ReadPolicy()`` is the default."""

    max_input_bytes: int | None = None  # None: half of the memory available when reading
    allow_hardlinks: bool = False


def input_limit(policy: ReadPolicy | None = None) -> int:
    """``max_input_bytes``, else half of the memory this process can still allocate."""
    if policy is not None and policy.max_input_bytes is not None:
        return policy.max_input_bytes
    from padconv_cli.resources import available_memory_bytes

    return available_memory_bytes() // 2


def limit_error(label: str, what: str, limit: int) -> InputError:
    """The error for an input over the limit (``what``: "declares 8.0 GiB", ...)."""
    return InputError(f"{label}: {what}, over the input limit max_input_bytes = "
                      f"{human_bytes(limit)}", param="max_input_bytes", source=label)


def check_input_size(size: int, label: str, what: str | None = None,
                     policy: ReadPolicy | None = None) -> None:
    """Refuse ``size`` bytes of input over the policy's limit (before reading them)."""
    limit = input_limit(policy)
    if size > limit:
        raise limit_error(label, what or f"{human_bytes(size)} of input", limit)


def check_read_bytes(size: int, label: str, what: str, limit: int) -> None:
    """Refuse reading ``size`` bytes at once over ``limit``; ``what`` names the part."""
    if size > limit:
        raise limit_error(label, f"reads {human_bytes(size)} at once ({what})", limit)


def check_link_count(links: int, label: str, what: str, folder: str,
                     policy: ReadPolicy | None = None) -> None:
    """Refuse ``links > 1`` hard links (a name outside ``folder``?) unless the policy allows."""
    if links > 1 and not (policy is not None and policy.allow_hardlinks):
        raise InputError(f"{what} has {links} hard links, one of which may lead outside "
                         f"{folder}; refused unless allow_hardlinks is set",
                         param="allow_hardlinks", source=label)


def printable(text: object) -> str:
    """``text`` with control characters and line separators escaped (``\\n``, ``\\x01``)."""
    text = str(text)
    if text.isprintable():  # none of them: the pattern is compiled only when needed
        return text
    return re.sub(_CONTROL, lambda match: match.group().encode("unicode_escape").decode(), text)


def one_line(text: object, limit: int = 300) -> str:
    """A foreign error message as one printable line of at most ``limit`` characters."""
    flat = printable(" ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _os_reason(exc: OSError) -> str:
    return one_line(exc.strerror or exc)


def _refuse_non_regular(label: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise InputError(f"{label}: {_KIND_NAMES.get(stat.S_IFMT(mode), 'not a regular file')}")


_ACCESS_ERRORS = {FileNotFoundError: "no such file",
                  NotADirectoryError: "no such file (a parent is not a folder)",
                  PermissionError: "permission denied"}


def open_regular_file(path: str, label: str | None = None) -> tuple[BinaryIO, int]:
    """(binary file, size) of ``path``, which must be a regular file (or a symlink to one);
    anything else is an :class:`InputError` naming ``label`` (default: the path)."""
    label = printable(path) if label is None else label
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        _refuse_non_regular(label, os.stat(path).st_mode)
        fd = os.open(path, flags)
    except OSError as exc:
        reason = _ACCESS_ERRORS.get(type(exc)) or f"cannot open ({_os_reason(exc)})"
        raise InputError(f"{label}: {reason}") from None
    except ValueError:  # the path holds a NUL byte
        raise InputError(f"{label}: not a valid path (it contains a NUL byte)") from None
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


def read_into(stream: BinaryIO, buffer: memoryview) -> int:
    """Fill ``buffer`` from ``stream``; the number of bytes read (short only at EOF).  Pieces
    of READ_PIECE bytes: a zip member serves ``readinto`` through a ``bytes`` of the size asked."""
    filled = 0
    while filled < len(buffer):
        count = stream.readinto(buffer[filled : filled + READ_PIECE])
        if not count:
            break
        filled += count
    return filled


def temp_name(folder: str, prefix: str, suffix: str) -> str:
    """A fresh name ``folder/prefix<12 random hex digits>suffix`` (nothing is created), the
    prefix cut to keep it within the file system's NAME_MAX (255 when unknown)."""
    try:
        name_max = os.pathconf(folder, "PC_NAME_MAX") or 255
    except (OSError, ValueError, AttributeError):
        name_max = 255
    name_max = name_max if name_max > 0 else 255
    while prefix and len(os.fsencode(prefix)) + len(suffix) + 12 > name_max:
        prefix = prefix[:-1]
    return os.path.join(folder, f"{prefix}{os.urandom(6).hex()}{suffix}")


def create_exclusive(path: str) -> int:
    """Create the file ``path``, mode 0600, open for reading and writing; ``O_EXCL``: never an
    existing file or a symlink (FileExistsError then)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o600)


def _current_umask() -> int:
    """The umask, from /proc where possible (setting it to read it is not thread-safe)."""
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


def resolve_target(path: str) -> tuple[str, int] | None:
    """(real path to replace, its mode), following symlinks; None for an existing character
    device or FIFO; refuses folders and other special files.  Messages name ``path`` as given
    (``/dev/stdout`` resolves into ``/proc``)."""
    label = printable(path)
    if path.endswith((os.sep, "/")):
        raise OutputError(f"{label}: names a folder, not a file")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(f"{label}: cannot access ({_os_reason(exc)})") from None
    if info is not None and (stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        return None
    real = os.path.realpath(path)
    if info is None:
        if real.startswith("/proc/"):
            raise OutputError(f"{label}: cannot create a file there; write to - instead")
        return real, 0o666 & ~_current_umask()
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"{label}: is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise OutputError(f"{label}: exists and is not a regular file, a character device or "
                          "a FIFO; write to - for stdout instead")
    return real, stat.S_IMODE(info.st_mode)


def write_stream(stream: BinaryIO, write: Callable[[BinaryIO], None], label: str) -> None:
    """``write`` into a stream through an object with only ``write`` (numpy's ``tofile`` fast
    path needs a file position, which pipes lack, and reports a closed pipe as a bare
    ``OSError``), then a flush; an OS failure but a closed pipe (the CLI's to handle) is an
    OutputError naming ``label``."""
    try:
        write(types.SimpleNamespace(write=stream.write))
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(f"{label}: write failed ({_os_reason(exc)})") from None


def _write_through(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Write straight into an existing character device or FIFO, opened without blocking: a
    FIFO nobody reads is an error (ENXIO), not a hang."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        reason = "is a FIFO that nobody reads" if exc.errno == errno.ENXIO else (
            f"write failed ({_os_reason(exc)})")
        raise OutputError(f"{printable(path)}: {reason}") from None
    stream = os.fdopen(fd, "wb")  # owns the descriptor from here on
    try:
        os.set_blocking(fd, True)
        write_stream(stream, write, printable(path))
    finally:
        with contextlib.suppress(OSError):  # a failed flush, reported already, fails again
            stream.close()


def temp_beside(path: str, real: str) -> str:
    """A temporary name beside ``real`` (the real path of the target ``path``), its folder
    checked; nothing is created."""
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        raise OutputError(f"{printable(path)}: folder {printable(folder)} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{printable(path)}: folder {printable(folder)} is not writable")
    return temp_name(folder, f".{os.path.basename(real)}.", ".tmp")


def replace_folder(temp: str, target: str) -> None:
    """Move the local store ``temp`` to ``target``.  An old store there is moved aside first,
    into a folder named before the ``try``; if the move is cut short (a Ctrl-C) and ``target``
    is left empty, the old store goes back; the folder aside is removed in any case."""
    aside = None
    if os.path.lexists(target):
        aside = os.path.join(os.path.dirname(target) or ".", f".old.{os.urandom(6).hex()}")
    try:
        if aside is not None:
            os.mkdir(aside, 0o700)
            os.replace(target, os.path.join(aside, "store"))
        os.replace(temp, target)
    finally:
        if aside is not None:
            import shutil  # here only: it loads the compression modules (start-up)

            old = os.path.join(aside, "store")
            if not os.path.lexists(target) and os.path.lexists(old):
                os.replace(old, target)
            shutil.rmtree(aside, ignore_errors=True)


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
            f"({_os_reason(exc)})"
        ) from None


def atomic_write(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Run ``write(stream)`` into a temporary file beside ``path`` (one file system), fsync it,
    give it the target's mode (new: ``0o666 & ~umask``) and rename it over ``path`` (a symlink
    is followed; an existing character device or FIFO is written straight through).

    Rule: ``path`` ends up holding exactly what ``write`` produced, or is unchanged and no
    temporary file remains; OS failures become :class:`OutputError`, other exceptions propagate
    after the clean-up.
    """
    resolved = resolve_target(path)
    if resolved is None:
        _write_through(path, write)
        return
    real, mode = resolved
    # The name is chosen before the ``try``: a Ctrl-C right after the file's creation still
    # removes it.  (A name taken already is refused by O_EXCL, so the file removed is ours.)
    temp = temp_beside(path, real)
    try:
        with os.fdopen(_create_temp(path, temp), "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        os.replace(temp, real)
    except BaseException as exc:
        if not isinstance(exc, _NameTaken):
            with contextlib.suppress(OSError):
                os.unlink(temp)
        if isinstance(exc, OSError):
            raise OutputError(f"{printable(path)}: write failed ({_os_reason(exc)})") from None
        raise
    with contextlib.suppress(OSError):  # the rename made durable, where the system allows it
        folder = os.open(os.path.dirname(real) or ".", os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
