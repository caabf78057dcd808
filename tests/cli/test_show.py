"""``padconv show`` / ``inspect``: statistics, percentiles, previews and histograms of every format,
models listed compactly, quantized tensors with their scale and zero point."""

from __future__ import annotations

import io
import json

import exported_models as em
import ml_dtypes
import numpy as np
import onnx
import pytest
from audit_models import YOLO_NAMES, exported_model
from family_models import conv_transpose_model, qlinear_conv_model
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pty_terminal import run_in_terminal

from padconv_cli import stats

# ``padconv show`` / ``padconv inspect``: statistics, previews and histograms of every format.


VALUES = np.array([[1.0, -2.0, np.nan], [np.inf, 4.0, -np.inf]], dtype=np.float32)


def _strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"non-strict JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def npy(tmp_path):
    path = tmp_path / "v.npy"
    np.save(path, VALUES)
    return str(path)


def test_statistics_are_over_finite_values(run_cli, npy):
    (info,) = _strict_json(run_cli("show", npy, "--json").stdout)
    assert info["name"] == npy
    assert (info["dtype"], info["shape"], info["size"], info["bytes"]) == ("float32", [2, 3], 6, 24)
    assert (info["min"], info["max"]) == (-2.0, 4.0)
    assert info["mean"] == pytest.approx(1.0)
    assert info["std"] == pytest.approx(np.std([1.0, -2.0, 4.0]))
    assert (info["finite"], info["nan"], info["posinf"], info["neginf"]) == (3, 1, 1, 1)
    assert "nan" in info["preview"] and "inf" in info["preview"]


def test_text_output(run_cli, npy):
    result = run_cli("show", npy)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"{npy}: float32[2, 3] (6 elements, 24 bytes)"
    assert "min -2  max 4  mean 1" in lines[1]
    assert lines[2].strip() == "finite 3  NaN 1  +Inf 1  -Inf 1"
    assert lines[-2:] == ["    [[  1.  -2.  nan]", "     [ inf   4. -inf]]"]


def test_inspect_is_an_alias(run_cli, npy):
    assert run_cli("inspect", npy).stdout == run_cli("show", npy).stdout


def test_histogram_counts_every_finite_value(run_cli, tmp_path):
    data = np.random.default_rng(0).standard_normal(1000)
    np.save(tmp_path / "n.npy", data)
    (info,) = _strict_json(
        run_cli("show", str(tmp_path / "n.npy"), "--histogram", "--bins", "7", "--json").stdout
    )
    histogram = info["histogram"]
    assert len(histogram["counts"]) == 7 and sum(histogram["counts"]) == 1000
    assert histogram["edges"][0] == data.min() and histogram["edges"][-1] == data.max()
    expected, _ = np.histogram(data, bins=7)
    assert histogram["counts"] == expected.tolist()
    text = run_cli("show", str(tmp_path / "n.npy"), "--histogram", "--bins", "7").stdout
    assert "histogram (7 bins):" in text and text.count("#") > 0


def test_large_tensor_preview_keeps_edge_items(run_cli, tmp_path):
    np.save(tmp_path / "big.npy", np.arange(10_000).reshape(100, 100))
    preview = _strict_json(
        run_cli("show", str(tmp_path / "big.npy"), "--edge-items", "2", "--json").stdout
    )[0]["preview"]
    assert "..." in preview
    assert preview.splitlines()[0] == "[[   0    1 ...   98   99]"
    assert preview.splitlines()[2].strip() == "..."
    assert "9999" in preview and "5000" not in preview and "  2  " not in preview
    hidden = _strict_json(
        run_cli("show", str(tmp_path / "big.npy"), "--edge-items", "0", "--json").stdout
    )[0]
    assert "preview" not in hidden


def test_every_member_of_an_npz_and_every_initializer_of_a_model(run_cli, tmp_path):
    np.savez(tmp_path / "a.npz", first=np.arange(3), second=np.ones((2, 2), np.float16))
    weights = onnx.numpy_helper.from_array(np.full((2, 2), 3.0, np.float32), "W")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["W"], ["y"])], "g", [],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[weights],
    )
    onnx.save(onnx.helper.make_model(graph), str(tmp_path / "m.onnx"))
    result = run_cli("show", str(tmp_path / "a.npz"), str(tmp_path / "m.onnx"), "--json")
    assert result.exit_code == 0, result.stderr
    infos = _strict_json(result.stdout)
    names = [info["name"] for info in infos]
    assert names == [f"{tmp_path}/a.npz:first", f"{tmp_path}/a.npz:second", f"{tmp_path}/m.onnx:W"]
    assert infos[1]["dtype"] == "float16" and infos[2]["mean"] == 3.0


