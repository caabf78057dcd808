"""What every command shares: the command class, the option types, the shared options (one
table, :data:`SHARED_OPTIONS`), where a result goes, and the terminal's presentation (colour,
width, lines wrapped at tokens, tensors pretty-printed).

Integer-list flags mirror ONNX list attributes.  They take the values as separate words
(``--pads 0 -1 0 2``: the flag takes the number words that follow it, negative ones
included), as one comma-separated word (``--pads 0,-1,0,2``), or as ``@FILE``, a 1-D integer
tensor file (``--pads @pads.npy``).  :class:`Command` gathers those words before click parses.

The global flags (``--no-color``, ``-v``, ``-q``) may stand before or after the command; they
are kept in ``ctx.meta`` (shared by the group's and the command's contexts), never in a
process global.

Rule for colour: on only when the stream is a terminal, ``NO_COLOR`` is unset or empty and
``--no-color`` was not given (https://no-color.org). Rule for width: ``COLUMNS`` when it is a
number of at least 40, else the terminal's width on a terminal, else 80 (a CI log).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import math
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import click

from padconv_cli.errors import OutputError, PadconvError
from padconv_cli.ops import OPERATORS, find

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# words that look like a number of some kind: taken into the list so that the error is
# "'1.5' is not an integer" rather than "unexpected extra argument"
_NUMBER = r"[+-]?(0[xX][0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)"
_NUMBER_WORD = rf"{_NUMBER}(,{_NUMBER})*,?"
_SIZE = r"(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?"
_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
TOLERANCE_FLAGS = {"atol": "--atol", "rtol": "--rtol"}  # verify and compare name them so
READ_POLICY_KEY = "padconv.read_policy"  # ctx.meta: the fields --max-input-bytes etc. set


def meta_flag(name: str) -> Any:
    """The global flag ``name`` (``no_color``, ``quiet``, ``verbose``, ``force_binary``) of the
    running command, from its context's meta; False outside a command."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(f"padconv.{name}", False) if ctx is not None else False


