"""Tolerance options share one help table and one validation; zarr errors are one line."""

from __future__ import annotations

import re

import pytest

from padconv_cli.errors import InputError


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
        dask_io.open_zarr_input(str(tmp_path / "a.zarr"))
    assert "bad metadata\\x01here" in str(excinfo.value)
    assert not hasattr(dask_io, "_one_line")
    assert not hasattr(dask_io, "open_dask_input")
