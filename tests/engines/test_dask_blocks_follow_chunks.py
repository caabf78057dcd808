"""Blocks of the dask engine follow the input's chunk grid: each Zarr chunk is read once, the
output chunks are the input's, and the halo comes from small crops of the neighbours."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

import dask.array as da  # noqa: E402

from padconv_cli.engines.dask_engine import dask_conv, dask_pad  # noqa: E402
from padconv_cli.engines.dask_io import open_block_input  # noqa: E402
from padconv_cli.engines.dask_ops import aligned_split, conv_dask  # noqa: E402
from padconv_cli.kernels.conv import conv  # noqa: E402
from padconv_cli.kernels.pad import pad  # noqa: E402

RNG = np.random.default_rng(6)


def zarr_input(path, data, chunks):
    store = zarr.create_array(str(path), shape=data.shape, chunks=chunks, dtype=data.dtype)
    store[...] = data
    return str(path)


@pytest.mark.parametrize(
    "attrs", [{"pads": [1, 1, 1, 1]}, {"pads": [2, 0, 1, 3], "dilations": [2, 1]}, {}]
)
def test_conv_from_zarr_is_exact_and_its_output_chunks_are_the_inputs(tmp_path, attrs):
    data = RNG.standard_normal((1, 1, 70, 50)).astype(np.float32)
    w = RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    source = zarr_input(tmp_path / "x.zarr", data, (1, 1, 16, 16))
    result = dask_conv(source, w, None, str(tmp_path / "y.zarr"), memory_limit=2**24, **attrs)
    y = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")
    assert result.exact and y[...].tobytes() == conv(data, w, **attrs).tobytes()
    assert y.chunks[2:] == (16, 16)


def test_each_chunk_is_read_once_and_blocks_get_crops_of_their_neighbours(tmp_path):
    data = RNG.standard_normal((1, 1, 64, 64)).astype(np.float32)
    w = RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    x = open_block_input(zarr_input(tmp_path / "x.zarr", data, (1, 1, 16, 16))).chunked(2**24)
    y, exact = conv_dask(x, w, None, block_bytes=2**24, pads=[1, 1, 1, 1])
    graph = dict(y.__dask_graph__())
    reads = [key for key in graph if isinstance(key, tuple) and "padconv-read" in key[0]]
    crops = [key for key in graph if isinstance(key, tuple) and "padconv-crop" in key[0]]
    assert len(reads) == 16 and y.numblocks == (1, 1, 4, 4)
    assert crops  # halos travel as crops, not as whole chunks
    assert y.compute(scheduler="sync").tobytes() == conv(data, w, pads=[1, 1, 1, 1]).tobytes()


def test_pad_from_zarr_follows_the_chunks_and_is_exact(tmp_path):
    data = RNG.integers(0, 100, size=(3, 40, 30)).astype(np.int32)
    source = zarr_input(tmp_path / "x.zarr", data, (1, 16, 16))
    pads = [0, 3, 2, 1, 4, 5]
    dask_pad(source, str(tmp_path / "y.zarr"), pads, mode="reflect", memory_limit=2**24)
    y = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")
    assert y[...].tobytes() == pad(data, pads, mode="reflect").tobytes()
    assert y.chunks == (1, 16, 16)


def test_a_dask_array_input_with_small_blocks_is_still_exact():
    data = RNG.standard_normal((2, 1, 45, 33)).astype(np.float32)
    w = RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    x = da.from_array(data, chunks=(1, 1, 10, 7))
    y, exact = conv_dask(x, w, None, block_bytes=20_000, pads=[1, 1, 1, 1], strides=[2, 1])
    assert exact and y.npartitions > 4
    got = y.compute(scheduler="sync")
    assert got.tobytes() == conv(data, w, pads=[1, 1, 1, 1], strides=[2, 1]).tobytes()


@pytest.mark.parametrize(
    "length, chunk, step",
    [(10, 4, 8), (3, 8, 3), (5, 16, 4), (7, 7, 7), (100, 0, 100)],
)
def test_aligned_split_never_exceeds_the_tile_and_divides_or_multiplies_the_chunk(
    length, chunk, step
):
    ranges = [(start, min(start + length, 40)) for start in range(0, 40, length)]
    got = aligned_split(ranges, chunk)
    assert got[0] == (0, min(step, 40)) and got[-1][1] == 40
