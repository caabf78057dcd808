"""Shell completion (click's ``_PADCONV_COMPLETE``): the scripts, and --node names from the
model given with --from-model."""

from __future__ import annotations

import os
import shutil
import subprocess

import onnx
import pytest
from click.shell_completion import ShellComplete
from onnx import TensorProto, helper

from padconv_cli.cli.main import cli


@pytest.fixture
def model(tmp_path):
    nodes = [
        helper.make_node("Pad", ["x", "p"], ["a"], name="pad_in"),
        helper.make_node("Conv", ["a", "w"], ["b"], name="conv_1"),
        helper.make_node("Conv", ["b", "w"], ["c"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("x", "p", "w")],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    return str(path)


def _complete(args, incomplete):
    completer = ShellComplete(cli, {}, "padconv", "_PADCONV_COMPLETE")
    return [(item.type, item.value) for item in completer.get_completions(args, incomplete)]


@pytest.mark.parametrize(
    ("command", "incomplete", "expected"),
    [
        ("conv", "", ["conv_1", "Conv#1"]),
        ("conv", "Co", ["Conv#1"]),
        ("pad", "", ["pad_in"]),
    ],
)
def test_node_names_come_from_the_model(model, command, incomplete, expected):
    args = [command, "x.npy", "--from-model", model, "--node"]
    assert [value for _, value in _complete(args, incomplete)] == expected


def test_node_completion_is_silent_for_a_broken_model(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"garbage")
    args = ["pad", "--from-model", str(tmp_path / "bad.onnx"), "--node"]
    assert _complete(args, "") == []


def test_commands_options_and_files_complete():
    assert ("plain", "show") in _complete([], "sh")
    assert ("plain", "compare") in _complete([], "c")
    assert ("plain", "--emit-onnx") in _complete(["pad", "x.npy"], "--em")
    assert _complete(["show"], "sam") == [("file", "sam")]


@pytest.mark.skipif(shutil.which("padconv") is None, reason="the padconv script is not installed")
@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o"), ("zsh", "#compdef"),
                                              ("fish", "complete --no-files")])
def test_completion_scripts(shell, marker):
    env = {**os.environ, "_PADCONV_COMPLETE": f"{shell}_source"}
    result = subprocess.run(["padconv"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert marker in result.stdout and "_PADCONV_COMPLETE" in result.stdout
