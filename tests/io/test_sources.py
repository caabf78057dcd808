"""Sources beyond .npy: tensors a model stores (``model.onnx:NAME``), Zarr stores, and the JSON
files polygraphy writes, read wherever a tensor is read."""

from __future__ import annotations

import base64
import builtins
import io
import json

import exported_models as em
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from polygraphy_files import (
    FIXTURES,
    pad_conv_model,
    polygraphy_command,
    run_polygraphy,
    write_two_runner_results,
)

from padconv_cli import read_tensor
from padconv_cli.errors import InputError
from padconv_cli.tensor_sources import read_named_tensor
from padconv_cli.tensorio import classify_source

# ``model.onnx:NAME``: a tensor the model stores, wherever a tensor is accepted.


ODD_NAMES = ("conv1.weight", "/features/0/Conv:weight", "onnx::Conv_7", "a.onnx:b")


def _model_with_odd_names(path):
    """Initializers whose names hold ':' and '/', a Constant, and a subgraph initializer."""
    arrays = {name: np.full((2,), i, np.float32) for i, name in enumerate(ODD_NAMES)}
    inner = helper.make_graph(
        [helper.make_node("Identity", ["inner_w"], ["z"])], "then", [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.arange(3, dtype=np.float32), "inner_w")],
    )
    nodes = [
        helper.make_node("Constant", [], ["const_out"], value_ints=[4, 5, 6]),
        helper.make_node("If", ["cond"], ["z"], then_branch=inner, else_branch=inner),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in arrays.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return em.save(model, path), arrays


@pytest.mark.parametrize("name", ODD_NAMES)
def test_initializers_by_name_even_with_colons_and_slashes(tmp_path, name):
    path, arrays = _model_with_odd_names(tmp_path / "m.onnx")
    assert classify_source(f"{path}:{name}").kind == "model"
    stored_name, array = read_named_tensor(f"{path}:{name}")
    assert stored_name == name
    np.testing.assert_array_equal(array, arrays[name])


def test_constant_outputs_subgraph_initializers_and_folded_values(tmp_path):
    path, _ = _model_with_odd_names(tmp_path / "m.onnx")
    np.testing.assert_array_equal(read_tensor(f"{path}:const_out"), [4, 5, 6])
    np.testing.assert_array_equal(read_tensor(f"{path}:inner_w"), [0, 1, 2])
    block = em.save(em.resnet_block(), tmp_path / "r.onnx")
    np.testing.assert_array_equal(read_tensor(f"{block}:onnx::Conv_b1"),
                                  read_tensor(f"{block}:conv1.bias"))


def test_a_wrong_name_lists_close_matches(tmp_path):
    path, _ = _model_with_odd_names(tmp_path / "m.onnx")
    with pytest.raises(InputError) as error:
        read_tensor(f"{path}:conv1.wieght")
    message = str(error.value)
    assert message.startswith(f"{path}: no stored tensor 'conv1.wieght'")
    assert "did you mean 'conv1.weight'" in message and "\n" not in message


def test_a_model_without_a_name_says_how_to_name_a_tensor(tmp_path):
    path, _ = _model_with_odd_names(tmp_path / "m.onnx")
    with pytest.raises(InputError, match=r"a model, not a tensor; .*m.onnx:NAME"):
        read_tensor(path)


def test_a_missing_model_is_no_such_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_tensor(f"{tmp_path}/absent.onnx:w")


def test_external_data_is_read_under_the_model_rules(tmp_path):
    model = em.resnet_block()
    expected = numpy_helper.to_array(model.graph.initializer[0])
    path = em.save(model, tmp_path / "m.onnx", external=True)
    np.testing.assert_array_equal(read_tensor(f"{path}:conv1.weight"), expected)
    (tmp_path / "weights.bin").write_bytes(b"short")
    with pytest.raises(InputError):
        read_tensor(f"{path}:conv1.weight")


def _npy(result) -> np.ndarray:
    assert result.exit_code == 0, result.stderr
    return np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)


