"""The ``padconv`` command group: lazy command loading, how a run ends, and ``--version``.

Exit codes: 0 success (``padconv`` alone prints the help, like ``padconv --help``), 1 a
verification or comparison found a difference, 2 bad usage, bad input or not enough memory
(one line on stderr, no traceback, nothing written), 3 a runtime failure of the engine (the
dask scheduler was lost, a worker died: one line, nothing written), 130 interrupted (Ctrl-C),
143/129 terminated (SIGTERM/SIGHUP), 141 the reader of stdout went away
(``padconv ... | head -c 10``).

Signals: see docs/architecture.md ("Signals").  A Ctrl-C during the interpreter's own
start-up, before :func:`main`, gets Python's traceback, as for any Python command: nothing has
been read or written yet.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import importlib
import io
import os
import signal
import sys
import threading
import warnings
from typing import Any

import click

from padconv_cli import __version__
from padconv_cli.cli.options import CONTEXT_SETTINGS, global_options
from padconv_cli.errors import PadconvError
from padconv_cli.messages import escaped
from padconv_cli.ops import MODULES

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
LINE_LIMIT = 2000  # characters of one error line; a longer one is cut in its middle
OUT_OF_MEMORY_MESSAGE = ("out of memory while computing the result (try --engine tiled with "
                         "--memory-limit, or a smaller input)")

# a command, or an operator whose command is built from its declarations (the registry's)
COMMANDS = {command: f"{module}:OPERATOR" for command, module in MODULES.values()} | {
    "verify": "padconv_cli.cli.verify_cmd:verify_command",
    "show": "padconv_cli.cli.show_cmd:show_command",
    "compare": "padconv_cli.cli.compare_cmd:compare_command",
    "audit": "padconv_cli.cli.audit_cmd:audit_command",
    "convert": "padconv_cli.cli.show_cmd:convert_command",
}
ALIASES: dict[str, str] = {"inspect": "show"}


class Terminated(BaseException):
    """SIGTERM/SIGHUP arrived (:data:`stopped_by`): unwind like Ctrl-C, removing temporary files."""


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))
stopped_by: int | None = None  # the stop signal that arrived during the run, if any


def on_stop_signal(signum: int, frame: object) -> None:
    """The first SIGINT, SIGTERM or SIGHUP: note it, ignore the next ones (the clean-up runs to
    its end), ask running native kernels to stop, and raise KeyboardInterrupt or
    :class:`Terminated`."""
    global stopped_by
    stopped_by = signum
    set_stop_handlers(signal.SIG_IGN)
    native = sys.modules.get("padconv_cli.kernels._native")  # only when loaded: no import here
    if native is not None:
        native.request_stop()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def set_stop_handlers(handler: Any) -> None:
    """Handle SIGINT, SIGTERM and SIGHUP with ``handler`` (:func:`on_stop_signal`, or SIG_IGN
    once the run is stopped); main thread only; a signal the caller ignores stays ignored."""
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) != signal.SIG_IGN:
                signal.signal(signum, handler)


@functools.cache
def _load(target: str) -> click.Command:
    """The command at ``module:attribute``, or the one built from the operator there (once)."""
    module_name, attribute = target.split(":")
    found = getattr(importlib.import_module(module_name), attribute)
    if isinstance(found, click.Command):
        return found
    from padconv_cli.cli.operator_command import operator_command

    return operator_command(found)


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs (fast start-up)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(ALIASES.get(cmd_name, cmd_name))
        return None if target is None else _load(target)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, with each alias named next to its command."""
        rows, limit = [], formatter.width - 6 - max(map(len, COMMANDS))
        for name in self.list_commands(ctx):
            rows.append((name, _load(COMMANDS[name]).get_short_help_str(limit)))
            rows += [(alias, f"Same as '{name}'.") for alias, to in ALIASES.items() if to == name]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run and turn every way the run can end into an exit code (module docstring) and at
        most one line; once a stop signal arrived, whatever ends the run is that signal
        (:func:`stop_outcome`).  The context is run here, not in click's ``main``, which would
        print an empty line on Ctrl-C and exit 1 on a broken pipe."""
        args = sys.argv[1:] if args is None else list(args)
        try:
            self._main_shell_completion(extra, prog_name or "padconv", complete_var)
            with self.make_context(prog_name or "padconv", args, **extra) as ctx:
                code = self.invoke(ctx)
            if sys.stdout is not None:  # ``padconv ... -o FILE >&-`` has none
                sys.stdout.flush()
            code = code if isinstance(code, int) else 0
        except BaseException as error:  # noqa: BLE001 - every ending is mapped or raised again
            outcome = stop_outcome(error)
            if outcome is None:
                code = _mapped_error(error)
            else:
                set_stop_handlers(signal.SIG_IGN)
                report(outcome[1])
                code = outcome[0]
        if standalone_mode:
            sys.exit(code)
        return code


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo("\n".join(version_lines()))
        ctx.exit(0)


@click.group("padconv", cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version,
              help="Show padconv's version, its libraries' versions and the native instruction "
              "set.")
def cli() -> None:
    """Apply the ONNX Pad and Conv operators to tensors in files, exactly as the spec says.

    \b
    Examples:
      padconv verify
      padconv pad '[[1, 2, 3], [4, 5, 6]]' --pads 0 2 0 1 --mode reflect
      padconv conv '[[[[0, 1, 2], [3, 4, 5]]]]' '[[[[1, 1], [1, 1]]]]' \\
          --dtype float32 --pads 0 0 1 1
      padconv show '[1.0, nan, inf]'

    Tensors come from .npy, .npz (FILE.npz:NAME), ONNX TensorProto .pb files, a model's
    stored tensors (MODEL.onnx:NAME), - (stdin) or inline literals such as '[[1, 2], [3, 4]]'.
    Results go to -o FILE (.npy or .pb), to stdout as .npy bytes when piped, or are
    pretty-printed on a terminal.
    """


cli.params.extend(global_options())


def _error_line(message: str, ctx: click.Context | None = None) -> str:
    """``padconv CMD: error: MESSAGE``, the message's first line, for the command of ``ctx``."""
    first, *_ = str(message).strip().splitlines() or [""]
    return f"{ctx.command_path if ctx is not None else 'padconv'}: error: {first}"


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is quiet."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def report(line: str) -> None:
    """Write padconv's one line to stderr: the one place it is escaped (what
    ``str.isprintable`` rejects, as its escape) and cut in its middle past LINE_LIMIT
    characters.  When stderr cannot take it (``2>/dev/full``) the line is dropped and stderr
    pointed at /dev/null, so the exit code stays the error's own (not the final flush's 120)."""
    line = escaped(line)
    if len(line) > LINE_LIMIT:
        keep = LINE_LIMIT // 2
        line = f"{line[:keep]} ... ({len(line) - 2 * keep} characters cut) ... {line[-keep:]}"
    try:
        click.echo(line, err=True)
    except (OSError, ValueError):
        from padconv_cli.streams import silence_stderr

        silence_stderr()


