"""Standard error that cannot be written (``2>/dev/full``, a full disk, a closed pipe).

padconv's messages and progress lines are for a person; when stderr cannot take them they are
dropped and the run's exit code stays its own.  Pointing descriptor 2 at /dev/null also lets
the interpreter's final flush of what is still buffered succeed (a failed flush at exit would
turn the exit code into 120).
"""

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
