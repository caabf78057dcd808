"""The command group and its help: version, option parsing, the error-to-exit-code mapping,
examples first in every help and runnable as shown, shared tolerance options."""

from __future__ import annotations

import re
import shlex
from importlib import metadata
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from padconv_cli import __version__
from padconv_cli.cli.main import (
    ALIASES,
    COMMANDS,
    distribution_version,
    padconv_version,
    version_lines,
)
from padconv_cli.cli.options import (
    Command,
    IntListType,
    command,
    int_list_option,
    parse_size,
    with_examples_first,
)
from padconv_cli.errors import InputError
from padconv_cli.kernels.native import available_isas, selected_isa


def example_commands(help_output: str) -> list[str]:
    """The commands of the ``Examples:`` section of a rendered ``--help``: one string per
    example, continuation lines (ending in a backslash) joined, trailing comments kept."""
    lines = help_output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "Examples:")
    commands: list[str] = []
    pending = ""
    for line in lines[start + 1:]:
        if not line.strip():
            break
        pending = f"{pending} {line.strip()}".strip()
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
        else:
            commands.append(pending)
            pending = ""
    return commands


# The command group: version, help, option parsing and the error-to-exit-code mapping.


@pytest.mark.parametrize(
    "command", [[], ["pad"], ["conv"], ["verify"], ["show"], ["inspect"], ["compare"]]
)
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_command_has_help_with_examples(run_cli, command, flag):
    result = run_cli(*command, flag)
    assert result.exit_code == 0
    assert "Usage: padconv" in result.stdout
    assert 2 <= len(example_commands(result.stdout)) <= 6


@click.command(cls=Command)
@int_list_option("--pads")
@click.argument("rest", nargs=-1)
def _echo_pads(pads, rest):
    click.echo(f"{pads}|{list(rest)}")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--pads", "0", "2", "0", "0", "x.npy"], "(0, 2, 0, 0)|['x.npy']"),
        (["--pads", "0,2,0,0", "x.npy"], "(0, 2, 0, 0)|['x.npy']"),
        (["--pads=0,2,0,0"], "(0, 2, 0, 0)|[]"),
        (["--pads", "0", "-1", "0", "2", "x.npy", "w.npy"], "(0, -1, 0, 2)|['x.npy', 'w.npy']"),
        (["--pads", "-1", "+2", "y"], "(-1, 2)|['y']"),
        (["x", "--pads", "3"], "(3,)|['x']"),
        (["--pads", "1", "--", "5"], "(1,)|['5']"),
    ],
)
def test_int_list_option_consumes_following_integers(args, expected):
    result = click.testing.CliRunner().invoke(_echo_pads, args)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == expected


def test_int_list_from_tensor_file(tmp_path):
    path = tmp_path / "pads.npy"
    np.save(path, np.array([0, 2, -1, 0], dtype=np.int64))
    assert IntListType().convert(f"@{path}", None, None) == (0, 2, -1, 0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 x", "'x' is not an integer"),
        ("99999999999999999999", "does not fit in int64"),
        ("1.5", "'1.5' is not an integer"),
    ],
)
def test_int_list_rejects(text, message):
    with pytest.raises(click.BadParameter, match=message):
        IntListType().convert(text, None, None)


def test_int_list_from_float_tensor_file_is_refused(tmp_path):
    path = tmp_path / "pads.npy"
    np.save(path, np.array([0.5, 1.0]))
    with pytest.raises(click.BadParameter, match="needs a 1-D integer tensor"):
        IntListType().convert(f"@{path}", None, None)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1000", 1000), ("512M", 512 * 2**20), ("4G", 4 * 2**30), ("1.5k", 1536), ("2GiB", 2**31)],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


def test_unknown_option_is_one_line_exit_2(run_cli):
    result = run_cli("pad", "--bogus")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "padconv pad: error: No such option '--bogus'" in result.stderr


def test_unknown_command_is_one_line_exit_2(run_cli):
    result = run_cli("transpose")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "No such command 'transpose'" in result.stderr