def test_conv_show_and_compare_take_model_tensors(run_cli, tmp_path):
    model = em.resnet_block()
    path = em.save(model, tmp_path / "m.onnx")
    x = em.weights((1, 3, 10, 10), seed=9)
    np.save(tmp_path / "x.npy", x)
    by_name = _npy(run_cli("conv", str(tmp_path / "x.npy"), f"{path}:conv1.weight",
                           f"{path}:conv1.bias", "--pads", "1", "1", "1", "1", "-o", "-"))
    by_node = _npy(run_cli("conv", str(tmp_path / "x.npy"), "--from-model", path, "--node",
                           "/conv1/Conv", "-o", "-"))
    np.testing.assert_array_equal(by_name, by_node)
    shown = run_cli("show", f"{path}:conv1.bias")
    assert shown.exit_code == 0 and "float32[8]" in shown.stdout
    same = run_cli("compare", f"{path}:conv1.bias", f"{path}:onnx::Conv_b1")
    assert same.exit_code == 0 and same.stdout.startswith("PASS")
    differ = run_cli("compare", f"{path}:conv1.bias", f"{path}:conv2.bias")
    assert differ.exit_code == 1
    wrong = run_cli("show", f"{path}:conv9.bias")
    assert wrong.exit_code == 2 and wrong.stderr.count("\n") == 1 and "conv1.bias" in wrong.stderr


# Files polygraphy itself writes (``polygraphy run --save-inputs/--save-outputs``: results as
# ``RunResults`` of ``IterationResult``, arrays wrapped in ``LazyArray``) are read, and one array
# is picked as ``FILE.json:NAME``. Committed files made by polygraphy run everywhere; fresh ones
# are made with polygraphy where it is installed.


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


# Polygraphy's JSON tensor files (--save-inputs / --save-outputs) are read by show, compare
# and every command, without pickles: arrays are base64 .npy bytes.


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


# A Zarr store is read wherever a tensor is read (show, compare, pad, conv), or the error says
# which extra provides zarr.


@pytest.fixture
def store(tmp_path):
    zarr = pytest.importorskip("zarr", reason="zarr is an optional extra (padconv[dask])")
    path = tmp_path / "out.zarr"
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    array = zarr.open_array(str(path), mode="w", shape=values.shape, chunks=(2, 2),
                            dtype=values.dtype)
    array[...] = values
    return path, values


def test_show_and_compare_read_zarr(run_cli, store, tmp_path):
    path, values = store
    shown = run_cli("show", str(path))
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.startswith(f"{path}: float32[3, 4] (12 elements, 48 bytes)")
    np.save(tmp_path / "same.npy", values)
    compared = run_cli("compare", str(path), str(tmp_path / "same.npy"))
    assert compared.exit_code == 0, compared.stdout + compared.stderr
    other = values.copy()
    other[2, 3] += 1
    np.save(tmp_path / "other.npy", other)
    assert run_cli("compare", str(path), str(tmp_path / "other.npy")).exit_code == 1


def test_pad_reads_zarr_in_memory(run_cli, store, tmp_path):
    path, values = store
    out = tmp_path / "y.npy"
    result = run_cli("pad", str(path), "--pads", "0", "1", "0", "1", "--engine", "memory",
                     "-o", str(out))
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), np.pad(values, ((0, 0), (1, 1))))


def test_without_zarr_the_error_names_the_extra(run_cli, store, monkeypatch):
    path, _ = store
    real_import = builtins.__import__

    def without_zarr(name, *args, **kwargs):
        if name == "zarr" or name.startswith("zarr."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_zarr)
    result = run_cli("show", str(path))
    assert result.exit_code == 2
    assert result.stderr == (
        f"padconv show: error: {path}: is a Zarr store; reading it needs zarr: "
        "pip install 'padconv[dask]' (zarr 3 needs Python >= 3.11)\n"
    )
