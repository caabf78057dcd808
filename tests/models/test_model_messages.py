"""Errors about a model's node name the model and the node; the wrong command is redirected."""

from __future__ import annotations

import exported_models as em
import numpy as np


def test_a_wrong_shaped_x_names_the_model_and_the_node(run_cli, tmp_path):
    path = em.save(em.resnet_block(), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((1, 5, 10, 10), np.float32))
    result = run_cli("conv", str(tmp_path / "x.npy"), "--from-model", path, "--node",
                     "/conv1/Conv", "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert f"{path} node '/conv1/Conv' (Conv-11)" in result.stderr
    assert "C=5 != W.shape[1]*group = 3*1" in result.stderr
    assert not (tmp_path / "y.npy").exists()


def test_a_bad_pad_data_names_the_model_and_the_node(run_cli, tmp_path):
    path = em.save(em.wrap_model(opset=19), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((2, 5), np.float32))  # rank 2, pads for rank 4
    result = run_cli("pad", str(tmp_path / "x.npy"), "--from-model", path, "-o", "-")
    assert result.exit_code == 2
    assert f"{path} node '/pad/Pad' (Pad-19)" in result.stderr and "pads has 8 values" in (
        result.stderr
    )


def test_pad_on_a_conv_only_model_suggests_padconv_conv(run_cli, tmp_path):
    path = em.save(em.resnet_block(), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 10, 10), np.float32))
    result = run_cli("pad", str(tmp_path / "x.npy"), "--from-model", path, "-o", "-")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "no Pad node" in result.stderr and "`padconv conv`" in result.stderr
    assert "/conv1/Conv" in result.stderr
    other = run_cli("conv", str(tmp_path / "x.npy"), "--from-model",
                    em.save(em.wrap_model(), tmp_path / "p.onnx"), "-o", "-")
    assert other.exit_code == 2 and "`padconv pad`" in other.stderr


def test_a_name_that_is_not_utf8_is_refused_in_one_line(run_cli, tmp_path):
    weights = em.numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    model = em.make([em.helper.make_node("Conv", ["x", "w"], ["ZZZZ"], name="conv")],
                    [("x", np.float32, [1, 1, 4, 4])], [("ZZZZ", np.float32, None)], [weights])
    data = model.SerializeToString().replace(b"ZZZZ", b"\xad\xad\xad\xad")
    (tmp_path / "m.onnx").write_bytes(data)
    np.save(tmp_path / "x.npy", np.ones((1, 1, 4, 4), np.float32))
    for args in (["conv", "--from-model", str(tmp_path / "m.onnx"), str(tmp_path / "x.npy")],
                 ["audit", str(tmp_path / "m.onnx")]):
        result = run_cli(*args)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "not UTF-8" in result.stderr and "m.onnx" in result.stderr
