"""Conv compute-path internals: the im2col patch view, and BLAS threading around the workers."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from padconv_cli.kernels import conv_paths, workers
from padconv_cli.kernels.conv import plan_conv


def patches_by_slicing(plan, xp, starts, lengths):
    """Reference for patch_view: one strided slice of xp per kernel offset and image."""
    groups, per_group = xp.shape[1:3]
    result = np.empty((groups, per_group, *plan.kernel_shape, *lengths), dtype=xp.dtype)
    for offset in conv_paths.kernel_offsets(plan.kernel_shape):
        window = conv_paths.tap_slices(plan, offset, starts[1:], lengths[1:])
        for index in range(lengths[0]):
            result[(slice(None), slice(None), *offset, index)] = xp[(starts[0] + index, ...,
                                                                     *window)]
    return result


@st.composite
def conv_geometries(draw):
    rank = draw(st.integers(1, 3))
    kernel = [draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [draw(st.integers(1, 3)) for _ in range(rank)]
    dilations = [draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [draw(st.integers(0, 2)) for _ in range(2 * rank)]
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    spatial = [draw(st.integers(extent, 9)) for extent in extents]
    group = draw(st.sampled_from([1, 2]))
    channels = group * draw(st.integers(1, 2))
    images = draw(st.integers(1, 3))
    return (images, channels, *spatial), (2 * group, channels // group, *kernel), dict(
        pads=pads, strides=strides, dilations=dilations, group=group
    )


@settings(max_examples=60, deadline=None)
@given(conv_geometries(), st.data())
def test_patch_view_equals_per_offset_slices(geometry, data):
    x_shape, w_shape, attrs = geometry
    plan = plan_conv(x_shape, w_shape, **attrs)
    x = np.arange(math.prod(x_shape), dtype=np.float32).reshape(x_shape)
    xp = conv_paths.padded_input(x, plan, np.dtype(np.float32)).reshape(
        x_shape[0], plan.group, x_shape[1] // plan.group, *conv_paths.padded_shape(plan)
    )
    dims = (plan.output_shape[0], *plan.output_shape[2:])
    budget = data.draw(st.integers(1, math.prod(dims)))
    first_axis = data.draw(st.integers(0, 1))
    axis, step = conv_paths.block_axis_and_step(dims, budget, first_axis)
    for starts, lengths in conv_paths.output_blocks(dims, axis, step):
        view = conv_paths.patch_view(plan, xp, starts, lengths)
        np.testing.assert_array_equal(view, patches_by_slicing(plan, xp, starts, lengths))


@settings(max_examples=60, deadline=None)
@given(conv_geometries(), st.integers(0, 5), st.integers(1, 3))
def test_padded_input_equals_np_pad_on_a_dirty_scratch_buffer(geometry, slack, part_count):
    x_shape, w_shape, attrs = geometry
    attrs = {**attrs, "pads": [p + 1 for p in attrs["pads"]]}  # always something to pad
    plan = plan_conv(x_shape, w_shape, **attrs)
    x = np.random.default_rng(0).uniform(-1, 1, x_shape).astype(np.float32)
    workers.scratch(10_000, np.dtype(np.float32), "padded")[:] = np.nan  # stale contents
    step = -(-x_shape[1] // part_count)
    parts = [(slice(None), slice(c, c + step)) for c in range(0, x_shape[1], step)]
    got = conv_paths.padded_input(x, plan, np.dtype(np.float32), slack, parts)
    rank = len(x_shape) - 2
    width = [(0, 0), (0, 0)] + [(plan.pads[i], plan.pads[i + rank]) for i in range(rank)]
    expected = np.pad(x, width).reshape(*x_shape[:2], -1)
    expected = np.concatenate([expected, np.zeros((*x_shape[:2], slack), np.float32)], axis=-1)
    np.testing.assert_array_equal(got, expected)


def blas_threads():
    controls = workers.openblas_thread_controls()
    if controls is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS whose thread count can be set")
    return controls


def test_single_threaded_blas_sets_one_thread_and_restores_the_count():
    get_threads, set_threads = blas_threads()
    before = get_threads()
    set_threads(2)
    try:
        with workers.single_threaded_blas() as ours:
            assert ours is (workers.worker_count() > 1)
            assert get_threads() == (1 if ours else 2)
            with workers.single_threaded_blas():
                assert get_threads() == (1 if ours else 2)
            assert get_threads() == (1 if ours else 2)
        assert get_threads() == 2
    finally:
        set_threads(before)


def test_concurrent_users_restore_the_count_only_when_the_last_leaves():
    get_threads, set_threads = blas_threads()
    if workers.worker_count() == 1:
        pytest.skip("one core: BLAS threading is left alone")
    before = get_threads()
    set_threads(2)
    entered, release = threading.Event(), threading.Event()

    def other_user():
        with workers.single_threaded_blas():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other_user)
    try:
        thread.start()
        assert entered.wait(10)
        with workers.single_threaded_blas():
            pass
        assert get_threads() == 1  # the other user is still inside
        release.set()
        thread.join(10)
        assert get_threads() == 2
    finally:
        release.set()
        thread.join(10)
        set_threads(before)


@pytest.mark.parametrize("task_count", [1, 3])
def test_gemm_tasks_run_with_single_threaded_blas(task_count):
    get_threads, set_threads = blas_threads()
    if workers.worker_count() == 1:
        pytest.skip("one core: BLAS threading is left alone")
    before = get_threads()
    set_threads(2)
    seen = []
    try:
        conv_paths.run_gemm_tasks([lambda: seen.append(get_threads())] * task_count)
        assert seen == [1] * task_count  # a single task too: BLAS's bits follow its threads
        assert get_threads() == 2
    finally:
        set_threads(before)


@pytest.mark.parametrize(
    "shape, expected",
    [
        ((1, 4, 8, 8), [(slice(None), slice(None))]),  # small: one part, no hand-over
        ((1, 64, 64, 64), [(slice(None), slice(0, 32)), (slice(None), slice(32, None))]),
        ((2, 64, 64, 64), [(slice(0, 1), slice(None)), (slice(1, 2), slice(None))]),
    ],
)
def test_padding_parts_split_only_large_inputs(shape, expected):
    assert conv_paths.padding_parts(np.zeros(shape, np.float32)) == expected
