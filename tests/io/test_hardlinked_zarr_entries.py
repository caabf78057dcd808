"""Hard links inside a local Zarr store follow the external-data rule: a chunk or metadata file
with more than one link may be the same file as one outside the store, which no path check can
see; it is refused unless allow_hardlinks (``--allow-hardlinks``) is set."""

from __future__ import annotations

import os

import numpy as np
import pytest

from padconv_cli import read_tensor
from padconv_cli.errors import InputError
from padconv_cli.tensorio import ReadPolicy

zarr = pytest.importorskip("zarr")  # the dask extra (zarr 3 needs Python >= 3.11)

SECRET = np.arange(6, dtype=np.float32).reshape(2, 3) * 1000


@pytest.fixture(params=["chunk", "metadata"])
def store(tmp_path, request):
    """ROOT/outside/FILE and ROOT/z.zarr whose chunk 0.0 (or .zarray) is a hard link to it."""
    array = zarr.open_array(tmp_path / "z.zarr", mode="w", shape=(4, 6), chunks=(2, 3),
                            dtype=np.float32, zarr_format=2, compressor=None)
    array[...] = np.ones((4, 6), np.float32)
    (tmp_path / "outside").mkdir()
    name = "0.0" if request.param == "chunk" else ".zarray"
    entry = tmp_path / "z.zarr" / name
    outside = tmp_path / "outside" / name
    outside.write_bytes(SECRET.tobytes() if name == "0.0" else entry.read_bytes())
    entry.unlink()
    os.link(outside, entry)
    return tmp_path / "z.zarr", name


def test_library_refuses_a_hardlinked_store_entry(store):
    path, name = store
    with pytest.raises(InputError, match=f"Zarr entry {name} has 2 hard links") as caught:
        read_tensor(str(path))
    assert caught.value.param == "allow_hardlinks"


def test_library_reads_it_when_allowed(store):
    path, name = store
    values = read_tensor(str(path), policy=ReadPolicy(allow_hardlinks=True))
    expected = np.ones((4, 6), np.float32)
    if name == "0.0":
        expected[:2, :3] = SECRET
    np.testing.assert_array_equal(values, expected)


@pytest.mark.parametrize("command", [
    ["show", "z.zarr"],
    ["pad", "z.zarr", "--pads", "1", "1", "1", "1", "-o", "out.npy"],
    ["pad", "z.zarr", "--pads", "1", "1", "1", "1", "-o", "out.zarr", "--engine", "dask"],
])
def test_commands_refuse_it_in_one_line(run_cli, store, monkeypatch, command):
    monkeypatch.chdir(store[0].parent)
    result = run_cli(*command)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "z.zarr" in result.stderr and "hard links" in result.stderr
    assert "--allow-hardlinks" in result.stderr
    assert "1000" not in result.stdout
    assert not os.path.exists("out.npy") and not os.path.exists("out.zarr")


@pytest.mark.parametrize("output", ["out.npy", "out.zarr"])
def test_the_dask_engine_reads_it_when_allowed(run_cli, store, monkeypatch, output):
    """--allow-hardlinks holds on the dask workers too (they check the store once more)."""
    pytest.importorskip("distributed")
    path, name = store
    monkeypatch.chdir(path.parent)
    result = run_cli("pad", "z.zarr", "--pads", "1", "1", "1", "1", "-o", output,
                     "--engine", "dask", "--allow-hardlinks")
    assert result.exit_code == 0, result.stderr
    expected = np.ones((4, 6), np.float32)
    if name == "0.0":
        expected[:2, :3] = SECRET
    got = np.load(output) if output.endswith(".npy") else zarr.open_array(output)[...]
    np.testing.assert_array_equal(got, np.pad(expected, 1))
