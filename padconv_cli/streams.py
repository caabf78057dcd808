"""Standard error that cannot be written (``2>/dev/full``, a closed pipe): messages are
dropped, the exit code stays the run's (a failed flush at exit would make it 120)."""

from __future__ import annotations

import contextlib
import os


def silence_stderr() -> None:
    """Point descriptor 2 at /dev/null (what is still buffered for it is then dropped)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 2)
        finally:
            if devnull != 2:
                os.close(devnull)
