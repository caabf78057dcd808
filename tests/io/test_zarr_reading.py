"""A Zarr store is read wherever a tensor is read (show, compare, pad, conv), or the error says
which extra provides zarr."""

from __future__ import annotations

import builtins

import numpy as np
import pytest


@pytest.fixture
def store(tmp_path):
    zarr = pytest.importorskip("zarr", reason="zarr is an optional extra (padconv[dask])")
    path = tmp_path / "out.zarr"
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    array = zarr.open_array(str(path), mode="w", shape=values.shape, chunks=(2, 2),
                            dtype=values.dtype)
    array[...] = values
    return path, values


def test_show_and_compare_read_zarr(run_cli, store, tmp_path):
    path, values = store
    shown = run_cli("show", str(path))
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.startswith(f"{path}: float32[3, 4] (12 elements, 48 bytes)")
    np.save(tmp_path / "same.npy", values)
    compared = run_cli("compare", str(path), str(tmp_path / "same.npy"))
    assert compared.exit_code == 0, compared.stdout + compared.stderr
    other = values.copy()
    other[2, 3] += 1
    np.save(tmp_path / "other.npy", other)
    assert run_cli("compare", str(path), str(tmp_path / "other.npy")).exit_code == 1


def test_pad_reads_zarr_in_memory(run_cli, store, tmp_path):
    path, values = store
    out = tmp_path / "y.npy"
    result = run_cli("pad", str(path), "--pads", "0", "1", "0", "1", "--engine", "memory",
                     "-o", str(out))
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), np.pad(values, ((0, 0), (1, 1))))


def test_without_zarr_the_error_names_the_extra(run_cli, store, monkeypatch):
    path, _ = store
    real_import = builtins.__import__

    def without_zarr(name, *args, **kwargs):
        if name == "zarr" or name.startswith("zarr."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_zarr)
    result = run_cli("show", str(path))
    assert result.exit_code == 2
    assert result.stderr == (
        f"padconv show: error: {path}: is a Zarr store; reading it needs zarr: "
        "pip install 'padconv[dask]' (zarr 3 needs Python >= 3.11)\n"
    )
