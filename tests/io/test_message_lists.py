"""Lists quoted in error messages stay short: at most a dozen names, then "and N more"."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from padconv_cli.errors import InputError
from padconv_cli.messages import LISTED_ITEMS, bounded_list, bounded_sequence
from padconv_cli.tensor_sources import read_tensor


def test_short_list_is_shown_whole():
    assert bounded_list(["a", "b", "c"]) == "a, b, c"


def test_long_list_names_the_first_dozen_and_counts_the_rest():
    text = bounded_list(f"m{i}" for i in range(100_000))
    assert text.startswith("m0, m1, ")
    assert f"m{LISTED_ITEMS - 1} ... and {100_000 - LISTED_ITEMS} more" in text
    assert f"m{LISTED_ITEMS}," not in text


def test_empty_list_and_sequence():
    assert bounded_list([]) == "(none)"
    assert bounded_sequence([]) == "[]"
    assert bounded_sequence(range(3)) == "[0, 1, 2]"


def _archive(count: int) -> bytes:
    buffer = io.BytesIO()
    member = io.BytesIO()
    np.save(member, np.zeros(1, np.float32))
    with zipfile.ZipFile(buffer, "w") as archive:
        for index in range(count):
            archive.writestr(f"member{index}.npy", member.getvalue())
    return buffer.getvalue()


@pytest.mark.parametrize("source", ["many.npz", "many.npz:absent"])
def test_npz_with_many_members_gives_a_short_message(tmp_path, source):
    (tmp_path / "many.npz").write_bytes(_archive(3000))
    with pytest.raises(InputError) as caught:
        read_tensor(str(tmp_path / source))
    message = str(caught.value)
    assert len(message) < 600, message
    assert f"and {3000 - LISTED_ITEMS} more" in message


def test_tensorproto_with_a_million_dims_gives_a_short_message(tmp_path):
    from onnx import TensorProto

    proto = TensorProto(data_type=TensorProto.FLOAT)
    proto.dims.extend([1] * 1_000_000)
    proto.dims.append(-1)
    (tmp_path / "dims.pb").write_bytes(proto.SerializeToString())
    with pytest.raises(InputError) as caught:
        read_tensor(str(tmp_path / "dims.pb"))
    assert len(str(caught.value)) < 600
    assert "more" in str(caught.value)