# ``padconv --version``: padconv's version with numpy's, onnx's and onnxruntime's, and the
# native instruction set Conv runs on.


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_padconv_and_the_libraries_it_depends_on(run_cli, flag):
    result = run_cli(flag)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"padconv, version {__version__}"
    fields = dict(line.split(None, 1) for line in lines[1:3])
    assert fields == {"numpy": metadata.version("numpy"), "onnx": metadata.version("onnx")}
    assert f"onnxruntime  {distribution_version('onnxruntime')}" in result.stdout
    assert f"native ISA   {selected_isa()} (this CPU: {', '.join(available_isas())})" in (
        result.stdout)


def test_version_of_an_installed_padconv_is_its_distribution_version():
    assert padconv_version() == metadata.version("padconv") == __version__


def test_a_library_that_is_not_installed_is_said_so(monkeypatch):
    real = metadata.version

    def without_onnxruntime(name: str) -> str:
        if name.startswith(("onnxruntime", "ort-")):
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", without_onnxruntime)
    assert "  onnxruntime  not installed" in version_lines()


@pytest.mark.parametrize("isa", ["generic", "AVX2"])
def test_the_native_line_shows_a_forced_instruction_set(run_cli, isa):
    if isa.lower() not in available_isas():
        pytest.skip(f"this CPU has no {isa}")
    result = run_cli("--version", env={"PADCONV_NATIVE_ISA": isa})
    assert f"native ISA   {isa.lower()} (this CPU:" in result.stdout


def test_an_unavailable_forced_instruction_set_is_reported_not_raised(run_cli):
    result = run_cli("--version", env={"PADCONV_NATIVE_ISA": "sse9"})
    assert result.exit_code == 0
    assert "native ISA   unavailable (PADCONV_NATIVE_ISA=sse9 is not available" in result.stdout


# A command's examples can be shown right after its summary, before the description and the
# options (padconv_cli.cli.options), and read back from the rendered help.


EXAMPLES = """\b
Examples:
  padconv pad '[[1, 2]]' --pads 0 1
  padconv pad '[[1, 2]]' --pads 0 1 \\
      --mode edge
"""


def _command() -> click.Command:
    @command("pad", "Pad.", EXAMPLES)
    @click.option("--pads")
    def pad(pads: str) -> None:
        """Pad DATA as ONNX Pad does.

        A longer description that comes after the examples, long enough to be wrapped by
        click at the terminal's width.
        """

    return pad


def test_examples_come_after_the_summary_and_before_description_and_options():
    output = CliRunner().invoke(_command(), ["--help"], terminal_width=80).output
    summary = output.index("Pad DATA as ONNX Pad does.")
    examples = output.index("Examples:")
    assert summary < examples < output.index("A longer description") < output.index("Options:")
    assert "examples, long enough to be wrapped by click at the terminal's width." in " ".join(
        output.split())
    description = output[output.index("A longer"):output.index("Options:")]
    assert all("  " not in line.strip() for line in description.splitlines())


def test_the_rendered_examples_read_back_as_whole_commands():
    output = CliRunner().invoke(_command(), ["--help"], terminal_width=80).output
    assert example_commands(output) == ["padconv pad '[[1, 2]]' --pads 0 1",
                                        "padconv pad '[[1, 2]]' --pads 0 1 --mode edge"]


def test_a_help_of_one_paragraph_gets_the_examples_after_it():
    assert with_examples_first("Summary.", "\\b\nExamples:\n  padconv x\n") == (
        "Summary.\n\n\\b\nExamples:\n  padconv x\n")


# Tolerance options share one help table and one validation; zarr errors are one line.


@pytest.mark.parametrize("command", ["compare", "verify"])
def test_tolerance_help_comes_from_the_default_table(run_cli, command):
    from padconv_cli.verification.compare import DEFAULT_TOLERANCES

    text = " ".join(run_cli(command, "--help").stdout.split())
    for name, (rtol, atol) in DEFAULT_TOLERANCES.items():
        for value in (rtol, atol):
            shown = re.sub(r"e([+-])0(\d)", r"e\1\2", f"{value:g}")
            assert f"{name} {shown}" in text


