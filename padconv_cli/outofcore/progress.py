"""A progress bar on stderr for tiled work: tiles done, throughput and time left.

Rules: nothing is shown when disabled (``--quiet``); on a terminal the bar appears only once
the work has run for :data:`SHOW_AFTER_SECONDS`, so that quick runs print nothing, and it is
removed when the work ends; ``enabled="plain"`` draws it without colour or bold (the caller's
colour rule said no: ``--no-color``, ``NO_COLOR``).  When stderr is not a terminal
(``enabled="line"``: a log file, a batch job), a run still going after
:data:`ANNOUNCE_AFTER_SECONDS` says once, in one line, what it is doing and how far it got.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

SHOW_AFTER_SECONDS = 1.0
ANNOUNCE_AFTER_SECONDS = 10.0


@dataclass(frozen=True)
class TiledResult:
    """What a tiled run did: the output shape, how many tiles, and whether the result is
    bit-identical to the in-memory kernel's by construction."""

    output_shape: tuple[int, ...]
    tiles: int
    exact: bool


class TileProgress:
    """Counts finished tiles and their output bytes; draws a rich bar when worth it.

    Use as a context manager and call :meth:`advance` after each tile.  ``enabled``: True
    (a bar), ``"plain"`` (a bar without colour), ``"line"`` (one line after a while, module
    docstring) or False (nothing).
    """

    def __init__(
        self, total_tiles: int, total_bytes: int, enabled: bool | str, label: str
    ) -> None:
        self.total_tiles = total_tiles
        self.total_bytes = total_bytes
        self.enabled = enabled
        self.label = label
        self.tiles_done = 0
        self.bytes_done = 0
        self._started = time.monotonic()
        self._progress: Any = None
        self._task: Any = None
        self._announced = False

    def __enter__(self) -> TileProgress:
        self._started = time.monotonic()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def advance(self, tile_bytes: int) -> None:
        """Record one finished tile of ``tile_bytes`` output bytes."""
        self.tiles_done += 1
        self.bytes_done += tile_bytes
        if not self.enabled:
            return
        if self.enabled == "line":
            self._announce_once()
            return
        if self._progress is None:
            if time.monotonic() - self._started < SHOW_AFTER_SECONDS:
                return
            self._start_bar()
        self._progress.update(
            self._task, completed=self.bytes_done, tiles=f"{self.tiles_done}/{self.total_tiles}"
        )

    def _announce_once(self) -> None:
        elapsed = time.monotonic() - self._started
        if self._announced or elapsed < ANNOUNCE_AFTER_SECONDS:
            return
        self._announced = True
        from padconv_cli.units import human_bytes

        done = self.bytes_done / max(self.total_bytes, 1)
        left = elapsed * (1 - done) / done if done > 0 else float("nan")
        line = (f"padconv: {self.label}: {self.tiles_done}/{self.total_tiles} tiles, "
                f"{human_bytes(self.bytes_done)} of {human_bytes(self.total_bytes)} written "
                f"after {elapsed:.0f} s, about {left:.0f} s left (the only progress line: "
                "stderr is not a terminal)")
        try:
            print(line, file=sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr full or gone: progress is not the run's result
            from padconv_cli.streams import silence_stderr

            silence_stderr()

    def _start_bar(self) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[tiles]} tiles"),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=_bar_console(plain=self.enabled == "plain"),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(
            self.label, total=max(self.total_bytes, 1), completed=self.bytes_done, tiles=""
        )


def _bar_console(plain: bool) -> Any:
    """A rich Console on stderr; ``plain``: no style at all (rich alone keeps bold under
    NO_COLOR)."""
    from rich.console import Console

    if plain:
        return Console(stderr=True, highlight=False, color_system=None, no_color=True)
    return Console(stderr=True, highlight=False)
