"""Polygraphy's own tensor files, made by polygraphy: the committed ones under
``io/data/polygraphy`` were written by :func:`write_polygraphy_files` (polygraphy 0.53.6,
onnxruntime), and the tests make fresh ones with it where polygraphy is installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).parent / "io" / "data" / "polygraphy"


def pad_conv_model(path: Path) -> Path:
    """A model Pad (pads 1 on the spatial axes) then Conv (2 filters 3x3), input x[1,1,4,4]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.random.RandomState(0).randn(2, 1, 3, 3).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["padded"], name="pad0"),
         helper.make_node("Conv", ["padded", "w"], ["y"], name="conv0")],
        "pad_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [numpy_helper.from_array(weights, "w"),
         numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def polygraphy_command() -> list[str] | None:
    """How to run polygraphy's command line here, or None when it is not installed."""
    try:
        import polygraphy  # noqa: F401
    except ImportError:
        return None
    script = Path(sys.executable).with_name("polygraphy")
    return [str(script)] if script.exists() else shutil.which("polygraphy") and ["polygraphy"]


def run_polygraphy(folder: Path, *args: str) -> None:
    """``polygraphy run pad_conv.onnx --onnxrt ARGS`` in ``folder`` (the model made there)."""
    model = pad_conv_model(folder / "pad_conv.onnx")
    subprocess.run([*polygraphy_command(), "run", str(model), "--onnxrt", *args], cwd=folder,
                   check=True, capture_output=True, timeout=300)


def write_two_runner_results(path: Path) -> Path:
    """A results file of two runners (as ``--onnxrt --trt`` writes), through polygraphy's API."""
    from polygraphy.comparator import IterationResult, RunResults

    first = np.arange(4, dtype=np.float16).reshape(2, 2)
    results = RunResults([
        ("onnxrt-runner-N0", [IterationResult({"y": first}, runtime=0.1,
                                              runner_name="onnxrt-runner-N0")]),
        ("trt-runner-N0", [IterationResult({"y": first + 1}, runtime=0.1,
                                           runner_name="trt-runner-N0")]),
    ])
    results.save(str(path))
    return path


def write_polygraphy_files(folder: Path) -> None:
    """Every file the tests read: inputs and every intermediate output of one iteration, two
    iterations' inputs and outputs, and a two-runner results file."""
    run_polygraphy(folder, "--save-inputs", "inputs.json", "--save-outputs", "outputs.json",
                   "--onnx-outputs", "mark", "all")
    run_polygraphy(folder, "--iterations", "2", "--save-inputs", "inputs_2iter.json",
                   "--save-outputs", "outputs_2iter.json")
    write_two_runner_results(folder / "two_runners.json")


if __name__ == "__main__":
    write_polygraphy_files(FIXTURES)
