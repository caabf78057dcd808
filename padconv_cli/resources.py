"""Memory available to this process (:func:`available_memory_bytes`; ``max_output_bytes`` and
``memory_limit`` default to half of it), and the one resource gate (:func:`check_call`), once
per call after planning, before any input is read in full or any output allocated:

* representable: numpy holds at most ``2**63 - 1`` bytes per array, counted over the non-zero
  dimensions (an empty result with one huge axis cannot be allocated either);
* output: the result's bytes *as written* must not exceed ``max_output_bytes``; out-of-core
  engines (output on disk) check only an explicit ``max_output_bytes`` (and the free disk);
* memory (in-memory engine): inputs + output as held + the working memory of the compute
  path must not exceed ``memory_limit``; the message says when engine tiled would take it.

Refusals are :class:`~padconv_cli.errors.OutputTooLargeError`; ``param`` names the limit.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from padconv_cli.errors import OutputTooLargeError
from padconv_cli.units import human_bytes

FALLBACK_MEMORY_BYTES = 8 * 2**30
NUMPY_MAX_BYTES = 2**63 - 1


def _number_in(path: str, field: str | None = None) -> int | None:
    """The first word of a file as an integer, or (``field``) its ``field:  N kB`` line in
    bytes; None where the file cannot be read or holds no such number ("max")."""
    try:
        with open(path, encoding="ascii") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError):
        return None
    if field is not None:
        text = next((line[len(field) + 1:] for line in text.splitlines()
                     if line.startswith(field + ":")), "")
    words = text.split()
    if not words or not words[0].isdigit():
        return None
    return int(words[0]) * (1024 if field else 1)


def _meminfo_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (Linux), None where it cannot be read."""
    return _number_in("/proc/meminfo", "MemAvailable")


def _cgroup_headroom(folder: str = "/sys/fs/cgroup") -> int | None:
    """cgroup v2 ``memory.max - memory.current`` in bytes; None without a limit ("max")."""
    limit = _number_in(f"{folder}/memory.max")
    if limit is None:
        return None
    return max(limit - (_number_in(f"{folder}/memory.current") or 0), 0)


def _address_space_headroom() -> int | None:
    """RLIMIT_AS (``ulimit -v``) minus the current VmSize in bytes; None when unlimited."""
    import resource  # POSIX, as the package

    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    return max(soft - (_number_in("/proc/self/status", "VmSize") or 0), 0)


def available_memory_bytes() -> int:
    """The memory this process can still allocate: the minimum of MemAvailable
    (/proc/meminfo), the cgroup v2 ``memory.max - memory.current`` (unless "max") and
    ``RLIMIT_AS - VmSize``; 8 GiB when none of them can be read."""
    bounds = [_meminfo_available(), _cgroup_headroom(), _address_space_headroom()]
    known = [bound for bound in bounds if bound is not None]
    return min(known) if known else FALLBACK_MEMORY_BYTES


def default_memory_limit() -> int:
    """Half of the memory available now (the default of ``memory_limit`` and of
    ``max_output_bytes``): room for the page cache and for other programs."""
    return available_memory_bytes() // 2


class Needs(NamedTuple):
    """What one call needs, from its plan: bytes of the inputs as held, of the output as
    written and of the working memory; the output's shape and type for the messages."""

    inputs: int
    output: int
    working: int
    output_shape: tuple[int, ...]
    dtype_name: str
    allocated_itemsize: int = 1
    held: int | None = None  # the output's bytes in memory, when not its bytes as written

    @property
    def output_held(self) -> int:
        """The output's bytes in memory: ``held``, else its bytes as written."""
        return self.output if self.held is None else self.held

    @property
    def total(self) -> int:
        """``inputs + output as held + working``: the peak of the in-memory engine."""
        return self.inputs + self.output_held + self.working


def nbytes(value: Any) -> int:
    """Bytes of an input as held (a declared input is not read: its declared size)."""
    import numpy as np

    held = getattr(value, "nbytes", None)
    return int(held) if held is not None else int(np.asarray(value).nbytes)


def _result(needs: Needs) -> str:
    return f"the result {tuple(int(d) for d in needs.output_shape)} of {needs.dtype_name}"


def check_call(needs: Needs, max_output_bytes: int | None, memory_limit: int | None = None, *,
               in_memory: bool = True, tiled_possible: bool = False) -> None:
    """The gate (module docstring): representable, output, then memory (in-memory only); a
    limit None is half of the memory available."""
    extent = math.prod(int(d) for d in needs.output_shape if d) * max(needs.allocated_itemsize, 1)
    if extent > NUMPY_MAX_BYTES:
        raise OutputTooLargeError(
            f"{_result(needs)} cannot be allocated: its non-zero dimensions span "
            f"{human_bytes(extent)}, over the 2**63 - 1 bytes an array can hold", param="pads")
    if max_output_bytes is None and not in_memory:
        return
    output_limit = default_memory_limit() if max_output_bytes is None else max_output_bytes
    if needs.output > output_limit:
        raise OutputTooLargeError(
            f"{_result(needs)} needs {human_bytes(needs.output)} as written, over the limit "
            f"max_output_bytes = {human_bytes(output_limit)}", param="max_output_bytes")
    if not in_memory:
        return
    limit = default_memory_limit() if memory_limit is None else memory_limit
    if needs.total <= limit:
        return
    hint = "; engine tiled works within that limit" if tiled_possible else ""
    raise OutputTooLargeError(
        f"the call needs {human_bytes(needs.total)} in memory (inputs "
        f"{human_bytes(needs.inputs)} + output {human_bytes(needs.output_held)} + working "
        f"{human_bytes(needs.working)}), over the limit memory_limit = {human_bytes(limit)}"
        f"{hint}", param=("memory_limit", "engine") if tiled_possible else "memory_limit")
