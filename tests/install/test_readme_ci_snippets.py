"""The README's pre-commit snippet works as written: pasted into a project's
``.pre-commit-config.yaml``, ``pre-commit run`` verifies the project's case folders with the
installed padconv, passes when they match and fails when an expected output is wrong."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from padconv_cli.verification.onnx_suite import onnx_data_root

REPO = Path(__file__).resolve().parents[2]
CASE = "test_ReflectionPad2d"


def readme_pre_commit_config() -> str:
    """The README's yaml block that starts with ``repos:`` and defines padconv-verify."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M)
    (config,) = [b for b in blocks if b.startswith("repos:") and "padconv-verify" in b]
    return config


def _pre_commit() -> str:
    beside = Path(sys.executable).with_name("pre-commit")
    found = str(beside) if beside.is_file() else shutil.which("pre-commit")
    if found is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[test]' brings it)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    return found


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A git repository holding the README's config and one case in tests/onnx_cases."""
    project = tmp_path / "project"
    shutil.copytree(onnx_data_root() / "pytorch-converted" / CASE,
                    project / "tests" / "onnx_cases" / CASE)
    (project / ".pre-commit-config.yaml").write_text(readme_pre_commit_config(),
                                                     encoding="utf-8")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "c"]):
        subprocess.run(command, cwd=project, env=env, check=True)
    return project, env


def _run_hooks(pre_commit: str, project: Path, env: dict[str, str]):
    return subprocess.run([pre_commit, "run", "--all-files", "--verbose"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_readme_pre_commit_hook_passes_on_matching_cases(tmp_path):
    pre_commit = _pre_commit()
    project, env = _project(tmp_path)
    done = _run_hooks(pre_commit, project, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "padconv verify" in done.stdout and "Passed" in done.stdout
    assert "1 passed, 0 failed" in done.stdout


def test_the_readme_pre_commit_hook_fails_on_a_wrong_expected_output(tmp_path):
    import onnx
    from onnx import numpy_helper

    pre_commit = _pre_commit()
    project, env = _project(tmp_path)
    expected = project / "tests" / "onnx_cases" / CASE / "test_data_set_0" / "output_0.pb"
    tensor = numpy_helper.to_array(onnx.load_tensor_from_string(expected.read_bytes()))
    wrong = numpy_helper.from_array((tensor + np.float32(1)).astype(tensor.dtype), "wrong")
    expected.write_bytes(wrong.SerializeToString())
    done = _run_hooks(pre_commit, project, env)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "0 passed, 1 failed" in done.stdout


def test_hook_manifest_runs_verify_without_file_names():
    """The hook a repository's `rev:` installs (``pre-commit try-repo`` of this checkout is a
    step of ``.ci/run``: it builds the native core)."""
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (the test extra)")
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "padconv-verify"
    assert hook["entry"].startswith("padconv verify")
    assert hook["language"] == "python" and hook["pass_filenames"] is False