def stop_outcome(error: BaseException) -> tuple[int, str] | None:
    """``(exit code, line)`` when ``error`` ends a run stopped by a signal (:data:`stopped_by`,
    whatever its unwinding raised) or is a Ctrl-C (KeyboardInterrupt; EOFError and Abort, as
    click takes them)."""
    if stopped_by is not None and stopped_by != signal.SIGINT:
        return 128 + stopped_by, "padconv: terminated"
    if stopped_by is not None or isinstance(
            error, (KeyboardInterrupt, EOFError, click.exceptions.Abort)):
        return EXIT_INTERRUPTED, "padconv: interrupted"
    return None


def _mapped_error(error: BaseException) -> int:
    """The exit code of an ending that is not a signal, its line reported; else raised again."""
    ctx = getattr(error, "raised_in", None)
    if isinstance(error, BrokenPipeError):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    if isinstance(error, click.exceptions.Exit):
        return error.exit_code
    if isinstance(error, click.ClickException):
        return _usage_error(error)
    if isinstance(error, PadconvError):
        report(_error_line(render_library_error(error, ctx), ctx))
        return getattr(error, "exit_code", EXIT_USAGE)
    if isinstance(error, MemoryError):
        report(_error_line(OUT_OF_MEMORY_MESSAGE, ctx))
    elif isinstance(error, OSError):  # a report could not be written (closed or full stdout)
        _silence_stdout()
        report(_error_line(_os_error_text(error), ctx))
    else:
        raise error
    return EXIT_USAGE


