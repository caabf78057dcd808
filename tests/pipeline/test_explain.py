"""``--explain``: resolved attributes, per-dimension formulas, FLOPs, and the memory the resource
gate checks; nothing computed."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from padconv_cli.errors import AttributeValueError
from padconv_cli.explain import explanation
from padconv_cli.models import resolve_call
from padconv_cli.ops import compute, plan_call
from padconv_cli.units import human_bytes

# ``--explain``: resolved attributes, per-dimension formulas, FLOPs, memory; nothing computed.


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(3)
    np.save(tmp_path / "x.npy", rng.standard_normal((2, 4, 9, 7)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.standard_normal((6, 2, 3, 2)).astype(np.float32))
    np.save(tmp_path / "b.npy", rng.standard_normal(6).astype(np.float32))
    return tmp_path


def _json(run_cli, *args):
    result = run_cli(*args, "--explain", "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_pad_explain_text(run_cli, files):
    out = files / "y.npy"
    result = run_cli("pad", str(files / "x.npy"), "--pads", "0", "0", "1", "-2", "0", "0", "3",
                     "1", "--mode", "edge", "--explain", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert not out.exists()
    text = result.stdout
    assert "dim 2: 9 + 1 + 3 = 13" in text
    assert "dim 3: 7 + (-2) + 1 = 6" in text
    assert "output: float32[2, 4, 13, 6]" in text
    assert "mode            edge  (flag)" in text
    assert "axes            [0, 1, 2, 3]  (default)" in text
    assert "FLOPs: 0" in text


def test_pad_explain_json_fields(run_cli, files):
    info = _json(run_cli, "pad", str(files / "x.npy"), "--pads", "2", "1", "--axes", "-1",
                 "--constant-value", "0.5")
    assert info["operator"] == "Pad"
    assert info["attributes"] == {
        "mode": "constant", "pads": [2, 1], "axes": [3], "constant_value": 0.5,
    }
    assert info["sources"] == {
        "mode": "default", "pads": "flag", "axes": "flag", "constant_value": "flag",
    }
    assert info["output"] == {"shape": [2, 4, 9, 10], "bytes": 2 * 4 * 9 * 10 * 4,
                              "dtype": "float32", "format": "npy"}
    assert [d["size"] for d in info["dims"]] == [2, 4, 9, 10]
    memory = info["memory"]
    assert memory["inputs"] == 2 * 4 * 9 * 7 * 4
    assert memory["total"] == memory["inputs"] + memory["output"] + memory["working"]
    assert info["onnx"] == {"operator": "Pad-18", "opset": 18, "reason": "the axes input"}


def test_conv_explain_resolves_auto_pad_and_kernel_shape(run_cli, files):
    info = _json(run_cli, "conv", str(files / "x.npy"), str(files / "w.npy"), str(files / "b.npy"),
                 "--group", "2", "--strides", "2", "3", "--auto-pad", "SAME_LOWER")
    attributes = info["attributes"]
    assert attributes["kernel_shape"] == [3, 2]
    assert info["sources"]["kernel_shape"] == "W.shape[2:]"
    # SAME: out = ceil(in / s) = (5, 3); total pad = (out - 1) * s + k - in = (2, 1);
    # SAME_LOWER puts the odd element at the beginning
    assert info["output"]["shape"] == [2, 6, 5, 3]
    assert attributes["pads"] == [1, 1, 1, 0]
    assert info["sources"]["pads"] == "auto_pad SAME_LOWER"
    assert attributes["dilations"] == [1, 1] and info["sources"]["dilations"] == "default"
    assert info["dims"][0]["formula"] == "N = X.shape[0] = 2"
    assert len(info["dims"]) == 4 and all(str(d["size"]) in d["formula"] for d in info["dims"])
    positions = 5 * 3
    expected_flops = 2 * 2 * 6 * positions * 2 * (3 * 2) + 2 * 6 * positions
    assert info["flops"] == expected_flops
    inputs = {entry["name"]: entry for entry in info["inputs"]}
    assert inputs["W"]["shape"] == [6, 2, 3, 2] and inputs["B"]["from"] == "command line"


def test_explain_from_model_marks_model_sources(run_cli, files):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("Conv", ["x", "W"], ["y"], name="c1", strides=[2, 2], group=2)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.load(files / "w.npy"), "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnx.save(model, str(files / "m.onnx"))
    info = _json(run_cli, "conv", str(files / "x.npy"), "--from-model", str(files / "m.onnx"),
                 "--dilations", "2", "1")
    assert info["model"] == {"path": str(files / "m.onnx"), "node": "c1", "operator": "Conv-11"}
    assert info["sources"]["strides"] == "model"
    assert info["sources"]["group"] == "model"
    assert info["sources"]["dilations"] == "flag"
    assert {e["name"]: e["from"] for e in info["inputs"]} == {"X": "command line", "W": "model"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--explain", "--check"], "--explain does not compute"),
        (["--json"], "--json changes the output of --explain or --check"),
        (["--check-atol", "1"], "need --check"),
    ],
)
def test_meaningless_combinations_are_usage_errors(run_cli, files, extra, message):
    result = run_cli("pad", str(files / "x.npy"), "--pads", "1,1,1,1,1,1,1,1", *extra)
    assert result.exit_code == 2
    assert message in result.stderr


def test_explain_reports_attribute_errors_like_a_run(run_cli, files):
    result = run_cli("conv", str(files / "x.npy"), str(files / "w.npy"), "--explain")
    assert result.exit_code == 2
    assert "W.shape[1]*group" in result.stderr


@settings(max_examples=20, deadline=None)
@given(
    size=st.integers(3, 9),
    kernel=st.integers(1, 3),
    stride=st.integers(1, 3),
    dilation=st.integers(1, 2),
    auto_pad=st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]),
    pads=st.tuples(st.integers(0, 2), st.integers(0, 2)),
)
def test_explained_shape_is_the_computed_shape(size, kernel, stride, dilation, auto_pad, pads):
    x = np.ones((1, 2, size), np.float32)
    w = np.ones((3, 2, kernel), np.float32)
    flags = {"strides": (stride,), "dilations": (dilation,), "auto_pad": auto_pad}
    if auto_pad == "NOTSET":
        flags["pads"] = pads
    resolved = resolve_call("Conv", (x, w, None), flags)
    try:
        plan = plan_call(resolved.call)
    except AttributeValueError:
        assume(False)  # input smaller than the dilated kernel: refused, tested with the kernel
    info = explanation(resolved, plan, set(flags))
    assert info["output"]["shape"] == list(compute(resolved.call).shape)
    assert info["flops"] == 2 * 3 * info["output"]["shape"][2] * 2 * kernel


def test_working_memory_estimate_covers_the_float32_copies_and_the_native_buffers():
    from padconv_cli.kernels import conv as conv_kernel
    from padconv_cli.kernels import native

    x = np.ones((1, 8, 32, 32), np.float16)
    w = np.ones((8, 8, 3, 3), np.float16)
    plan = plan_call(resolve_call("Conv", (x, w, None), {"pads": (1, 1, 1, 1)}).call)
    working = conv_kernel.working_bytes(plan, np.dtype(np.float16))
    # W and B in float32, and the float32 output in one chunk (X is read in place)
    copies = (w.size + 8 + 8 * 32 * 32) * 4
    # packed W and every thread's buffer, as the native core sizes them for its run
    threads = native.thread_count()
    buffers = native.extension().conv_scratch_bytes(
        x.shape, w.shape, (1, 8, 32, 32), (1, 1), (1, 1), (1, 1), 1, threads,
        native.selected_isa(), 4)
    assert 8 * 72 * 4 < buffers  # W packed at least
    assert working == copies + buffers


def test_explain_pipes_nothing_but_text(run_cli, files):
    result = run_cli("pad", str(files / "x.npy"), "--pads", "1,1,1,1,1,1,1,1", "--explain")
    assert result.exit_code == 0
    with pytest.raises(ValueError):
        np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    assert math.prod([4, 6, 11, 9]) * 4 == json.loads(
        run_cli("pad", str(files / "x.npy"), "--pads", "1,1,1,1,1,1,1,1", "--explain",
                "--json").stdout
    )["output"]["bytes"]


# ``--explain`` reports the memory the resource gate checks: a limit one byte below its total
# is refused naming that total, a limit equal to it runs (in memory: literal inputs).


CALLS = {
    "strings": ["pad", '["ab", "c"]', "--pads", "1", "2"],  # python strings, 8 B pointers
    "floats": ["pad", "[[1.5, 2.5], [3.5, 4.5]]", "--pads", "1", "0", "0", "1"],
    "conv": ["conv", "[[[[1.0, 2.0, 3.0, 4.0]]]]", "[[[[1.0, -1.0]]]]",
             "--pads", "0", "0", "0", "1"],
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_gate_checks_what_explain_reports(run_cli, tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    explained = run_cli(*CALLS[name], "--explain", "--json")
    assert explained.exit_code == 0, explained.stderr
    total = json.loads(explained.stdout)["memory"]["total"]
    refused = run_cli(*CALLS[name], "--memory-limit", str(total - 1), "-o", "y.npy")
    assert refused.exit_code == 2
    assert f"needs {human_bytes(total)} in memory" in refused.stderr
    assert not (tmp_path / "y.npy").exists()
    done = run_cli(*CALLS[name], "--memory-limit", str(total), "-o", "y.npy")
    assert done.exit_code == 0, done.stderr


def test_pad_explain_shows_the_default_fill_of_a_type_without_zero():
    import ml_dtypes

    from padconv_cli.pipeline import Request, plan

    data = np.ones((2, 2), ml_dtypes.float8_e8m0fnu)
    planned = plan(Request("Pad", (data,), {"pads": [1, 1, 1, 1]}))
    shown = planned.explain()["attributes"]["constant_value"]
    result = planned.execute(write=False).result
    assert shown == float(result[0, 0]) == 2.0**-127
