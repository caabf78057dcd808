"""``padconv --version``: padconv's version with numpy's, onnx's and onnxruntime's, and the
native instruction set Conv runs on."""

from __future__ import annotations

from importlib import metadata

import pytest

from padconv_cli import __version__
from padconv_cli.cli import version
from padconv_cli.kernels.native import available_isas, selected_isa


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_padconv_and_the_libraries_it_depends_on(run_cli, flag):
    result = run_cli(flag)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"padconv, version {__version__}"
    fields = dict(line.split(None, 1) for line in lines[1:3])
    assert fields == {"numpy": metadata.version("numpy"), "onnx": metadata.version("onnx")}
    assert f"onnxruntime  {version.distribution_version('onnxruntime')}" in result.stdout
    assert f"native ISA   {selected_isa()} (this CPU: {', '.join(available_isas())})" in (
        result.stdout)


def test_version_of_an_installed_padconv_is_its_distribution_version():
    assert version.padconv_version() == metadata.version("padconv") == __version__


def test_a_library_that_is_not_installed_is_said_so(monkeypatch):
    real = metadata.version

    def without_onnxruntime(name: str) -> str:
        if name.startswith(("onnxruntime", "ort-")):
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", without_onnxruntime)
    assert "  onnxruntime  not installed" in version.version_lines()


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
