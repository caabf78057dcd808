"""``.npy`` files read and written box by box with ``pread`` and ``pwrite`` (never through a
memory map).

Reading: :func:`open_npy_input` validates the header (magic, version, header size, no object
dtype, sane shape; see :func:`padconv_cli.tensorio.npy.read_npy_header`) and refuses a header
that promises more bytes than the file holds.  :meth:`NpyInput.read` then reads only the rows a
box selects, after checking on the opened descriptor that the file is the one opened and still
long enough: an input truncated or replaced by another process during the run is one
:class:`InputError`.

Writing: :class:`NpyOutput` creates the result (header and full length, still sparse) with
``numpy.lib.format.open_memmap`` in a temporary file next to the target, writes each box with
``pwrite`` (a full disk is one :class:`OutputError`, never the SIGBUS of a mapped page), and
:meth:`NpyOutput.commit` renames it over the target (atomic, like
:func:`padconv_cli.tensorio.write_tensor`).  Resident memory follows the box, not the file.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import math
import operator
import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from padconv_cli.errors import InputError, OutputError, UnsupportedDtypeError
from padconv_cli.tensorio.files import (
    ReadPolicy,
    check_read_bytes,
    create_exclusive,
    input_limit,
    one_line,
    open_regular_file,
    temp_name,
)
from padconv_cli.tensorio.npy import NpyHeader, read_npy_header, to_native_byte_order
from padconv_cli.units import human_bytes


@dataclass(frozen=True)
class NpyInput:
    """A validated ``.npy`` file read one box at a time with ``pread`` (never memory-mapped)."""

    path: str
    header: NpyHeader
    # (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) when opened
    identity: tuple[int, ...] | None = None
    max_read_bytes: int | None = None  # the input limit where it was opened (workers keep it)

    @property
    def shape(self) -> tuple[int, ...]:
        """The declared shape."""
        return self.header.shape

    @property
    def dtype(self) -> np.dtype:
        """The element type in native byte order (what :meth:`read` returns)."""
        return self.header.dtype.newbyteorder("=")

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.header.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of data: ``prod(shape) * itemsize``."""
        return self.header.data_bytes

    def check_unchanged(self, fd: int | None = None) -> None:
        """Refuse to go on when another process replaced, truncated or changed the file
        meanwhile.

        Rule: same device and inode as when it was opened, still at least ``data_offset +
        data_bytes`` long, and the same size, modification time and status-change time (a
        write in place, even of the same length, moves both times; ``touch`` cannot set the
        status-change time back).  Checked on the descriptor before each read and once more
        after the last read, before the result is published.  ``fd``: the descriptor about to
        be read, checked itself (a path checked, then opened, could be replaced in between).
        """
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
            raise InputError(
                f"{self.path}: truncated from {self.identity[2]} to {info.st_size} bytes by "
                "another process while being read"
            )
        if (info.st_size, info.st_mtime_ns, info.st_ctime_ns) != self.identity[2:]:
            raise InputError(f"{self.path}: changed by another process while being read "
                             "(its size or modification time moved)")

    def read(self, box: object) -> np.ndarray:
        """A native-byte-order, C-contiguous copy of ``array[box]``, read with ``pread``.

        ``box``: slices of any step, integers and ``...``, as numpy indexes an array.  Only the
        rows the box selects are read (never through a memory map: a file truncated by another
        process meanwhile gives a short read and one :class:`InputError`, not the SIGBUS of
        touching a mapped page past its end); steps are then taken in memory.  A box of more
        than the input limit in force where the file was opened is refused before it is read
        (:func:`padconv_cli.tensorio.files.check_read_bytes`).
        """
        ranges, local = box_ranges(box, self.shape)
        self.check_reads([box])
        fd = _open_for_reading(self.path)
        try:
            self.check_unchanged(fd)
            part = _pread_box(fd, self.path, self.header, ranges)
        finally:
            os.close(fd)
        part = np.asarray(part[local], order="C")
        part = to_native_byte_order(part)
        _check_bool_bytes(part, self.path)
        return part

    def check_reads(self, boxes: Iterable[object]) -> None:
        """Refuse, before anything is read or written, when one of ``boxes`` would bring more
        than the input limit (where the file was opened) into memory at once."""
        itemsize = self.header.dtype.itemsize
        largest = max((math.prod(len(r) for r in box_ranges(box, self.shape)[0]) * itemsize
                       for box in boxes), default=0)
        check_read_bytes(largest, self.path, "one box of the out-of-core engine",
                         self.max_read_bytes)

    def __getitem__(self, box: object) -> np.ndarray:
        """``read(box)``: lets dask read chunks of the file (``dask.array.from_array``)."""
        return self.read(box)


