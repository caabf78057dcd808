"""``--engine auto`` with a ``.npy`` input that stays in memory: the engine choice hands its
reading on instead of repeating it, so W given on stdin (which can be read only once) still
gives the right result, and a call refused on the declared shapes writes nothing."""

from __future__ import annotations

import io

import numpy as np
import pytest

from padconv_cli.kernels.conv import conv
from padconv_cli.pipeline import Request, run


def test_conv_auto_in_memory_reads_w_from_stdin_once(run_cli, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 9, 9)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    stdin = io.BytesIO()
    np.save(stdin, w)
    result = run_cli("conv", str(tmp_path / "x.npy"), "-", "--pads", "1", "1", "1", "1",
                     "-o", str(tmp_path / "y.npy"), input=stdin.getvalue())
    assert result.exit_code == 0, result.stderr
    expected = conv(x, w, pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)


def test_pad_auto_in_memory_writes_the_kernels_result(tmp_path):
    data = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.save(tmp_path / "d.npy", data)
    request = Request("Pad", (str(tmp_path / "d.npy"),), {"pads": [1, 0, 0, 1]},
                      output=str(tmp_path / "y.npy"))
    assert run(request).engine == "memory"
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"),
                                  np.pad(data, ((1, 0), (0, 1))))


def test_auto_that_does_not_fit_is_refused_before_anything_is_written(tmp_path):
    from padconv_cli.errors import OutputTooLargeError

    np.save(tmp_path / "d.npy", np.zeros((4, 4), np.float32))
    request = Request("Pad", (str(tmp_path / "d.npy"),), {"pads": [0, 0, 0, 10**6]},
                      output=str(tmp_path / "y.npy"), max_output_bytes=1000)
    with pytest.raises(OutputTooLargeError, match="max_output_bytes"):
        run(request)
    assert not (tmp_path / "y.npy").exists()
