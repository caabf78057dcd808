"""``.npy`` files as memory maps, opened with the same header checks as :mod:`tensorio`.

Reading: :func:`open_npy_memmap` validates the header (magic, version, header size, no object
dtype, sane shape; see :func:`padconv_cli.tensorio.npy.read_npy_header`) and refuses a header
that promises more bytes than the file holds, before anything is mapped.

Resident memory: pages of a memory map that were touched count in the process's resident set
until the map is closed.  :class:`NpyInput` and :class:`NpyOutput` therefore map the file only
for the duration of one tile (``read``/``write``) and unmap it right after, so that resident
memory follows the tile, not the file.

Writing: :class:`NpyOutput` creates the result with ``numpy.lib.format.open_memmap`` in a
temporary file next to the target, and :meth:`NpyOutput.commit` renames it over the target
(atomic, like :func:`padconv_cli.tensorio.write_tensor`).
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from padconv_cli.errors import InputError, OutputError, UnsupportedDtypeError
from padconv_cli.tensorio.files import one_line, open_regular_file
from padconv_cli.tensorio.npy import NpyHeader, read_npy_header, to_native_byte_order
from padconv_cli.units import human_bytes


@dataclass(frozen=True)
class NpyInput:
    """A validated ``.npy`` file read one box at a time through a short-lived memory map."""

    path: str
    header: NpyHeader
    identity: tuple[int, int, int] | None = None  # (st_dev, st_ino, st_size) when opened

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

    @contextlib.contextmanager
    def mapped(self) -> Iterator[np.ndarray]:
        """The whole array as a read-only memory map, unmapped when the block ends."""
        array = _map(self.path, self.header, "r")
        try:
            yield array
        finally:
            del array

    def check_unchanged(self) -> None:
        """Refuse to go on when another process replaced or truncated the file meanwhile.

        Rule: same device and inode as when it was opened, and still at least
        ``data_offset + data_bytes`` long (mapping a shrunk file fails; touching its missing
        pages would kill the process with SIGBUS).
        """
        if self.identity is None:
            return
        try:
            info = os.stat(self.path)
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

    def read(self, box: tuple[slice, ...]) -> np.ndarray:
        """A native-byte-order, C-contiguous copy of ``array[box]``.

        A box of unit-step slices is read with ``pread`` (a file truncated meanwhile gives a
        short read, not the SIGBUS of touching a mapped page past its end); other indexing
        goes through a short-lived memory map.
        """
        self.check_unchanged()
        bounds = _unit_bounds(box, self.shape)
        if bounds is not None:
            part = _pread_box(self.path, self.header, bounds)
        else:
            with self.mapped() as array:
                part = np.array(array[box], order="C")
        part = to_native_byte_order(part)
        _check_bool_bytes(part, self.path)
        return part

    def __getitem__(self, box: tuple[slice, ...]) -> np.ndarray:
        """``read(box)``: lets dask read chunks of the file (``dask.array.from_array``)."""
        return self.read(box if isinstance(box, tuple) else (box,))


def open_npy_memmap(path: str) -> NpyInput:
    """Validate an ``.npy`` file for memory-mapped reading without loading its data.

    Rules (as :func:`padconv_cli.tensorio.read_tensor` applies them): the path is a regular
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
    return NpyInput(path, header, (info.st_dev, info.st_ino, size))


def _unit_bounds(box: object, shape: tuple[int, ...]) -> list[tuple[int, int]] | None:
    """[(start, stop)] per axis for a tuple of unit-step slices (None for other indexing)."""
    if not isinstance(box, tuple) or len(box) != len(shape):
        return None
    bounds = []
    for index, dim in zip(box, shape, strict=True):
        if not isinstance(index, slice):
            return None
        start, stop, step = index.indices(dim)
        if step != 1:
            return None
        bounds.append((start, max(start, stop)))
    return bounds


def _pread_box(path: str, header: NpyHeader, bounds: list[tuple[int, int]]) -> np.ndarray:
    """``array[box]`` read run by run with ``os.preadv`` into a fresh C-order array.

    Rule: the axes after the last partially covered one are contiguous in the file, so each
    index of the axes before it is one run of (stop - start) * prod(trailing dims) elements.
    A Fortran-order file is the C-order file of the reversed axes.
    """
    shape = header.shape
    if header.fortran_order:
        part = _pread_c_box(path, header, shape[::-1], bounds[::-1])
        return np.ascontiguousarray(part.T)
    return _pread_c_box(path, header, shape, bounds)