def open_npy_input(path: str, policy: ReadPolicy | None = None) -> NpyInput:
    """Validate an ``.npy`` file for reading box by box (:meth:`NpyInput.read`) without loading
    its data.

    Rules (as :func:`padconv_cli.tensor_sources.read_tensor` applies them): the path is a regular
    file; the header parses and declares no object dtype; ``prod(shape) * itemsize`` fits in
    ``file size - header length``.  Raises :class:`InputError` naming the file.
    """
    stream, size = open_regular_file(path)
    with stream:
        header = read_npy_header(stream, path)
        info = os.fstat(stream.fileno())
    available = size - header.data_offset
    if header.data_bytes > available:
        raise InputError(
            f"{path}: header declares shape {header.shape} of {header.dtype} = "
            f"{header.data_bytes} bytes but only {max(available, 0)} bytes follow "
            "(truncated or forged)"
        )
    if header.dtype.fields is not None or header.dtype.subdtype is not None:
        raise UnsupportedDtypeError(
            f"{path}: structured element type {header.dtype} is not a tensor element type"
        )
    identity = (info.st_dev, info.st_ino, size, info.st_mtime_ns, info.st_ctime_ns)
    return NpyInput(path, header, identity, input_limit(policy))


def box_ranges(box: object, shape: tuple[int, ...]) -> tuple[list[range], tuple]:
    """The ascending ``range`` of indices ``box`` selects on each axis, and the index that
    turns the array of those rows into ``array[box]`` (drops integer axes, reverses negative
    steps).

    Rule: as numpy's basic indexing: ``...`` stands for the missing full axes, an integer
    ``i`` is ``i + dim`` when negative and must lie in ``[0, dim)``, a slice is
    ``range(*slice.indices(dim))``.  Anything else (arrays, ``None``) is a TypeError.
    """
    items = list(box) if isinstance(box, tuple) else [box]
    if any(item is Ellipsis for item in items):
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(shape) - len(items) + 1)
    if len(items) > len(shape):
        raise IndexError(f"too many indices: {len(items)} for {len(shape)} axes")
    items += [slice(None)] * (len(shape) - len(items))
    ranges, local = [], []
    for item, dim in zip(items, shape, strict=True):
        chosen, index = _axis_range(item, dim)
        ranges.append(chosen)
        local.append(index)
    return ranges, tuple(local)


def _axis_range(item: object, dim: int) -> tuple[range, object]:
    """(ascending range read on one axis, index applied to the rows read) for ``item``."""
    if isinstance(item, slice):
        chosen = range(*item.indices(dim))
        if chosen.step < 0:
            return chosen[::-1], slice(None, None, -1)
        return chosen, slice(None)
    try:
        position = operator.index(item)
    except TypeError:
        raise TypeError(f"unsupported index {item!r} (slices, integers and ... only)") from None
    if not -dim <= position < dim:
        raise IndexError(f"index {position} is out of bounds for an axis of size {dim}")
    position %= dim
    return range(position, position + 1), 0


def _open_for_reading(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{path}: disappeared while being read "
                         f"({one_line(exc.strerror or exc)})") from None


def _pread_box(fd: int, path: str, header: NpyHeader, ranges: list[range]) -> np.ndarray:
    """The rows ``ranges`` selects, read with ``os.preadv`` into a fresh C-order array.

    A Fortran-order file is the C-order file of the reversed axes.
    """
    if header.fortran_order:
        part = _pread_c_box(fd, path, header, header.shape[::-1], ranges[::-1])
        return np.ascontiguousarray(part.T)
    return _pread_c_box(fd, path, header, header.shape, ranges)


def _pread_c_box(fd: int, path: str, header: NpyHeader, shape: tuple[int, ...],
                 ranges: list[range]) -> np.ndarray:
    """Rule: the axes after ``split`` are whole, so in the file each index of the axes up to
    ``split`` is one run of ``len(ranges[split]) * prod(trailing dims)`` elements with a
    stride of ``ranges[split].step`` slabs: one ``pread`` when the step is 1, else
    :func:`_pread_strided`."""
    out = np.empty(tuple(len(r) for r in ranges), dtype=header.dtype)
    if out.size == 0:
        return out
    itemsize = header.dtype.itemsize
    strides = [itemsize * math.prod(shape[axis + 1:]) for axis in range(len(shape))]
    if not shape:
        _pread_exact(fd, memoryview(out.reshape(-1).view(np.uint8)), header.data_offset, path)
        return out
    split = len(shape) - 1  # the last axis that is not whole and unit-step (or axis 0)
    while split > 0 and ranges[split] == range(shape[split]):
        split -= 1
    slab = strides[split]
    run = ranges[split]
    run_bytes = len(run) * slab
    flat = memoryview(out.reshape(-1).view(np.uint8))
    for number, leading in enumerate(itertools.product(*ranges[:split])):
        offset = header.data_offset + run.start * slab + sum(
            i * st for i, st in zip(leading, strides, strict=False)
        )
        target = flat[number * run_bytes:(number + 1) * run_bytes]
        if run.step == 1:
            _pread_exact(fd, target, offset, path)
        else:
            _pread_strided(fd, target, offset, slab, run.step, path)
    return out


