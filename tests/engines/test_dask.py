"""The dask engine on a LocalCluster on loopback, compared with the in-memory kernels."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.array")
pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from padconv_cli.engines import cluster as cluster_module  # noqa: E402
from padconv_cli.engines.dask_engine import dask_conv, dask_pad  # noqa: E402
from padconv_cli.engines.dask_ops import conv_dask, pad_dask  # noqa: E402
from padconv_cli.errors import InputError, OutputError, PadconvError  # noqa: E402
from padconv_cli.kernels.conv import conv, plan_conv  # noqa: E402
from padconv_cli.kernels.pad import pad  # noqa: E402
from padconv_cli.outofcore.conv_tiles import conv_tile_cost, fixed_bytes  # noqa: E402

RNG = np.random.default_rng(99)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def scheduler():
    """A one-worker, two-thread cluster on 127.0.0.1 over TCP (its dashboard on a free port)."""
    with LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        host="127.0.0.1",
        protocol="tcp",
        dashboard_address="127.0.0.1:0",
    ) as local:
        yield local.scheduler_address


@pytest.fixture
def client(scheduler):
    with Client(scheduler) as connected:
        yield connected


# --- dask arrays in, dask arrays out -------------------------------------------------------


@pytest.mark.parametrize(
    "mode, pads",
    [
        ("constant", [1, -2, 0, 3, 2, -1]),
        ("edge", [4, 0, 1, 0, 5, 2]),
        ("reflect", [0, 9, 15, 0, 13, 20]),
        ("wrap", [2, 11, 3, 1, 0, 8]),
        ("reflect", [-1, 2, 0, 1, -2, 3]),
    ],
)
def test_pad_dask_matches_the_kernel(client, mode, pads):
    data = RNG.standard_normal((4, 6, 7)).astype(np.float64)
    x = da.from_array(data, chunks=(2, 3, 4))
    value = np.float64(-1.5) if mode == "constant" else None
    got = pad_dask(x, pads, value, None, mode, block_bytes=6000).compute()
    expected = pad(data, pads, value, None, mode)
    assert same_bits(got, expected)


CONV_CASES = [
    ((2, 4, 21, 13), (6, 4, 3, 3), 1, {"pads": [1, 0, 2, 3], "strides": [2, 1]}),
    ((1, 4, 20, 17), (6, 2, 3, 3), 2, {"dilations": [2, 1], "auto_pad": "SAME_LOWER"}),
    ((2, 6, 18, 18), (6, 1, 3, 3), 6, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 3, 15, 9), (5, 3, 2, 3), 1, {"auto_pad": "VALID", "strides": [3, 1]}),
    ((3, 2, 40), (4, 1, 5), 2, {"pads": [3, 1], "dilations": [2]}),
    ((1, 2, 9, 8, 10), (3, 2, 3, 2, 2), 1, {"pads": [1, 0, 1, 0, 2, 1], "strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("x_shape, w_shape, group, attrs", CONV_CASES)
def test_conv_dask_matches_the_kernel(client, x_shape, w_shape, group, attrs):
    data = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    b = RNG.standard_normal(w_shape[0]).astype(np.float32)
    x = da.from_array(data, chunks=tuple(max(1, n // 2) for n in x_shape))
    plan = plan_conv(x_shape, w_shape, b.shape, group=group, **attrs)
    whole = conv_tile_cost(plan.output_shape, plan=plan, itemsize=4)
    blocks = fixed_bytes(w, b) + min(12_000, whole * 2 // 3)  # at least two blocks
    y, exact = conv_dask(x, w, b, block_bytes=blocks, group=group, **attrs)
    assert y.npartitions > 1
    expected = conv(data, w, b, group=group, **attrs)
    assert exact  # the native core sums every element in one order, in any block
    assert same_bits(y.compute(), expected)


def test_conv_dask_exact_blocks_are_bit_identical(client):
    data = RNG.standard_normal((1, 3, 64, 48)).astype(np.float32)
    w = RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)
    y, exact = conv_dask(
        da.from_array(data, chunks=(1, 3, 16, 48)), w, None, block_bytes=200_000, pads=[1, 1, 1, 1]
    )
    assert exact and y.npartitions > 1
    assert same_bits(y.compute(), conv(data, w, pads=[1, 1, 1, 1]))


# --- files and stores through a scheduler address -----------------------------------------


def test_npy_to_zarr_and_back(scheduler, tmp_path):
    data = RNG.integers(0, 1000, size=(5, 33, 17)).astype(np.int32)
    np.save(tmp_path / "x.npy", data)
    result = dask_pad(
        str(tmp_path / "x.npy"),
        str(tmp_path / "y.zarr"),
        [0, 2, -3, 1, 4, 2],
        None,
        None,
        "edge",
        memory_limit=40_000,
        scheduler=scheduler,
    )
    expected = pad(data, [0, 2, -3, 1, 4, 2], mode="edge")
    assert result.tiles > 1
    assert same_bits(zarr.open_array(str(tmp_path / "y.zarr"), mode="r")[...], expected)
    dask_pad(
        str(tmp_path / "y.zarr"),
        str(tmp_path / "z.npy"),
        [1, 0, 0, 0, 0, 1],
        np.int32(9),
        memory_limit=40_000,
        scheduler=scheduler,
    )
    assert same_bits(np.load(tmp_path / "z.npy"), pad(expected, [1, 0, 0, 0, 0, 1], np.int32(9)))


def test_conv_zarr_to_zarr_replaces_an_old_store(scheduler, tmp_path):
    data = RNG.standard_normal((2, 2, 30, 30)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    zarr.save_array(str(tmp_path / "x.zarr"), data)
    zarr.save_array(str(tmp_path / "y.zarr"), np.zeros(3))
    result = dask_conv(
        str(tmp_path / "x.zarr"),
        w,
        None,
        str(tmp_path / "y.zarr"),
        memory_limit=10**8,
        scheduler=scheduler,
        strides=[2, 2],
    )
    got = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")[...]
    assert result.exact and same_bits(got, conv(data, w, strides=[2, 2]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.zarr", "y.zarr"]


def test_kernel_errors_come_back_as_padconv_errors_and_leave_no_output(scheduler, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 2, 8, 8), np.int32))
    with pytest.raises(PadconvError, match="float"):
        dask_conv(
            str(tmp_path / "x.npy"),
            np.zeros((1, 2, 3, 3), np.int32),
            None,
            str(tmp_path / "y.npy"),
            memory_limit=10**7,
            scheduler=scheduler,
        )
    assert [p.name for p in tmp_path.iterdir()] == ["x.npy"]


def test_refuses_to_replace_a_non_zarr_folder(scheduler, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3,), np.float32))
    (tmp_path / "keep.zarr").mkdir()
    (tmp_path / "keep.zarr" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="not a Zarr store"):
        dask_pad(
            str(tmp_path / "x.npy"),
            str(tmp_path / "keep.zarr"),
            [1, 1],
            memory_limit=10**6,
            scheduler=scheduler,
        )
    assert (tmp_path / "keep.zarr" / "notes.txt").read_text() == "mine"


def test_bad_zarr_input_is_an_input_error(scheduler, tmp_path):
    (tmp_path / "bad.zarr").mkdir()
    (tmp_path / "bad.zarr" / "zarr.json").write_text("{not json")
    with pytest.raises(InputError, match="bad.zarr"):
        dask_pad(
            str(tmp_path / "bad.zarr"),
            str(tmp_path / "y.npy"),
            [1, 1],
            memory_limit=10**6,
            scheduler=scheduler,
        )


def test_unreachable_scheduler_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT_SECONDS", 1)
    np.save(tmp_path / "x.npy", np.zeros((3,), np.float32))
    with pytest.raises(PadconvError, match="^scheduler tcp://127.0.0.1:9: cannot connect") as e:
        dask_pad(
            str(tmp_path / "x.npy"),
            str(tmp_path / "y.npy"),
            [1, 1],
            memory_limit=10**6,
            scheduler="tcp://127.0.0.1:9",
        )
    assert e.value.param == "scheduler"  # the CLI renders it as --scheduler
