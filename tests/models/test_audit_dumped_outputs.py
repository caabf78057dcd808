"""``audit MODEL --outputs FILE|DIR`` judges another runtime's own dumped tensors: every
Pad/Conv node recomputed from that runtime's inputs for it, the first node outside its bound
named; nothing is run."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from audit_models import YOLO_NAMES, exported_model
from polygraphy_files import FIXTURES, polygraphy_command

from padconv_cli.audit.dumped import file_key

needs_polygraphy = pytest.mark.skipif(polygraphy_command() is None,
                                      reason="polygraphy is not installed")


def dump_every_tensor(model_path, folder, x):
    """What a runtime dumping every tensor writes: onnxruntime's values of all of them."""
    import onnxruntime

    model = onnx.load(model_path)
    names = [out for node in model.graph.node for out in node.output]
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    folder.mkdir()
    np.save(folder / "x.npy", x)
    for name, value in zip(names, session.run(None, {"x": x}), strict=True):
        np.save(folder / f"{file_key(name)}.npy", value)
    return folder


@pytest.fixture
def dumped(tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    return path, dump_every_tensor(path, tmp_path / "dump", x)


def test_polygraphy_results_of_every_tensor_are_judged(run_cli):
    result = run_cli("audit", str(FIXTURES / "pad_conv.onnx"), str(FIXTURES / "inputs.json"),
                     "--outputs", str(FIXTURES / "outputs.json"))
    assert result.exit_code == 0, result.stderr
    assert "every judged node is within the bound (2 of 2 judged)" in result.stdout
    assert "2 nodes padconv implements: 2 ok (onnxrt-runner-N0" in result.stdout


def test_a_folder_dump_within_the_bound_passes(run_cli, dumped):
    path, folder = dumped
    result = run_cli("audit", path, "--outputs", str(folder), "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["counts"] == {"ok": 7}


def test_the_first_node_to_leave_the_bound_is_named(run_cli, dumped):
    path, folder = dumped
    third = folder / f"{file_key(YOLO_NAMES[2])}_output_0.npy"
    value = np.load(third)
    value[0, 1, 5, 5] += 0.01  # that runtime's Conv is off by much more than its sums allow
    np.save(third, value)
    result = run_cli("audit", path, "--outputs", str(folder), env={"COLUMNS": "120"})
    assert result.exit_code == 1, result.stderr
    assert f"note: first node outside the bound: {YOLO_NAMES[2]}" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("/model.22/")]
    statuses = [row.split()[-1] for row in rows]
    assert statuses == ["ok", "ok", "OUTSIDE", "ok", "ok", "ok", "ok"], result.stdout
    assert "right: padconv" in result.stdout


def test_nodes_not_dumped_are_said_and_nothing_judged_is_a_bad_input(run_cli, dumped):
    path, folder = dumped
    for file in folder.glob("*cv3*"):
        file.unlink()
    partial = run_cli("audit", path, "--outputs", str(folder), env={"COLUMNS": "120"})
    assert partial.exit_code == 0, partial.stderr
    assert partial.stdout.count("not dumped") >= 3 and "3 ok" in partial.stdout
    for file in folder.glob("*conv_Conv*"):
        file.unlink()
    nothing = run_cli("audit", path, "--outputs", str(folder))
    assert nothing.exit_code == 2 and nothing.stderr.count("\n") == 1
    assert "holds no Pad/Conv node's output" in nothing.stderr


def test_several_runners_need_one_named(run_cli):
    result = run_cli("audit", str(FIXTURES / "pad_conv.onnx"),
                     "--outputs", str(FIXTURES / "two_runners.json"))
    assert result.exit_code == 2
    assert "onnxrt-runner-N0, trt-runner-N0" in result.stderr and ":RUNNER" in result.stderr


def test_runtime_and_dims_do_not_go_with_outputs(run_cli):
    result = run_cli("audit", str(FIXTURES / "pad_conv.onnx"), "--outputs",
                     str(FIXTURES / "outputs.json"), "--runtime", "onnx.reference")
    assert result.exit_code == 2 and "--outputs judges tensors" in result.stderr


@needs_polygraphy
def test_what_polygraphy_dumps_now_is_judged(run_cli, tmp_path):
    import subprocess

    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    subprocess.run([*polygraphy_command(), "run", path, "--onnxrt", "--onnx-outputs", "mark",
                    "all", "--save-inputs", "in.json", "--save-outputs", "out.json"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=300)
    result = run_cli("audit", path, str(tmp_path / "in.json"),
                     "--outputs", str(tmp_path / "out.json"), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["counts"] == {"ok": 7}


@needs_polygraphy
def test_polygraphy_iteration_folders_are_read(run_cli, tmp_path):
    import subprocess

    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    subprocess.run([*polygraphy_command(), "run", path, "--onnxrt", "--onnx-outputs", "mark",
                    "all", "--save-inputs", "inputs", "--save-outputs", "outputs"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=300)
    result = run_cli("audit", path, str(tmp_path / "inputs"),
                     "--outputs", str(tmp_path / "outputs"), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["counts"] == {"ok": 7}
