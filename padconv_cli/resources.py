"""Memory available to this process, and the one resource gate every Pad/Conv call passes.

Probe (:func:`available_memory_bytes`): the minimum of MemAvailable (``/proc/meminfo``), the
cgroup v2 headroom (``memory.max - memory.current``) and the address-space headroom
(``RLIMIT_AS - VmSize``); 8 GiB when none can be read.  Every engine takes its defaults from
this one probe: ``max_output_bytes`` and ``memory_limit`` default to half of it.

Gate (:func:`check_call`), run once per call after planning and before any input is read in
full or any output allocated:

* the representable rule: numpy holds at most ``2**63 - 1`` bytes per array, counted over the
  non-zero dimensions (an empty result with one huge axis cannot be allocated either);
* the output rule: the result's bytes *as written* (strings at the width the writer uses)
  must not exceed ``max_output_bytes``; for out-of-core engines, whose output goes to disk,
  only an explicit ``max_output_bytes`` applies (and the free disk space, checked by them);
* the memory rule (in-memory engine): inputs + output as held + the working memory of the
  compute path that will run must not exceed ``memory_limit`` (a string result held as
  Python strings and written in pieces is held as its pointers, not at its written size).
  When the tiled engine could take the call instead, the message says so.

Refusals are :class:`~padconv_cli.errors.OutputTooLargeError` with ``param`` naming the
parameter that changes the limit; messages speak parameter names, the CLI renders flags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from padconv_cli.errors import OutputTooLargeError
from padconv_cli.units import human_bytes

FALLBACK_MEMORY_BYTES = 8 * 2**30
CGROUP_FOLDER = "/sys/fs/cgroup"
NUMPY_MAX_BYTES = 2**63 - 1


# --- the probe -------------------------------------------------------------------------------


def _meminfo_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes (Linux), None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_first_word(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read().split()[0]
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _cgroup_headroom(folder: str = CGROUP_FOLDER) -> int | None:
    """cgroup v2 ``memory.max - memory.current`` in bytes; None without a limit ("max")."""
    limit = _read_first_word(f"{folder}/memory.max")
    if limit is None or not limit.isdigit():
        return None
    current = _read_first_word(f"{folder}/memory.current")
    used = int(current) if current is not None and current.isdigit() else 0
    return max(int(limit) - used, 0)


def _virtual_size_bytes() -> int:
    """VmSize of this process from /proc/self/status in bytes; 0 where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _address_space_headroom() -> int | None:
    """RLIMIT_AS (``ulimit -v``) minus the current VmSize in bytes; None when unlimited."""
    try:
        import resource
    except ImportError:  # not on every platform
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    return max(soft - _virtual_size_bytes(), 0)


def available_memory_bytes() -> int:
    """The memory this process can still allocate, in bytes.

    Rule: the minimum of the known bounds: MemAvailable (/proc/meminfo), the cgroup v2 limit
    minus its usage (memory.max - memory.current, unless "max") and the address-space limit
    RLIMIT_AS minus the current VmSize; 8 GiB when none of them can be read.
    """
    bounds = [_meminfo_available(), _cgroup_headroom(), _address_space_headroom()]
    known = [bound for bound in bounds if bound is not None]
    return min(known) if known else FALLBACK_MEMORY_BYTES


def default_max_output_bytes() -> int:
    """Half of the memory available now: a result larger than that is refused up front."""
    return available_memory_bytes() // 2


def default_memory_limit() -> int:
    """Half of the memory available now: room for the page cache and for other programs."""
    return available_memory_bytes() // 2


# --- the gate --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Needs:
    """What one call needs, from its plan: bytes of the inputs (as held in memory), of the
    output as written, and of the compute path's working memory; the output's shape and dtype
    name for messages and the representable rule."""

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


@dataclass(frozen=True)
class Limits:
    """The limits of one call (None: half of the memory available)."""

    max_output_bytes: int | None = None
    memory_limit: int | None = None

    def output_limit(self) -> int:
        """``max_output_bytes``, or its default."""
        given = self.max_output_bytes
        return default_max_output_bytes() if given is None else given

    def memory(self) -> int:
        """``memory_limit``, or its default."""
        return default_memory_limit() if self.memory_limit is None else self.memory_limit


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def check_representable(needs: Needs) -> None:
    """Refuse a result numpy cannot allocate: ``prod(non-zero dims) * itemsize > 2**63 - 1``."""
    extent = math.prod(int(d) for d in needs.output_shape if d) * max(needs.allocated_itemsize, 1)
    if extent > NUMPY_MAX_BYTES:
        raise OutputTooLargeError(
            f"the result {_shape_text(needs.output_shape)} of {needs.dtype_name} cannot be "
            f"allocated: its non-zero dimensions span {human_bytes(extent)}, over the "
            "2**63 - 1 bytes an array can hold", param="pads",
        )


def check_output(needs: Needs, limit: int) -> None:
    """Refuse a result whose bytes as written exceed ``limit`` (``max_output_bytes``)."""
    if needs.output > limit:
        raise OutputTooLargeError(
            f"the result {_shape_text(needs.output_shape)} of {needs.dtype_name} needs "
            f"{human_bytes(needs.output)} as written, over the limit max_output_bytes = "
            f"{human_bytes(limit)}", param="max_output_bytes",
        )


def check_memory(needs: Needs, limit: int, *, tiled_possible: bool = False) -> None:
    """Refuse an in-memory call whose inputs + output + working memory exceed ``limit``."""
    if needs.total <= limit:
        return
    hint = "; engine tiled works within that limit" if tiled_possible else ""
    raise OutputTooLargeError(
        f"the call needs {human_bytes(needs.total)} in memory (inputs "
        f"{human_bytes(needs.inputs)} + output {human_bytes(needs.output_held)} + working "
        f"{human_bytes(needs.working)}), over the limit memory_limit = {human_bytes(limit)}"
        f"{hint}", param=("memory_limit", "engine") if tiled_possible else "memory_limit",
    )


def check_call(needs: Needs, limits: Limits, *, in_memory: bool = True,
               tiled_possible: bool = False) -> None:
    """The gate (module docstring): representable, output, then memory (in-memory only)."""
    check_representable(needs)
    if in_memory:
        check_output(needs, limits.output_limit())
        check_memory(needs, limits.memory(), tiled_possible=tiled_possible)
    elif limits.max_output_bytes is not None:
        check_output(needs, limits.max_output_bytes)
