"""Reusable click options: integer lists, sizes, dtypes and the output options every command shares.

Integer-list options mirror ONNX list attributes.  They accept the values as separate words
(``--pads 0 -1 0 2``: the option consumes the integer words that follow it, negative ones
included), as one comma-separated word (``--pads 0,-1,0,2``), or as ``@FILE``, a 1-D integer
tensor file (``--pads @pads.npy``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

# Memory probing lives in the library, beside the engines; re-exported for the commands.
from padconv_cli.resources import available_memory_bytes, default_max_output_bytes  # noqa: F401

if TYPE_CHECKING:
    from padconv_cli.tensorio.files import ReadPolicy

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
READ_POLICY_KEY = "padconv.read_policy"  # ctx.meta: the flags of cli.input_options
_INT_WORD = re.compile(r"[+-]?\d+(,[+-]?\d+)*,?")
# words that look like a number of some kind: taken into the list so that the error is
# "'1.5' is not an integer" rather than "unexpected extra argument"
_NUMBER = r"[+-]?(0[xX][0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)"
_NUMBER_WORD = re.compile(rf"{_NUMBER}(,{_NUMBER})*,?")
LIST_TAILS_KEY = "padconv.list_option_tails"
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?", re.IGNORECASE)
_DECIMAL_INTEGER = re.compile(r"[+-]?[0-9]+")
_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def read_policy_of(ctx: click.Context | None = None) -> ReadPolicy | None:
    """The read policy the running command's ``--max-input-bytes``/``--allow-hardlinks`` set
    (``ctx``: default, the current click context); None without them: the readers' default."""
    ctx = ctx or click.get_current_context(silent=True)
    fields = ctx.meta.get(READ_POLICY_KEY) if ctx is not None else None
    if not fields:
        return None
    from padconv_cli.tensorio.files import ReadPolicy

    return ReadPolicy(**fields)


class IntListType(click.ParamType):
    """Converts ``"0 2 0 0"``, ``"0,2,0,0"`` or ``"@pads.npy"`` into a tuple of int64 values."""

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
        values = []
        for word in words:
            if not _DECIMAL_INTEGER.fullmatch(word):  # int() also takes "1_0" and "١"
                self.fail(f"{word!r} is not an integer", param, ctx)
            number = int(word)
            if not INT64_MIN <= number <= INT64_MAX:
                self.fail(f"{word} does not fit in int64", param, ctx)
            values.append(number)
        return tuple(values)

    def _from_tensor_file(self, path: str, param, ctx) -> tuple[int, ...]:
        import numpy as np

        from padconv_cli.errors import PadconvError
        from padconv_cli.tensor_sources import read_tensor

        try:
            array = read_tensor(path, policy=read_policy_of(ctx))
        except PadconvError as error:
            self.fail(str(error), param, ctx)
        if array.ndim > 1 or array.dtype.kind not in "iu":
            self.fail(
                f"{path}: needs a 1-D integer tensor, got {array.dtype} of shape {array.shape}",
                param,
                ctx,
            )
        if array.dtype == np.uint64 and array.size and array.max() > INT64_MAX:
            self.fail(f"{path}: value {array.max()} does not fit in int64", param, ctx)
        return tuple(int(v) for v in array.reshape(-1))


class ChoiceWithSuggestion(click.Choice):
    """A choice accepted in any case (``Reflect``, ``same_upper``); a typo gets the closest
    choice as a suggestion (``'reflct' is not a choice; did you mean 'reflect'?``)."""

    def __init__(self, choices: Any) -> None:
        super().__init__(choices, case_sensitive=False)

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str:
        """``[NOTSET|SAME_UPPER|...]``: the choices as declared (click 8.2 shows a
        case-insensitive choice in lower case, 8.1 as declared)."""
        return "[" + "|".join(str(choice) for choice in self.choices) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        lowered = {str(choice).lower(): choice for choice in self.choices}
        if isinstance(value, str) and value.lower() in lowered:
            return lowered[value.lower()]
        from padconv_cli.cli.messages import suggestion

        close = suggestion(str(value), self.choices)
        listing = ", ".join(str(choice) for choice in self.choices)
        hint = f"; did you mean {close!r}?" if close else ""
        self.fail(f"{str(value)!r} is not one of {listing}{hint}", param, ctx)


