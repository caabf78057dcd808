"""Files polygraphy itself writes (``polygraphy run --save-inputs/--save-outputs``: results as
``RunResults`` of ``IterationResult``, arrays wrapped in ``LazyArray``) are read, and one array
is picked as ``FILE.json:NAME``. Committed files made by polygraphy run everywhere; fresh ones
are made with polygraphy where it is installed."""

from __future__ import annotations

import numpy as np
import pytest
from polygraphy_files import (
    FIXTURES,
    pad_conv_model,
    polygraphy_command,
    run_polygraphy,
    write_two_runner_results,
)

from padconv_cli import read_tensor

needs_polygraphy = pytest.mark.skipif(polygraphy_command() is None,
                                      reason="polygraphy is not installed")


def headers(result) -> list[str]:
    return [line.split(": ", 1)[0] for line in result.stdout.splitlines()
            if line and not line.startswith(" ")]


def test_show_lists_the_arrays_of_polygraphy_results(run_cli):
    result = run_cli("show", str(FIXTURES / "outputs.json"), "--edge-items", "0")
    assert result.exit_code == 0, result.stderr
    assert headers(result) == [f"{FIXTURES / 'outputs.json'}:padded",
                               f"{FIXTURES / 'outputs.json'}:y"]


def test_an_intermediate_output_is_the_pad_of_the_saved_input():
    x = read_tensor(str(FIXTURES / "inputs.json"))
    padded = read_tensor(f"{FIXTURES / 'outputs.json'}:padded")
    np.testing.assert_array_equal(padded, np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)]))


def test_pad_reads_one_array_of_a_results_file(run_cli, tmp_path):
    out = tmp_path / "again.npy"
    result = run_cli("pad", str(FIXTURES / "inputs.json"), "--pads", "0", "0", "1", "1",
                     "0", "0", "1", "1", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    compared = run_cli("compare", f"{FIXTURES / 'outputs.json'}:padded", str(out))
    assert compared.exit_code == 0, compared.stdout + compared.stderr


def test_iterations_are_named_by_their_index(run_cli):
    result = run_cli("show", str(FIXTURES / "outputs_2iter.json"), "--edge-items", "0")
    assert result.exit_code == 0, result.stderr
    path = FIXTURES / "outputs_2iter.json"
    assert headers(result) == [f"{path}:0/y", f"{path}:1/y"]
    assert read_tensor(f"{FIXTURES / 'inputs_2iter.json'}:1/x").shape == (1, 1, 4, 4)


def test_runners_are_named_when_several(run_cli):
    path = FIXTURES / "two_runners.json"
    differ = run_cli("compare", f"{path}:onnxrt-runner-N0/y", f"{path}:trt-runner-N0/y")
    assert differ.exit_code == 1
    unnamed = run_cli("show", str(path), "--edge-items", "0")
    assert headers(unnamed) == [f"{path}:onnxrt-runner-N0/y", f"{path}:trt-runner-N0/y"]


def test_a_file_of_several_arrays_asks_for_a_name(run_cli):
    result = run_cli("compare", str(FIXTURES / "outputs.json"), "[1.0]")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "holds 2 arrays" in result.stderr and "padded, y" in result.stderr


def test_a_torch_tensor_is_refused_unread(run_cli, tmp_path):
    path = tmp_path / "torch.json"
    path.write_text('{"y": {"values": {"tensor": "UEsDBA==", "polygraphy_class": "Tensor"},'
                    ' "polygraphy_class": "LazyArray"}}')
    result = run_cli("show", str(path))
    assert result.exit_code == 2
    assert "torch" in result.stderr and "pickle" in result.stderr


@needs_polygraphy
def test_files_polygraphy_writes_now_are_read(tmp_path):
    run_polygraphy(tmp_path, "--save-inputs", "in.json", "--save-outputs", "out.json",
                   "--onnx-outputs", "mark", "all")
    from polygraphy.comparator import RunResults
    from polygraphy.json import load_json

    saved = RunResults.load(str(tmp_path / "out.json"))
    [(_, [iteration])] = list(saved.items())
    for name in ("padded", "y"):
        np.testing.assert_array_equal(read_tensor(f"{tmp_path / 'out.json'}:{name}"),
                                      iteration[name])
    [feed] = load_json(str(tmp_path / "in.json"))
    np.testing.assert_array_equal(read_tensor(str(tmp_path / "in.json")), feed["x"])


@needs_polygraphy
def test_results_polygraphy_writes_through_its_api_are_read(tmp_path):
    path = write_two_runner_results(tmp_path / "results.json")
    assert read_tensor(f"{path}:trt-runner-N0/y").tolist() == [[1, 2], [3, 4]]


def test_the_fixture_model_is_the_one_committed(tmp_path):
    import onnx

    made = onnx.load(str(pad_conv_model(tmp_path / "m.onnx")))
    assert made.graph == onnx.load(str(FIXTURES / "pad_conv.onnx")).graph
