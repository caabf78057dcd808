"""``padconv conv-transpose``, ``conv-integer`` and ``qlinear-conv`` as a user runs them: the
result equals the public API's, bad input is one line and exit 2, --explain names the rulings,
--emit-onnx writes a model onnxruntime runs, --check compares with the peers, and the
out-of-core engines write the in-memory result."""

from __future__ import annotations

import numpy as np
import pytest

import padconv_cli

RNG = np.random.default_rng(5)


@pytest.fixture
def float_case(tmp_path):
    """x 1x4x5x5, w 4x3x3x3, b 3 (float32) as files."""
    arrays = {"x": RNG.standard_normal((1, 4, 5, 5)).astype(np.float32),
              "w": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32),
              "b": RNG.standard_normal(3).astype(np.float32)}
    return _save(tmp_path / "float", arrays)


@pytest.fixture
def integer_case(tmp_path):
    """uint8 x, int8 w, their zero points, scales (w per channel), y's, an int32 bias."""
    arrays = {
        "x": RNG.integers(0, 256, (1, 4, 5, 5)).astype(np.uint8),
        "w": RNG.integers(-128, 128, (3, 4, 3, 3)).astype(np.int8),
        "xz": np.array(128, np.uint8), "wz": np.array([1, -2, 3], np.int8),
        "xs": np.array(0.02, np.float32), "ws": np.array([0.01, 0.02, 0.03], np.float32),
        "ys": np.array(0.5, np.float32), "yz": np.array(10, np.uint8),
        "b": np.array([100, -200, 5], np.int32),
    }
    return _save(tmp_path / "integer", arrays)


def _save(folder, arrays):
    folder.mkdir()
    paths = {}
    for name, array in arrays.items():
        paths[name] = str(folder / f"{name}.npy")
        np.save(paths[name], array)
    paths["arrays"] = arrays
    paths["dir"] = folder
    return paths


def _qlinear_arguments(case):
    return [case[k] for k in ("x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b")]


def _qlinear_api(case, **attributes):
    a = case["arrays"]
    return padconv_cli.qlinear_conv(a["x"], a["xs"], a["xz"], a["w"], a["ws"], a["wz"],
                                    a["ys"], a["yz"], a["b"], **attributes)