def test_pb_name_stdin_and_literal(run_cli, tmp_path):
    from padconv_cli.tensorio import write_tensor

    write_tensor(np.array([1, 2, 3], np.int32), str(tmp_path / "t.pb"))
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(4, np.uint8))
    pb = _strict_json(run_cli("show", str(tmp_path / "t.pb"), "--json").stdout)[0]
    assert (pb["dtype"], pb["max"]) == ("int32", 3)
    piped = _strict_json(run_cli("show", "-", "--json", input=buffer.getvalue()).stdout)[0]
    assert (piped["name"], piped["dtype"], piped["size"]) == ("-", "uint8", 4)
    literal = _strict_json(run_cli("show", "[[1, 2], [3, 4]]", "--dtype", "int8", "--json")
                           .stdout)[0]
    assert (literal["dtype"], literal["mean"]) == ("int8", 2.5)


@pytest.mark.parametrize(
    ("array", "minimum", "maximum", "mean"),
    [
        (np.array([1.5, -0.5, 2.0]).astype(ml_dtypes.bfloat16), -0.5, 2.0, 1.0),
        (np.array([7, -8, 1]).astype(ml_dtypes.int4), -8, 7, 0.0),
        (np.array([True, False, True, True]), False, True, 0.75),
        (np.array([3 + 4j, 0j], np.complex64), 0.0, 5.0, 2.5),
        (np.array([2**64 - 1, 0], np.uint64), 0, 2**64 - 1, 2.0**63),
    ],
)
def test_exotic_types(array, minimum, maximum, mean):
    described = stats.describe_tensor("t", array)
    assert described["min"] == minimum and described["max"] == maximum
    assert type(described["min"]) is type(minimum)
    assert described["mean"] == pytest.approx(mean)


def test_strings_have_no_numbers(run_cli):
    (info,) = _strict_json(run_cli("show", '["a", "bc"]', "--json").stdout)
    assert info["dtype"] == "string" and info["min"] is None and info["finite"] == 0
    assert "no numeric statistics" in info["notes"][0]


def test_empty_tensor(run_cli, tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((0, 3), np.float32))
    (info,) = _strict_json(run_cli("show", str(tmp_path / "e.npy"), "--histogram",
                                   "--json").stdout)
    assert info["size"] == 0 and info["min"] is None and "histogram" not in info


def test_missing_file_is_exit_2(run_cli, tmp_path):
    result = run_cli("show", str(tmp_path / "absent.npy"))
    assert result.exit_code == 2 and "absent.npy" in result.stderr


def test_help_ends_with_examples(run_cli):
    for command in ("show", "inspect", "compare"):
        text = run_cli(command, "--help").stdout
        assert 2 <= text[text.rindex("Examples:"):].count("padconv ") <= 4


@settings(max_examples=30, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.integers(1, 60),
        elements=st.one_of(
            st.floats(-1e6, 1e6), st.sampled_from([np.nan, np.inf, -np.inf])
        ),
    )
)
def test_chunked_moments_equal_numpy(array):
    """Chan's merge over chunks of 7 equals numpy over the finite values in one go."""
    original = stats.CHUNK_ELEMENTS
    stats.CHUNK_ELEMENTS = 7
    try:
        result = stats.tensor_stats(array, bins=5)
    finally:
        stats.CHUNK_ELEMENTS = original
    finite = array[np.isfinite(array)]
    assert result["finite"] == finite.size
    assert result["nan"] == int(np.isnan(array).sum())
    if finite.size == 0:
        assert result["mean"] is None and "histogram" not in result
        return
    assert result["min"] == finite.min() and result["max"] == finite.max()
    assert result["mean"] == pytest.approx(finite.mean(), rel=1e-9, abs=1e-6)
    assert result["std"] == pytest.approx(finite.std(), rel=1e-7, abs=1e-6)
    assert sum(result["histogram"]["counts"]) == finite.size


@pytest.mark.parametrize("as_json", [False, True])
def test_model_without_initializers_says_so(run_cli, tmp_path, as_json):
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    onnx.save(onnx.helper.make_model(graph), str(tmp_path / "m.onnx"))
    result = run_cli("show", str(tmp_path / "m.onnx"),
                     *(["--json"] if as_json else ["--initializers"]))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == f"{tmp_path}/m.onnx: no initializers in the main graph\n"
    assert (_strict_json(result.stdout) == []) if as_json else (result.stdout == "")


def test_named_tensors_reports_an_empty_model_on_stderr(tmp_path, capsys):
    graph = onnx.helper.make_graph([], "g", [], [])
    onnx.save(onnx.helper.make_model(graph), str(tmp_path / "m.onnx"))
    assert list(stats.named_tensors(str(tmp_path / "m.onnx"))) == []
    assert capsys.readouterr().err == f"{tmp_path}/m.onnx: no initializers in the main graph\n"


# ``padconv show MODEL.onnx`` lists the nodes compactly (op, name, key attributes, shapes) and
# summarises the initializers, readable at 80 columns; --initializers describes each in full.


