"""External data through a hard link: a path check cannot see that ``hard.bin`` in the
tensor's folder is the same file as one outside it, so a file with more than one link is
refused (checked on the opened descriptor) unless --allow-hardlinks is given."""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper

from padconv_cli.errors import InputError
from padconv_cli.tensor_sources import read_tensor
from padconv_cli.tensorio import ReadPolicy

SECRET = np.arange(6, dtype="<f4") * 1000


def _external_tensor(location: str, name: str = "W") -> TensorProto:
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[1, 1, 2, 3])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return tensor


@pytest.fixture
def layout(tmp_path):
    """ROOT/secret.bin outside; ROOT/case/hard.bin a hard link to it; ROOT/case/x.pb uses it."""
    (tmp_path / "secret.bin").write_bytes(SECRET.tobytes())
    case = tmp_path / "case"
    case.mkdir()
    os.link(tmp_path / "secret.bin", case / "hard.bin")
    (case / "x.pb").write_bytes(_external_tensor("hard.bin").SerializeToString())
    return case


def _model_with_external_initializer(case) -> str:
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="c")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 2, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [_external_tensor("hard.bin")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (case / "m.onnx").write_bytes(model.SerializeToString())
    return str(case / "m.onnx")


def test_library_refuses_a_hardlinked_external_file(layout):
    with pytest.raises(InputError, match="2 hard links") as caught:
        read_tensor(layout / "x.pb")
    assert caught.value.param == "allow_hardlinks"


def test_library_reads_it_when_allowed(layout):
    allowed = ReadPolicy(allow_hardlinks=True)
    np.testing.assert_array_equal(read_tensor(layout / "x.pb", policy=allowed).ravel(), SECRET)


@pytest.mark.parametrize("command", [
    ["pad", "x.pb", "--pads", "0", "0", "0", "0", "1", "1", "1", "1", "-o", "out.npy"],
    ["show", "x.pb"],
    ["compare", "x.pb", "x.pb"],
])
def test_commands_refuse_it_in_one_line(run_cli, layout, monkeypatch, command):
    monkeypatch.chdir(layout)
    result = run_cli(*command)
    assert result.exit_code == 2, result.stdout
    assert "hard.bin" in result.stderr and "hard links" in result.stderr
    assert "--allow-hardlinks" in result.stderr
    assert "1000" not in result.stdout
    assert not (layout / "out.npy").exists()


def test_from_model_refuses_a_hardlinked_initializer(run_cli, layout, monkeypatch):
    monkeypatch.chdir(layout)
    np.save("x.npy", np.ones((1, 1, 2, 3), np.float32))
    model = _model_with_external_initializer(layout)
    result = run_cli("conv", "x.npy", "--from-model", model, "-o", "out.npy")
    assert result.exit_code == 2
    assert "hard links" in result.stderr and "initializer 'W'" in result.stderr
    allowed = run_cli("conv", "x.npy", "--from-model", model, "-o", "out.npy",
                      "--allow-hardlinks")
    assert allowed.exit_code == 0, allowed.stderr
    assert np.load("out.npy").item() == pytest.approx(SECRET.sum())


def test_flag_lets_the_command_read_it(run_cli, layout, monkeypatch):
    monkeypatch.chdir(layout)
    result = run_cli("pad", "x.pb", "--pads", *["0"] * 8, "-o", "out.npy", "--allow-hardlinks")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load("out.npy").ravel(), SECRET)


def test_a_single_link_file_is_read_as_before(tmp_path):
    (tmp_path / "data.bin").write_bytes(SECRET.tobytes())
    (tmp_path / "x.pb").write_bytes(_external_tensor("data.bin").SerializeToString())
    np.testing.assert_array_equal(read_tensor(tmp_path / "x.pb").ravel(), SECRET)

