"""The ``padconv`` command group: lazy command loading and the mapping of errors to exit codes.

Exit codes: 0 success (``padconv`` alone prints the help, like ``padconv --help``), 1 a
verification or comparison found a difference, 2 bad usage, bad input or not enough memory
(one line on stderr, no traceback, nothing written), 130 interrupted (Ctrl-C), 143/129
terminated (SIGTERM/SIGHUP, temporary files removed), 141 the reader of stdout went away
(``padconv ... | head -c 10``).
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from padconv_cli import __version__
from padconv_cli.errors import PadconvError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
OUT_OF_MEMORY_MESSAGE = (
    "out of memory while computing the result "
    "(try --engine tiled with --memory-limit, or a smaller input)"
)

COMMANDS = {
    "pad": "padconv_cli.cli.pad_cmd:pad_command",
    "conv": "padconv_cli.cli.conv_cmd:conv_command",
    "verify": "padconv_cli.cli.verify_cmd:verify_command",
    "show": "padconv_cli.cli.show_cmd:show_command",
    "compare": "padconv_cli.cli.compare_cmd:compare_command",
}
ALIASES: dict[str, str] = {"inspect": "show"}

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C so temporary files are removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def install_termination_handlers() -> None:
    """Turn SIGTERM and SIGHUP into :class:`Terminated`, so ``finally`` blocks run."""
    import signal

    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None:
            signal.signal(signum, _raise_terminated)


class Interrupted(Exception):
    """Ctrl-C, carried past click, which would print an empty line before aborting."""


class StdoutClosed(Exception):
    """The reader of stdout went away; carried past click, which would exit 1 on EPIPE."""


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs (fast start-up)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(ALIASES.get(cmd_name, cmd_name))
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise StdoutClosed() from None
        except KeyboardInterrupt:
            raise Interrupted() from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run with padconv's error mapping (see :func:`run_and_map_errors`), then exit."""
        code = run_and_map_errors(
            self, args, prog_name=prog_name or "padconv", complete_var=complete_var, **extra
        )
        if standalone_mode:
            sys.exit(code)
        return code


@click.group("padconv", cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="padconv")
def cli() -> None:
    """Apply the ONNX Pad and Conv operators to tensors in files, exactly as the spec says.

    Tensors come from .npy, .npz (FILE.npz:NAME), ONNX TensorProto .pb files, - (stdin) or
    inline literals such as '[[1, 2], [3, 4]]'. Results go to -o FILE (.npy or .pb), to
    stdout as .npy bytes when piped, or are pretty-printed on a terminal.

    \b
    Examples:
      padconv pad samples/pad_reflect_data.npy --pads 0 2 0 0 --mode reflect
      padconv conv samples/conv_basic_x.npy samples/conv_basic_w.npy --pads 1 1 1 1
      padconv verify --onnx-suite
    """


def _error_line(message: str, command: str = "padconv") -> str:
    first, *_ = str(message).strip().splitlines() or [""]
    return f"{command}: error: {first}"


def rendered_message(error: PadconvError) -> str:
    """The library's message with its parameter name (``error.param``, e.g. ``memory_limit``)
    written as the flag that sets it (``--memory-limit``)."""
    message = str(error)
    param = getattr(error, "param", None)
    if not param or not param.isidentifier():
        return message
    import re

    flag = "--" + param.replace("_", "-")
    return re.sub(rf"(?<![\w-]){re.escape(param)}(?![\w-])", flag, message)


def _usage_error_line(error: click.ClickException) -> str:
    ctx = getattr(error, "ctx", None)
    command = ctx.command_path if ctx is not None else "padconv"
    hint = f" (see '{command} --help')" if ctx is not None else ""
    return _error_line(error.format_message(), command) + hint


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _is_no_args_help(error: click.ClickException) -> bool:
    """True for click's "no arguments, show the help" signal (click 8.2+; absent before)."""
    no_args_error = getattr(click.exceptions, "NoArgsIsHelpError", None)
    return no_args_error is not None and isinstance(error, no_args_error)


def _print_help(error: click.ClickException) -> int:
    """Print the help of the context the error came from to stdout; exit status 0."""
    ctx = error.ctx
    click.echo(ctx.get_help(), color=ctx.color)
    return 0


def run_and_map_errors(command: click.Command, args: list[str] | None, **extra) -> int:
    """Run ``command`` and turn every way it can end into an exit code and at most one line.

    PadconvError and click usage errors: one line on stderr, exit 2; MemoryError: one line
    suggesting the tiled engine, exit 2; no arguments at all: the help on stdout, exit 0 (a
    request for help, not a mistake); Ctrl-C: 130; a closed stdout pipe: 141, silently.
    """
    try:
        code = click.Command.main(command, args=args, standalone_mode=False, **extra)
        sys.stdout.flush()
    except (click.exceptions.Abort, KeyboardInterrupt, Interrupted):
        click.echo("padconv: interrupted", err=True)
        code = EXIT_INTERRUPTED
    except Terminated as terminated:
        click.echo("padconv: terminated", err=True)
        code = 128 + terminated.signum
    except (BrokenPipeError, StdoutClosed):
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    except click.exceptions.Exit as exit_:
        code = exit_.exit_code
    except click.ClickException as error:
        if _is_no_args_help(error) and getattr(error, "ctx", None) is not None:
            return _print_help(error)
        click.echo(_usage_error_line(error), err=True)
        code = error.exit_code
    except MemoryError:
        click.echo(_error_line(OUT_OF_MEMORY_MESSAGE), err=True)
        code = EXIT_USAGE
    except PadconvError as error:
        click.echo(_error_line(rendered_message(error)), err=True)
        code = EXIT_USAGE
    return code if isinstance(code, int) else 0


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``padconv`` console script."""
    install_termination_handlers()
    cli.main(args=argv, prog_name="padconv")