def _pread_c_box(path: str, header: NpyHeader, shape: tuple[int, ...],
                 bounds: list[tuple[int, int]]) -> np.ndarray:
    out = np.empty([stop - start for start, stop in bounds], dtype=header.dtype)
    if out.size == 0:
        return out
    itemsize = header.dtype.itemsize
    strides = [itemsize * math.prod(shape[axis + 1:]) for axis in range(len(shape))]
    split = max(len(shape) - 1, 0)  # the axis whose run is contiguous with all after it
    while split > 0 and bounds[split] == (0, shape[split]):
        split -= 1
    run_bytes = out[(0,) * split].nbytes if shape else itemsize
    flat = memoryview(out.reshape(-1).view(np.uint8))
    fd = os.open(path, os.O_RDONLY)
    try:
        for number, leading in enumerate(np.ndindex(*out.shape[:split])):
            corner = (*leading, *([0] * (len(shape) - split)))
            offset = header.data_offset + sum(
                (i + b[0]) * st for i, b, st in zip(corner, bounds, strides, strict=True)
            )
            _pread_exact(fd, flat[number * run_bytes:(number + 1) * run_bytes], offset, path)
    finally:
        os.close(fd)
    return out


def _pread_exact(fd: int, target: memoryview, offset: int, path: str) -> None:
    """Fill ``target`` from ``offset``; a short file is an InputError (truncated meanwhile)."""
    done = 0
    while done < len(target):
        count = os.preadv(fd, [target[done:]], offset + done)
        if count == 0:
            raise InputError(f"{path}: truncated by another process while being read "
                             f"(no data at byte {offset + done})")
        done += count


def _map(path: str, header: NpyHeader, mode: str) -> np.ndarray:
    if header.data_bytes == 0:
        return np.empty(header.shape, dtype=header.dtype)
    order = "F" if header.fortran_order else "C"
    try:
        return np.memmap(
            path,
            dtype=header.dtype,
            mode=mode,
            offset=header.data_offset,
            shape=header.shape,
            order=order,
        )
    except OSError as exc:
        raise InputError(f"{path}: cannot map ({one_line(exc.strerror or exc)})") from None
    except ValueError as exc:  # "mmap length is greater than file size": it shrank meanwhile
        raise InputError(f"{path}: cannot map, the file is shorter than its header says "
                         f"(changed while being read? {one_line(exc, 80)})") from None


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
        self._temp = _temp_path_for(target)
        self._header = self._create()

    def _create(self) -> NpyHeader:
        try:
            return self._create_temp_file()
        except (OSError, ValueError) as exc:
            self.discard()
            raise OutputError(f"{self.target}: cannot create ({one_line(exc)})") from None
        except BaseException:  # Ctrl-C between creating the file and owning it
            self.discard()
            raise

    def _create_temp_file(self) -> NpyHeader:
        array = np.lib.format.open_memmap(self._temp, mode="w+", dtype=self.dtype, shape=self.shape)
        offset = array.offset if isinstance(array, np.memmap) else _header_length(self._temp)
        del array
        return NpyHeader(self.shape, False, self.dtype, offset)

    def write(self, box: tuple[slice, ...], values: np.ndarray) -> None:
        """``result[box] = values`` through a memory map that is closed again right after."""
        if self._header.data_bytes == 0:
            return
        array = _map(self._temp, self._header, "r+")
        try:
            array[box] = values
        except OSError as exc:  # e.g. the disk filled up while pages were written
            raise OutputError(f"{self.target}: write failed ({one_line(exc)})") from None
        finally:
            del array

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
        with contextlib.suppress(OSError):
            os.unlink(self._temp)

    def __enter__(self) -> NpyOutput:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


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
    real = os.path.realpath(target)
    folder = os.path.dirname(real) or "."
    if os.path.isdir(real):
        raise OutputError(f"{target}: is a directory")
    if not os.path.isdir(folder):
        raise OutputError(f"{target}: folder {folder} does not exist")
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputError(f"{target}: cannot create a file in {folder} ({one_line(exc)})") from None
    os.close(fd)
    return temp


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
