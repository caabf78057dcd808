"""Engine options shared by ``pad`` and ``conv``: flags only; the engines are chosen and run by
the library pipeline (:mod:`padconv_cli.pipeline`).

Engines:

* ``memory``: read everything, run the kernel, write the result (the commands' own path);
* ``tiled``: out of core on one machine — a ``.npy`` DATA/X is read box by box and processed
  in tiles that fit ``--memory-limit``, each tile of the result written into ``-o FILE.npy``;
* ``dask``: blocks on a ``dask.distributed`` cluster (``--scheduler ADDRESS``, else a local
  one); ``.npy`` or Zarr (``.zarr``) input and output; needs ``padconv[dask]``;
* ``auto`` (default): ``dask`` when the input or ``-o`` is a Zarr store; ``tiled`` when DATA/X
  is a ``.npy`` file, ``-o`` names a ``.npy`` file and input plus output plus the kernel's
  working memory need more than ``--memory-limit``; ``memory`` otherwise.

``--memory-limit`` bounds the working memory of the tiled and dask engines (on top of the
interpreter itself) and the whole in-memory run; the default is half of the memory available
now (:mod:`padconv_cli.resources`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from padconv_cli.cli.options import SizeType
from padconv_cli.pipeline import ENGINES
from padconv_cli.resources import default_memory_limit


@dataclass(frozen=True)
class EngineSettings:
    """The engine flags of one command line."""

    engine: str = "auto"
    memory_limit: int | None = None
    scheduler: str | None = None
    quiet: bool = False
    verbose: bool = False

    @property
    def limit(self) -> int:
        """``--memory-limit``, or half of the memory available now."""
        return self.memory_limit if self.memory_limit is not None else default_memory_limit()


def quiet_requested() -> bool:
    """True when the global ``-q`` was given before the command name."""
    from padconv_cli.cli.style import SETTINGS

    return bool(SETTINGS["quiet"])


def verbose_requested() -> bool:
    """True when the global ``-v`` was given before the command name."""
    from padconv_cli.cli.style import SETTINGS

    return bool(SETTINGS["verbose"])


def engine_options(f: Callable) -> Callable:
    """Add ``--engine``, ``--memory-limit``, ``--scheduler``, ``--quiet`` and ``--verbose``;
    the command gets them as one ``engine_settings`` (:class:`EngineSettings`) argument."""

    @functools.wraps(f)
    def with_settings(*args: Any, **kwargs: Any) -> Any:
        settings = EngineSettings(
            engine=kwargs.pop("engine"),
            memory_limit=kwargs.pop("memory_limit"),
            scheduler=kwargs.pop("scheduler"),
            quiet=kwargs.pop("quiet") or quiet_requested(),
            verbose=kwargs.pop("verbose") or verbose_requested(),
        )
        return f(*args, engine_settings=settings, **kwargs)

    decorated = with_settings
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated


_OPTIONS = (
    click.option(
        "--engine",
        type=click.Choice(ENGINES),
        default="auto",
        show_default=True,
        help="memory: all in RAM; tiled: out of core from a .npy to -o FILE.npy within "
        "--memory-limit; dask: blocks on a dask cluster (.npy or .zarr in and out); auto: "
        "dask for Zarr, tiled when a .npy input and output exceed --memory-limit.",
    ),
    click.option(
        "--memory-limit",
        type=SizeType(),
        default=None,
        metavar="SIZE",
        help="Working memory of the tiled and dask engines, e.g. 256M, 4G "
        "(default: half of the memory available).",
    ),
    click.option(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="dask scheduler to run on, e.g. tcp://10.0.0.5:8786 (default: a local cluster); "
        "its workers must see the input and output paths.",
    ),
    click.option(
        "--quiet",
        "-q",
        is_flag=True,
        default=False,
        help="No progress bar (it shows on a terminal for work longer than a second).",
    ),
    click.option(
        "--verbose",
        "-v",
        is_flag=True,
        default=False,
        help="Let the dask engine's own log lines and warnings through to stderr.",
    ),
)


def progress_display(quiet: bool, terminal: bool, colour: bool = True) -> bool | str:
    """How the tiled and dask engines report progress: nothing with ``--quiet``, a bar on a
    terminal (``"plain"``, without colour, when ``colour`` is off), else one line if the run
    is long (see :mod:`padconv_cli.outofcore.progress`)."""
    if quiet:
        return False
    if not terminal:
        return "line"
    return True if colour else "plain"
