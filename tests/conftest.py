"""Shared fixtures: a CLI runner that goes through padconv's own error mapping."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
import pytest
from click.testing import CliRunner

from padconv_cli.cli.main import cli

# click 8.1 mixes stderr into stdout unless told not to; click 8.2 removed the option (always
# separate)
SEPARATE_STDERR = (
    {"mix_stderr": False}
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters
    else {}
)


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


@pytest.fixture
def run_cli():
    """Run ``padconv ARGS`` in-process; returns exit code, stdout (text and bytes) and stderr."""

    def run(*args: str, input: bytes | str | None = None, env: dict | None = None) -> CliResult:
        runner = CliRunner(**SEPARATE_STDERR)
        result = runner.invoke(cli, list(args), input=input, env=env, catch_exceptions=False)
        return CliResult(result.exit_code, result.stdout, result.stderr, result.stdout_bytes)

    return run


@pytest.fixture
def conv_allocations(monkeypatch) -> list[int]:
    """The bytes each native Conv call of the test allocated, in call order (the native
    module's own count, read after every ``native.conv_into`` and every ConvTranspose
    ``phase_convs`` job)."""
    from padconv_cli.kernels import conv_transpose, native

    asked: list[int] = []

    def observing(run):
        def observed(*args, **kwargs):
            result = run(*args, **kwargs)
            asked.append(native.extension().last_conv_bytes())
            return result
        return observed

    monkeypatch.setattr(native, "conv_into", observing(native.conv_into))
    monkeypatch.setattr(conv_transpose, "phase_convs", observing(conv_transpose.phase_convs))
    return asked


@pytest.fixture
def unsupported_dir(tmp_path):
    """An ONNX backend-test case whose model computes Pad then Relu (unsupported by verify)."""
    import onnx
    from onnx import helper, numpy_helper

    folder = tmp_path / "test_pad_then_relu"
    (folder / "test_data_set_0").mkdir(parents=True)
    nodes = [
        helper.make_node("Pad", ["x"], ["p"], pads=[0, 1, 0, 1]),
        helper.make_node("Relu", ["p"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 2)])
    onnx.save(model, str(folder / "model.onnx"))
    for name, array in (("input_0", np.ones((2, 2))), ("output_0", np.ones((2, 4)))):
        tensor = numpy_helper.from_array(array.astype(np.float32), name)
        (folder / "test_data_set_0" / f"{name}.pb").write_bytes(tensor.SerializeToString())
    return folder
