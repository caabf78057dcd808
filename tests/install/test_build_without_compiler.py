"""Building padconv from source on a machine without a C++ compiler ends with one short
message naming what is missing and how to install it (or to use a wheel), not with the
compiler's 'No such file or directory' after a hundred lines of copied files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_FILES = ("setup.py", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in")


def _source_copy(folder: Path) -> Path:
    """The files a source build reads, without this tree's build products."""
    source = folder / "source"
    source.mkdir()
    for name in BUILD_FILES:
        if (REPO / name).exists():
            shutil.copy(REPO / name, source / name)
    for folder_name in ("padconv_cli", "scripts"):
        if (REPO / folder_name).is_dir():
            shutil.copytree(REPO / folder_name, source / folder_name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    return source


def _path_with_python_only(folder: Path) -> str:
    """A PATH on which ``python`` is this interpreter and no compiler can be found."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    return str(bin_dir)


@pytest.mark.parametrize("compilers", [{}, {"CC": "/nonexistent/cc", "CXX": "/nonexistent/c++"}],
                         ids=["default-compiler-off-path", "CXX-names-a-missing-file"])
@pytest.mark.parametrize("install", ["wheel", "editable"])
def test_a_build_without_a_compiler_says_what_to_install(tmp_path, compilers, install):
    source = _source_copy(tmp_path)
    env = {**os.environ, **compilers, "PATH": _path_with_python_only(tmp_path),
           "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    assert not any(shutil.which(name, path=env["PATH"]) for name in ("g++", "c++", "gcc", "cc"))
    command = {"wheel": ["wheel", "-w", str(tmp_path / "out")],
               "editable": ["install", "--target", str(tmp_path / "out"), "-e"]}[install]
    done = subprocess.run(
        [sys.executable, "-m", "pip", *command, ".", "--no-deps", "--no-build-isolation"],
        cwd=source, env=env, capture_output=True, text=True, timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "this machine cannot build it: the C++ compiler" in output, output
    assert "sudo apt install g++ python3-dev" in output
    assert "pip install padconv-*.whl" in output
    assert "No such file or directory" not in output
    assert not list(tmp_path.glob("out/*.whl"))
