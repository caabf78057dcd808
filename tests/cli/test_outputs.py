"""Every ``--json`` output encodes values the same way (README, "JSON output"): complex numbers
as {"real": re, "imag": im}, NaN and infinities as "nan", "inf", "-inf", strict JSON."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from padconv_cli.json_output import dumps, jsonable


def _strict(text: str) -> object:
    """Parse ``text`` refusing the non-standard NaN/Infinity tokens."""
    def refuse(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (np.complex64(1.5 - 2j), '{"real": 1.5, "imag": -2.0}'),
        (complex(float("nan"), float("inf")), '{"real": "nan", "imag": "inf"}'),
        (np.float32("nan"), '"nan"'),
        (-np.inf, '"-inf"'),
        (np.array([[1, 2]], dtype=np.int8), "[[1, 2]]"),
        (b"caf\xc3\xa9", '"café"'),
        (np.dtype("float16"), '"float16"'),
        ((np.bool_(True), None, "x"), '[true, null, "x"]'),
    ],
)
def test_one_encoding(value, text):
    assert dumps(value) == text


def test_ml_dtypes_scalars_are_plain_numbers():
    import ml_dtypes

    values = np.array([0.5, np.nan], dtype=ml_dtypes.bfloat16)
    assert jsonable({"v": values}) == {"v": [0.5, "nan"]}


# --- --explain -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "constant", "encoded"),
    [
        ("complex64", "1+2j", '"constant_value": {\n      "real": 1.0,\n      "imag": 2.0\n    }'),
        ("float32", "nan", '"constant_value": "nan"'),
        ("float64", "-inf", '"constant_value": "-inf"'),
    ],
)
def test_explain_json_constant_value(run_cli, tmp_path, dtype, constant, encoded):
    np.save(tmp_path / "d.npy", np.ones((2, 2), dtype=dtype))
    result = run_cli("pad", str(tmp_path / "d.npy"), "--pads", "1", "0", "0", "0",
                     "--constant-value", constant, "--explain", "--json")
    assert result.exit_code == 0, result.stderr
    assert encoded in result.stdout
    _strict(result.stdout)


# --- --check ---------------------------------------------------------------------------------


def _off_by(monkeypatch, offset):
    from padconv_cli import ops as operators

    entry = operators.OPERATORS["Pad"]
    monkeypatch.setitem(operators.OPERATORS, "Pad", dataclasses.replace(
        entry, run=lambda *args: entry.run(*args) + offset))


def test_check_json_complex_mismatch(run_cli, tmp_path, monkeypatch):
    np.save(tmp_path / "d.npy", np.array([1 + 2j], dtype=np.complex64))
    _off_by(monkeypatch, np.complex64(0.5j))
    result = run_cli("pad", str(tmp_path / "d.npy"), "--pads", "0", "1", "--check", "--json",
                     "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 1, result.stderr
    report = _strict(result.stdout)
    (reference,) = [p for p in report["peers"] if p["peer"] == "onnx.reference"]
    assert reference["mismatches"][0] == {
        "index": [0],
        "expected": {"real": 1.0, "imag": 2.0},
        "actual": {"real": 1.0, "imag": 2.5},
    }


def test_check_json_nan_mismatch(run_cli, tmp_path, monkeypatch):
    np.save(tmp_path / "d.npy", np.array([1.0, 2.0], dtype=np.float32))
    _off_by(monkeypatch, np.float32("nan"))
    result = run_cli("pad", str(tmp_path / "d.npy"), "--pads", "1", "0", "--check", "--json",
                     "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 1, result.stderr
    assert '"actual": "nan"' in result.stdout
    report = _strict(result.stdout)
    (reference,) = [p for p in report["peers"] if p["peer"] == "onnx.reference"]
    assert reference["mismatches"][0] == {"index": [0], "expected": 0.0, "actual": "nan"}


# --- verify ----------------------------------------------------------------------------------


def _pad_case(folder, data: np.ndarray, expected: np.ndarray):
    """An ONNX test-case folder: Pad-18 of ``data`` by one element before, ``expected`` out."""
    kind = helper.np_dtype_to_tensor_dtype(data.dtype)
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["y"])], "pad",
        [helper.make_tensor_value_info("x", kind, data.shape)],
        [helper.make_tensor_value_info("y", kind, expected.shape)],
        [numpy_helper.from_array(np.array([1, 0], dtype=np.int64), "pads")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    (folder / "test_data_set_0").mkdir(parents=True)
    onnx.save(model, str(folder / "model.onnx"))
    for name, array in (("input_0.pb", data), ("output_0.pb", expected)):
        (folder / "test_data_set_0" / name).write_bytes(
            numpy_helper.from_array(array).SerializeToString())
    return folder


def _verify_record(run_cli, folder) -> dict:
    result = run_cli("verify", str(folder), "--json")
    assert result.exit_code == 1, result.stdout + result.stderr
    (record,) = [r for r in map(_strict, result.stdout.splitlines()) if r["type"] == "case"]
    return record


def test_verify_json_complex_mismatch(run_cli, tmp_path):
    data = np.array([1 + 2j, 3 - 4j], dtype=np.complex64)
    wrong = np.array([0, 1 + 2j, 3 + 4j], dtype=np.complex64)
    record = _verify_record(run_cli, _pad_case(tmp_path / "test_pad_complex", data, wrong))
    assert record["mismatches"] == [
        {"index": [2], "expected": {"real": 3.0, "imag": 4.0},
         "actual": {"real": 3.0, "imag": -4.0}},
    ]


def test_verify_json_nan_mismatch(run_cli, tmp_path):
    data = np.array([1.0, 2.0], dtype=np.float32)
    wrong = np.array([np.nan, 1.0, 2.0], dtype=np.float32)
    record = _verify_record(run_cli, _pad_case(tmp_path / "test_pad_nan", data, wrong))
    assert record["mismatches"] == [{"index": [0], "expected": "nan", "actual": 0.0}]
