"""``padconv show MODEL.onnx:NAME`` of a quantized tensor shows its scale and zero point."""

from __future__ import annotations

import json

from family_models import conv_transpose_model, qlinear_conv_model


def test_show_names_the_scale_of_a_quantized_weight(run_cli, tmp_path):
    model = qlinear_conv_model(tmp_path / "m.onnx")
    result = run_cli("show", f"{model}:w")
    assert result.exit_code == 0, result.stderr
    assert "quantized (QLinearConv 'qlconv')" in result.stdout
    assert "scale [0.01, 0.02, 0.015, 0.03] (per channel)" in result.stdout


def test_show_json_carries_the_quantization(run_cli, tmp_path):
    model = qlinear_conv_model(tmp_path / "m.onnx", per_channel=False)
    (record,) = json.loads(run_cli("show", f"{model}:w", "--json").stdout)
    assert record["quantization"]["zero_point"] == 0
    assert abs(record["quantization"]["scale"] - 0.02) < 1e-7


def test_float_tensors_show_no_quantization(run_cli, tmp_path):
    model = conv_transpose_model(tmp_path / "m.onnx")
    assert "quantized" not in run_cli("show", f"{model}:w1").stdout
