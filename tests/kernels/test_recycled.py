"""Recycled result memory: reused only once nothing refers to the earlier result any more."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import padconv_cli
from padconv_cli.kernels import recycled

SMALL_LIMIT = 4096  # bytes: recycle arrays this large in these tests, to keep them quick


@pytest.fixture(autouse=True)
def small_recycling(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(recycled, "RECYCLE_MIN_BYTES", SMALL_LIMIT)
    recycled.release()
    yield
    recycled.release()


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_small_arrays_are_plain_allocations() -> None:
    array = recycled.new_array((SMALL_LIMIT // 8 - 1,), np.dtype(np.float64))
    assert array.flags.owndata
    del array
    assert recycled.kept_bytes() == 0


@pytest.mark.parametrize("dtype", ["float32", ">f8", "complex128", "int8", "bool", "<U3"])
@pytest.mark.parametrize("shape", [(4096,), (16, 32, 8), (3, 4, 5, 7, 11)])
def test_large_arrays_look_like_np_empty(shape: tuple[int, ...], dtype: str) -> None:
    array = recycled.new_array(shape, np.dtype(dtype))
    assert array.shape == shape
    assert array.dtype == np.dtype(dtype)
    assert array.flags.c_contiguous and array.flags.writeable and array.flags.aligned
    assert not array.flags.owndata


def test_memory_comes_back_when_the_result_is_dropped() -> None:
    first = recycled.new_array((64, 64), np.dtype(np.float32))
    first_address = address(first)
    del first
    assert recycled.kept_bytes() == 64 * 64 * 4
    second = recycled.new_array((32, 128), np.dtype(np.int32))  # same byte size
    assert address(second) == first_address
    assert recycled.kept_bytes() == 0


KEEPERS = {
    "slice": lambda a: a[1:],
    "transpose": lambda a: a.T,
    "reshape": lambda a: a.reshape(-1),
    "dtype view": lambda a: a.view(np.int32),
    "subclass view": lambda a: a.view(np.ma.MaskedArray),
    "memoryview": memoryview,
    "array of a memoryview": lambda a: np.asarray(memoryview(a)),
    "view of a view": lambda a: a[::2][1:].T,
}


@pytest.mark.parametrize("keeper", KEEPERS.values(), ids=KEEPERS.keys())
def test_memory_still_referenced_is_never_handed_out(keeper) -> None:
    first = recycled.new_array((64, 64), np.dtype(np.float32))
    first[...] = 7.0
    kept = keeper(first)
    del first
    gc.collect()
    assert recycled.kept_bytes() == 0
    second = recycled.new_array((64, 64), np.dtype(np.float32))
    second[...] = -1.0
    assert (np.asarray(kept).view(np.float32) == 7.0).all()
    del kept
    gc.collect()
    assert recycled.kept_bytes() == 64 * 64 * 4


def test_a_request_of_another_size_frees_the_kept_buffers() -> None:
    dropped = recycled.new_array((64, 64), np.dtype(np.float32))
    del dropped
    assert recycled.kept_bytes() > 0
    other = recycled.new_array((65, 64), np.dtype(np.float32))
    assert recycled.kept_bytes() == 0
    assert other.shape == (65, 64)


def test_kept_bytes_stay_within_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recycled, "RECYCLE_KEEP_BYTES", 3 * 16384)
    arrays = [recycled.new_array((4096,), np.dtype(np.float32)) for _ in range(5)]
    arrays.append(recycled.new_array((4 * 16384,), np.dtype(np.uint8)))  # above the limit
    del arrays
    assert recycled.kept_bytes() == 3 * 16384


def test_object_arrays_are_never_recycled() -> None:
    array = recycled.new_array((SMALL_LIMIT,), np.dtype(object))
    assert array.flags.owndata
    assert array[0] is None


def test_concurrent_results_never_share_memory() -> None:
    failures: list[str] = []

    def churn(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(300):
            size = int(rng.choice([1024, 2048]))
            held = [recycled.new_array((size,), np.dtype(np.float32)) for _ in range(3)]
            for index, array in enumerate(held):
                array[...] = seed * 10 + index
            for index, array in enumerate(held):
                if not (array == seed * 10 + index).all():
                    failures.append(f"thread {seed}: array {index} was overwritten")

    threads = [threading.Thread(target=churn, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_into_recycled_memory_matches_numpy(mode: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 20, 30)).astype(np.float32)
    expected = np.pad(x, ((0, 0), (2, 3), (1, 4)), mode=mode)  # numpy's names are ONNX's
    for _ in range(3):  # the second and third results reuse the first's memory
        result = padconv_cli.pad(x, [0, 2, 1, 0, 3, 4], mode=mode)
        np.testing.assert_array_equal(result, expected)
        assert not result.flags.owndata
        result[...] = np.nan  # stale values must not survive into the next result
        del result


def test_negative_dimensions_are_refused_like_np_empty() -> None:
    with pytest.raises(ValueError, match="negative"):
        recycled.new_array((-1, -(2**40)), np.dtype(np.float32))


def test_a_numpy_that_unwraps_the_memoryview_gets_plain_arrays(monkeypatch) -> None:
    # if flat's base were the raw array, views would skip flat and free the buffer too early
    def unwrapping_frombuffer(buffer, dtype):
        return np.asarray(buffer.obj).view(dtype)

    monkeypatch.setattr(recycled.np, "frombuffer", unwrapping_frombuffer)
    array = recycled.new_array((64, 64), np.dtype(np.float32))
    assert array.flags.owndata
    del array
    assert recycled.kept_bytes() == 0
