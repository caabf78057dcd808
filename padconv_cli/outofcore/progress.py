"""Progress of tiled work on stderr: tiles done, bytes written, throughput and time left.

Nothing when disabled (``--quiet``); on a terminal a bar appears only once the work has run for
:data:`SHOW_AFTER_SECONDS` and is removed at the end, ``"plain"`` without colour or bold
(``--no-color``, ``NO_COLOR``); when stderr is not a terminal (``"line"``: a log file, a batch
job), a run still going after :data:`ANNOUNCE_AFTER_SECONDS` says once what it does and how far.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass

SHOW_AFTER_SECONDS = 1.0
ANNOUNCE_AFTER_SECONDS = 10.0


@dataclass(frozen=True)
class TiledResult:
    """What a tiled run did: the output shape and how many tiles."""

    output_shape: tuple[int, ...]
    tiles: int


class TileProgress(contextlib.AbstractContextManager):
    """A context manager counting finished tiles (:meth:`advance`); ``enabled``: True (a
    bar), ``"plain"`` (a bar without colour), ``"line"`` (one line after a while) or False."""

    def __init__(self, total_tiles: int, total_bytes: int, enabled: bool | str, label: str) -> None:
        self.total_tiles, self.total_bytes = total_tiles, total_bytes
        self.enabled, self.label = enabled, label
        self.tiles_done = self.bytes_done = 0
        self._started, self._progress = time.monotonic(), None

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def advance(self, tile_bytes: int) -> None:
        """Record one finished tile of ``tile_bytes`` output bytes (module docstring)."""
        self.tiles_done += 1
        self.bytes_done += tile_bytes
        elapsed = time.monotonic() - self._started
        if self.enabled == "line":
            if elapsed >= ANNOUNCE_AFTER_SECONDS:
                self.enabled = False  # the one line is said: nothing more
                self._announce(elapsed)
        elif self.enabled and (self._progress is not None or elapsed >= SHOW_AFTER_SECONDS):
            if self._progress is None:
                self._start_bar()
            self._progress.update(self._task, completed=self.bytes_done,
                                  tiles=f"{self.tiles_done}/{self.total_tiles}")

    def _announce(self, elapsed: float) -> None:
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
        import rich.progress as bar
        from rich.console import Console

        # rich alone keeps bold under NO_COLOR: "plain" asks for no style at all
        plain = {"color_system": None, "no_color": True} if self.enabled == "plain" else {}
        self._progress = bar.Progress(
            bar.TextColumn("[bold]{task.description}"), bar.BarColumn(),
            bar.TextColumn("{task.fields[tiles]} tiles"), bar.DownloadColumn(binary_units=True),
            bar.TransferSpeedColumn(), bar.TimeRemainingColumn(),
            console=Console(stderr=True, highlight=False, **plain), transient=True)
        self._progress.start()
        self._task = self._progress.add_task(
            self.label, total=max(self.total_bytes, 1), completed=self.bytes_done, tiles="")
