"""audit's table at 80 columns tells every node apart (YOLOv8's names differ only in their
middle), gives each shortened label whole on the next line, and widens on wider terminals."""

from __future__ import annotations

from audit_models import YOLO_NAMES, exported_model
from pty_terminal import run_in_terminal

from padconv_cli.audit.report import distinct_labels

PLAIN = {"NO_COLOR": "1"}


def rows(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("NODE "))
    return [line for line in lines[start + 1:] if line and not line.startswith(" ")][:-1]


def test_labels_are_distinct_and_whole_below_at_80_columns(tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    run = run_in_terminal("audit", path, "-q", columns=80, env=PLAIN)
    assert run.exit_code == 0, run.text
    assert all(len(line) <= 80 for line in run.lines), run.text
    labels = [row[:20] for row in rows(run.lines)]
    assert len(labels) == 7 and len(set(labels)) == 7, run.text
    for name in YOLO_NAMES:
        assert f"  node {name}" in run.lines


def test_a_wider_terminal_shows_whole_labels(tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    for run in (run_in_terminal("audit", path, "-q", columns=200, env=PLAIN),
                run_in_terminal("audit", path, "-q", columns=80, env={**PLAIN, "COLUMNS": "200"})):
        assert run.exit_code == 0, run.text
        starts = {row.split(" ")[0] for row in rows(run.lines)}
        assert set(YOLO_NAMES) <= starts, run.text
        assert not any(line.startswith("  node ") for line in run.lines)


def test_labels_alike_after_shortening_are_told_apart():
    names = [*YOLO_NAMES, "/model.4/m.0/cv1/conv/Conv", "/model.6/m.0/cv1/conv/Conv", "a", "a"]
    short = distinct_labels(names, 20)
    assert all(len(text) <= 20 for text in short)
    assert len(set(short)) == len(short)
    assert short[0] == "~cv2.0/cv2.0.0~/Conv"
