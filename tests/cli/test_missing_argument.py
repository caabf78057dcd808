"""A command run without its required argument says which argument is missing and what it
takes, in one line, exit 2 (not click's empty ``DATA:``)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("command", "label", "what"), [
    ("pad", "DATA", "a tensor file, '-' for stdin, or a literal"),
    ("conv", "X", "a tensor file, '-' for stdin, or a literal"),
    ("compare", "A", "a tensor file, '-' for stdin, or a literal"),
    ("audit", "MODEL.onnx", "an ONNX model file"),
    ("show", "FILE", "a tensor file or an ONNX model"),
    ("convert", "IN", "a tensor file, '-' for stdin, or a literal"),
])
def test_missing_argument_is_named_with_what_it_takes(run_cli, command, label, what):
    result = run_cli(command)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"padconv {command}: error: missing argument {label}: {what} "
        f"(see 'padconv {command} --help')"
    ]


def test_compare_names_its_second_argument(run_cli):
    result = run_cli("compare", "[1.0]")
    assert result.exit_code == 2
    assert "missing argument B: a tensor file" in result.stderr
