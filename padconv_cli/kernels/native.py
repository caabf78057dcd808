"""padconv's compiled Conv core (``padconv_cli.kernels._native``), imported on first use.

``Y[n, m, o] = sum_{c, t} W[m, c, t] * Xpad[n, g*C/G + c, o*s + t*d]`` (``+ B[m]`` after the
sum) for float32 and float64, X read in place (never copied padded), each output element
summed in one fixed order (``c``, then the taps in C order) by one chain of fused
multiply-adds: results depend neither on the thread count nor on tiling.  Instruction set:
the fastest the CPU has (``avx512``, ``avx2``, ``generic``) or ``PADCONV_NATIVE_ISA``;
threads: the usable cores or ``PADCONV_NATIVE_THREADS``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from padconv_cli.errors import PadconvError

ISA_VARIABLE = "PADCONV_NATIVE_ISA"
THREADS_VARIABLE = "PADCONV_NATIVE_THREADS"
MAX_THREADS = 4096  # beyond any machine; keeps the C++ task counts far from overflow


@functools.cache
def extension() -> ModuleType:
    """The compiled module, imported once (kept off the CLI's start-up path)."""
    from padconv_cli.kernels import _native

    return _native


@functools.cache
def _cpu_isas() -> tuple[str, ...]:
    """The extension's answer, asked once: the CPU does not change under a process."""
    return tuple(extension().isas())


def available_isas() -> list[str]:
    """Instruction sets this CPU runs, fastest first; always ends with ``generic``."""
    return list(_cpu_isas())


def selected_isa() -> str:
    """``PADCONV_NATIVE_ISA`` when set (it must be one of :func:`available_isas`), else the
    fastest available instruction set."""
    isas = _cpu_isas()
    wanted = extension().getenv(ISA_VARIABLE).strip().lower()
    if not wanted:
        return isas[0]
    if wanted not in isas:
        raise PadconvError(f"{ISA_VARIABLE}={wanted} is not available on this CPU; choose one "
                           f"of {', '.join(isas)}", param=ISA_VARIABLE)
    return wanted


def thread_count() -> int:
    """``PADCONV_NATIVE_THREADS`` when set to an integer in [1, MAX_THREADS] (ASCII digits),
    else the cores this process may run on.  Both read by the extension: through os.environ
    and os.sched_getaffinity they took about 20 us of a 0.7 ms Conv, whose data had pushed the
    interpreter's out of the caches."""
    text = extension().getenv(THREADS_VARIABLE).strip()
    if text:
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_THREADS:
            raise PadconvError(f"{THREADS_VARIABLE} must be an integer from 1 to {MAX_THREADS}, "
                               f"got {text[:40]!r}", param=THREADS_VARIABLE)
        return int(text)
    return max(1, extension().usable_cpus())


def conv_into(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, y: np.ndarray, *,
              strides: Sequence[int], dilations: Sequence[int], pads_begin: Sequence[int],
              group: int, threads: int | None = None, isa: str | None = None) -> None:
    """Write ONNX Conv of ``x`` (N, C, *in) and ``w`` (M, C/group, *k) into ``y`` (N, M, *out).

    C-contiguous arrays; ``w``, ``b`` (optional, ``(M,)``) and ``y`` share float32 or float64;
    ``x`` too, or float16/bfloat16 (read as float32 on the fly) with a float32 ``y``.  The
    attributes are resolved (the end pads follow from ``y``'s shape); the GIL is released.
    """
    narrow = () if x.dtype == y.dtype else (x.dtype.name,)  # "float16" or "bfloat16"
    if narrow:
        x = x.view(np.uint16)  # the kernel reads the 2-byte patterns
    extension().conv(x, w, b, y, tuple(strides), tuple(dilations), tuple(pads_begin), int(group),
                     thread_count() if threads is None else int(threads),
                     selected_isa() if isa is None else isa, *narrow)


def round_into(y: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = y`` for a float32 ``y`` and a float16/bfloat16 ``out`` of one shape, both
    C-contiguous: each value rounded once, to nearest even (numpy's and ml_dtypes' rounding;
    a nan stays a nan). Native where the instruction set allows it, else numpy's cast."""
    done = extension().narrow(y, out.view(np.uint16), out.dtype.name, selected_isa())
    if not done:
        np.copyto(out, y, casting="unsafe")