def test_conv_transpose_command_equals_the_public_api(run_cli, float_case):
    out = float_case["dir"] / "y.npy"
    result = run_cli("conv-transpose", float_case["x"], float_case["w"], float_case["b"],
                     "--strides", "2", "2", "--pads", "1", "1", "1", "1",
                     "--output-padding", "1", "1", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    a = float_case["arrays"]
    expected = padconv_cli.conv_transpose(a["x"], a["w"], a["b"], strides=[2, 2],
                                          pads=[1, 1, 1, 1], output_padding=[1, 1])
    assert np.array_equal(np.load(out), expected)
    assert expected.shape == (1, 3, 10, 10)


def test_conv_transpose_output_shape_flag(run_cli, float_case):
    out = float_case["dir"] / "y.npy"
    result = run_cli("conv-transpose", float_case["x"], float_case["w"], "--strides", "2",
                     "2", "--output-shape", "10", "9", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert np.load(out).shape == (1, 3, 10, 9)


def test_conv_integer_command_equals_the_public_api(run_cli, integer_case):
    out = integer_case["dir"] / "y.npy"
    a = integer_case["arrays"]
    wz = integer_case["dir"] / "wz_scalar.npy"
    np.save(wz, np.array(3, np.int8))
    result = run_cli("conv-integer", integer_case["x"], integer_case["w"], integer_case["xz"],
                     str(wz), "--pads", "1", "1", "1", "1", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    got = np.load(out)
    assert got.dtype == np.int32
    assert np.array_equal(got, padconv_cli.conv_integer(a["x"], a["w"], a["xz"],
                                                        np.array(3, np.int8),
                                                        pads=[1, 1, 1, 1]))


def test_conv_integer_without_zero_points(run_cli, integer_case):
    out = integer_case["dir"] / "y.npy"
    result = run_cli("conv-integer", integer_case["x"], integer_case["w"], "-o", str(out))
    assert result.exit_code == 0, result.stderr
    a = integer_case["arrays"]
    assert np.array_equal(np.load(out), padconv_cli.conv_integer(a["x"], a["w"]))


def test_qlinear_conv_command_equals_the_public_api(run_cli, integer_case):
    out = integer_case["dir"] / "y.npy"
    result = run_cli("qlinear-conv", *_qlinear_arguments(integer_case), "--strides", "2", "2",
                     "--pads", "1", "1", "1", "1", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    got = np.load(out)
    assert got.dtype == np.uint8
    assert np.array_equal(got, _qlinear_api(integer_case, strides=[2, 2], pads=[1, 1, 1, 1]))


def test_literal_zero_points_and_scales_take_their_inputs_types(run_cli, integer_case):
    """``128`` for x_zero_point is X's uint8, ``0.02`` a float32 scale: the same result as the
    typed files; a literal outside its type's range is one line, exit 2, nothing written."""
    case = integer_case
    out = case["dir"] / "literal.npy"
    literals = [case["x"], "0.02", "128", case["w"], "[0.01, 0.02, 0.03]", "[1, -2, 3]", "0.5",
                "10", "[100, -200, 5]"]
    result = run_cli("qlinear-conv", *literals, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(out), _qlinear_api(case))
    result = run_cli("conv-integer", case["x"], case["w"], "128", "[1, -2, 3]", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    a = case["arrays"]
    assert np.array_equal(np.load(out), padconv_cli.conv_integer(a["x"], a["w"], a["xz"], a["wz"]))
    before = out.read_bytes()
    refused = run_cli("qlinear-conv", *literals[:2], "256", *literals[3:], "-o", str(out))
    assert refused.exit_code == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and "uint8" in refused.stderr
    assert out.read_bytes() == before


@pytest.mark.parametrize("name, value, param", [
    ("xs", np.array(0.0, np.float32), "x_scale"),
    ("ys", np.array(-1.0, np.float32), "y_scale"),
    ("ws", np.array([0.1, np.inf, 0.1], np.float32), "w_scale"),
    ("xz", np.array(12, np.int8), "x_zero_point"),
    ("wz", np.array([1, 2], np.int8), "w_zero_point"),
    ("ws", np.array([0.1, 0.2], np.float32), "w_scale"),
    ("b", np.array([1, 2, 3], np.int64), "B"),
    ("x", np.zeros((1, 4, 5, 5), np.int16), "x"),
])
def test_qlinear_conv_bad_input_is_one_line_exit_2(run_cli, integer_case, name, value, param):
    np.save(integer_case[name], value)
    out = integer_case["dir"] / "y.npy"
    result = run_cli("qlinear-conv", *_qlinear_arguments(integer_case), "-o", str(out))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("padconv qlinear-conv: error:"), lines
    assert param in lines[0]
    assert "Traceback" not in result.stderr and not out.exists()


@pytest.mark.parametrize("arguments, words", [
    (["--output-padding", "2", "2"], "--output-padding"),
    (["--strides", "2", "2", "--output-shape", "100000000", "100000000"], "limit"),
    (["--output-shape", "1", "2", "3"], "--output-shape"),
])
def test_conv_transpose_bad_attributes_are_one_line_exit_2(run_cli, float_case, arguments,
                                                           words):
    result = run_cli("conv-transpose", float_case["x"], float_case["w"], *arguments,
                     "-o", str(float_case["dir"] / "y.npy"))
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert words in result.stderr


def test_conv_integer_refuses_float_input(run_cli, float_case):
    result = run_cli("conv-integer", float_case["x"], float_case["w"])
    assert result.exit_code == 2
    assert "int8 or uint8" in result.stderr


def test_explain_names_the_rulings(run_cli, float_case, integer_case):
    result = run_cli("conv-transpose", float_case["x"], float_case["w"], "--strides", "2",
                     "2", "--auto-pad", "SAME_UPPER", "--explain")
    assert result.exit_code == 0, result.stderr
    assert "ruling same-target-in-times-stride" in result.stdout
    assert "out[0] = 5*2 = 10" in result.stdout
    result = run_cli("qlinear-conv", *_qlinear_arguments(integer_case), "--pads", "1", "1",
                     "1", "1", "--explain")
    assert "ruling qlinear-exactly-rounded" in result.stdout
    assert "ruling integer-padding-is-zero-point" in result.stdout
    assert "uint8[1, 3, 5, 5]" in result.stdout


@pytest.mark.parametrize("command", ["conv-transpose", "conv-integer", "qlinear-conv"])
def test_emitted_model_runs_in_onnxruntime(run_cli, float_case, integer_case, command):
    ort = pytest.importorskip("onnxruntime")
    if command == "conv-transpose":
        arguments = [float_case["x"], float_case["w"], float_case["b"], "--strides", "2", "2"]
        folder = float_case["dir"]
    elif command == "conv-integer":
        arguments = [integer_case["x"], integer_case["w"], integer_case["xz"]]
        folder = integer_case["dir"]
    else:
        arguments = _qlinear_arguments(integer_case)
        folder = integer_case["dir"]
    model, out = folder / "m.onnx", folder / "y.npy"
    result = run_cli(command, *arguments, "--emit-onnx", str(model),
                     "--emit-initializers", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    got = session.run(None, {})[0]
    ours = np.load(out)
    assert got.dtype == ours.dtype and got.shape == ours.shape
    if ours.dtype.kind == "f":
        assert np.allclose(got, ours, rtol=1e-5, atol=1e-5)
    else:
        assert np.abs(got.astype(np.int64) - ours.astype(np.int64)).max() <= 1


@pytest.mark.parametrize("command", ["conv-transpose", "conv-integer"])
def test_check_agrees_with_the_peers(run_cli, float_case, integer_case, command):
    pytest.importorskip("onnxruntime")
    case = float_case if command == "conv-transpose" else integer_case
    result = run_cli(command, case["x"], case["w"], "--pads", "1", "1", "1", "1", "--check",
                     "-o", str(case["dir"] / "y.npy"))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "check: passed" in result.stdout + result.stderr


def test_check_names_onnxruntimes_per_channel_conv_integer_refusal(run_cli, integer_case):
    pytest.importorskip("onnxruntime")
    result = run_cli("conv-integer", integer_case["x"], integer_case["w"], integer_case["xz"],
                     integer_case["wz"], "--check", "-o", str(integer_case["dir"] / "y.npy"))
    text = result.stdout + result.stderr
    assert "per-channel w_zero_point" in text
    assert result.exit_code == 0, text


@pytest.mark.parametrize("engine", ["tiled", "dask"])
def test_out_of_core_engines_write_the_in_memory_result(run_cli, float_case, engine):
    pytest.importorskip("dask")
    memory, out = float_case["dir"] / "m.npy", float_case["dir"] / "y.npy"
    arguments = [float_case["x"], float_case["w"], float_case["b"], "--strides", "2", "2"]
    assert run_cli("conv-transpose", *arguments, "-o", str(memory)).exit_code == 0
    result = run_cli("conv-transpose", *arguments, "--engine", engine, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(np.load(out), np.load(memory))


def test_help_lists_the_family_commands(run_cli):
    text = run_cli("--help").stdout
    for command in ("conv-transpose", "conv-integer", "qlinear-conv"):
        assert command in text


@pytest.mark.parametrize("arguments, named", [
    (["--dilations", "2", "2", "--output-padding", "1", "1"], ["onnxruntime#14208",
                                                               "output_padding >= stride"]),
    (["--strides", "2", "2", "--output-shape", "13", "13"], ["derived from output_shape",
                                                             "more than one element past"]),
])
def test_check_names_the_peers_known_conv_transpose_deviations(run_cli, float_case, arguments,
                                                               named):
    pytest.importorskip("onnxruntime")
    result = run_cli("conv-transpose", float_case["x"], float_case["w"], *arguments, "--check",
                     "-o", str(float_case["dir"] / "y.npy"))
    text = result.stdout + result.stderr
    assert result.exit_code == 0, text
    for words in named:
        assert words in text
    assert "believed right: padconv" in text


def test_check_names_the_reference_deviation_on_grouped_conv_transpose(run_cli, tmp_path):
    pytest.importorskip("onnxruntime")
    x = RNG.standard_normal((1, 4, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    result = run_cli("conv-transpose", str(tmp_path / "x.npy"), str(tmp_path / "w.npy"),
                     "--group", "2", "--check", "-o", str(tmp_path / "y.npy"))
    text = result.stdout + result.stderr
    assert "grouped ConvTranspose" in text
    assert "onnxruntime     agree" in text
