"""Engine options shared by ``pad`` and ``conv``, and the one call that runs an operator on them.

Engines:

* ``memory``: read everything, run the kernel, write the result (the commands' own path);
* ``tiled``: out of core on one machine — a ``.npy`` DATA/X is memory-mapped and processed in
  tiles that fit ``--memory-limit``, the result goes to ``-o FILE.npy`` through a memory map;
* ``dask``: blocks on a ``dask.distributed`` cluster (``--scheduler ADDRESS``, else a local
  one); ``.npy`` or Zarr (``.zarr``) input and output; needs ``padconv[dask]``;
* ``auto`` (default): ``dask`` when the input or ``-o`` is a Zarr store; ``tiled`` when DATA/X
  is a ``.npy`` file, ``-o`` names a ``.npy`` file and input plus output need more than
  ``--memory-limit``; ``memory`` otherwise.

``--memory-limit`` bounds the working memory of the tiled and dask engines (on top of the
interpreter itself); the default is half of the memory available now.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from padconv_cli.cli.options import SizeType, available_memory_bytes
from padconv_cli.errors import InputError, OutputError

ENGINES = ("auto", "memory", "tiled", "dask")


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


def default_memory_limit() -> int:
    """Half of MemAvailable: room for the page cache and for other programs."""
    return available_memory_bytes() // 2


def quiet_requested() -> bool:
    """True when the global ``-q`` was given before the command name."""
    from padconv_cli.cli.style import SETTINGS

    return bool(SETTINGS["quiet"])


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
            verbose=kwargs.pop("verbose"),
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
        is_flag=True,
        default=False,
        help="Let the dask engine's own log lines and warnings through to stderr.",
    ),
)


def plain_run(extras: Any) -> bool:
    """True when a command just computes its result: no --from-model, --explain, --check or
    --emit-onnx (those run on the in-memory path)."""
    return extras.from_model is None and not (extras.explain or extras.check or extras.emit_onnx)


def run_with_engine(
    operator: str,
    inputs: Sequence[str | None],
    attributes: dict[str, Any],
    output: str | None,
    fmt: str | None,
    settings: EngineSettings,
    dtype: str | None = None,
    max_output_bytes: int | None = None,
) -> bool:
    """Run ``operator`` (``pad`` or ``conv``) through the tiled or dask engine.

    ``inputs`` are the sources (pad: DATA; conv: X, W and B or None), ``attributes`` the
    keyword arguments of the kernel (pad: pads, constant_value as typed, axes, mode).
    Returns False, doing nothing, when the in-memory engine applies, so that the command runs
    its own path; True when the result was written.
    """
    engine = resolve_engine(operator, inputs, attributes, output, fmt, settings)
    if engine == "memory":
        return False
    data, *others = inputs
    _check_file_input(data, engine)
    _check_file_output(output, fmt, engine)
    _check_result_fits_disk(operator, data, others, attributes, output, max_output_bytes)
    show = progress_display(settings.quiet, _stderr_is_terminal())
    if operator == "pad":
        result = _run_pad(engine, data, output, attributes, settings, show)
    else:
        weights = _read_small_inputs(others, dtype)
        result = _run_conv(engine, data, weights, output, attributes, settings, show)
    if not result.exact and not settings.quiet:
        click.echo(
            "padconv: note: --memory-limit is below one of the Conv kernel's own blocks; "
            "tiles were made smaller, so the sums may differ from --engine memory in the "
            "last bits",
            err=True,
        )
    return True


def progress_display(quiet: bool, terminal: bool) -> bool | str:
    """How the tiled and dask engines report progress: nothing with ``--quiet``, a bar on a
    terminal, else one line if the run is long (see :mod:`padconv_cli.outofcore.progress`)."""
    if quiet:
        return False
    return True if terminal else "line"


def resolve_engine(
    operator: str,
    inputs: Sequence[str | None],
    attributes: dict[str, Any],
    output: str | None,
    fmt: str | None,
    settings: EngineSettings,
) -> str:
    """The engine ``auto`` stands for (module docstring); other choices are kept."""
    if settings.engine != "auto":
        return settings.engine
    data = inputs[0] or ""
    if _is_zarr(data) or (output is not None and _is_zarr(output)):
        return "dask"
    if settings.scheduler:
        return "dask"
    if not (_is_npy_file(data) and _is_npy_target(output, fmt)):
        return "memory"
    needed = _in_memory_bytes(operator, data, inputs[1:], attributes)
    return "tiled" if needed is not None and needed > settings.limit else "memory"


def _is_zarr(path: str) -> bool:
    from padconv_cli.engines.zarr_paths import is_zarr_path

    return is_zarr_path(path)


def _is_npy_file(source: str | None) -> bool:
    return bool(source) and source.lower().endswith(".npy") and os.path.isfile(source)


def _is_npy_target(output: str | None, fmt: str | None) -> bool:
    if output in (None, "-"):
        return False
    suffix = os.path.splitext(output)[1].lower()
    return fmt == "npy" or (fmt is None and suffix in (".npy", ""))


def _in_memory_bytes(
    operator: str, data: str, others: Sequence[str | None], attributes: dict[str, Any]
) -> int | None:
    """Input plus output bytes of the in-memory path (None when the shapes are invalid: the
    in-memory path then reports the error)."""
    from padconv_cli.errors import PadconvError
    from padconv_cli.outofcore.npy_memmap import open_npy_memmap

    try:
        source = open_npy_memmap(data)
        shape = _result_shape(operator, source.shape, others, attributes)
    except PadconvError:
        return None
    return source.nbytes + math.prod(shape) * source.dtype.itemsize


def _result_shape(
    operator: str,
    shape: tuple[int, ...],
    others: Sequence[str | None],
    attributes: dict[str, Any],
) -> tuple[int, ...]:
    """Output shape by the kernels' own planning (and validation) functions."""
    if operator == "pad":
        from padconv_cli.kernels.pad import plan_pad

        return plan_pad(
            shape, attributes["pads"], attributes.get("axes"), attributes["mode"]
        ).output_shape
    return _conv_output_shape(shape, others, attributes)


