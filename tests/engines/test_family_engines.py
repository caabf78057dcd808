"""The tiled engine runs ConvInteger and QLinearConv bit-identical to the in-memory result,
whatever the tiles (tiles reading only padding included); the engines that do not run an
operator of the family refuse in one line naming the engines that do."""

from __future__ import annotations

import numpy as np
import pytest

from padconv_cli.pipeline import Request, run

RNG = np.random.default_rng(21)


@pytest.fixture
def integer_files(tmp_path):
    arrays = {
        "x": RNG.integers(0, 256, (2, 8, 23, 19)).astype(np.uint8),
        "w": RNG.integers(-128, 128, (6, 4, 3, 2)).astype(np.int8),
        "xz": np.array(100, np.uint8), "wz": np.array([1, 2, 3, -4, 5, 6], np.int8),
        "xs": np.array(0.02, np.float32), "ys": np.array(0.37, np.float32),
        "ws": np.array([0.01, 0.02, 0.03, 0.011, 0.5, 0.003], np.float32),
        "yz": np.array(-3, np.int8), "b": RNG.integers(-1000, 1000, 6).astype(np.int32),
    }
    paths = {}
    for name, array in arrays.items():
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], array)
    return paths


def _inputs(files, op):
    names = ("x", "w", "xz", "wz") if op == "ConvInteger" else (
        "x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b")
    return tuple(files[n] for n in names)


@pytest.mark.parametrize("op", ["ConvInteger", "QLinearConv"])
@pytest.mark.parametrize("attributes", [
    {"pads": [5, 5, 5, 5], "group": 2},
    {"pads": [1, 0, 2, 1], "strides": [3, 2], "dilations": [2, 1], "group": 2},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2], "group": 2},
])
def test_tiled_engine_is_bit_identical_to_memory(tmp_path, integer_files, op, attributes):
    inputs = _inputs(integer_files, op)
    expected = run(Request(op, inputs, attributes), write=False).result
    target = str(tmp_path / "y.npy")
    outcome = run(Request(op, inputs, attributes, engine="tiled", output=target,
                          memory_limit=120_000))
    assert outcome.tiled.tiles > 1
    got = np.load(target)
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected)


def test_auto_engine_takes_tiled_over_the_memory_limit(tmp_path, integer_files):
    inputs = _inputs(integer_files, "QLinearConv")
    expected = run(Request("QLinearConv", inputs, {"group": 2}), write=False).result
    target = str(tmp_path / "y.npy")
    outcome = run(Request("QLinearConv", inputs, {"group": 2}, output=target,
                          memory_limit=150_000))
    assert outcome.engine == "tiled"
    assert np.array_equal(np.load(target), expected)


@pytest.mark.parametrize("command, engine, runs", [
    ("conv-integer", "dask", "--engine memory or --engine tiled"),
    ("conv-transpose", "tiled", "--engine memory"),
    ("conv-transpose", "dask", "--engine memory"),
])
def test_engines_that_do_not_run_an_operator_refuse(run_cli, tmp_path, integer_files, command,
                                                    engine, runs):
    if command == "conv-transpose":
        np.save(tmp_path / "fx.npy", np.ones((1, 2, 4, 4), np.float32))
        np.save(tmp_path / "fw.npy", np.ones((2, 3, 3, 3), np.float32))
        arguments = [str(tmp_path / "fx.npy"), str(tmp_path / "fw.npy")]
    else:
        arguments = [integer_files["x"], integer_files["w"], "--group", "2"]
    out = tmp_path / "y.npy"
    result = run_cli(command, *arguments, "--engine", engine, "-o", str(out))
    assert result.exit_code == 2
    assert runs in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()
