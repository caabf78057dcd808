"""Polygraphy's JSON tensor files (--save-inputs / --save-outputs) are read by show, compare
and every command, without pickles: arrays are base64 .npy bytes."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest


def encoded(array: np.ndarray) -> dict:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return {"array": base64.b64encode(buffer.getvalue()).decode(), "polygraphy_class": "ndarray"}


@pytest.fixture
def inputs_file(tmp_path):
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps([{"x": encoded(np.arange(6, dtype=np.float32).reshape(2, 3))}]))
    return path


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "outputs.json"
    results = {"lst": [["onnxrt-runner-N0", [{"y": encoded(np.ones((2, 2), np.float16))}]],
                       ["trt-runner-N0", [{"y": encoded(np.zeros((2, 2), np.float16))}]]],
               "polygraphy_class": "RunResults"}
    path.write_text(json.dumps(results))
    return path


def test_show_lists_every_array(run_cli, inputs_file, results_file):
    result = run_cli("show", str(inputs_file), str(results_file), "--edge-items", "0")
    assert result.exit_code == 0, result.stderr
    headers = [line for line in result.stdout.splitlines() if not line.startswith(" ")]
    assert headers == [
        f"{inputs_file}:x: float32[2, 3] (6 elements, 24 bytes)",
        f"{results_file}:onnxrt-runner-N0/y: float16[2, 2] (4 elements, 8 bytes)",
        f"{results_file}:trt-runner-N0/y: float16[2, 2] (4 elements, 8 bytes)",
    ]


def test_compare_and_pad_read_one_array(run_cli, inputs_file, results_file, tmp_path):
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    assert run_cli("compare", str(inputs_file), str(tmp_path / "x.npy")).exit_code == 0
    differ = run_cli("compare", f"{results_file}:onnxrt-runner-N0/y",
                     f"{results_file}:trt-runner-N0/y")
    assert differ.exit_code == 1
    out = tmp_path / "y.npy"
    assert run_cli("pad", f"{inputs_file}:x", "--pads", "0", "1", "0", "0",
                   "-o", str(out)).exit_code == 0
    assert np.load(out).shape == (2, 4)


def test_several_arrays_need_a_name(run_cli, results_file):
    result = run_cli("compare", str(results_file), "[1.0]")
    assert result.exit_code == 2
    assert "holds 2 arrays" in result.stderr and "onnxrt-runner-N0/y" in result.stderr


def test_a_pickled_array_is_refused(run_cli, tmp_path):
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    payload = {"x": {"array": base64.b64encode(buffer.getvalue()).decode(),
                     "polygraphy_class": "ndarray"}}
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(payload))
    result = run_cli("show", str(path))
    assert result.exit_code == 2
    assert "pickle" in result.stderr and len(result.stderr.splitlines()) == 1
