"""verify exits 1 when nothing was verified, and its help says so."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_verify_with_nothing_verified_exits_1(run_cli, unsupported_dir, extra):
    result = run_cli("verify", str(unsupported_dir), *extra)
    assert result.exit_code == 1
    assert "nothing was verified" in result.stderr


def test_verify_help_states_the_exit_rule(run_cli):
    text = " ".join(run_cli("verify", "--help").stdout.split())
    assert "nothing was verified" in text and "Exit status" in text