@pytest.mark.parametrize("command", ["compare", "verify"])
@pytest.mark.parametrize("value", ["-1", "nan"])
def test_tolerance_validation_is_shared(run_cli, command, value):
    args = ("[1.0]", "[1.0]") if command == "compare" else ()
    result = run_cli(command, *args, "--atol", value)
    assert result.exit_code == 2
    assert "is not a tolerance (needs a number >= 0)" in result.stderr


def test_zarr_errors_use_the_shared_one_line(monkeypatch, tmp_path):
    import zarr

    from padconv_cli.engines import dask_io

    def broken(*args, **kwargs):
        raise ValueError("bad\nmetadata\x01here")

    monkeypatch.setattr(zarr, "open_array", broken)
    with pytest.raises(InputError) as excinfo:
        dask_io.open_block_input(str(tmp_path / "a.zarr"))
    assert "bad metadata\\x01here" in str(excinfo.value)
    assert not hasattr(dask_io, "_one_line")
    assert not hasattr(dask_io, "open_dask_input")


# Every ``--help`` shows its examples first, and they run as shown after a plain install,
# from an empty folder: they use inline literals and files an earlier example of the same help
# wrote, nothing from a clone, and they fit 80 columns.


EVERY_HELP = [[], *([name] for name in sorted(COMMANDS))]


def _help(run_cli, command: list[str]) -> str:
    return run_cli(*command, "--help", env={"COLUMNS": "80"}).stdout


@pytest.mark.parametrize("command", EVERY_HELP, ids=lambda c: " ".join(["padconv", *c]))
def test_help_shows_examples_after_the_summary_within_80_columns(run_cli, command):
    output = _help(run_cli, command)
    examples = output.index("Examples:")
    assert examples < output.index("Options:")
    usage, summary, after_summary, *_ = output.split("\n\n")
    assert after_summary.strip().startswith("Examples:"), "examples are not after the summary"
    assert "samples/" not in output
    assert len(example_commands(output)) >= 2
    too_wide = [line for line in output.splitlines() if len(line) > 80]
    assert not too_wide, too_wide


def _run_example(run_cli, example: str) -> None:
    """Run one example line as a shell would: words split and quotes removed by the shell's
    rules, ``#`` comments dropped, ``&&`` and ``|`` between padconv commands (``echo`` passes);
    each padconv command runs in-process and must exit 0."""
    for sequence in example.split(" && "):
        piped: bytes | None = None
        for stage in sequence.split(" | "):
            words = shlex.split(stage, comments=True)
            if words[0] == "echo":
                continue
            assert words[0] == "padconv", f"{example}: not a padconv command"
            result = run_cli(*words[1:], input=piped)
            assert result.exit_code == 0, f"{example}: {result.stderr}"
            piped = result.stdout_bytes


@pytest.mark.parametrize("command", EVERY_HELP, ids=lambda c: " ".join(["padconv", *c]))
def test_help_examples_run_from_an_empty_folder(run_cli, tmp_path, monkeypatch, command):
    examples = example_commands(_help(run_cli, command))
    monkeypatch.chdir(tmp_path)
    for example in examples:
        _run_example(run_cli, example)


# Help: no arguments print it; short helps are whole (examples: see test_help_examples_*).


REPO = Path(__file__).resolve().parents[2]


def test_no_arguments_prints_help_and_exits_0(run_cli):
    result = run_cli()
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: padconv")
    assert "Commands:" in result.stdout
    assert result.stderr == ""

def test_group_help_shows_whole_short_helps(run_cli):
    text = run_cli("--help").stdout
    commands = text.split("Commands:")[1].strip().splitlines()
    assert len(commands) == len(COMMANDS) + len(ALIASES)
    for line in commands:
        assert not line.rstrip().endswith("..."), line
