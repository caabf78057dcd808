"""``--engine auto`` with a ``.npy`` input that stays in memory: W is read once and the resource
gate runs once (the engine choice's reading and gate are handed on, not repeated)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from padconv_cli import resources, tensor_sources
from padconv_cli.pipeline import Request, run


@pytest.fixture
def counted(monkeypatch):
    counts: Counter[str] = Counter()
    read, check = tensor_sources.read_tensor, resources.check_call

    def counting_read(source, **kwargs):
        counts[f"read {source}"] += 1
        return read(source, **kwargs)

    def counting_check(*args, **kwargs):
        counts["gate"] += 1
        return check(*args, **kwargs)

    monkeypatch.setattr(tensor_sources, "read_tensor", counting_read)
    monkeypatch.setattr(resources, "check_call", counting_check)
    return counts


def test_conv_auto_in_memory_reads_w_once_and_gates_once(tmp_path, counted):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 9, 9)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    request = Request("Conv", (str(tmp_path / "x.npy"), str(tmp_path / "w.npy")),
                      {"pads": [1, 1, 1, 1]}, output=str(tmp_path / "y.npy"))
    outcome = run(request)
    assert outcome.engine == "memory"
    assert counted[f"read {tmp_path / 'w.npy'}"] == 1
    assert counted["gate"] == 1
    assert np.load(tmp_path / "y.npy").shape == (1, 3, 9, 9)


def test_pad_auto_in_memory_gates_once(tmp_path, counted):
    np.save(tmp_path / "d.npy", np.arange(12, dtype=np.int32).reshape(3, 4))
    request = Request("Pad", (str(tmp_path / "d.npy"),), {"pads": [1, 0, 0, 1]},
                      output=str(tmp_path / "y.npy"))
    assert run(request).engine == "memory"
    assert counted["gate"] == 1
    assert np.load(tmp_path / "y.npy").shape == (4, 5)


def test_auto_that_does_not_fit_still_refuses_in_one_gate(tmp_path, counted):
    """A call refused on the declared shapes is refused by that one gate."""
    from padconv_cli.errors import OutputTooLargeError

    np.save(tmp_path / "d.npy", np.zeros((4, 4), np.float32))
    request = Request("Pad", (str(tmp_path / "d.npy"),), {"pads": [0, 0, 0, 10**6]},
                      output=str(tmp_path / "y.npy"), max_output_bytes=1000)
    with pytest.raises(OutputTooLargeError):
        run(request)
    assert counted["gate"] == 1
    assert not (tmp_path / "y.npy").exists()
