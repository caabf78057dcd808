"""The library words its messages in parameter names (``memory_limit``); only the CLI layer
renders them as flags (``--memory-limit``), so Python callers never read a flag they did not
type, and the command line always does."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np

PACKAGE = Path(__file__).resolve().parents[2] / "padconv_cli"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
FOREIGN = ("dask worker --memory-limit",)  # another program's flag, quoted as its command


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


COMMAND_DECLARATIONS = ("Attribute", "Command")  # an operator's flags and command texts
COMMAND_LINE_BUILDERS = ("sample_arguments", "notes")  # an operator's words for the CLI


def _command_words(tree: ast.AST) -> set[int]:
    """The strings an operator module declares for its command: flag help, the command's
    texts and examples, a case's command line, remarks on the flags given."""
    ids = set()
    for node in ast.walk(tree):
        declared = isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
            COMMAND_DECLARATIONS)
        built = isinstance(node, ast.FunctionDef) and node.name in COMMAND_LINE_BUILDERS
        if declared or built:
            ids.update(id(inner) for inner in ast.walk(node))
    return ids


def _flag_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstring_nodes(tree)
    if path.parent.name == "ops":
        docstrings |= _command_words(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings:
                continue
            text = node.value
            for foreign in FOREIGN:
                text = text.replace(foreign, "")
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno}: {m}" for m in FLAG.findall(text)]
    return found


def test_no_flag_names_outside_the_cli_layer():
    offenders = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if "cli" not in path.relative_to(PACKAGE).parts[:1]
        for hit in _flag_literals(path)
    ]
    assert offenders == []


def test_the_scan_sees_a_flag():
    """The check itself can fail: a flag in a message string is found, a docstring is not."""
    source = '"""Use --pads."""\nraise ValueError(f"give --memory-limit {n}")\n'
    tree = ast.parse(source)
    docstrings = _docstring_nodes(tree)
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
             and isinstance(n.value, str) and id(n) not in docstrings]
    assert [m for t in texts for m in FLAG.findall(t)] == ["--memory-limit"]


def test_tiled_memory_limit_message_names_the_flag_on_the_command_line(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((64, 64), np.float32))
    result = run_cli("pad", str(tmp_path / "x.npy"), "--pads", "1", "1", "1", "1", "--engine",
                     "tiled", "--memory-limit", "64", "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("padconv pad: error: --memory-limit 64 B is too small")
    assert line.endswith("or more") and "; give --memory-limit " in line
    assert "memory_limit" not in line


def test_library_message_names_the_parameter(tmp_path):
    import pytest

    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.outofcore.pad_tiles import tiled_pad

    np.save(tmp_path / "x.npy", np.zeros((64, 64), np.float32))
    with pytest.raises(OutputTooLargeError, match=r"^memory_limit 64 B is too small") as error:
        tiled_pad(str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), [1, 1, 1, 1],
                  memory_limit=64)
    assert error.value.param == "memory_limit" and "--" not in str(error.value)


def test_pad_input_computed_at_run_time_names_the_flag(run_cli, tmp_path):
    import onnx
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "p"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("p", onnx.TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
              str(tmp_path / "m.onnx"))
    result = run_cli("pad", "[1.0, 2.0]", "--from-model", str(tmp_path / "m.onnx"))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.endswith("not stored in the model; give --pads"), line


def test_engine_and_output_both_render_as_flags(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(4))
    result = run_cli("pad", str(tmp_path / "x.npy"), "--pads", "1,1", "--engine", "tiled",
                     "--format", "npy")
    assert result.exit_code == 2
    assert result.stderr == (
        "padconv pad: error: stdout: not a .npy file; --engine tiled writes a .npy file, "
        "give --output FILE.npy\n"
    )


def test_audit_symbolic_dim_names_the_flag(run_cli, tmp_path):
    import exported_models as em

    path = em.save(em.symbolic_batch_model(), tmp_path / "m.onnx")
    result = run_cli("audit", str(path), "--dim", "batch=100000000000")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "; give smaller sizes with --dim NAME=VALUE" in line
