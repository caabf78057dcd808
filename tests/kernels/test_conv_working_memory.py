"""Conv's working memory: the figure the resource gate and the tiler use
(``kernels.conv.scratch_bytes``) is what the native run itself asks for, never less."""

from __future__ import annotations

import numpy as np
import pytest

from padconv_cli.kernels import conv as conv_kernel
from padconv_cli.kernels import native

# name: (x shape, w shape, group, strides, dilations, pads), chosen to reach each kernel
SHAPES = {
    "depthwise 2-D": ((1, 4, 16, 16), (4, 1, 3, 3), 4, (1, 1), (1, 1), (1, 1, 1, 1)),
    "depthwise strided 1-D": ((2, 3, 40), (3, 1, 5), 3, (2,), (1,), (2, 1)),
    "depthwise 3-D": ((1, 2, 6, 7, 8), (2, 1, 3, 3, 3), 2, (1, 1, 1), (1, 1, 1), (0,) * 6),
    "pointwise": ((2, 16, 8, 8), (32, 16, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0)),
    "plane": ((1, 8, 32, 32), (8, 8, 3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1)),
    # 18 output channels on rows of 100: AVX2 runs them on its 6-row plane tiles
    "plane, 6-row tiles": ((1, 8, 12, 100), (18, 8, 3, 3), 1, (1, 1), (1, 1), (1, 1, 1, 1)),
    "rows (dilated)": ((1, 4, 20, 68), (8, 4, 3, 3), 1, (1, 1), (2, 2), (0, 0, 0, 0)),
    "gemm 1-D": ((1, 6, 52), (4, 6, 3), 1, (1,), (1,), (0, 0)),
    "strided": ((1, 16, 33, 33), (8, 16, 3, 3), 1, (2, 2), (1, 1), (1, 1, 1, 1)),
    "grouped": ((1, 8, 10, 10), (12, 4, 3, 3), 2, (1, 1), (1, 1), (1, 0, 1, 0)),
}


def _plan(name: str) -> conv_kernel.ConvPlan:
    x_shape, w_shape, group, strides, dilations, pads = SHAPES[name]
    return conv_kernel.plan_conv(x_shape, w_shape, None, group=group, strides=strides,
                                 dilations=dilations, pads=pads)


