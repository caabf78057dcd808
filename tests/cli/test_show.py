"""``padconv show`` / ``padconv inspect``: statistics, previews and histograms of every format."""

from __future__ import annotations

import io
import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from padconv_cli import stats

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
    assert result.finite == finite.size
    assert result.nan == int(np.isnan(array).sum())
    if finite.size == 0:
        assert result.mean is None and result.histogram is None
        return
    assert result.minimum == finite.min() and result.maximum == finite.max()
    assert result.mean == pytest.approx(finite.mean(), rel=1e-9, abs=1e-6)
    assert result.std == pytest.approx(finite.std(), rel=1e-7, abs=1e-6)
    assert sum(result.histogram.counts) == finite.size


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


def test_named_tensors_reports_an_empty_model_to_its_notice(tmp_path):
    graph = onnx.helper.make_graph([], "g", [], [])
    onnx.save(onnx.helper.make_model(graph), str(tmp_path / "m.onnx"))
    notices = []
    assert list(stats.named_tensors(str(tmp_path / "m.onnx"), notice=notices.append)) == []
    assert notices == [f"{tmp_path}/m.onnx: no initializers in the main graph"]
