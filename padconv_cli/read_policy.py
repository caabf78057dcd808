"""What reading an input may do: how many bytes it may bring into memory, and whether external
data may be a file with several hard links.

Rules (one policy for every source: files, ``.npz`` members, ``.pb`` external data, models,
stdin, ``@FILE`` lists):

* **Input limit.** ``max_input_bytes`` bounds the bytes of an input brought into memory at
  once, checked from declared sizes before they are read: the whole input when it is read
  into memory (the declared size of an ``.npy``, header first, then the body; the size of a
  ``.pb``, model or external-data file; stdin, read against the bound, since a stream never
  ends on its own: ``< /dev/zero``; a Zarr array's declared shape); each box that the
  out-of-core engines read of an ``.npy`` or Zarr input (a tile, a dask block); and each Zarr
  chunk or shard, which is decoded whole (a few compressed bytes can declare gigabytes).
  Default: half of the memory available now, as for the result.
* **Hard links.** External data (``location`` in a ``.pb`` or a model initializer) must stay in
  the tensor's folder.  A path check cannot see a hard link to a file elsewhere, so a regular
  file with more than one link (``st_nlink > 1``, checked on the opened descriptor) is refused
  unless ``allow_hardlinks`` is set.

The CLI sets the policy from ``--max-input-bytes`` and ``--allow-hardlinks``; library callers use
:func:`reading` (``with reading(max_input_bytes=2**30): read_tensor(...)``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from padconv_cli.errors import InputError
from padconv_cli.units import human_bytes


@dataclass(frozen=True)
class ReadPolicy:
    """The reading rules in force (see the module docstring)."""

    max_input_bytes: int | None = None  # None: half of the memory available when reading
    allow_hardlinks: bool = False


_current = ReadPolicy()


def read_policy() -> ReadPolicy:
    """The policy in force."""
    return _current


def set_read_policy(policy: ReadPolicy) -> ReadPolicy:
    """Put ``policy`` in force; returns the previous one."""
    global _current
    previous, _current = _current, policy
    return previous


@contextmanager
def reading(**changes: object) -> Iterator[ReadPolicy]:
    """Run a block under the current policy with ``changes`` (field=value) applied."""
    previous = set_read_policy(replace(_current, **changes))
    try:
        yield _current
    finally:
        set_read_policy(previous)


def default_max_input_bytes() -> int:
    """Half of the memory this process can still allocate."""
    from padconv_cli.resources import available_memory_bytes

    return available_memory_bytes() // 2


def input_limit() -> int:
    """The input limit in bytes: ``max_input_bytes``, else :func:`default_max_input_bytes`."""
    limit = _current.max_input_bytes
    return default_max_input_bytes() if limit is None else limit


def limit_error(label: str, what: str, limit: int) -> InputError:
    """The error for an input over the limit (``what``: "declares 8.0 GiB", ...)."""
    return InputError(
        f"{label}: {what}, over the input limit max_input_bytes = {human_bytes(limit)}",
        param="max_input_bytes",
        source=label,
    )


def check_input_size(size: int, label: str, what: str | None = None) -> None:
    """Refuse ``size`` bytes of input over the limit (before reading them)."""
    limit = input_limit()
    if size > limit:
        raise limit_error(label, what or f"{human_bytes(size)} of input", limit)


def check_read_bytes(size: int, label: str, what: str, limit: int | None = None) -> None:
    """Refuse reading ``size`` bytes of an input at once over ``limit`` (default: the limit in
    force); ``what`` names the part ("one tile", "one Zarr chunk")."""
    limit = input_limit() if limit is None else limit
    if size > limit:
        raise limit_error(label, f"reads {human_bytes(size)} at once ({what})", limit)


def check_single_link(fd: int, label: str) -> None:
    """Refuse an external-data file with several hard links, unless allowed (module rule)."""
    check_link_count(os.fstat(fd).st_nlink, label, f"{label}: the file", "the tensor's folder")


def check_link_count(links: int, label: str, what: str, folder: str) -> None:
    """Refuse a regular file with ``links > 1`` hard links unless ``allow_hardlinks`` is set:
    one of its names may be outside ``folder``, where no path check can see it."""
    if links > 1 and not _current.allow_hardlinks:
        raise InputError(
            f"{what} has {links} hard links, one of which may lead outside {folder}; "
            "refused unless allow_hardlinks is set",
            param="allow_hardlinks",
            source=label,
        )
