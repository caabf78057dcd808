"""A CLI run of pad or conv plans its call exactly once, whatever the engine or the extras.

A profiling hook (``sys.setprofile`` and ``threading.setprofile``) counts the calls entering
the code of the public planners ``plan_pad`` and ``plan_conv``, however their callers look
them up.  The kernels plan the tiles of the out-of-core engines through their own private
planner, which is not counted: the count is the call's planning.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from padconv_cli.kernels.conv_plan import plan_conv
from padconv_cli.kernels.pad_plan import plan_pad

PLANNERS = {plan_pad.__code__: "plan_pad", plan_conv.__code__: "plan_conv"}


class PlanCounter:
    """Counts entries into the planners' code objects, in every thread."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _hook(self, frame, event, arg):
        if event == "call":
            name = PLANNERS.get(frame.f_code)
            if name is not None:
                with self._lock:
                    self.calls[name] += 1

    def __enter__(self) -> PlanCounter:
        sys.setprofile(self._hook)
        threading.setprofile(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    rng = np.random.default_rng(16)
    np.save(tmp_path / "d.npy", rng.standard_normal((6, 40)).astype(np.float32))
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 2, 12, 12)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    pad_node = helper.make_node("Pad", ["data", "pads"], ["output"], mode="edge")
    pad_graph = helper.make_graph(
        [pad_node], "p", [helper.make_tensor_value_info("data", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)],
        [helper.make_tensor("pads", TensorProto.INT64, [4], [1, 2, 1, 2])],
    )
    onnx.save(helper.make_model(pad_graph, opset_imports=[helper.make_opsetid("", 18)]),
              tmp_path / "pad.onnx")
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    conv_node = helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1])
    conv_graph = helper.make_graph(
        [conv_node], "c", [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [helper.make_tensor("W", TensorProto.FLOAT, w.shape, w.ravel().tolist())],
    )
    onnx.save(helper.make_model(conv_graph, opset_imports=[helper.make_opsetid("", 11)]),
              tmp_path / "conv.onnx")
    return tmp_path


PAD = ["pad", "d.npy", "--pads", "1", "2", "1", "2"]
CONV = ["conv", "x.npy", "w.npy", "--pads", "1", "1", "1", "1"]
RUNS = {
    "memory": ["-o", "y.npy", "--engine", "memory"],
    "tiled": ["-o", "y.npy", "--engine", "tiled", "--memory-limit", "64K", "-q"],
    "auto_tiled": ["-o", "y.npy", "--memory-limit", "4K", "-q"],
    "auto_memory": ["-o", "y.npy"],
    "explain": ["--explain"],
    "explain_json": ["--explain", "--json"],
    "emit_onnx": ["-o", "y.npy", "--emit-onnx", "m.onnx"],
    "check": ["-o", "y.npy", "--check"],
    "pb_output": ["-o", "y.pb"],
}


def _count(run_cli, folder: Path, monkeypatch, args: list[str]) -> Counter[str]:
    monkeypatch.chdir(folder)
    with PlanCounter() as counter:
        result = run_cli(*args)
    assert result.exit_code == 0, result.stderr
    return counter.calls


@pytest.mark.parametrize("run", sorted(RUNS))
def test_pad_plans_once(run_cli, files, monkeypatch, run):
    assert _count(run_cli, files, monkeypatch, PAD + RUNS[run]) == Counter(plan_pad=1)


@pytest.mark.parametrize("run", sorted(RUNS))
def test_conv_plans_once(run_cli, files, monkeypatch, run):
    assert _count(run_cli, files, monkeypatch, CONV + RUNS[run]) == Counter(plan_conv=1)


@pytest.mark.parametrize("extra", [[], ["--explain"], ["--check"], ["--emit-onnx", "m.onnx"]])
def test_from_model_plans_once(run_cli, files, monkeypatch, extra):
    pad_args = ["pad", "d.npy", "--from-model", "pad.onnx", "-o", "y.npy", *extra]
    assert _count(run_cli, files, monkeypatch, pad_args) == Counter(plan_pad=1)
    conv_args = ["conv", "x.npy", "--from-model", "conv.onnx", "-o", "y.npy", *extra]
    assert _count(run_cli, files, monkeypatch, conv_args) == Counter(plan_conv=1)


def test_tiled_results_equal_the_in_memory_ones(run_cli, files, monkeypatch):
    """The plan handed to the tiled engine is the call's: same bits as in memory."""
    monkeypatch.chdir(files)
    for command in (PAD, CONV):
        assert run_cli(*command, "-o", "m.npy", "--engine", "memory").exit_code == 0
        assert run_cli(*command, *RUNS["tiled"][2:], "-o", "t.npy").exit_code == 0
        assert np.load(files / "t.npy").tobytes() == np.load(files / "m.npy").tobytes()


def test_dask_plans_once(run_cli, files, monkeypatch):
    pytest.importorskip("dask.array", reason="the dask engine needs padconv[dask]")
    pytest.importorskip("distributed", reason="the dask engine needs padconv[dask]")
    pytest.importorskip("zarr", reason="the dask engine needs padconv[dask]")
    args = PAD + ["-o", "y.zarr", "-q"]
    assert _count(run_cli, files, monkeypatch, args) == Counter(plan_pad=1)
    args = CONV + ["-o", "c.zarr", "-q"]
    assert _count(run_cli, files, monkeypatch, args) == Counter(plan_conv=1)
