"""Steps that a Ctrl-C (or SIGTERM, SIGHUP) must not split in two.

Creating a temporary file and recording it for clean-up, or moving an old output aside and the
new one in, are two steps each.  A KeyboardInterrupt raised between them would leave a
temporary file behind or no output at all.  :func:`signals_held` runs such steps with those
signals recorded instead of handled, and handles them once the steps are done.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

HELD_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Run the block with SIGINT, SIGTERM and SIGHUP recorded: the first that arrives meanwhile
    is handled by its own handler (raising KeyboardInterrupt, or the termination exception)
    right after the block ends, so whatever the block assigned is in place for the clean-up.

    Only Python-level handlers are held (an ignored or default signal keeps its action), and
    only in the main thread, the one Python runs signal handlers in; elsewhere the block runs
    as it is.  An exception of the block itself propagates, and a recorded signal is dropped
    with it (the run is unwinding already).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous: dict[int, object] = {}

    def record(signum: int, frame: object) -> None:
        arrived.append(signum)

    try:
        for signum in HELD_SIGNALS:
            if callable(signal.getsignal(signum)):
                previous[signum] = signal.signal(signum, record)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if arrived:
        previous[arrived[0]](arrived[0], None)
