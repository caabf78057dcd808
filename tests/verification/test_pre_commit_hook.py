"""The pre-commit hook runs ``padconv verify`` where users already are: ``pre-commit
try-repo`` installs this checkout as a hook in a temporary repository holding case files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from padconv_cli.verification.onnx_suite import onnx_data_root

REPO = Path(__file__).resolve().parents[2]


def test_hook_manifest_runs_verify_without_file_names():
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (the test extra)")
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "padconv-verify"
    assert hook["entry"].startswith("padconv verify")
    assert hook["language"] == "python" and hook["pass_filenames"] is False


def _pre_commit() -> str | None:
    """The pre-commit installed beside this interpreter (a venv that is not activated), else
    the one on PATH."""
    beside = Path(sys.executable).with_name("pre-commit")
    return str(beside) if beside.is_file() else shutil.which("pre-commit")


def test_try_repo_runs_the_hook(tmp_path):
    pre_commit = _pre_commit()
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]' brings it)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    target = tmp_path / "project"
    shutil.copytree(onnx_data_root() / "pytorch-converted" / "test_ReflectionPad2d",
                    target / "cases" / "test_ReflectionPad2d")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "c"]):
        subprocess.run(command, cwd=target, env=env, check=True)
    done = subprocess.run(
        [pre_commit, "try-repo", str(REPO), "padconv-verify", "--all-files", "--verbose"],
        cwd=target, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "padconv verify" in done.stdout and "Passed" in done.stdout
    assert "passed, 0 failed" in done.stdout
