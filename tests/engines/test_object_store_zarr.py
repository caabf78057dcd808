"""The dask engine reads and writes Zarr stores in an S3-compatible object store (moto in
server mode on 127.0.0.1, credentials and endpoint from the environment), with the same rules
as files: the result published only when complete, nothing left under a temporary prefix."""

from __future__ import annotations

import os

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
pytest.importorskip("distributed")
s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

from padconv_cli.engines.dask_engine import dask_conv, dask_pad  # noqa: E402
from padconv_cli.errors import PadconvError  # noqa: E402
from padconv_cli.kernels.conv import conv  # noqa: E402
from padconv_cli.kernels.pad import pad  # noqa: E402

RNG = np.random.default_rng(8)
ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "padconv-test",
    "AWS_SECRET_ACCESS_KEY": "padconv-test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def bucket():
    """A moto S3 server on a free loopback port, stopped after the module; yields ``s3fs``."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    saved = {name: os.environ.get(name) for name in [*ENVIRONMENT, "AWS_ENDPOINT_URL"]}
    os.environ.update(ENVIRONMENT, AWS_ENDPOINT_URL=f"http://{host}:{port}")
    try:
        fs = s3fs.S3FileSystem()
        fs.mkdir("data")
        yield fs
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()


def put_zarr(url: str, data: np.ndarray, chunks: tuple[int, ...]) -> None:
    store = zarr.create_array(url, shape=data.shape, chunks=chunks, dtype=data.dtype)
    store[...] = data


def names(fs, prefix: str = "data") -> list[str]:
    return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(prefix, detail=False, refresh=True))


def test_conv_s3_zarr_to_s3_zarr_matches_the_kernel_and_leaves_no_temporary(bucket):
    data = RNG.standard_normal((1, 2, 40, 36)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    put_zarr("s3://data/x.zarr", data, (1, 2, 16, 16))
    put_zarr("s3://data/y.zarr", np.zeros(5, np.float32), (5,))  # an old result, replaced
    dask_conv("s3://data/x.zarr", w, None, "s3://data/y.zarr", memory_limit=2**24,
              pads=[1, 1, 1, 1])
    got = zarr.open_array("s3://data/y.zarr", mode="r")[...]
    assert got.tobytes() == conv(data, w, pads=[1, 1, 1, 1]).tobytes()
    assert names(bucket) == ["x.zarr", "y.zarr"]
    assert "padconv-owner.json" not in names(bucket, "data/y.zarr")


def test_pad_s3_zarr_to_a_local_npy_and_back_to_s3(bucket, tmp_path):
    data = RNG.integers(0, 99, size=(3, 20, 17)).astype(np.int16)
    put_zarr("s3://data/p.zarr", data, (1, 8, 8))
    pads = [0, 2, 1, 1, 3, 0]
    dask_pad("s3://data/p.zarr", str(tmp_path / "p.npy"), pads, mode="wrap", memory_limit=2**24)
    expected = pad(data, pads, mode="wrap")
    assert np.load(tmp_path / "p.npy").tobytes() == expected.tobytes()
    dask_pad(str(tmp_path / "p.npy"), "s3://data/q.zarr", [0, 0, 0, 0, 0, 0], memory_limit=2**24)
    assert zarr.open_array("s3://data/q.zarr", mode="r")[...].tobytes() == expected.tobytes()


def test_a_failed_run_leaves_nothing_in_the_bucket(bucket):
    put_zarr("s3://data/i.zarr", np.zeros((1, 2, 8, 8), np.int32), (1, 2, 4, 4))
    before = names(bucket)
    with pytest.raises(PadconvError, match="float"):
        dask_conv("s3://data/i.zarr", np.zeros((1, 2, 3, 3), np.int32), None,
                  "s3://data/out.zarr", memory_limit=2**24)
    assert names(bucket) == before


def test_a_later_run_removes_an_abandoned_temporary_prefix(bucket):
    bucket.pipe("data/.r.zarr.padconv-dead/c/0", b"partial")  # no owner file: abandoned
    put_zarr("s3://data/src.zarr", np.arange(6, dtype=np.float32), (3,))
    dask_pad("s3://data/src.zarr", "s3://data/r.zarr", [1, 1], memory_limit=2**24)
    assert ".r.zarr.padconv-dead" not in names(bucket)


@pytest.mark.parametrize(
    "url, rule",
    [
        ("s3://data/x.npy", "only Zarr stores"),
        ("file:///etc/x.zarr", "not an object store"),
        ("s3://data/../x.zarr", "'..'"),
        ("s3://x.zarr", "bucket/path/name.zarr"),
    ],
)
def test_urls_outside_the_rules_are_refused_naming_them(url, rule, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    with pytest.raises(PadconvError, match=rule) as refused:
        dask_pad(str(tmp_path / "x.npy"), url, [1, 1], memory_limit=2**20)
    assert url in str(refused.value)
    assert os.listdir(tmp_path) == ["x.npy"]