def _usage_error(error: click.ClickException) -> int:
    """click's usage error as one line (with ``(see 'padconv CMD --help')`` when found parsing),
    or the help on stdout and 0 for a bare command (click's ``NoArgsIsHelpError``)."""
    ctx = getattr(error, "ctx", None)
    if ctx is not None and type(error).__name__ == "NoArgsIsHelpError":
        click.echo(ctx.get_help(), color=ctx.color)
        return 0
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    report(_error_line(render_usage_error(error), ctx or getattr(error, "raised_in", None))
           + hint)
    return error.exit_code


class _ClosedStdout(io.TextIOBase):
    """``sys.stdout`` when descriptor 1 was closed at start (``>&-``): writing text raises an
    OSError naming ``<stdout>``; without ``buffer``, the tensor writer refuses it itself."""

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            raise OSError(errno.EBADF, "standard output is closed; the report has nowhere to go",
                          "<stdout>")
        return 0


def _os_error_text(error: OSError) -> str:
    """The one-line reason of a failed write: to stdout unless the error names a file."""
    reason = error.strerror or str(error)
    if error.filename is not None:
        return f"{error.filename}: {reason}"
    return f"<stdout>: write failed ({reason})"


def plug_closed_standard_streams() -> None:
    """Open /dev/null on a closed fd 0, 1 or 2 (``padconv ... >&-``): the next file padconv
    opens cannot land on descriptor 1; a closed stdout becomes :class:`_ClosedStdout`."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
            except OSError:
                return
    if sys.stdout is None:
        sys.stdout = _ClosedStdout()
    if sys.stderr is None:  # descriptor 2 is /dev/null now; click before 8.1.3 needs a stream
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)


def keep_quiet_after_the_outcome() -> None:
    """Drop every log record, warning and ignored exception from here to the interpreter's exit:
    the outcome is reported; what a library's thread or finaliser says at shut-down (asyncio's
    "Task was destroyed but it is pending!" after a failed Zarr read) is not part of it."""
    logging = sys.modules.get("logging")
    if logging is not None:  # a library that logs has loaded it; importing it costs ~5 ms
        logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    sys.unraisablehook = lambda unraisable: None


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``padconv`` console script: run the command with padconv's signal
    handling, report the outcome, exit (at once after a signal: :func:`exit_now`)."""
    plug_closed_standard_streams()
    set_stop_handlers(on_stop_signal)
    status = cli.main(args=argv, prog_name="padconv", standalone_mode=False)
    keep_quiet_after_the_outcome()
    if status >= 128 and status != EXIT_BROKEN_PIPE:
        exit_now(status)
    # The interpreter's shut-down collects garbage over every object still alive (numpy's
    # and click's modules: 11-15 ms, a tenth of a small command) to free memory the exit
    # frees anyway.  Frozen objects are skipped; those not in a cycle are still released,
    # and padconv's outputs are closed by now.
    gc.freeze()
    sys.exit(status)


