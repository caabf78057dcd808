"""Run ``padconv`` in a pseudo-terminal of a given size, as a user's terminal would run it."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ESCAPE = "\x1b["


@dataclass
class TerminalRun:
    exit_code: int
    text: str  # what the terminal received (stdout and stderr), "\r\n" turned into "\n"

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()


def run_in_terminal(*args: str, columns: int = 80, env: dict | None = None,
                    cwd: Path = REPO, timeout: float = 120) -> TerminalRun:
    """``padconv ARGS`` with stdin, stdout and stderr on a pty of ``columns`` x 24."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES",
                                                                   "NO_COLOR", "FORCE_COLOR")}
    environment.update({"TERM": "xterm-256color", **(env or {})})
    process = subprocess.Popen(
        [sys.executable, "-m", "padconv_cli", *args], stdin=slave, stdout=slave, stderr=slave,
        env=environment, cwd=cwd, close_fds=True,
    )
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            process.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = process.wait(timeout=timeout)
    text = b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")
    return TerminalRun(code, text)
