"""The tiled engine follows Pad's shape rule when a crop is longer than its axis."""

from __future__ import annotations

import numpy as np
import pytest

from padconv_cli.kernels.pad import pad


@pytest.mark.parametrize(
    "pads",
    [[0, -4, 0, 2], [0, 5, 0, -6], [-3, 0, 1, 0], [1, 0, -3, 0], [0, -1, 0, -2]],
)
def test_tiled_engine_matches_the_kernel(run_cli, tmp_path, pads):
    data = np.arange(30, dtype=np.float32).reshape(3, 10)[:, :3].copy()
    np.save(tmp_path / "x.npy", data)
    out = tmp_path / "y.npy"
    pads_text = ",".join(str(p) for p in pads)
    result = run_cli("pad", str(tmp_path / "x.npy"), f"--pads={pads_text}", "--constant-value",
                     "7", "--engine", "tiled", "--memory-limit", "64K", "--quiet", "-o",
                     str(out))
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), pad(data, pads, np.float32(7)))