def exit_now(status: int) -> None:
    """End the process with ``status`` without the interpreter's own shut-down: after a signal
    padconv's clean-up has run; what is left is libraries' teardown (a dask worker's idle
    threads each wait up to a second)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or full stream: the status tells
            stream.flush()
    os._exit(status)

# --- one error style for every command: ``padconv CMD: error: MESSAGE``, whether click or
# padconv found the problem, the library's parameter names rendered as the flags and files the
# user typed.  Rule for a library error: the one table is the command's own parameters
# (``ctx.command.params``: name -> label, the long flag of an option, the metavar of an
# argument).  Every name in the error's ``param`` (a name or a tuple, the first the one the
# message is about; without ``param``, the message's first word when it names a parameter) is
# rendered as its label wherever it stands as a word of the message.  When the message does not
# name the first one, the label goes in front (``--memory-limit: ...``; an argument: the file
# the user gave for it).  ``source`` goes in front when the message does not name it; without
# a source, the files of the arguments the message names are added (``(W is w.npy)``).  No
# message text is parsed beyond its words; the line is escaped once, where it is printed
# (:func:`report`). -----------------------------------------------------------------------

# what each required argument takes, by the name the help shows
ARGUMENT_KINDS = {"MODEL.onnx": "an ONNX model file", "FILE": "a tensor file or an ONNX model"}
TENSOR_ARGUMENT = "a tensor file, '-' for stdin, or a literal"
# the reading-policy flags: a refusal of theirs points at them where the command lacks them
POLICY_FLAGS = ("max_input_bytes", "allow_hardlinks")
_PUNCTUATION = ",;:)."


def _label(param: click.Parameter) -> str:
    """How the user names a parameter: the long flag of an option, the metavar of an argument."""
    if isinstance(param, click.Option):
        longs = [opt for opt in param.opts if opt.startswith("--")]
        return (longs or param.opts)[0]
    return (param.metavar or (param.name or "").upper()).strip("[].")


def labels(ctx: click.Context | None) -> dict[str, click.Parameter]:
    """The table: each parameter of the command by its name and by its long flags' names
    (``fmt`` and ``format`` both name ``--format``); an argument also by its label, the
    library's name for that input (``W`` names the argument ``w``)."""
    table: dict[str, click.Parameter] = {}
    for param in ctx.command.params if ctx is not None else ():
        for opt in param.opts if isinstance(param, click.Option) else ():
            if opt.startswith("--"):
                table.setdefault(opt[2:].replace("-", "_"), param)
        table.setdefault(param.name or "", param)
        if isinstance(param, click.Argument):
            table.setdefault(_label(param), param)
    return table


def _typed_file(ctx: click.Context | None, param: click.Parameter) -> str | None:
    """The file the user gave for an argument (not an inline literal), when given."""
    value = ctx.params.get(param.name or "") if ctx is not None else None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    literal = text[0] in "[('\"-+.0123456789" and not text.endswith(
        (".npy", ".npz", ".pb", ".onnx"))
    return None if literal else value


def _render_words(message: str, table: dict[str, click.Parameter], names: list[str]) -> str:
    """``message`` with each word that is one of ``names`` (trailing punctuation aside)
    replaced by its label."""
    words = message.split(" ")
    for index, word in enumerate(words):
        core = word.rstrip(_PUNCTUATION)
        if core in names and isinstance(table.get(core), click.Option):
            words[index] = _label(table[core]) + word[len(core):]
    return " ".join(words)


def _argument_files(ctx: click.Context | None, message: str) -> str:
    """`` (X is x.npy, W is w.npy)`` for the arguments the message names by their label (as a
    name of its own: ``W`` in ``W.shape[1]``, not in ``Wx``), without naming the file the user
    gave for them."""
    words = set("".join(c if c.isalnum() or c == "_" else " " for c in message).split())
    named = [f"{_label(param)} is {typed}" for param in (ctx.command.params if ctx else ())
             if isinstance(param, click.Argument) and _label(param) in words
             and (typed := _typed_file(ctx, param)) and typed not in message]
    return f" ({', '.join(named)})" if named else ""


