"""``audit --save DIR`` writes every checked node as an ONNX backend-test case folder, which
``padconv verify DIR`` replays and any runtime can run."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from audit_models import YOLO_NAMES, exported_model
from onnx import numpy_helper


@pytest.fixture
def saved(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("audit", path, "-q", "--save", str(tmp_path / "cases"))
    assert result.exit_code == 0, result.stderr
    return tmp_path / "cases", result


def test_every_checked_node_is_a_case_verify_replays(run_cli, saved):
    folder, result = saved
    assert result.stdout.splitlines()[-1] == (
        f"saved 7 case folders in {folder} (padconv verify {folder} replays them)")
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 7 and "test_model.22_Pad" in names
    assert "test_model.22_cv3.0_cv3.0.0_conv_Conv" in names
    replay = run_cli("verify", str(folder), "-q")
    assert replay.exit_code == 0, replay.stdout
    assert replay.stdout.strip() == "7 passed, 0 failed"


def test_a_saved_case_is_a_valid_single_node_model(saved):
    import onnxruntime

    case = saved[0] / "test_model.22_Pad"
    model = onnx.load(str(case / "model.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert [node.op_type for node in model.graph.node] == ["Pad"]
    data = case / "test_data_set_0"
    feeds = {}
    for index, value in enumerate(model.graph.input):
        feeds[value.name] = numpy_helper.to_array(onnx.load_tensor(str(data / f"input_{index}.pb")))
    expected = numpy_helper.to_array(onnx.load_tensor(str(data / "output_0.pb")))
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected)


def test_json_lists_the_saved_folders(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", names=YOLO_NAMES[:1], with_pad=False)
    result = run_cli("audit", path, "-q", "--json", "--save", str(tmp_path / "cases"))
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["saved"] == [str(tmp_path / "cases" / "test_model.22_cv2.0_cv2.0.0_conv_Conv")]


def test_saving_again_replaces_the_cases(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", names=YOLO_NAMES[:1], with_pad=False)
    for seed in ("1", "2"):
        assert run_cli("audit", path, "-q", "--seed", seed, "--save",
                       str(tmp_path / "cases")).exit_code == 0
    assert len(list((tmp_path / "cases").iterdir())) == 1