def _check_result_fits_disk(
    operator: str,
    data: str,
    others: Sequence[str | None],
    attributes: dict[str, Any],
    output: str | None,
    max_output_bytes: int | None,
) -> None:
    """Refuse, before planning tiles, an out-of-core result larger than an explicit
    ``--max-output-bytes`` or than the free disk space where it goes.

    Runs the kernels' own attribute validation first, so a bad attribute is reported as such.
    """
    if output is None or not _is_npy_file(data):
        return
    from padconv_cli.outofcore.npy_memmap import check_disk_space, open_npy_memmap

    source = open_npy_memmap(data)
    shape = _result_shape(operator, source.shape, others, attributes)
    if max_output_bytes is not None:
        from padconv_cli.cli.output import check_output_size

        check_output_size(shape, source.dtype, max_output_bytes)
    check_disk_space(output, shape, source.dtype)


def _conv_output_shape(
    x_shape: tuple[int, ...], others: Sequence[str | None], attributes: dict[str, Any]
) -> tuple[int, ...]:
    from padconv_cli.kernels.conv import plan_conv
    from padconv_cli.outofcore.npy_memmap import open_npy_memmap

    w_source = others[0] if others else None
    if not _is_npy_file(w_source):
        from padconv_cli.tensorio import read_tensor

        w_shape = read_tensor(w_source).shape
    else:
        w_shape = open_npy_memmap(w_source).shape
    return plan_conv(x_shape, w_shape, None, **attributes).output_shape


def _check_file_input(data: str | None, engine: str) -> None:
    if data and (_is_npy_file(data) or (engine == "dask" and _is_zarr(data))):
        return
    accepted = ".npy file or a Zarr store" if engine == "dask" else ".npy file"
    raise InputError(f"{data}: --engine {engine} reads its input from a {accepted}")


def _check_file_output(output: str | None, fmt: str | None, engine: str) -> None:
    if output is not None and engine == "dask" and _is_zarr(output):
        return
    if _is_npy_target(output, fmt):
        return
    accepted = "-o FILE.npy or -o STORE.zarr" if engine == "dask" else "-o FILE.npy"
    raise OutputError(f"{output or 'stdout'}: --engine {engine} writes a file, give {accepted}")


def _read_small_inputs(sources: Sequence[str | None], dtype: str | None) -> list[Any]:
    from padconv_cli.tensorio import read_tensor

    return [None if source is None else read_tensor(source, dtype=dtype) for source in sources]


def _run_pad(
    engine: str,
    data: str,
    output: str,
    attributes: dict[str, Any],
    settings: EngineSettings,
    show: bool | str,
) -> Any:
    arguments = (
        attributes["pads"],
        attributes.get("constant_value"),
        attributes.get("axes"),
        attributes.get("mode", "constant"),
    )
    if engine == "tiled":
        from padconv_cli.outofcore.pad_tiles import tiled_pad

        return tiled_pad(data, output, *arguments, memory_limit=settings.limit, show_progress=show)
    from padconv_cli.engines.dask_engine import dask_pad

    return dask_pad(data, output, *arguments, **_dask_settings(settings, show))


def _run_conv(
    engine: str,
    data: str,
    weights: list[Any],
    output: str,
    attributes: dict[str, Any],
    settings: EngineSettings,
    show: bool | str,
) -> Any:
    w, b = (weights + [None, None])[:2]
    if w is None:
        raise InputError("conv: W is required")
    if engine == "tiled":
        from padconv_cli.outofcore.conv_tiles import tiled_conv

        return tiled_conv(
            data, w, b, output, memory_limit=settings.limit, show_progress=show, **attributes
        )
    from padconv_cli.engines.dask_engine import dask_conv

    return dask_conv(data, w, b, output, **_dask_settings(settings, show), **attributes)


def _dask_settings(settings: EngineSettings, show: bool | str) -> dict[str, Any]:
    """Keyword arguments of the dask engine: ``--memory-limit`` caps each worker's budget
    (workers without a memory limit get it, or its default)."""
    return {
        "memory_limit": settings.memory_limit,
        "fallback_limit": settings.limit,
        "scheduler": settings.scheduler,
        "show_progress": show,
        "verbose": settings.verbose,
    }


def _stderr_is_terminal() -> bool:
    from padconv_cli.outofcore.progress import stderr_is_terminal

    return stderr_is_terminal()
