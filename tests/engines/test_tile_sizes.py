"""The tiler's cost model: tiles as large as the budget allows, whatever the Pad mode."""

from __future__ import annotations

import numpy as np
import pytest

from padconv_cli.kernels.pad import pad, plan_pad
from padconv_cli.outofcore.pad_tiles import plan_pad_tiles, tiled_pad
from padconv_cli.outofcore.tiling import tile_count

PADS = [0, 0, 2, 2, 0, 0, 2, 2]


@pytest.mark.parametrize("mode", ["wrap", "reflect", "edge"])
def test_wrap_and_reflect_tiles_are_as_large_as_constant_ones(mode):
    shape, budget = (1, 1, 4096, 1024), 4 * 2**20
    constant = plan_pad_tiles(plan_pad(shape, PADS, None, "constant"), 4, budget)
    other = plan_pad_tiles(plan_pad(shape, PADS, None, mode), 4, budget)
    assert tile_count(other) <= tile_count(constant) <= 25


def test_wrap_in_few_tiles_is_bit_identical(tmp_path):
    data = np.random.default_rng(7).standard_normal((1, 1, 300, 200)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    result = tiled_pad(
        str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), PADS, mode="wrap", memory_limit=200_000
    )
    assert 1 < result.tiles <= 12
    expected = pad(data, PADS, mode="wrap")
    assert np.load(tmp_path / "y.npy").tobytes() == expected.tobytes()
