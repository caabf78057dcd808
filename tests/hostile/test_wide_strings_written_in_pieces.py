"""Wide fixed-width strings: a tiny input whose padded result is hundreds of MiB at its fixed
width is computed on python strings and written at that width in pieces (peak under 300 MiB,
the file exactly what numpy.pad and numpy.save give), or refused in one line by the engines
that would hold whole elements."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from hostile.runner import run_padconv  # noqa: E402

PEAK_LIMIT = 300 * 2**20
WIDTH = 100_000_000  # characters: 381 MiB per element


@pytest.fixture()
def wide(tmp_path: Path) -> Path:
    """The issue's 128-byte .npy: ``<U100000000`` of shape (0,)."""
    np.save(tmp_path / "u.npy", np.zeros((0,), dtype=f"<U{WIDTH}"))
    assert (tmp_path / "u.npy").stat().st_size == 128
    return tmp_path


def _ok(run) -> None:
    assert run.returncode == 0, run.stderr_text
    assert run.stderr_text == ""
    assert 0 < run.peak_rss_bytes < PEAK_LIMIT


def test_padded_to_a_file_streams_at_the_declared_width(wide):
    run = run_padconv(["pad", "u.npy", "--pads", "1", "1", "-o", "o.npy"],
                      cwd=wide, measure_memory=True)
    _ok(run)
    result = np.load(wide / "o.npy", mmap_mode="r")
    assert result.dtype == np.dtype(f"<U{WIDTH}") and result.shape == (2,)
    assert (wide / "o.npy").stat().st_size == 128 + 2 * 4 * WIDTH
    assert [len(item) for item in result] == [0, 0]


def test_padded_to_stdout_streams(wide):
    with open(wide / "stdout.npy", "wb") as stdout:
        run = run_padconv(["pad", "u.npy", "--pads", "0", "1", "-o", "-"], cwd=wide,
                          measure_memory=True, stdout_target=stdout)
    _ok(run)
    result = np.load(wide / "stdout.npy", mmap_mode="r")
    assert result.dtype == np.dtype(f"<U{WIDTH}") and result.shape == (1,)


def test_padded_to_pb_writes_the_strings(wide):
    from padconv_cli.tensor_sources import read_tensor

    run = run_padconv(["pad", "u.npy", "--pads", "1", "1", "-o", "o.pb"],
                      cwd=wide, measure_memory=True)
    _ok(run)
    assert read_tensor(str(wide / "o.pb")).tolist() == ["", ""]


@pytest.mark.parametrize("args", [["--engine", "tiled", "-o", "o.npy"],
                                  ["--engine", "dask", "-o", "o.npy"],
                                  ["--engine", "dask", "-o", "o.zarr"]],
                         ids=["tiled", "dask_npy", "dask_zarr"])
def test_engines_holding_whole_elements_refuse_in_one_line(wide, args):
    run = run_padconv(["pad", "u.npy", "--pads", "1", "1", *args], cwd=wide,
                      measure_memory=True)
    assert run.returncode == 2, run.stderr_text
    assert len(run.stderr_lines) == 1 and "Traceback" not in run.stderr_text
    line = run.stderr_lines[0]
    assert "381.5 MiB per element" in line and "--engine memory" in line
    assert 0 < run.peak_rss_bytes < PEAK_LIMIT
    assert not (wide / args[-1]).exists()


def test_unknown_output_suffix_is_refused_before_computing(wide):
    run = run_padconv(["pad", "u.npy", "--pads", "1", "1", "-o", "o.npz"], cwd=wide,
                      measure_memory=True)
    assert run.returncode == 2 and len(run.stderr_lines) == 1, run.stderr_text
    assert "'.npz'" in run.stderr_lines[0]
    assert 0 < run.peak_rss_bytes < PEAK_LIMIT
    assert not (wide / "o.npz").exists()


@pytest.mark.parametrize(
    ("mode", "pads", "constant"),
    [("constant", [2, 1], "zz"), ("constant", [1, 0], None), ("edge", [1, 2], None),
     ("reflect", [2, 2], None), ("constant", [-1, 2], "q")],
)
def test_wide_result_equals_numpy_pad_bit_for_bit(tmp_path, mode, pads, constant):
    """Written in pieces, the file is the one numpy.pad + numpy.save give."""
    _compare_with_numpy(tmp_path, "<U2000000", mode, pads, constant)  # 8 MB per element


def test_elements_wider_than_a_piece_equal_numpy_pad_bit_for_bit(tmp_path):
    """Each 20 MB element is written in pieces of its own (one holds 5e6 characters)."""
    _compare_with_numpy(tmp_path, "<U5000000", "constant", [1, 1], "zz", "é" * 5_000_000)


def _compare_with_numpy(tmp_path, dtype, mode, pads, constant, last="c" * 10):
    from padconv_cli.pipeline import Request, run

    data = np.array(["ab", "", last], dtype=dtype)
    np.save(tmp_path / "d.npy", data)
    attributes = {"pads": pads, "mode": mode}
    if constant is not None:
        attributes["constant_value"] = constant
    run(Request("Pad", (str(tmp_path / "d.npy"),), attributes,
                output=str(tmp_path / "y.npy"), engine="memory"))
    fill = {"constant_values": constant or ""} if mode == "constant" else {}
    expected = np.pad(data[max(0, -pads[0]):], (max(pads[0], 0), pads[1]), mode=mode, **fill)
    np.save(tmp_path / "e.npy", expected)
    assert (tmp_path / "y.npy").read_bytes() == (tmp_path / "e.npy").read_bytes()