def _keep_in_meta(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep a given flag in the run's ``ctx.meta`` as ``padconv.NAME`` (``global_`` dropped)."""
    if value:
        ctx.meta[f"padconv.{(param.name or '').removeprefix('global_')}"] = value
    return value


def _keep_in_policy(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """Keep a read-policy flag in the run's ``ctx.meta`` (:func:`read_policy_of`)."""
    ctx.meta.setdefault(READ_POLICY_KEY, {})[param.name] = value


def global_options() -> list[click.Option]:
    """Fresh ``--no-color``, ``-v`` and ``-q`` options, accepted by the group and every command."""
    flags = (
        (["--no-color", "global_no_color"], {"is_flag": True},
         "Plain text: no colour or bold (as when NO_COLOR is set or stdout is not a terminal)."),
        (["-v", "--verbose", "global_verbose"], {"count": True},
         "More detail (verify: every case's details; the dask engine: its own log lines and "
         "warnings, on stderr)."),
        (["-q", "--quiet", "global_quiet"], {"is_flag": True},
         "Print less: no progress bar (it shows on a terminal for work longer than a second), "
         "no notes (verify: failures only)."),
    )
    return [click.Option(decls, expose_value=False, is_eager=True, callback=_keep_in_meta,
                         help=text, **kind) for decls, kind, text in flags]


class Command(click.Command):
    """A padconv command: the shared context settings and global flags, integer-list flags
    that take several words, extra arguments refused by name, and its errors carrying its
    context as ``raised_in`` (the CLI names the flags from ``ctx.command.params``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", CONTEXT_SETTINGS)
        super().__init__(*args, **kwargs)
        self.params += global_options()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """click's parse of ``args`` with each list flag's number words joined into its one
        value; a word left over is refused, as a non-integer of the list flag it follows
        (``--pads 0 1 x``) or as an extra argument."""
        words, tails = self._gather_lists(args)
        allowed, ctx.allow_extra_args = ctx.allow_extra_args, True
        rest = super().parse_args(ctx, words)
        ctx.allow_extra_args = allowed
        if rest and not allowed and not ctx.resilient_parsing:
            flag = tails.get(rest[0])
            if flag is not None:
                raise click.UsageError(f"{flag}: {rest[0]!r} is not an integer", ctx)
            raise click.UsageError(f"Got unexpected extra argument{'s' * (len(rest) > 1)} "
                                   f"({' '.join(rest)})", ctx)
        return rest

    def _gather_lists(self, args: list[str]) -> tuple[list[str], dict[str, str]]:
        """``args`` with the number words after a list flag joined to its value, and the word
        that followed each list (``{word: flag}``)."""
        lists = {opt for p in self.params if isinstance(p.type, IntListType) for opt in p.opts}
        valued = {opt for p in self.params if isinstance(p, click.Option)
                  and not (p.is_flag or p.count) for opt in p.opts}
        words: list[str] = []
        tails: dict[str, str] = {}
        position = 0
        while position < len(args):
            word, flag = args[position], args[position].partition("=")[0]
            position += 1
            if word == "--":
                return [*words, *args[position - 1:]], tails
            words.append(word)
            if flag in valued and "=" not in word and position < len(args):
                words.append(args[position])  # a flag's value, whatever it looks like
                position += 1
            if flag not in lists:
                continue
            while position < len(args) and re.fullmatch(_NUMBER_WORD, args[position]):
                words[-1] += " " + args[position]
                position += 1
            if position < len(args) and not args[position].startswith("-"):
                tails.setdefault(args[position], flag)
        return words, tails

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as error:
            with contextlib.suppress(AttributeError):  # a type without attributes: "padconv"
                error.raised_in = ctx  # type: ignore[attr-defined]
            raise


def with_examples_first(help_text: str, examples: str) -> str:
    """``help_text`` (a docstring: its indentation is removed first) with ``examples``
    inserted after its first paragraph (the summary)."""
    summary, _, rest = inspect.cleandoc(help_text).partition("\n\n")
    parts = [summary, examples.strip("\n"), rest.strip()]
    return "\n\n".join(part for part in parts if part) + "\n"


def command(name: str, short_help: str, examples: str,
            help_text: str | None = None) -> Callable[[Callable], click.Command]:
    """Decorator: a padconv :class:`Command` named ``name``, its help (``help_text``, else the
    function's docstring) with ``examples`` right after the summary."""

    def decorate(f: Callable) -> click.Command:
        return click.command(name, cls=Command, short_help=short_help,
                             help=with_examples_first(help_text or f.__doc__ or "", examples))(f)

    return decorate


class IntListType(click.ParamType):
    """Converts ``"0 2 0 0"``, ``"0,2,0,0"`` or ``"@pads.npy"`` into a tuple of int64 values;
    :class:`Command` gives a flag of this type the number words that follow it."""

    name = "INTS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, tuple):
            return value
        text = str(value).strip()
        if text.startswith("@"):
            return self._from_tensor_file(text[1:], param, ctx)
        if re.search(r"(^|,)\s*(,|$)", text) and "," in text:
            self.fail(f"{text!r} has an empty value between commas", param, ctx)
        words = [w for w in re.split(r"[\s,]+", text) if w]
        return tuple(Int64Type().convert(word, param, ctx) for word in words)

    def _from_tensor_file(self, path: str, param, ctx) -> tuple[int, ...]:
        import numpy as np

        from padconv_cli.tensor_sources import read_tensor

        try:
            array = read_tensor(path, policy=read_policy_of(ctx))
        except PadconvError as error:
            self.fail(str(error), param, ctx)
        if array.ndim > 1 or array.dtype.kind not in "iu":
            self.fail(f"{path}: needs a 1-D integer tensor, got {array.dtype} of shape "
                      f"{array.shape}", param, ctx)
        if array.dtype == np.uint64 and array.size and array.max() > INT64_MAX:
            self.fail(f"{path}: value {array.max()} does not fit in int64", param, ctx)
        return tuple(int(v) for v in array.reshape(-1))


def int_list_option(*param_decls: str, **kwargs: Any) -> Callable:
    """Decorator for an ONNX integer-list attribute flag (see the module docstring)."""
    kwargs.setdefault("type", IntListType())
    kwargs.setdefault("metavar", "INT...")
    return click.option(*param_decls, **kwargs)


class ChoiceWithSuggestion(click.Choice):
    """A choice accepted in any case (``Reflect``, ``same_upper``); a typo gets the closest
    choice as a suggestion (``'reflct' is not a choice; did you mean 'reflect'?``)."""

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str:
        """``[NOTSET|SAME_UPPER|...]``: the choices as declared (click 8.2 shows a
        case-insensitive choice in lower case, 8.1 as declared)."""
        return "[" + "|".join(str(choice) for choice in self.choices) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        lowered = {str(choice).lower(): choice for choice in self.choices}
        if isinstance(value, str) and value.lower() in lowered:
            return lowered[value.lower()]
        import difflib  # only for the refusal (start-up)

        close = difflib.get_close_matches(str(value).lower(), list(lowered), n=1, cutoff=0.6)
        listing = ", ".join(str(choice) for choice in self.choices)
        hint = f"; did you mean {str(lowered[close[0]])!r}?" if close else ""
        self.fail(f"{str(value)!r} is not one of {listing}{hint}", param, ctx)


class Int64Type(click.ParamType):
    """One integer that must fit ONNX's int64 attributes."""

    name = "INTEGER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        text = str(value).strip()
        if not re.fullmatch(r"[+-]?[0-9]+", text):  # int() also takes "1_0" and "١"
            self.fail(f"{value!r} is not an integer", param, ctx)
        if not INT64_MIN <= int(text) <= INT64_MAX:
            self.fail(f"{value} does not fit in int64", param, ctx)
        return int(text)


def parse_size(text: str) -> int:
    """Parse a byte count such as ``1000000``, ``512M``, ``4GiB`` or ``1.5G`` (powers of 1024).

    Rule: floor(number * unit), computed exactly; above 2^63 - 1 bytes (8 EiB) is a
    ValueError (400 nines is a mistake, not a limit).
    """
    match = re.fullmatch(_SIZE, text.strip(), re.IGNORECASE)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 1000000, 512M, 4G)")
    number, unit = match.groups()
    whole, _, fraction = number.partition(".")
    fraction = fraction[:64]  # exact: n / 2^40 never needs more than 40 decimals
    size = INT64_MAX + 1
    if len(whole.lstrip("0")) <= 20:  # else far beyond 2^63 whatever the unit: not computed
        scale = _SIZE_UNITS[(unit or "")[:1].lower()]
        size = (int(whole + fraction) * scale) // 10 ** len(fraction)
    if size > INT64_MAX:
        shown = text.strip() if len(text.strip()) <= 40 else text.strip()[:37] + "..."
        raise ValueError(f"{shown!r} is too large (at most 8 EiB)")
    return size


class SizeType(click.ParamType):
    """A byte count with an optional K/M/G/T suffix (powers of 1024)."""

    name = "SIZE"

    def convert(self, value: Any, param, ctx) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


def _tolerance(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Accept no value or a number >= 0 (NaN is refused too)."""
    if value is not None and (math.isnan(value) or value < 0):
        raise click.BadParameter(f"{value} is not a tolerance (needs a number >= 0)")
    return value


class ToleranceOption(click.Option):
    """``--rtol``/``--atol``, its help ending in the per-dtype defaults of the comparison table
    (``1e-09`` written ``1e-9``), read only when the help is shown (no import at load)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from padconv_cli.verification.compare import DEFAULT_TOLERANCES

        position = 0 if self.name == "rtol" else 1
        shown = ", ".join(name + " " + re.sub(r"e([+-])0(\d)", r"e\1\2", f"{pair[position]:g}")
                          for name, pair in DEFAULT_TOLERANCES.items())
        lead = ("Relative", "Absolute")[position]
        self.help = (f"{lead} tolerance (default per dtype: {shown}, other floats their "
                     "epsilon, integers 0).")
        return super().get_help_record(ctx)


def complete_path(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of a tensor or model argument: file names."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def complete_node(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of --node: the labels of the --from-model model's nodes of the
    command's operator (nothing when the model cannot be read)."""
    from padconv_cli.models import model_nodes

    model = ctx.params.get("from_model")
    if not model:
        return []
    entry = find(ctx.info_name or "")
    try:
        nodes = model_nodes(model, (entry.name,) if entry else tuple(OPERATORS),
                            read_policy_of(ctx))
    except PadconvError:
        return []
    return [n.label for n in nodes if n.label.startswith(incomplete)]


# The options commands share, by group: (declarations, click settings) in the help's order.
SHARED_OPTIONS: dict[str, tuple[tuple[tuple[str, ...], dict[str, Any]], ...]] = {
    "dtype": ((("--dtype",), dict(metavar="TYPE", help=(
        "Element type for inline literal inputs, e.g. float32, float16, bfloat16, int64, bool, "
        "string, complex64 (default: float32 for numbers with a point and for [], int64 for "
        "integers)."))),),
    "output": (
        (("-o", "--output"), dict(metavar="PATH", help=(
            "Where to write the result: a .npy or .pb path, or - for stdout. Default: "
            "pretty-print on a terminal, .npy bytes into a pipe."))),
        (("--force-binary",), dict(is_flag=True, expose_value=False, callback=_keep_in_meta, help=(
            "Write tensor bytes to stdout even when it is a terminal (-o -)."))),
        (("--format", "fmt"), dict(type=click.Choice(["npy", "pb"]), help=(
            "Output format (default: from the -o suffix, else npy)."))),
        (("--max-output-bytes",), dict(type=SizeType(), metavar="SIZE", help=(
            "Refuse, before computing, a result larger than this (e.g. 512M, 4G). Default: half "
            "of the memory available; for out-of-core engines, the free disk space."))),
    ),
    "tolerance": tuple(((name,), dict(cls=ToleranceOption, type=float, callback=_tolerance))
                       for name in ("--rtol", "--atol")),
    # eager, so they are set before any other option reads a file (--pads @-)
    "input": (
        (("--max-input-bytes",), dict(type=SizeType(), metavar="SIZE", is_eager=True,
                                      expose_value=False, callback=_keep_in_policy, help=(
            "Refuse an input (file, stdin, external data, model) that would bring more than "
            "this into memory (e.g. 512M, 8G). Default: half of the memory available."))),
        (("--allow-hardlinks",), dict(is_flag=True, is_eager=True, expose_value=False,
                                      callback=_keep_in_policy, help=(
            "Read external data from a file that has several hard links (refused by default: a "
            "hard link can lead outside the tensor's folder)."))),
    ),
    "engine": (
        (("--engine",), dict(default="auto", show_default=True, help=(  # type: see engine_options
            "memory: all in RAM; tiled: out of core from a .npy to -o FILE.npy within "
            "--memory-limit; dask: blocks on a dask cluster (.npy or .zarr in and out); auto: "
            "dask for Zarr, tiled when a .npy input and output exceed --memory-limit."))),
        (("--memory-limit",), dict(type=SizeType(), metavar="SIZE", help=(
            "Working memory of the tiled and dask engines, e.g. 256M, 4G (default: half of the "
            "memory available)."))),
        (("--scheduler",), dict(metavar="ADDRESS", help=(
            "dask scheduler to run on, e.g. tcp://10.0.0.5:8786 (default: a local cluster); its "
            "workers must see the input and output paths."))),
    ),
    "model": (
        (("--from-model",), dict(metavar="MODEL.onnx", shell_complete=complete_path, help=(
            "Take the attributes and stored inputs (W, B, pads, ...) of a node of this model; "
            "flags given here override them."))),
        (("--node",), dict(metavar="NAME", shell_complete=complete_node, help=(
            "The node of --from-model: its name, OpType#k (k-th node of that type) or its output "
            "name. Optional when the model has one such node."))),
        (("--explain",), dict(is_flag=True, help=(
            "Print the resolved attributes, each output dimension with its formula, FLOPs and "
            "memory; compute nothing."))),
        (("--json", "as_json"), dict(is_flag=True, help=(
            "Print --explain or --check output as JSON."))),
        (("--emit-onnx",), dict(metavar="FILE.onnx", shell_complete=complete_path, help=(
            "Also write the equivalent single-node ONNX model to FILE.onnx."))),
        (("--emit-initializers",), dict(is_flag=True, help=(
            "Store the given tensors (DATA, or X, W, B) in the --emit-onnx model as "
            "initializers: it runs without inputs."))),
        (("--check",), dict(is_flag=True, help=(
            "After computing, run the same node through onnx.reference and onnxruntime; exit 1 "
            "when they disagree beyond tolerance."))),
        (("--check-rtol",), dict(type=float, metavar="RTOL", callback=_tolerance, help=(
            "Relative tolerance of --check (default: by dtype)."))),
        (("--check-atol",), dict(type=float, metavar="ATOL", callback=_tolerance, help=(
            "Absolute tolerance of --check (default: by dtype)."))),
    ),
}


def shared(group: str, **added: dict[str, Any]) -> Callable[[Callable], Callable]:
    """Decorator: the options of ``group`` in :data:`SHARED_OPTIONS`, in that order (``added``:
    more settings of an option, by its long name without dashes).  The ``input`` options are
    the read policy of one run (:class:`padconv_cli.tensorio.files.ReadPolicy`)."""

    def decorate(f: Callable) -> Callable:
        for declarations, settings in reversed(SHARED_OPTIONS[group]):
            more = added.get(declarations[-1].lstrip("-").replace("-", "_"), {})
            f = click.option(*declarations, **settings, **more)(f)
        return f

    return decorate


def read_policy_of(ctx: click.Context | None = None) -> Any:
    """The ReadPolicy the running command's ``--max-input-bytes``/``--allow-hardlinks`` set
    (``ctx``: default, the current click context); None without them: the readers' default."""
    ctx = ctx or click.get_current_context(silent=True)
    given = ctx.meta.get(READ_POLICY_KEY) if ctx is not None else None
    if not given:
        return None
    from padconv_cli.tensorio.files import ReadPolicy

    return ReadPolicy(**given)


# The engine flags of one command line (the engines: padconv_cli.pipeline), -q/-v included
EngineSettings = collections.namedtuple(
    "EngineSettings", ["engine", "memory_limit", "scheduler", "quiet", "verbose"],
    defaults=["auto", None, None, False, False])


# The values of the "model" options of SHARED_OPTIONS (every operator command shares them
# beyond its attributes), by parameter name: from_model, node, explain, as_json, ...
ExtraOptions = collections.namedtuple("ExtraOptions", [
    click.Option(declarations).name for declarations, _ in SHARED_OPTIONS["model"]])


def engine_options(f: Callable) -> Callable:
    """``--engine``, ``--memory-limit`` and ``--scheduler`` with the global ``-q``/``-v``,
    received as one ``engine_settings`` (:class:`EngineSettings`)."""
    from padconv_cli.pipeline import ENGINES

    @functools.wraps(f)
    def command(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) if name in kwargs else bool(meta_flag(name))
                  for name in EngineSettings._fields}
        return f(*args, engine_settings=EngineSettings(**values), **kwargs)

    return shared("engine", engine={"type": click.Choice(ENGINES)})(command)


def check_combination(extras: ExtraOptions) -> None:
    """Refuse model options that combine into nothing meaningful."""
    if extras.node is not None and extras.from_model is None:
        raise click.UsageError("--node needs --from-model MODEL.onnx")
    if extras.explain and extras.check:
        raise click.UsageError("--check computes the result; --explain does not compute")
    if extras.as_json and not (extras.explain or extras.check):
        raise click.UsageError("--json changes the output of --explain or --check; give one")
    if extras.emit_initializers and extras.emit_onnx is None:
        raise click.UsageError("--emit-initializers changes the model of --emit-onnx; give it")
    if extras.emit_onnx == "-":
        raise click.UsageError("--emit-onnx needs a file path (stdout carries the tensor)")
    if (extras.check_rtol is not None or extras.check_atol is not None) and not extras.check:
        raise click.UsageError("--check-rtol/--check-atol need --check")


def progress_display(quiet: bool, terminal: bool, colour: bool = True) -> bool | str:
    """How the tiled and dask engines report progress: nothing with ``--quiet``, a bar on a
    terminal (``"plain"``, without colour, when ``colour`` is off), else one line if the run
    is long (see :mod:`padconv_cli.outofcore.progress`)."""
    if quiet:
        return False
    return ("plain" if not colour else True) if terminal else "line"


def print_json(data: Any, err: bool = False) -> None:
    """``data`` as strict JSON (:mod:`padconv_cli.json_output`), indented by 2, on stdout."""
    from padconv_cli.json_output import dumps

    click.echo(dumps(data, indent=2), err=err)


def emit_result(array: Any, output: str | None, fmt: str | None,
                string_dtype: Any = None) -> None:
    """Send ``array`` to ``output`` (``string_dtype``: the fixed width a string object array
    is written at, :func:`padconv_cli.tensorio.write_tensor`).

    Rule: ``-o PATH`` writes PATH (format from ``--format``, else the suffix); ``-o -`` writes
    the bytes to stdout; no ``-o`` pretty-prints on a terminal and writes ``.npy`` (or ``fmt``)
    bytes into a pipe, so that padconv commands chain with ``-``.
    """
    from padconv_cli.tensorio import write_tensor

    if output is None and is_terminal() and fmt is None:
        print_tensor(array)
        return
    refuse_binary_to_terminal(output, fmt)
    write_tensor(array, output or "-", fmt=fmt or ("npy" if output in (None, "-") else None),
                 string_dtype=string_dtype)


def refuse_binary_to_terminal(output: str | None, fmt: str | None) -> None:
    """Refuse to write tensor bytes to stdout when it is a terminal (as gzip does), unless
    ``--force-binary`` was given: they would only garble the screen."""
    if output not in (None, "-") or not is_terminal() or meta_flag("force_binary"):
        return
    raise OutputError(f"refusing to write binary .{fmt or 'npy'} data to a terminal: redirect "
                      "it (> y.npy), pipe it, give -o FILE, or add --force-binary")


def same_file(first: str, second: str) -> bool:
    """True when two paths name one file (one real path, or one existing inode)."""
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):
        return False


def refuse_output_onto_inputs(flag: str, target: str | None, sources) -> None:
    """Rule: an extra output (``--emit-onnx``, ``--junit-xml``, ``--png``) never names one of
    the run's input files (a tensor, a model, ``FILE.npz`` of ``FILE.npz:NAME``), by any
    spelling or hard link: writing it would destroy that input. A usage error, before anything
    is read or written."""
    if target is None or target == "-" or not target.strip():
        return
    for source in (s for s in sources if s and s != "-"):
        prefixes = [source[:i] for i, ch in enumerate(source) if ch == ":" and i]
        for path in (p for p in [source, *prefixes] if os.path.isfile(p)):
            if same_file(path, target):
                raise click.UsageError(f"{flag} {target} is also an input ({source}); "
                                       "writing it would destroy that input: give another file")


# --- the terminal: colour, width, wrapping, tensors pretty-printed --------------------------

DEFAULT_WIDTH = 80
PREVIEW_THRESHOLD = 1000
EDGE_ITEMS = 3


def is_terminal(err: bool = False) -> bool:
    """True when stdout (or stderr) is an interactive terminal."""
    try:
        return (sys.stderr if err else sys.stdout).isatty()
    except (AttributeError, ValueError):
        return False


def color_enabled(err: bool = False) -> bool:
    """Colour and bold on this stream? Only on a terminal, without NO_COLOR or --no-color."""
    return not (meta_flag("no_color") or os.environ.get("NO_COLOR")) and is_terminal(err)


def output_width() -> int:
    """Columns of stdout to fit (module docstring: COLUMNS wins, as shutil reads it)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    if is_terminal():
        try:
            return max(os.get_terminal_size(sys.stdout.fileno()).columns, 40)
        except (OSError, ValueError):
            pass
    return DEFAULT_WIDTH


def styled(text: str, **style: Any) -> str:
    """``text`` with click's style (fg=..., bold=...) when colour is on for stdout."""
    return click.style(text, **style) if color_enabled() else text


# A line may break after a space, after "=", after "+" (not the exponent sign of 1e+05) and
# after "," (not a digit group such as 1,000): never inside a number or a name.
_BREAK_AFTER = r"(?<= )|(?<==)|(?<=,)(?!\d)|(?<=\+)(?<![0-9.][eE]\+)"
HANGING_INDENT = 4


def wrap_at_tokens(text: str, width: int) -> str:
    """``text`` with each line longer than ``width`` broken at token boundaries (after a space,
    ``=``, ``+`` or ``,``), continuation lines indented by the line's own indent plus
    ``HANGING_INDENT``; a single token longer than a line stays whole on a line of its own.
    Lines that fit are unchanged."""
    return "\n".join(wrapped for line in text.split("\n") for wrapped in _wrap_line(line, width))


def _wrap_line(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    own_indent = len(line) - len(line.lstrip(" "))
    indent = " " * (own_indent + HANGING_INDENT)
    pieces = [piece for piece in re.split(_BREAK_AFTER, line[own_indent:]) if piece]
    lines: list[str] = []
    current = line[:own_indent]
    for piece in pieces:
        if len(current + piece.rstrip(" ")) > width and current.strip():
            lines.append(current.rstrip(" "))
            current = indent + piece.lstrip(" ")
        else:
            current += piece
    return [*lines, current.rstrip(" ")]


def tensor_text(array: Any) -> str:
    """``float32[2, 3]``: the tensor's element type as ONNX spells it, and its shape."""
    from padconv_cli.dtypes import dtype_name

    return f"{dtype_name(array.dtype)}[{', '.join(str(d) for d in array.shape)}]"


def print_tensor(array: Any) -> None:
    """Show a tensor on the terminal: ``dtype[d0, d1, ...] (size elements)`` in bold (the
    dtype as ONNX spells it), then numpy's text form in lines of the terminal's width, elided
    with ``...`` past PREVIEW_THRESHOLD elements."""
    import numpy as np

    click.echo(styled(f"{tensor_text(array)} ({array.size} elements)", bold=True))
    click.echo(np.array2string(array, threshold=PREVIEW_THRESHOLD, edgeitems=EDGE_ITEMS,
                               max_line_width=output_width()))
