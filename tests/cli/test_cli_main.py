"""The command group: version, help, option parsing and the error-to-exit-code mapping."""

from __future__ import annotations

import click
import numpy as np
import pytest

from padconv_cli.cli.help_examples import example_commands
from padconv_cli.cli.options import Command, IntListType, int_list_option, parse_size


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
