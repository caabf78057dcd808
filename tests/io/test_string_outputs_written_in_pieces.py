"""String tensors are written to ``.npy`` at a fixed width in pieces: a padded string array is
far larger as a file than in memory, and only the file needs to be that large."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hostile.runner import run_padconv
from onnx import TensorProto, helper

from padconv_cli.tensorio import npy


@pytest.mark.parametrize(
    "array",
    [
        np.array(["ab", "", "h\u00e9llo"], dtype=object),
        np.array([["a", "bb"], ["ccc", "d"]], dtype=object)[:, ::-1],
        np.array([b"x", b"yz", b""], dtype=object),
        np.array("solo", dtype=object),
        np.array(["", ""], dtype=object),
        np.empty((0, 3), dtype=object),
    ],
)
def test_written_strings_equal_their_fixed_width_array(array, monkeypatch):
    monkeypatch.setattr(npy, "STRING_CHUNK_BYTES", 8)  # many pieces
    buffer = io.BytesIO()
    npy.write_npy(array, buffer, "t.npy")
    buffer.seek(0)
    kind = np.bytes_ if array.size and isinstance(array.flat[0], bytes) else np.str_
    expected = array.astype(kind)
    result = np.load(buffer, allow_pickle=False)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)


def test_mixed_object_arrays_are_refused():
    with pytest.raises(Exception, match="only all-str or all-bytes"):
        npy.write_npy(np.array(["a", b"b"], dtype=object), io.BytesIO(), "t.npy")


def test_padding_one_long_string_costs_the_file_not_the_memory(tmp_path):
    tensor = helper.make_tensor("s", TensorProto.STRING, [1], [b"x" * 30000])
    (tmp_path / "s.pb").write_bytes(tensor.SerializeToString())
    run = run_padconv(["pad", "s.pb", "--pads", "2000", "2000", "-o", "out.npy"], cwd=tmp_path,
                      measure_memory=True)
    assert run.returncode == 0, run.stderr_text
    out = np.load(tmp_path / "out.npy")
    assert out.dtype == np.dtype("<U30000") and out.shape == (4001,)
    assert out[2000] == "x" * 30000 and (out[:2000] == "").all() and (out[2001:] == "").all()
    # the file is 480 MB; the run holds the strings once, plus one piece of 16 MiB
    assert run.peak_rss_bytes < 300 * 2**20
