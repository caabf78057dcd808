"""``padconv show MODEL.onnx`` lists the nodes compactly (op, name, key attributes, shapes) and
summarises the initializers, readable at 80 columns; --initializers describes each in full."""

from __future__ import annotations

import exported_models as em
from audit_models import YOLO_NAMES, exported_model
from pty_terminal import run_in_terminal

PLAIN = {"env": {"NO_COLOR": "1"}}


def test_nodes_are_listed_one_line_each_with_their_shapes(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    result = run_cli("show", path, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{path}: opset 17, 20 nodes (6 Conv, 6 Sigmoid")
    assert "  input   x float32[1, 3, 16, 16]" in lines
    pad = [line for line in lines if "/model.22/Pad" in line]
    assert pad and "reflect pads=[0,0,1,1,0,0,1,1]" in pad[0]
    assert pad[0].endswith("[1,4,16,16]->[1,4,18,18]")
    first_conv = [line for line in lines if YOLO_NAMES[0] + " " in line]
    assert "k=3x3 p=1" in first_conv[0] and first_conv[0].endswith("[1,3,16,16]->[1,4,16,16]")
    assert "13 initializers (3.4 KiB): w0 float32[4,3,3,3], b0" in result.stdout


def test_at_80_columns_every_node_name_is_whole(tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    run = run_in_terminal("show", path, columns=80, **PLAIN)
    assert run.exit_code == 0, run.text
    assert all(len(line) <= 80 for line in run.lines), run.text
    for name in YOLO_NAMES:
        assert any(f" {name} " in line or line.endswith(f" {name}") for line in run.lines)
    assert "[-1,3,?,?]->[-1,4,?,?]" in run.text
    assert len(run.lines) <= 30


def test_a_resnet_lists_nodes_not_initializers(run_cli, tmp_path):
    path = em.save(em.resnet18_like(width=64, size=224), tmp_path / "r.onnx")
    result = run_cli("show", path, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert result.stdout.count(" Conv ") + result.stdout.count(" Conv\n") >= 20
    assert "min at" not in result.stdout  # no per-initializer statistics
    full = run_cli("show", path, "--initializers", "--edge-items", "0")
    assert full.stdout.count("  min at ") >= 40


def test_one_initializer_is_still_described(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("show", f"{path}:pads")
    assert result.exit_code == 0 and "int64[8]" in result.stdout