STRIDED_SCRATCH_BYTES = 1 << 20  # at most this much is read beyond what a strided run needs


def _pread_strided(fd: int, target: memoryview, offset: int, slab: int, step: int,
                   path: str) -> None:
    """``len(target) // slab`` slabs of ``slab`` bytes, ``step * slab`` bytes apart from
    ``offset``: each slab read on its own when the gaps are large, else the spans covering
    several slabs read into a scratch buffer of at most :data:`STRIDED_SCRATCH_BYTES` and
    picked from there."""
    count = len(target) // slab
    per_read = max(1, STRIDED_SCRATCH_BYTES // (step * slab))
    if per_read == 1:
        for number in range(count):
            _pread_exact(fd, target[number * slab:(number + 1) * slab],
                         offset + number * step * slab, path)
        return
    scratch = bytearray(per_read * step * slab)
    picked = np.frombuffer(target, dtype=np.uint8).reshape(count, slab)
    for first in range(0, count, per_read):
        slabs = min(per_read, count - first)
        span = memoryview(scratch)[: ((slabs - 1) * step + 1) * slab]
        _pread_exact(fd, span, offset + first * step * slab, path)
        view = np.frombuffer(span, dtype=np.uint8)
        picked[first:first + slabs] = np.lib.stride_tricks.as_strided(
            view, shape=(slabs, slab), strides=(step * slab, 1)
        )


def _pread_exact(fd: int, target: memoryview, offset: int, path: str) -> None:
    """Fill ``target`` from ``offset``; a short file is an InputError (truncated meanwhile)."""
    done = 0
    while done < len(target):
        count = os.preadv(fd, [target[done:]], offset + done)
        if count == 0:
            raise InputError(f"{path}: truncated by another process while being read "
                             f"(no data at byte {offset + done})")
        done += count


def _check_bool_bytes(array: np.ndarray, label: str) -> None:
    if array.dtype == np.bool_ and array.size and array.view(np.uint8).max() > 1:
        raise InputError(f"{label}: bool data holds bytes other than 0 and 1")


class NpyOutput:
    """A result ``.npy`` written box by box, then renamed over its target.

    Use as a context manager: on an exception the temporary file is removed and the target is
    left untouched; :meth:`commit` (called by a clean exit) fsyncs and renames.
    """

    def __init__(self, target: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.target = target
        self.shape = tuple(int(d) for d in shape)
        self.dtype = _npy_storable(np.dtype(dtype), target)
        # named before the ``try``: a Ctrl-C right after the file's creation still removes it
        self._temp = _temp_path_for(target)
        try:
            self._header = self._create()
        except BaseException:  # no ``with`` owns this object yet
            self.discard()
            raise

    def _create(self) -> NpyHeader:
        try:
            return self._create_temp_file()
        except FileExistsError as exc:  # the name was taken: that file is not ours to remove
            self._temp = None
            raise OutputError(f"{self.target}: cannot create ({one_line(exc)})") from None
        except (OSError, ValueError) as exc:
            raise OutputError(f"{self.target}: cannot create ({one_line(exc)})") from None

    def _create_temp_file(self) -> NpyHeader:
        os.close(create_exclusive(self._temp))
        array = np.lib.format.open_memmap(self._temp, mode="w+", dtype=self.dtype, shape=self.shape)
        offset = array.offset if isinstance(array, np.memmap) else _header_length(self._temp)
        del array
        return NpyHeader(self.shape, False, self.dtype, offset)

    def write(self, box: tuple[slice, ...], values: np.ndarray) -> None:
        """``result[box] = values``, written with ``pwrite``.

        Rule: never through a memory map: the temporary file is sparse until written, and a
        disk that fills up meanwhile (another process) would kill a mapped write with SIGBUS;
        ``pwrite`` fails with ENOSPC instead, one :class:`OutputError`, the temporary file
        removed.  ``box``: one slice of step 1 per axis (what the engines make), written row
        run by row run.
        """
        if self._header.data_bytes == 0:
            return
        ranges = _unit_step_ranges(box, self.shape)
        if ranges is None:
            raise ValueError(f"box {box!r} is not one unit-step slice per axis")
        part = np.ascontiguousarray(
            np.broadcast_to(np.asarray(values, dtype=self.dtype), tuple(len(r) for r in ranges)))
        fd = os.open(self._temp, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            _pwrite_c_box(fd, self._header, ranges, part)
        except OSError as exc:  # e.g. the disk filled up (ENOSPC)
            raise OutputError(f"{self.target}: write failed ({one_line(exc)})") from None
        finally:
            os.close(fd)

    def commit(self) -> None:
        """Make the data durable, give the file its final mode and rename it over the target."""
        try:
            with open(self._temp, "rb+") as stream:
                os.fsync(stream.fileno())
            os.chmod(self._temp, _final_mode(self.target))
            os.replace(self._temp, os.path.realpath(self.target))
        except OSError as exc:
            self.discard()
            raise OutputError(f"{self.target}: write failed ({one_line(exc)})") from None

    def discard(self) -> None:
        """Remove the temporary file (nothing happens to the target)."""
        if self._temp is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._temp)

    def __enter__(self) -> NpyOutput:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def _unit_step_ranges(box: object, shape: tuple[int, ...]) -> list[range] | None:
    """The ``range`` of each axis for a box of unit-step slices, one per axis; else None."""
    if not isinstance(box, tuple) or len(box) != len(shape):
        return None
    if not all(isinstance(s, slice) and s.step in (None, 1) for s in box):
        return None
    return [range(*s.indices(dim)) for s, dim in zip(box, shape, strict=True)]


def _pwrite_c_box(fd: int, header: NpyHeader, ranges: list[range], part: np.ndarray) -> None:
    """Write the C-order ``part`` at the rows ``ranges`` selects of the C-order file: as
    :func:`_pread_c_box`, one run of whole trailing axes per index of the leading ones."""
    if part.size == 0:
        return
    shape = header.shape
    itemsize = header.dtype.itemsize
    strides = [itemsize * math.prod(shape[axis + 1:]) for axis in range(len(shape))]
    split = len(shape) - 1
    while split > 0 and ranges[split] == range(shape[split]):
        split -= 1
    slab = strides[split] if shape else itemsize
    run = ranges[split] if shape else range(1)
    run_bytes = len(run) * slab
    flat = memoryview(part.reshape(-1).view(np.uint8))
    for number, leading in enumerate(itertools.product(*ranges[:split])):
        offset = header.data_offset + run.start * slab + sum(
            i * st for i, st in zip(leading, strides, strict=False))
        _pwrite_all(fd, flat[number * run_bytes:(number + 1) * run_bytes], offset)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """``os.pwrite`` until every byte is written (a write may be partial)."""
    while len(data):
        written = os.pwrite(fd, data, offset)
        if written <= 0:
            raise OSError(errno.ENOSPC, "no byte written")
        data, offset = data[written:], offset + written


def _npy_storable(dtype: np.dtype, target: str) -> np.dtype:
    """Types ``.npy`` can name without pickle (not bfloat16/float8/int4 or objects)."""
    from padconv_cli.dtypes import dtype_name, is_npy_native

    if dtype.hasobject or not is_npy_native(dtype):
        raise UnsupportedDtypeError(
            f"{target}: .npy cannot store dtype {dtype_name(dtype)}; write a .pb TensorProto "
            "instead (format pb, on the memory engine)",
            param="format",
        )
    return dtype


def _temp_path_for(target: str) -> str:
    """A temporary name beside ``target`` (nothing is created), its folder checked."""
    real = os.path.realpath(target)
    folder = os.path.dirname(real) or "."
    if os.path.isdir(real):
        raise OutputError(f"{target}: is a directory")
    if not os.path.isdir(folder):
        raise OutputError(f"{target}: folder {folder} does not exist")
    return temp_name(folder, f".{os.path.basename(real)}.", ".tmp")


def _final_mode(target: str) -> int:
    """An existing target keeps its mode; a new file gets ``0o666 & ~umask``."""
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def _header_length(path: str) -> int:
    stream, _ = open_regular_file(path)
    with stream:
        return read_npy_header(stream, path).data_offset


def free_disk_bytes(target: str) -> int:
    """Bytes free on the file system that will hold ``target``."""
    import shutil

    folder = os.path.dirname(os.path.realpath(target)) or "."
    return shutil.disk_usage(folder).free


def check_disk_space(target: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse, before computing, a result larger than the free space where it goes."""
    needed = math.prod(shape) * np.dtype(dtype).itemsize
    try:
        free = free_disk_bytes(target)
    except OSError:
        return
    if needed > free:
        raise OutputError(
            f"{target}: the result {tuple(shape)} of {np.dtype(dtype)} needs "
            f"{human_bytes(needed)}, more than the {human_bytes(free)} free on that disk "
            "(out-of-core output; max_output_bytes sets a lower limit)",
            param="max_output_bytes",
        )
