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


# --- a minimum tile, and a limit that cannot be honoured -----------------------------------


def test_a_big_conv_is_never_cut_into_slivers_a_too_small_limit_is_refused_up_front(tmp_path):
    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.kernels.conv import plan_conv
    from padconv_cli.outofcore.conv_tiles import plan_conv_tiles
    from padconv_cli.outofcore.tiling import MIN_TILE_ELEMENTS

    plan = plan_conv((1, 1, 8192, 8192), (1, 1, 3, 3), None, pads=[1, 1, 1, 1])
    with pytest.raises(OutputTooLargeError, match=r"64\.0 KiB is too small.*needs at least"):
        plan_conv_tiles(plan, 4, 64 * 2**10)
    images, channels, rows, columns = plan_conv_tiles(plan, 4, 2 * 2**20).axis_ranges
    first_tile = [images[0][1], channels[0].m1 - channels[0].m0, rows[0][1], columns[0][1]]
    assert np.prod(first_tile) >= MIN_TILE_ELEMENTS  # all tiles but the last have this shape


def test_the_refusal_names_the_limit_needed_and_that_limit_works(run_cli, tmp_path):
    data = np.random.default_rng(3).standard_normal((1, 1, 1024, 1024)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    np.save(tmp_path / "w.npy", np.ones((1, 1, 3, 3), np.float32))
    args = ["conv", str(tmp_path / "x.npy"), str(tmp_path / "w.npy"), "--engine", "tiled"]
    refused = run_cli(*args, "--memory-limit", "8K", "-o", str(tmp_path / "y.npy"))
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    needed = refused.stderr.split("give --memory-limit ")[1].split(" or more")[0]
    assert not (tmp_path / "y.npy").exists()
    number, unit = needed.split()
    limit = f"{float(number) + 0.1:.1f}{unit[0]}"
    done = run_cli(*args, "--memory-limit", limit, "-o", str(tmp_path / "y.npy"))
    assert done.exit_code == 0, done.stderr
    assert (tmp_path / "y.npy").exists()


# --- one line of progress when stderr is not a terminal -----------------------------------


def test_a_long_run_without_a_terminal_says_once_what_it_is_doing(monkeypatch, capsys):
    from padconv_cli.outofcore import progress as progress_module

    monkeypatch.setattr(progress_module, "ANNOUNCE_AFTER_SECONDS", 0.0)
    with progress_module.TileProgress(4, 4096, "line", "conv") as progress:
        for _ in range(4):
            progress.advance(1024)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("padconv: conv: 1/4 tiles")


def test_quiet_says_nothing_and_a_terminal_gets_the_bar():
    from padconv_cli.cli.options import progress_display

    assert progress_display(quiet=True, terminal=False) is False
    assert progress_display(quiet=False, terminal=True) is True
    assert progress_display(quiet=False, terminal=True, colour=False) == "plain"
    assert progress_display(quiet=False, terminal=False) == "line"


# --- W and B come first: the budget left for tiles -------------------------------------------


def _engine_runs():
    """The tiled and the dask engine's Conv, each with a limit of ``limit`` bytes."""
    from padconv_cli.outofcore.conv_tiles import tiled_conv

    def tiled(folder, x, w, b, limit):
        np.save(folder / "x.npy", x)
        return tiled_conv(str(folder / "x.npy"), w, b, str(folder / "y.npy"), memory_limit=limit)

    def on_dask(folder, x, w, b, limit):
        da = pytest.importorskip("dask.array")
        from padconv_cli.engines.dask_ops import conv_dask

        return conv_dask(da.from_array(x), w, b, block_bytes=limit)

    return {"tiled": tiled, "dask": on_dask}


@pytest.mark.parametrize("engine", sorted(_engine_runs()))
def test_a_limit_that_does_not_hold_w_and_b_is_refused_naming_it(tmp_path, engine):
    """W (float32) held with its float32 accumulator copy, plus B: 2 * 4 * 8*8*3*3 + 4 * 8
    bytes; a limit of exactly that leaves nothing for a tile."""
    from padconv_cli.errors import OutputTooLargeError

    x = np.ones((1, 8, 16, 16), np.float32)
    w, b = np.ones((8, 8, 3, 3), np.float32), np.ones(8, np.float32)
    held = 2 * w.nbytes + b.nbytes
    with pytest.raises(OutputTooLargeError, match=f"of {held} bytes does not hold W and B "
                       f"[(]{held} bytes") as refused:
        _engine_runs()[engine](tmp_path, x, w, b, held)
    assert refused.value.param == "memory_limit"
    assert not (tmp_path / "y.npy").exists()