def _run_native(plan: conv_kernel.ConvPlan, dtype: type, threads: int) -> int:
    """Bytes the native run asked for besides X, W, B and Y."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(plan.x_shape).astype(dtype)
    w = rng.standard_normal(plan.w_shape).astype(dtype)
    y = np.empty(plan.output_shape, dtype)
    native.conv_into(x, w, None, y, strides=plan.strides, dilations=plan.dilations,
                     pads_begin=plan.pads_begin, group=plan.group, threads=threads)
    return native.extension().last_conv_bytes()


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_gate_figure_covers_what_the_run_asks_for(name, dtype, threads, monkeypatch):
    plan = _plan(name)
    for isa in native.available_isas():
        monkeypatch.setenv(native.ISA_VARIABLE, isa)
        figure = conv_kernel.scratch_bytes(plan, np.dtype(dtype).itemsize, threads)
        asked = _run_native(plan, dtype, threads)
        assert 0 < asked <= figure
        if threads == 1:  # no helper to wait for: the very same buffers
            assert asked == figure


@pytest.mark.parametrize("name", ["plane", "grouped", "pointwise"])
def test_tile_figure_covers_the_run_of_the_tiles_channels(name):
    plan = _plan(name)
    per_group = plan.w_shape[0] // plan.group
    tile = per_group if plan.group > 1 else plan.w_shape[0] // 2
    groups = max(1, tile // per_group)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((plan.x_shape[0], groups * plan.w_shape[1], *plan.x_shape[2:]))
    w = rng.standard_normal((tile, *plan.w_shape[1:]))
    y = np.empty((plan.output_shape[0], tile, *plan.output_shape[2:]))
    native.conv_into(x, w, None, y, strides=plan.strides, dilations=plan.dilations,
                     pads_begin=plan.pads_begin, group=groups, threads=1)
    assert native.extension().last_conv_bytes() == conv_kernel.scratch_bytes(plan, 8, 1, tile)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gate_figure_covers_the_narrow_runs(dtype, monkeypatch):
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)

    monkeypatch.setenv(native.THREADS_VARIABLE, "1")
    plan = _plan("plane")
    rng = np.random.default_rng(2)
    x = rng.standard_normal(plan.x_shape).astype(dtype)
    w = rng.standard_normal(plan.w_shape).astype(dtype)
    conv_kernel.conv(x, w, pads=plan.pads)
    asked = native.extension().last_conv_bytes()
    assert 0 < asked <= conv_kernel.scratch_bytes(plan, 4, 1)


def test_a_conv_with_nothing_to_sum_allocates_nothing():
    plan = conv_kernel.plan_conv((1, 0, 5), (3, 0, 2), None)
    assert conv_kernel.scratch_bytes(plan, 4, 2) == 0
    assert native.extension().conv_scratch_bytes(
        (1, 0, 5), (3, 0, 2), (1, 3, 4), (1,), (1,), (0,), 1, 2, "generic", 4) == 0


def test_figure_of_a_padded_pointwise_tile_covers_its_run_inside_the_padding(monkeypatch):
    """Tiles of a 1x1 kernel with pads: one inside the padding runs the pointwise kernel (X
    read in place, W's rows shared among the threads), whose buffers the padded plan's would
    not cover."""
    monkeypatch.setenv(native.THREADS_VARIABLE, "3")
    padded = conv_kernel.plan_conv((1, 64, 30, 30), (256, 64, 1, 1), None, pads=(1, 1, 1, 1))
    inside = conv_kernel.plan_conv((1, 64, 32, 32), (256, 64, 1, 1), None)
    assert conv_kernel.scratch_bytes(padded, 4, 3) >= conv_kernel.scratch_bytes(inside, 4, 3)
    assert conv_kernel.scratch_bytes(inside, 4, 3) >= _run_native(inside, np.float32, 3)


# name: (x shape, w shape, ConvTranspose attributes), one for each way the run calls Conv
TRANSPOSE_SHAPES = {
    "kernel == stride": ((1, 16, 8, 8), (16, 8, 2, 2), {"strides": (2, 2)}),
    "k4 s2 p1": ((2, 8, 7, 9), (8, 6, 4, 4), {"strides": (2, 2), "pads": (1, 1, 1, 1)}),
    "1-D k16 s8": ((1, 4, 12), (4, 3, 16), {"strides": (8,), "pads": (4, 4)}),
    "grouped": ((1, 8, 6, 6), (8, 3, 3, 3), {"strides": (2, 2), "group": 2,
                                             "pads": (1, 0, 1, 0)}),
    "grouped k4 s2 p1": ((1, 8, 6, 6), (8, 2, 4, 4), {"strides": (2, 2), "group": 4,
                                                      "pads": (1, 1, 1, 1)}),
    "many input channels": ((1, 4096, 6, 6), (4096, 8, 3, 3), {"pads": (1, 1, 1, 1)}),
    "dilated": ((1, 6, 9, 10), (6, 5, 3, 2), {"strides": (3, 2), "dilations": (2, 3),
                                              "pads": (2, 1, 0, 1)}),
    "pads beyond the kernel": ((1, 3, 9), (3, 2, 3), {"strides": (2,), "pads": (5, 1)}),
}


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name", sorted(TRANSPOSE_SHAPES))
def test_transpose_figure_covers_what_its_conv_calls_ask_for(name, dtype, threads, monkeypatch,
                                                              conv_allocations):
    from padconv_cli.kernels import conv_transpose as ct
    from padconv_cli.kernels.conv_transpose_plan import plan_conv_transpose

    monkeypatch.setenv(native.THREADS_VARIABLE, threads)
    x_shape, w_shape, attributes = TRANSPOSE_SHAPES[name]
    plan = plan_conv_transpose(x_shape, w_shape, None, **attributes)
    rng = np.random.default_rng(3)
    ct.conv_transpose(rng.standard_normal(x_shape).astype(dtype),
                      rng.standard_normal(w_shape).astype(dtype), **attributes)
    assert conv_allocations, "the run made no native Conv call"
    asked = max(conv_allocations)
    core = ct.core_bytes(plan, np.dtype(dtype), int(threads))
    assert asked <= core
    conv_plans = ct.phase_conv_plans(plan, np.dtype(dtype))
    padded_pointwise = any(set(p.kernel_shape) == {1} and any(p.pads) for p in conv_plans)
    if threads == "1" and not padded_pointwise:  # no helper to wait for: the same buffers
        assert asked == core  # (a padded 1x1 plan also counts a tile inside its padding)
    assert ct.working_bytes(plan, np.dtype(dtype)) >= asked
