"""A Zarr chunk the client's store holds is never read as the fill value by a block task that
cannot find it; a chunk the store never held still reads as the fill value (Zarr's rule)."""

from __future__ import annotations

import os

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

from padconv_cli.engines.dask_io import open_block_input  # noqa: E402
from padconv_cli.errors import InputError  # noqa: E402


def run_task(task: tuple) -> np.ndarray:
    function, *arguments = task
    return function(*arguments)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "x.zarr"
    array = zarr.create_array(str(path), shape=(8, 8), chunks=(4, 4), dtype="f4", fill_value=7)
    array[:4, :] = np.arange(32, dtype=np.float32).reshape(4, 8)  # chunks (0, 0) and (0, 1)
    return path


def test_a_stored_chunk_that_vanished_is_an_error_naming_the_chunk(store):
    source = open_block_input(str(store))
    task = source.fetch_task((slice(2, 6), slice(0, 8)))
    run_task(task)  # this process confirms the store once
    os.remove(store / "c" / "0" / "1")
    with pytest.raises(InputError, match=r"x\.zarr: chunk c/0/1 is stored in the client's store"):
        run_task(task)


def test_chunks_never_stored_read_as_the_fill_value(store):
    source = open_block_input(str(store))
    got = run_task(source.fetch_task((slice(2, 6), slice(0, 8))))
    assert np.array_equal(got[:2], np.arange(16, 32, dtype=np.float32).reshape(2, 8))
    assert np.array_equal(got[2:], np.full((2, 8), 7, np.float32))


def test_a_store_changed_after_it_was_opened_is_refused(store):
    source = open_block_input(str(store))
    task = source.fetch_task((slice(0, 4), slice(0, 4)))
    zarr.open_array(str(store), mode="r+")[4:, 4:] = 1  # one more stored chunk
    with pytest.raises(InputError, match="not the client's file: stored chunks is 3"):
        run_task(task)
