"""im2col over whole padded rows: stride-1 column copies along contiguous windows, then a crop."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_conv_kernel import (
    ORACLE_CASES,
    assert_conv_within_bound,
    check_nan_and_inf_stay_inside_their_receptive_field,
    random_inputs,
)

from padconv_cli.kernels import conv_paths
from padconv_cli.kernels.conv import conv, plan_conv

WIDE_CANDIDATES = sorted(
    name
    for name, (x_shape, w_shape, attrs) in ORACLE_CASES.items()
    if len(x_shape) >= 4 and all(s == 1 for s in attrs.get("strides", [1]))
)


@pytest.fixture
def im2col_everywhere(monkeypatch):
    """Keep stride-1 convs off the shifted path, so that im2col computes them."""
    monkeypatch.setattr(conv_paths, "SHIFTED_MIN_CHANNELS", 2**30)


def copies_whole_rows(x_shape, w_shape, attrs, itemsize=4):
    plan = plan_conv(x_shape, w_shape, **attrs)
    return (conv_paths.choose_path(plan) is conv_paths.im2col_path
            and conv_paths._im2col_grid(plan, itemsize)[3])


def test_some_oracle_cases_copy_whole_rows(im2col_everywhere):
    wide = [n for n in WIDE_CANDIDATES if copies_whole_rows(*ORACLE_CASES[n])]
    assert len(wide) >= 3, wide


@pytest.mark.parametrize("name", WIDE_CANDIDATES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("workspace", [1024, 64 * 2**20])
def test_whole_row_blocks_match_the_oracle(im2col_everywhere, monkeypatch, name, dtype, workspace):
    monkeypatch.setattr(conv_paths, "WORKSPACE_BYTES", workspace)  # one row per block, or all
    x_shape, w_shape, attrs = ORACLE_CASES[name]
    X, W, B = random_inputs(x_shape, w_shape, dtype)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, **attrs)


@pytest.mark.parametrize("name", WIDE_CANDIDATES)
def test_nan_and_inf_stay_inside_their_receptive_field(im2col_everywhere, name):
    check_nan_and_inf_stay_inside_their_receptive_field(name)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs", "wide"),
    [
        ((1, 8, 32, 32, 32), (16, 8, 3, 3, 3), {"pads": [1] * 6}, True),  # the benchmark's 3-D
        ((1, 8, 20, 24, 24), (16, 4, 3, 3, 3), {"pads": [1] * 6, "group": 2}, True),
        ((1, 16, 40, 40), (32, 16, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, True),
        ((1, 3, 224, 224), (64, 3, 7, 7), {"pads": [3] * 4, "strides": [2, 2]}, False),
        ((4, 16, 1000), (32, 16, 9), {"pads": [4, 4]}, False),  # 1-D: its rows are whole anyway
        ((1, 8, 40, 6), (8, 8, 3, 5), {"pads": [1, 2, 1, 2]}, False),  # rows 10 for 6: too wide
    ],
)
def test_which_convs_copy_whole_rows(x_shape, w_shape, attrs, wide):
    assert copies_whole_rows(x_shape, w_shape, attrs) == wide


@pytest.mark.parametrize(
    ("workspace", "wide"), [(4096, False), (2**20, False), (2 * 2**20, False), (64 * 2**20, True)]
)
def test_whole_row_columns_stay_within_the_workspace(monkeypatch, workspace, wide):
    """The column buffer counts padded rows: whole rows only when they fit the workspace."""
    monkeypatch.setattr(conv_paths, "WORKSPACE_BYTES", workspace)
    plan = plan_conv((1, 8, 32, 32, 32), (16, 8, 3, 3, 3), pads=[1] * 6)
    _, axis, step, got_wide = conv_paths._im2col_grid(plan, 4)
    assert got_wide == wide
    row = math.prod(conv_paths.padded_shape(plan)[1:] if wide else plan.output_shape[3:])
    columns = 8 * 27 * step * (row if axis == 1 else 1) * 4
    assert columns <= workspace


def test_an_image_gets_the_same_bits_alone_as_in_a_batch():
    x_shape, w_shape, attrs = (3, 8, 16, 20, 20), (16, 8, 3, 3, 3), {"pads": [1] * 6}
    assert copies_whole_rows(x_shape, w_shape, attrs)
    X, W, B = random_inputs(x_shape, w_shape, np.float32)
    batch = conv(X, W, B, **attrs)
    alone = conv(X[1:2], W, B, **attrs)
    assert batch[1:2].tobytes() == alone.tobytes()


def test_realistic_size_against_float64():
    x_shape, w_shape, attrs = (1, 8, 32, 32, 32), (16, 8, 3, 3, 3), {"pads": [1] * 6}
    X, W, B = random_inputs(x_shape, w_shape, np.float32)
    assert_conv_within_bound(conv(X, W, B, **attrs), X, W, B, reference=conv, **attrs)
