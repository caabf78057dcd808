"""One array of an ``.npz`` archive (``np.savez[_compressed]``), read with :mod:`zipfile`
through the ``.npy`` checks, the entry's size as the bytes available.  Before decompressing:
only stored or deflated entries (numpy's), a stored one as long as it claims, a deflated one
expanding no more than deflate can (about 1032:1)."""

from __future__ import annotations

import io
import zipfile
import zlib
from typing import BinaryIO

import numpy as np

from padconv_cli.errors import InputError
from padconv_cli.messages import bounded_list
from padconv_cli.tensorio.files import ReadPolicy, one_line, printable
from padconv_cli.tensorio.npy import read_npy_stream

MAX_DEFLATE_RATIO = 1032  # deflate's best case: 258-byte matches coded in about 2 bits
# what zipfile raises on a corrupt, encrypted (RuntimeError) or unsupported archive
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
               ValueError, RuntimeError, NotImplementedError, UnicodeDecodeError, OverflowError,
               IndexError, KeyError)


def _member_names(archive: zipfile.ZipFile, label: str) -> dict[str, zipfile.ZipInfo]:
    """Array name -> zip entry (``x`` is stored as ``x.npy``); two entries of one name
    (``a.npy`` twice, ``a`` and ``a.npy``) are refused: zip readers disagree on which is meant."""
    members = {}
    for info in archive.infolist():
        if info.is_dir():
            continue
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if name in members:
            raise InputError(f"{label}: the archive holds two entries for the array "
                             f"{printable(name)!r} ({printable(members[name].filename)}, "
                             f"{printable(info.filename)}); readers disagree on which is meant")
        members[name] = info
    return members


def _pick_member(members: dict[str, zipfile.ZipInfo], member: str | None,
                 label: str) -> tuple[str, zipfile.ZipInfo]:
    names = bounded_list(printable(name) for name in sorted(members))
    if member is None:
        if len(members) == 1:
            return next(iter(members.items()))
        if not members:
            raise InputError(f"{label}: archive holds no arrays")
        pick = "-:NAME (after a -- that ends the options)" if label == "<stdin>" else (
            f"{label}:NAME")  # stdin is -, which needs --
        raise InputError(f"{label}: ambiguous, the archive holds {len(members)} arrays ({names}); "
                         f"pick one with {pick}")
    if member not in members and member.endswith(".npy"):
        member = member[:-4]
    if member not in members:
        raise InputError(f"{label}: no array named {member!r} (available: {names})")
    return member, members[member]


def _check_entry_sizes(info: zipfile.ZipInfo, archive_size: int, where: str) -> None:
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise InputError(f"{where}: unsupported zip compression method {info.compress_type} "
                         "(numpy writes stored or deflated entries)")
    if info.compress_size > archive_size:
        raise InputError(f"{where}: zip entry claims {info.compress_size} compressed bytes but "
                         f"the archive has {archive_size}")
    if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
        raise InputError(f"{where}: stored zip entry claims {info.file_size} bytes but holds "
                         f"{info.compress_size}")
    if info.file_size > info.compress_size * MAX_DEFLATE_RATIO + 1024:
        raise InputError(f"{where}: zip entry claims {info.file_size} bytes from "
                         f"{info.compress_size} compressed bytes, more than deflate can produce")


def read_npz_stream(stream: BinaryIO, archive_size: int, member: str | None, label: str,
                    policy: ReadPolicy | None = None) -> tuple[str, np.ndarray]:
    """(member name, array) of the archive in ``stream``: the array ``member`` names, or the
    only one when None; a missing or ambiguous name is refused, listing the names."""
    try:
        with zipfile.ZipFile(stream) as archive:
            name, info = _pick_member(_member_names(archive, label), member, label)
            where = f"{label}:{printable(name)}"
            _check_entry_sizes(info, archive_size, where)
            with archive.open(info) as entry:
                array = read_npy_stream(entry, info.file_size, where, policy)
                while entry.read(1 << 20):  # to the entry's end: zipfile then checks the CRC
                    pass
            return name, array
    except InputError:
        raise
    except _ZIP_ERRORS as exc:
        raise InputError(f"{label}: not a readable .npz archive ({one_line(exc, 200)})") from None


def read_npz_bytes(data: bytes, member: str | None, label: str,
                   policy: ReadPolicy | None = None) -> tuple[str, np.ndarray]:
    """(member name, array) from an ``.npz`` image held in memory (stdin)."""
    return read_npz_stream(io.BytesIO(data), len(data), member, label, policy)