class Int64Type(click.ParamType):
    """One integer that must fit ONNX's int64 attributes."""

    name = "INTEGER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        try:
            number = int(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not an integer", param, ctx)
        if not INT64_MIN <= number <= INT64_MAX:
            self.fail(f"{value} does not fit in int64", param, ctx)
        return number


class IntListOption(click.Option):
    """An option that also swallows the integer words following its first value."""

    def add_to_parser(self, parser, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        for opt in self.opts:
            parser_option = parser._long_opt.get(opt) or parser._short_opt.get(opt)
            if parser_option is not None:
                parser_option.process = _greedy(parser_option.process, self.opts[0])


def _greedy(process: Callable[[Any, Any], None], flag: str) -> Callable[[Any, Any], None]:
    def process_with_following_ints(value: Any, state: Any) -> None:
        words = [value]
        while state.rargs and _NUMBER_WORD.fullmatch(state.rargs[0]):
            words.append(state.rargs.pop(0))
        if state.rargs and not state.rargs[0].startswith("-"):
            _remember_tail(state.rargs[0], flag)
        process(" ".join(words), state)

    return process_with_following_ints


def _remember_tail(word: str, flag: str) -> None:
    """Note the word right after a list option's values: if click finds it to be an extra
    argument, the error names the option (``--pads: 'x' is not an integer``)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta.setdefault(LIST_TAILS_KEY, {}).setdefault(word, flag)


def list_option_tail(ctx: click.Context, word: str) -> str | None:
    """The list option ``word`` followed, when it did (see :func:`_remember_tail`)."""
    return ctx.meta.get(LIST_TAILS_KEY, {}).get(word)


def int_list_option(*param_decls: str, **kwargs: Any) -> Callable:
    """Decorator for an ONNX integer-list attribute option (see the module docstring)."""
    kwargs.setdefault("type", IntListType())
    kwargs.setdefault("metavar", "INT...")
    return click.option(*param_decls, cls=IntListOption, **kwargs)


MAX_SIZE = 2**63 - 1


def parse_size(text: str) -> int:
    """Parse a byte count such as ``1000000``, ``512M``, ``4GiB`` or ``1.5G`` (powers of 1024).

    Rule: the number times its unit, rounded down, computed exactly; it must not exceed
    2^63 - 1 bytes (8 EiB), else ValueError (400 nines is a mistake, not a limit).
    """
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 1000000, 512M, 4G)")
    number, unit = match.groups()
    return _exact_size(number, _SIZE_UNITS[(unit or "")[:1].lower()], text)


def _exact_size(number: str, unit: int, text: str) -> int:
    """floor(number * unit) for a decimal ``number``, refused above :data:`MAX_SIZE`."""
    whole, _, fraction = number.partition(".")
    fraction = fraction[:64]  # exact: n / 2^40 never needs more than 40 decimals
    if len(whole.lstrip("0")) > 20:  # far beyond 2^63 whatever the unit: do not compute it
        raise ValueError(f"{_short(text)} is too large (at most 8 EiB)")
    size = (int(whole + fraction) * unit) // 10 ** len(fraction)
    if size > MAX_SIZE:
        raise ValueError(f"{_short(text)} is too large (at most 8 EiB)")
    return size


def _short(text: str) -> str:
    """``text`` quoted, cut to 40 characters for a message."""
    text = text.strip()
    return repr(text if len(text) <= 40 else text[:37] + "...")


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


def dtype_option(f: Callable) -> Callable:
    """``--dtype``: element type of inline literal inputs (ONNX or numpy names)."""
    return click.option(
        "--dtype",
        metavar="TYPE",
        default=None,
        help="Element type for inline literal inputs, e.g. float32, float16, bfloat16, int64, "
        "bool, string, complex64 (default: float32 for numbers with a point and for [], int64 "
        "for integers).",
    )(f)


def _remember_force_binary(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    from padconv_cli.cli.style import SETTINGS

    SETTINGS["force_binary"] = bool(value)
    return value


def output_options(f: Callable) -> Callable:
    """``-o/--output``, ``--format`` and ``--max-output-bytes``, shared by every compute command."""
    f = click.option(
        "--max-output-bytes",
        type=SizeType(),
        default=None,
        metavar="SIZE",
        help="Refuse, before computing, a result larger than this (e.g. 512M, 4G). "
        "Default: half of the memory available; for out-of-core engines, the free disk space.",
    )(f)
    f = click.option(
        "--format",
        "fmt",
        type=click.Choice(["npy", "pb"]),
        default=None,
        help="Output format (default: from the -o suffix, else npy).",
    )(f)
    f = click.option(
        "--force-binary",
        is_flag=True,
        expose_value=False,
        callback=_remember_force_binary,
        help="Write tensor bytes to stdout even when it is a terminal (-o -).",
    )(f)
    f = click.option(
        "-o",
        "--output",
        metavar="PATH",
        default=None,
        help="Where to write the result: a .npy or .pb path, or - for stdout. Default: "
        "pretty-print on a terminal, .npy bytes into a pipe.",
    )(f)
    return f


def env_flag(name: str) -> bool:
    """True when the environment variable is set to a non-empty value (NO_COLOR convention)."""
    return bool(os.environ.get(name))


TOLERANCE_FALLBACK_TEXT = "other floats their epsilon, integers 0"


def _tolerance(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Accept no value or a number >= 0 (NaN is refused too)."""
    if value is not None and (math.isnan(value) or value < 0):
        raise click.BadParameter(f"{value} is not a tolerance (needs a number >= 0)")
    return value


def _short_number(value: float) -> str:
    """``1e-09`` written as ``1e-9``."""
    return re.sub(r"e([+-])0(\d)", r"e\1\2", f"{value:g}")


def default_tolerance_text(position: int) -> str:
    """The per-dtype defaults of rtol (``position`` 0) or atol (1), from the comparison table."""
    from padconv_cli.verification.compare import DEFAULT_TOLERANCES

    shown = ", ".join(
        f"{name} {_short_number(pair[position])}" for name, pair in DEFAULT_TOLERANCES.items()
    )
    return f"{shown}, {TOLERANCE_FALLBACK_TEXT}"


class ToleranceOption(click.Option):
    """``--rtol``/``--atol``: the per-dtype defaults are read into the help only when shown,
    so that loading the command does not import the comparison module."""

    def __init__(self, *args: Any, lead: str, position: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lead, self.position = lead, position

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = f"{self.lead} (default per dtype: {default_tolerance_text(self.position)})."
        return super().get_help_record(ctx)


TOLERANCE_FLAGS = {"atol": "--atol", "rtol": "--rtol"}  # verify and compare name them so


def tolerance_options(f: Callable) -> Callable:
    """``--rtol`` and ``--atol`` (numbers >= 0; default: by the expected tensor's dtype)."""
    for name, lead, position in (
        ("--atol", "Absolute tolerance", 1),
        ("--rtol", "Relative tolerance", 0),
    ):
        f = click.option(
            name, cls=ToleranceOption, type=float, default=None, callback=_tolerance,
            lead=lead, position=position,
        )(f)
    return f
