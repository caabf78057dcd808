"""``.npy`` files read and written box by box with ``pread``/``pwrite``, not a memory map (a
file truncated meanwhile or a full disk is one error line, not a SIGBUS); memory follows the
box.  The result is a temporary file beside the target, renamed over it when complete."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from padconv_cli.errors import InputError, OutputError, UnsupportedDtypeError
from padconv_cli.tensorio.files import (
    ReadPolicy,
    check_read_bytes,
    create_exclusive,
    input_limit,
    one_line,
    open_regular_file,
    resolve_target,
    temp_beside,
)
from padconv_cli.tensorio.npy import (
    NpyHeader,
    check_bool_bytes,
    check_declared_size,
    check_npy_dtype,
    read_npy_header,
    to_native_byte_order,
    write_npy_header,
)
from padconv_cli.units import human_bytes


class NpyInput:
    """A validated ``.npy`` file read one box at a time with ``pread``."""

    __slots__ = ("path", "header", "identity", "max_read_bytes")

    def __init__(self, path: str, header: NpyHeader, identity: tuple[int, ...] | None = None,
                 max_read_bytes: int | None = None) -> None:
        self.path, self.header = path, header
        self.identity = identity  # (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) when opened
        self.max_read_bytes = max_read_bytes  # the input limit where opened (workers keep it)

    @property
    def shape(self) -> tuple[int, ...]:
        """The declared shape."""
        return self.header.shape

    @property
    def dtype(self) -> np.dtype:
        """The element type in native byte order (what :meth:`read` returns)."""
        return self.header.dtype.newbyteorder("=")

    @property
    def nbytes(self) -> int:
        """Bytes of data: ``prod(shape) * itemsize``."""
        return self.header.data_bytes

    def check_unchanged(self, fd: int | None = None) -> None:
        """Rule: the file (``fd``, the descriptor about to be read, else the path) has the
        device, inode, size, mtime and ctime (``touch`` cannot set it back) it had when opened,
        and at least ``data_offset + data_bytes`` bytes; else it was replaced or changed."""
        if self.identity is None:
            return
        try:
            info = os.stat(self.path) if fd is None else os.fstat(fd)
        except OSError as exc:
            raise InputError(f"{self.path}: disappeared while being read "
                             f"({one_line(exc.strerror or exc)})") from None
        if (info.st_dev, info.st_ino) != self.identity[:2]:
            raise InputError(f"{self.path}: replaced by another file while being read")
        if info.st_size < self.header.data_offset + self.header.data_bytes:
            raise InputError(f"{self.path}: truncated from {self.identity[2]} to {info.st_size} "
                             "bytes by another process while being read")
        if (info.st_size, info.st_mtime_ns, info.st_ctime_ns) != self.identity[2:]:
            raise InputError(f"{self.path}: changed by another process while being read "
                             "(its size or modification time moved)")

    def read(self, box: tuple[slice, ...]) -> np.ndarray:
        """A native-byte-order, C-contiguous copy of ``array[box]`` (:func:`box_ranges`),
        reading only the rows the box selects; a box over the input limit is refused."""
        ranges = box_ranges(box, self.shape)
        self.check_reads([box])
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise InputError(f"{self.path}: disappeared while being read "
                             f"({one_line(exc.strerror or exc)})") from None
        try:
            self.check_unchanged(fd)
            part = _pread_box(fd, self.path, self.header, ranges)
        finally:
            os.close(fd)
        part = to_native_byte_order(np.asarray(part, order="C"))
        check_bool_bytes(part, self.path)
        return part

    def check_reads(self, boxes: Iterable[tuple[slice, ...]]) -> None:
        """Refuse a box over the input limit in force where the file was opened."""
        itemsize = self.header.dtype.itemsize
        largest = max((math.prod(len(r) for r in box_ranges(box, self.shape)) * itemsize
                       for box in boxes), default=0)
        check_read_bytes(largest, self.path, "one box of the out-of-core engine",
                         self.max_read_bytes)

    __getitem__ = read  # ``source[box]``


def open_npy_input(path: str, policy: ReadPolicy | None = None) -> NpyInput:
    """An ``.npy`` file opened to be read box by box, nothing loaded; its header is checked
    (no object or structured dtype, ``prod(shape) * itemsize`` within the file)."""
    stream, size = open_regular_file(path)
    with stream:
        header = read_npy_header(stream, path)
        info = os.fstat(stream.fileno())
    check_declared_size(header, size, path)
    if header.dtype.fields is not None:  # (read_npy_header refuses subarrays)
        raise UnsupportedDtypeError(f"{path}: structured element type {header.dtype} is not a "
                                    "tensor element type")
    identity = (info.st_dev, info.st_ino, size, info.st_mtime_ns, info.st_ctime_ns)
    return NpyInput(path, header, identity, input_limit(policy))


def box_ranges(box: tuple[slice, ...], shape: tuple[int, ...]) -> list[range]:
    """The indices ``box`` selects per axis, ``range(*slice.indices(dim))`` (axes past the box:
    whole); a box of anything but unit-step slices (not what the engines read or write) is a
    ValueError."""
    if not (isinstance(box, tuple) and len(box) <= len(shape) and all(
            isinstance(s, slice) and s.step in (None, 1) for s in box)):
        raise ValueError(f"box {box!r} is not one unit-step slice per axis")
    box += (slice(None),) * (len(shape) - len(box))
    return [range(*s.indices(dim)) for s, dim in zip(box, shape, strict=True)]


def _runs(shape: tuple[int, ...], itemsize: int, ranges: list[range]) -> Iterator[tuple[int, int]]:
    """``(offset after the header, bytes)`` of each contiguous run of a C-order file holding
    the rows ``ranges`` selects, in C order: the axes after ``split`` are whole, so each index
    of the axes before it is one run of ``len(ranges[split])`` slabs."""
    if not shape:
        yield 0, itemsize
        return
    strides = [itemsize * math.prod(shape[axis + 1:]) for axis in range(len(shape))]
    split = len(shape) - 1
    while split > 0 and ranges[split] == range(shape[split]):
        split -= 1
    first, size = ranges[split].start * strides[split], len(ranges[split]) * strides[split]
    for index in itertools.product(*ranges[:split]):
        yield first + sum(i * s for i, s in zip(index, strides, strict=False)), size


def _pread_box(fd: int, path: str, header: NpyHeader, ranges: list[range]) -> np.ndarray:
    """The rows ``ranges`` selects, read into a fresh array (a Fortran-order file is the
    C-order file of the reversed axes); a short file is an InputError (truncated meanwhile)."""
    shape = header.shape[::-1] if header.fortran_order else header.shape
    ranges = ranges[::-1] if header.fortran_order else ranges
    out = np.empty(tuple(len(r) for r in ranges), dtype=header.dtype)
    if out.size:
        try:
            _each_run(fd, out, _runs(shape, header.dtype.itemsize, ranges), header.data_offset,
                      lambda fd, piece, at: os.preadv(fd, [piece], at))
        except EOFError as at:
            raise InputError(f"{path}: truncated by another process while being read "
                             f"(no data at byte {at})") from None
    return out.T if header.fortran_order else out


def _each_run(fd: int, array: np.ndarray, runs: Iterable[tuple[int, int]], base: int,
              move: Callable[[int, memoryview, int], int]) -> None:
    """``move(fd, bytes of array, file position)`` (``pread`` or ``pwrite``) through the runs
    at ``base``, repeated on short counts; EOFError(position) when it moves nothing."""
    flat, done = memoryview(array.reshape(-1).view(np.uint8)), 0
    for offset, length in runs:
        at = base + offset
        while length:
            count = move(fd, flat[done:done + length], at)
            if count <= 0:
                raise EOFError(at)
            done, at, length = done + count, at + count, length - count


class NpyOutput(contextlib.AbstractContextManager):
    """A result ``.npy`` written box by box; as a context manager, renamed over its target on
    a clean exit, removed (the target untouched) on an exception."""

    def __init__(self, target: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.target = target
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        check_npy_dtype(self.dtype, target, ", on the memory engine")
        resolved = resolve_target(target)
        if resolved is None:  # renaming over it would replace the device itself
            raise OutputError(f"{target}: is a character device or FIFO; the out-of-core "
                              "engines write a file (give --engine memory)")
        self._real, self._mode = resolved
        # named before the ``try``: a Ctrl-C right after the file's creation still removes it
        self._temp = temp_beside(target, self._real)
        try:
            self._data_offset = self._create()
        except BaseException:  # no ``with`` owns this object yet
            self.discard()
            raise

    def _create(self) -> int:
        """Create the temporary file: its header, then its data size (a sparse file)."""
        try:
            with os.fdopen(create_exclusive(self._temp), "wb") as stream:
                write_npy_header(stream, self.shape, self.dtype)
                offset = stream.tell()
                stream.truncate(offset + math.prod(self.shape) * self.dtype.itemsize)
        except (OSError, ValueError) as exc:
            if isinstance(exc, FileExistsError):  # the name was taken: not ours to remove
                self._temp = None
            raise OutputError(f"{self.target}: cannot create ({one_line(exc)})") from None
        return offset

    def write(self, box: tuple[slice, ...], values: np.ndarray) -> None:
        """``result[box] = values`` (:func:`box_ranges`) with ``pwrite``; a full disk is one
        :class:`OutputError`."""
        ranges = box_ranges(box, self.shape)
        part = np.ascontiguousarray(
            np.broadcast_to(np.asarray(values, dtype=self.dtype), tuple(len(r) for r in ranges)))
        if part.size == 0:
            return
        fd = os.open(self._temp, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            _each_run(fd, part, _runs(self.shape, self.dtype.itemsize, ranges),
                      self._data_offset, os.pwrite)
        except (OSError, EOFError) as exc:  # e.g. the disk filled up (ENOSPC)
            reason = exc if isinstance(exc, OSError) else "no byte written"
            raise OutputError(f"{self.target}: write failed ({one_line(reason)})") from None
        finally:
            os.close(fd)

    __setitem__ = write  # ``out[box] = values``, as the dask workers write

    def commit(self) -> None:
        """Make the data durable, give the file its final mode and rename it over the target
        (the target's mode when it was opened, else ``0o666 & ~umask``)."""
        try:
            with open(self._temp, "rb+") as stream:
                os.fsync(stream.fileno())
            os.chmod(self._temp, self._mode)
            os.replace(self._temp, self._real)
        except OSError as exc:
            self.discard()
            raise OutputError(f"{self.target}: write failed ({one_line(exc)})") from None

    def discard(self) -> None:
        """Remove the temporary file (nothing happens to the target)."""
        if self._temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._temp)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def check_disk_space(target: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse, before computing, a result larger than the free space where it goes."""
    import shutil

    needed = math.prod(shape) * np.dtype(dtype).itemsize
    try:
        free = shutil.disk_usage(os.path.dirname(os.path.realpath(target)) or ".").free
    except OSError:
        return
    if needed > free:
        raise OutputError(
            f"{target}: the result {tuple(shape)} of {np.dtype(dtype)} needs "
            f"{human_bytes(needed)}, more than the {human_bytes(free)} free on that disk "
            "(out-of-core output; max_output_bytes sets a lower limit)",
            param="max_output_bytes",
        )