def render_library_error(error: Exception, ctx: click.Context | None) -> str:
    """The one-line message of a library error for the CLI (module docstring)."""
    first, *_ = str(error).strip().splitlines() or [""]
    table = labels(ctx)
    param = getattr(error, "param", None)
    if param is None and first.split(" ")[0] in table:
        param = first.split(" ")[0]
    names = list(param) if isinstance(param, tuple) else [param] if param else []
    source = getattr(error, "source", None)
    message = _render_words(first, table, names)
    main = table.get(names[0]) if names else None
    if isinstance(main, click.Option) and _label(main) not in message:
        message = f"{_label(main)}: {message}"
    elif main is not None and source is None:
        source = _typed_file(ctx, main)
    if source and str(source) not in message:
        message = f"{source}: {message}"
    elif not source:
        message += _argument_files(ctx, message)
    if main is None and names and names[0] in POLICY_FLAGS:
        message += f" (see --{names[0].replace('_', '-')})"
    return message


def render_usage_error(error: click.ClickException) -> str:
    """click's message in padconv's words, the same for every click version:
    ``--pads: 'x' is not an integer``, ``No such option '--bogus'``."""
    if isinstance(error, click.NoSuchOption):
        close = ", ".join(error.possibilities or [])
        hint = f"; did you mean {close}?" if close else ""
        return f"No such option {error.option_name!r}{hint}"
    if isinstance(error, click.MissingParameter) and isinstance(error.param, click.Argument):
        label = _label(error.param)
        return f"missing argument {label}: {ARGUMENT_KINDS.get(label, TENSOR_ARGUMENT)}"
    if isinstance(error, click.BadParameter) and error.param is not None:
        label = error.param_hint or _label(error.param)
        if isinstance(label, (list, tuple)):
            label = label[0]
        return f"{str(label).strip(chr(39) + chr(34))}: {error.message}"
    return error.format_message()


# --- padconv --version: the versions of the libraries its results depend on (read from the
# distributions' metadata: nothing heavy is imported), and the native instruction set that
# Conv runs on (the native extension is loaded to ask the CPU) ---------------------------

NOT_INSTALLED = "not installed"


def distribution_version(*names: str) -> str:
    """The version of the first installed distribution among ``names``, else ``not installed``."""
    from importlib import metadata

    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(name)
    return NOT_INSTALLED


def padconv_version() -> str:
    """The installed distribution's version; the package's own ``__version__`` when padconv
    runs from a source tree that was never installed."""
    found = distribution_version("padconv")
    return __version__ if found == NOT_INSTALLED else found


def native_isa_description() -> str:
    """The instruction set Conv uses (``selected_isa``) with those the CPU offers, or why the
    native core is not usable (not built, or ``PADCONV_NATIVE_ISA`` names a missing one)."""
    try:
        from padconv_cli.kernels.native import available_isas, selected_isa

        return f"{selected_isa()} (this CPU: {', '.join(available_isas())})"
    except ImportError as error:
        return f"unavailable (the native extension cannot be imported: {error})"
    except PadconvError as error:
        return f"unavailable ({error})"


def version_lines() -> list[str]:
    """The lines ``padconv --version`` prints: padconv, numpy, onnx, onnxruntime (the first
    installed of the distributions providing it, the plain CPU build first), the native
    instruction set, and the interpreter with its platform."""
    import platform

    onnxruntime = distribution_version(
        "onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-directml",
        "onnxruntime-qnn", "ort-nightly")
    return [
        f"padconv, version {padconv_version()}",
        f"  numpy        {distribution_version('numpy')}",
        f"  onnx         {distribution_version('onnx')}",
        f"  onnxruntime  {onnxruntime}",
        f"  native ISA   {native_isa_description()}",
        f"  python       {platform.python_version()} ({sys.platform}, {platform.machine()})",
    ]
