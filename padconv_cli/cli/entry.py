"""Ctrl-C from this module's first line, for ``python -m padconv_cli`` and the installed script.

Importing the command group (click, numpy, the command modules) takes a noticeable time; a
Ctrl-C arriving then must not print a traceback.  Until :func:`padconv_cli.cli.main.main` takes
over, SIGINT writes ``padconv: interrupted`` and exits 130 at once: nothing has been written
yet, so there is nothing to clean up.  The installed ``padconv`` command (``scripts/padconv``)
installs the same handler as its own first statement, before importing this package; what
runs before that is the interpreter's own start-up (see docs/reliability.md).
"""

import os

try:  # the built-in half of ``signal``: importing ``signal`` itself pulls in ``enum`` first
    import _signal as signals
except ImportError:  # pragma: no cover - other interpreters
    import signal as signals

EXIT_INTERRUPTED = 130
INTERRUPTED_LINE = b"padconv: interrupted\n"


def exit_interrupted(signum: int = 2, frame: object = None) -> None:
    """SIGINT handler while there is nothing to clean up: one line on stderr, exit 130 now."""
    try:
        os.write(2, INTERRUPTED_LINE)
    except OSError:  # stderr closed: the exit code alone tells
        pass
    os._exit(EXIT_INTERRUPTED)


if signals.getsignal(signals.SIGINT) != signals.SIG_IGN:  # ignored by the caller: stays so
    signals.signal(signals.SIGINT, exit_interrupted)


def main() -> None:
    """Entry point of the ``padconv`` console script (imports the command group, then runs)."""
    from padconv_cli.cli.main import main as run

    run()
