"""The tiled and dask engines run ConvTranspose, ConvInteger and QLinearConv bit-identical to
the in-memory result, whatever the tiles or blocks (tiles reading only padding, or no input at
all, included), from a .npy file or a chunked Zarr store."""

from __future__ import annotations

import itertools

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
                          memory_limit=70_000))
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


def _zarr_copy(path, folder):
    zarr = pytest.importorskip("zarr")
    array = np.load(path)
    chunks = (1, array.shape[1], *(max(1, n // 3) for n in array.shape[2:]))
    store = zarr.open(str(folder / "x.zarr"), mode="w", shape=array.shape, chunks=chunks,
                      dtype=array.dtype)
    store[...] = array
    return str(folder / "x.zarr")


@pytest.mark.parametrize("op, attributes", [
    ("ConvInteger", {"pads": [5, 5, 5, 5], "group": 2}),
    ("QLinearConv", {"pads": [1, 0, 2, 1], "strides": [3, 2], "dilations": [2, 1],
                     "group": 2}),
])
@pytest.mark.parametrize("source", ["npy", "zarr"])
def test_dask_engine_is_bit_identical_for_the_integer_operators(tmp_path, integer_files, op,
                                                                attributes, source,
                                                                monkeypatch):
    pytest.importorskip("dask")
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", "2")  # the working memory, so the tile count
    inputs = _inputs(integer_files, op)
    expected = run(Request(op, inputs, attributes), write=False).result
    if source == "zarr":
        inputs = (_zarr_copy(inputs[0], tmp_path), *inputs[1:])
    target = str(tmp_path / "y.npy")
    outcome = run(Request(op, inputs, attributes, engine="dask", output=target,
                          memory_limit=100_000))
    assert outcome.tiled.tiles > 1
    got = np.load(target)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


TRANSPOSE_CASES = [
    {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 2},
    {"strides": [3, 2], "dilations": [2, 3], "output_padding": [1, 2], "group": 2},
    {"strides": [2, 2], "output_shape": [44, 33], "group": 2},  # extends past the inputs
    {"strides": [3, 3], "auto_pad": "SAME_LOWER", "group": 2},
    {"strides": [1, 1], "pads": [3, 3, 3, 2], "group": 2},
    {"strides": [2, 3], "pads": [4, 0, 0, 5]},
    {"strides": [4, 3]},  # kernel == stride: the whole call stacks its phases, tiles may not
    {"strides": [2, 3], "pads": [1, 0, 1, 0], "group": 2},  # phases interleaved in one pass
    {"strides": [2, 3], "pads": [1, 0, 1, 0]},  # ... runs of phases stacked in one Conv
]


@pytest.mark.parametrize("attributes", TRANSPOSE_CASES)
@pytest.mark.parametrize("rows, columns", [(3, 5), (7, 2)])  # rows and columns of tiles
def test_conv_transpose_tiles_of_any_shape_are_bit_identical(attributes, rows, columns):
    from padconv_cli.kernels.conv_transpose import conv_transpose, conv_transpose_planned
    from padconv_cli.kernels.conv_transpose_plan import plan_conv_transpose
    from padconv_cli.outofcore.conv_transpose_tiles import tile_plan
    from padconv_cli.outofcore.tiling import split_range

    x = RNG.standard_normal((2, 6, 17, 13)).astype(np.float32)
    w = RNG.standard_normal((6, 4 // attributes.get("group", 1) * 2, 4, 3)).astype(np.float32)
    m = w.shape[1] * attributes.get("group", 1)
    b = RNG.standard_normal(m).astype(np.float32)
    expected = conv_transpose(x, w, b, **attributes)
    plan = plan_conv_transpose(x.shape, w.shape, b.shape, **attributes)
    got = np.full(expected.shape, np.nan, np.float32)
    height, width = plan.output_shape[2:]
    for images in split_range(2, 1):
        for r in split_range(height, rows):
            for c in split_range(width, columns):
                box, piece = tile_plan(plan, images, (r, c))
                where = (slice(*images), slice(None), slice(*r), slice(*c))
                if box is None:
                    got[where] = b.reshape(-1, 1, 1)
                else:
                    got[where] = conv_transpose_planned(piece, x[box], w, b)
    assert np.array_equal(got, expected)


def test_conv_transpose_tiled_engine_writes_the_memory_result(tmp_path):
    x = RNG.standard_normal((2, 6, 17, 13)).astype(np.float32)
    w = RNG.standard_normal((6, 4, 4, 3)).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    inputs = []
    for name, array in (("x", x), ("w", w), ("b", b)):
        np.save(tmp_path / f"{name}.npy", array)
        inputs.append(str(tmp_path / f"{name}.npy"))
    attributes = {"strides": [2, 2], "output_shape": [40, 30], "group": 2}
    expected = run(Request("ConvTranspose", tuple(inputs), attributes), write=False).result
    target = str(tmp_path / "y.npy")
    outcome = run(Request("ConvTranspose", tuple(inputs), attributes, engine="tiled",
                          output=target, memory_limit=100_000))
    assert outcome.tiled.tiles > 1
    assert np.array_equal(np.load(target), expected)


@pytest.mark.parametrize("source", ["npy", "zarr"])
def test_conv_transpose_dask_engine_writes_the_memory_result(tmp_path, source, monkeypatch):
    pytest.importorskip("dask")
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", "2")  # the working memory, so the tile count
    x = RNG.standard_normal((2, 6, 17, 13)).astype(np.float32)
    w = RNG.standard_normal((6, 4, 4, 3)).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    inputs = []
    for name, array in (("x", x), ("w", w), ("b", b)):
        np.save(tmp_path / f"{name}.npy", array)
        inputs.append(str(tmp_path / f"{name}.npy"))
    attributes = {"strides": [3, 3], "auto_pad": "SAME_LOWER", "group": 2}
    expected = run(Request("ConvTranspose", tuple(inputs), attributes), write=False).result
    if source == "zarr":
        inputs[0] = _zarr_copy(inputs[0], tmp_path)
    target = str(tmp_path / "y.npy")
    outcome = run(Request("ConvTranspose", tuple(inputs), attributes, engine="dask",
                          output=target, memory_limit=300_000))
    assert outcome.tiled.tiles > 1
    assert np.array_equal(np.load(target), expected)


TILE_COST_CASES = [  # (X shape, W shape, attributes)
    *(((1, 6, 17, 13), (6, 4 // a.get("group", 1) * 2, 4, 3), a) for a in TRANSPOSE_CASES),
    ((1, 6, 4, 11), (6, 2, 1, 5), {"strides": [2, 1], "dilations": [2, 2],
                                   "pads": [1, 2, 3, 2], "group": 2}),
    ((1, 64, 9, 7), (64, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
]


@pytest.mark.parametrize("x_shape, w_shape, attributes", TILE_COST_CASES)
@pytest.mark.parametrize("rows, columns", [(3, 5), (7, 2), (1, 13)])  # tile lengths
def test_conv_transpose_tile_cost_covers_every_tile_of_its_shape(x_shape, w_shape, attributes,
                                                                 rows, columns,
                                                                 conv_allocations):
    """Wherever a tile lies, its window, output and working memory (its own plan's figure,
    which covers what its native Conv calls asked for) stay within the tiler's cost."""
    import math

    from padconv_cli.kernels.conv_transpose import conv_transpose_planned, working_bytes
    from padconv_cli.kernels.conv_transpose_plan import plan_conv_transpose
    from padconv_cli.outofcore.conv_transpose_tiles import tile_cost, tile_plan
    from padconv_cli.outofcore.tiling import split_range

    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    plan = plan_conv_transpose(x.shape, w.shape, None, **attributes)
    cost = tile_cost((1, plan.output_shape[1], rows, columns), plan=plan, itemsize=4)
    asked = conv_allocations
    height, width = plan.output_shape[2:]
    for r, c in itertools.product(split_range(height, rows), split_range(width, columns)):
        box, piece = tile_plan(plan, (0, 1), (r, c))
        asked.clear()
        if box is not None:
            conv_transpose_planned(piece, x[box], w)
        figure = working_bytes(piece, np.dtype(np.float32))
        assert max(asked, default=0) <= figure
        held = 2 * (math.prod(piece.x_shape) + math.prod(piece.output_shape)) * 4
        assert held + figure <= cost