PLAIN = {"env": {"NO_COLOR": "1"}}


def test_nodes_are_listed_one_line_each_with_their_shapes(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx", input_dims=(1, 3, 16, 16))
    result = run_cli("show", path, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{path}: opset 17, 20 nodes (6 Conv, 6 Sigmoid")
    assert "  input   x float32[1, 3, 16, 16]" in lines
    pad = [line for line in lines if "/model.22/Pad" in line]
    assert pad and "reflect pads=[0,0,1,1,0,0,1,1]" in pad[0]
    assert pad[0].endswith("[1,4,16,16]->[1,4,18,18]")
    first_conv = [line for line in lines if YOLO_NAMES[0] + " " in line]
    assert "k=3x3 p=1" in first_conv[0] and first_conv[0].endswith("[1,3,16,16]->[1,4,16,16]")
    assert "13 initializers (3.4 KiB): w0 float32[4,3,3,3], b0" in result.stdout


def test_at_80_columns_every_node_name_is_whole(tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    run = run_in_terminal("show", path, columns=80, **PLAIN)
    assert run.exit_code == 0, run.text
    assert all(len(line) <= 80 for line in run.lines), run.text
    for name in YOLO_NAMES:
        assert any(f" {name} " in line or line.endswith(f" {name}") for line in run.lines)
    assert "[-1,3,?,?]->[-1,4,?,?]" in run.text
    assert len(run.lines) <= 30


def test_a_resnet_lists_nodes_not_initializers(run_cli, tmp_path):
    path = em.save(em.resnet18_like(width=64, size=224), tmp_path / "r.onnx")
    result = run_cli("show", path, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert result.stdout.count(" Conv ") + result.stdout.count(" Conv\n") >= 20
    assert "min at" not in result.stdout  # no per-initializer statistics
    full = run_cli("show", path, "--initializers", "--edge-items", "0")
    assert full.stdout.count("  min at ") >= 40


def test_one_initializer_is_still_described(run_cli, tmp_path):
    path = exported_model(tmp_path / "m.onnx")
    result = run_cli("show", f"{path}:pads")
    assert result.exit_code == 0 and "int64[8]" in result.stdout


# ``padconv show`` statistics: median, p90/p95/p99 and the index of min/max, over the finite
# values (NaN and infinities left out), also across chunk boundaries.


def test_percentiles_and_extreme_indices_skip_non_finite(monkeypatch):
    monkeypatch.setattr(stats, "CHUNK_ELEMENTS", 7)  # several chunks, extremes in later ones
    rng = np.random.default_rng(0)
    array = rng.normal(size=(5, 9)).astype(np.float32)
    array[0, 0], array[1, 1], array[2, 2] = np.nan, np.inf, -np.inf
    array[4, 3], array[3, 8] = -50.0, 70.0
    result = stats.tensor_stats(array)
    finite = array[np.isfinite(array)].astype(np.float64)
    for name, q in stats.PERCENTILES.items():
        assert result[name] == pytest.approx(np.percentile(finite, q), abs=1e-6)
    assert result["argmin"] == [4, 3] and result["argmax"] == [3, 8]
    assert result["min"] == -50.0 and result["max"] == 70.0


def test_first_occurrence_of_a_repeated_extreme_is_reported(monkeypatch):
    monkeypatch.setattr(stats, "CHUNK_ELEMENTS", 4)
    array = np.array([3, 1, 9, 1, 9, 0, 0, 9], np.int64)
    result = stats.tensor_stats(array)
    assert result["argmin"] == [5] and result["argmax"] == [2]


def test_uint64_extremes_stay_exact():
    array = np.array([2**64 - 1, 5, 2**64 - 2], np.uint64)
    result = stats.tensor_stats(array)
    assert result["max"] == 2**64 - 1 and result["argmax"] == [0] and result["argmin"] == [1]


def test_only_non_finite_values_have_no_percentiles(run_cli):
    result = run_cli("show", "[nan, inf]", "--json")
    (record,) = json.loads(result.stdout)
    assert "median" not in record and "argmin" not in record


def test_show_prints_and_jsons_the_new_statistics(run_cli):
    text = run_cli("show", "[[1.0, 5.0], [7.0, -2.0]]").stdout
    assert "median 3  p90 6.4  p95 6.7  p99 6.94" in text
    assert "min at [1, 1]  max at [1, 0]" in text
    (record,) = json.loads(run_cli("show", "[[1.0, 5.0], [7.0, -2.0]]", "--json").stdout)
    assert record["median"] == 3.0 and record["p99"] == pytest.approx(6.94)
    assert record["argmin"] == [1, 1] and record["argmax"] == [1, 0]


# ``padconv show MODEL.onnx:NAME`` of a quantized tensor shows its scale and zero point.


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
