"""Shared fixtures: a CLI runner that goes through padconv's own error mapping."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from padconv_cli.cli.main import cli


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


@pytest.fixture
def run_cli():
    """Run ``padconv ARGS`` in-process; returns exit code, stdout (text and bytes) and stderr."""

    def run(*args: str, input: bytes | str | None = None, env: dict | None = None) -> CliResult:
        runner = CliRunner()
        result = runner.invoke(cli, list(args), input=input, env=env, catch_exceptions=False)
        return CliResult(result.exit_code, result.stdout, result.stderr, result.stdout_bytes)

    return run
