"""stdin as a source: a typeable .npz member hint, and at most one stdin per conv."""

from __future__ import annotations

import io

import numpy as np
import pytest


def _two_member_npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, a=np.ones((2, 2), np.float32), b=np.zeros(3, np.float32))
    return buffer.getvalue()


def test_stdin_npz_ambiguity_names_a_typeable_form(run_cli):
    result = run_cli("pad", "--pads", "1", "1", "-", "-o", "-", input=_two_member_npz())
    assert result.exit_code == 2
    assert "pick one with -:NAME (after a -- that ends the options)" in result.stderr
    assert "<stdin>:NAME" not in result.stderr


def test_the_suggested_stdin_member_form_works(run_cli):
    result = run_cli("pad", "--pads", "1", "1", "-o", "-", "--", "-:b", input=_two_member_npz())
    assert result.exit_code == 0, result.stderr
    assert np.load(io.BytesIO(result.stdout_bytes)).shape == (5,)

@pytest.mark.parametrize("sources", [("-", "-"), ("-", "[[[1.0]]]", "-"), ("x", "-", "-")])
def test_conv_refuses_stdin_twice(run_cli, sources):
    result = run_cli("conv", *sources, input=b"")
    assert result.exit_code == 2
    assert "only one of X, W, B can be - (stdin)" in result.stderr
    assert result.stderr.count("\n") == 1
