"""The operator commands as a user runs them (pad, conv, conv-transpose, conv-integer,
qlinear-conv): built from the operators' declarations, files in and files or bytes out, one-line
errors, and the notes a new user needs."""

from __future__ import annotations

import io

import numpy as np
import pytest
from click.testing import CliRunner
from oracles import fp16_spec_example

import padconv_cli
from padconv_cli.cli.operator_command import operator_command
from padconv_cli.ops.conv import OPERATOR as CONV
from padconv_cli.ops.protocol import OPTIONAL, UNLESS_MODEL, Attribute, Command, Input

# ``padconv conv-transpose``, ``conv-integer`` and ``qlinear-conv`` as a user runs them: the
# result equals the public API's, bad input is one line and exit 2, --explain names the rulings,
# --emit-onnx writes a model onnxruntime runs, --check compares with the peers, and the
# out-of-core engines write the in-memory result.


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
    else:  # W halved: onnxruntime's AVX2 kernel saturates beyond [-64, 63] (onnxruntime#16105)
        halved = integer_case["dir"] / "w_halved.npy"
        np.save(halved, np.load(integer_case["w"]) // 2)
        arguments = [str(halved) if path == integer_case["w"] else path
                     for path in _qlinear_arguments(integer_case)]
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


# ``padconv pad`` as a user runs it: files in, files or bytes out, one-line errors.


DATA = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], dtype=np.float32)
DOC_EXPECTED = {
    "constant": [[0.0, 0.0, 1.0, 1.2], [0.0, 0.0, 2.3, 3.4], [0.0, 0.0, 4.5, 5.7]],
    "reflect": [[1.0, 1.2, 1.0, 1.2], [2.3, 3.4, 2.3, 3.4], [4.5, 5.7, 4.5, 5.7]],
    "edge": [[1.0, 1.0, 1.0, 1.2], [2.3, 2.3, 2.3, 3.4], [4.5, 4.5, 4.5, 5.7]],
}


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.npy"
    np.save(path, DATA)
    return path


@pytest.mark.parametrize("mode", sorted(DOC_EXPECTED))
def test_documented_examples_to_npy(run_cli, data_file, tmp_path, mode):
    out = tmp_path / "out.npy"
    result = run_cli(
        "pad", str(data_file), "--pads", "0", "2", "0", "0", "--mode", mode, "-o", str(out)
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    got = np.load(out)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array(DOC_EXPECTED[mode], dtype=np.float32))


def test_pb_output_round_trips(run_cli, data_file, tmp_path):
    from padconv_cli.tensor_sources import read_tensor

    out = tmp_path / "out.pb"
    result = run_cli("pad", str(data_file), "--pads", "0,2,0,0", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(
        read_tensor(str(out)), np.array(DOC_EXPECTED["constant"], dtype=np.float32)
    )


def test_piped_stdout_gets_npy_bytes(run_cli, data_file):
    result = run_cli("pad", str(data_file), "--pads", "0", "2", "0", "0", "--mode", "edge")
    assert result.exit_code == 0, result.stderr
    got = np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    np.testing.assert_array_equal(got, np.array(DOC_EXPECTED["edge"], dtype=np.float32))


def test_stdin_input(run_cli):
    buffer = io.BytesIO()
    np.save(buffer, DATA)
    result = run_cli("pad", "-", "--pads", "0", "2", "0", "0", "-o", "-", input=buffer.getvalue())
    assert result.exit_code == 0, result.stderr
    got = np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    np.testing.assert_array_equal(got, np.array(DOC_EXPECTED["constant"], dtype=np.float32))


def test_inline_literal_with_dtype_axes_and_negative_pads(run_cli):
    result = run_cli(
        "pad",
        "[[1, 2, 3], [4, 5, 6]]",
        "--dtype",
        "int8",
        "--pads",
        "1",
        "-1",
        "--axes",
        "-1",
        "--constant-value",
        "7",
        "-o",
        "-",
    )
    assert result.exit_code == 0, result.stderr
    got = np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, [[7, 1, 2], [7, 4, 5]])


def test_output_may_name_the_input(run_cli, data_file):
    result = run_cli("pad", str(data_file), "--pads", "0", "1", "0", "0", "-o", str(data_file))
    assert result.exit_code == 0, result.stderr
    assert np.load(data_file).shape == (3, 3)


def test_pads_from_tensor_file(run_cli, data_file, tmp_path):
    pads = tmp_path / "pads.npy"
    np.save(pads, np.array([0, 2, 0, 0], dtype=np.int64))
    out = tmp_path / "out.npy"
    result = run_cli(
        "pad", str(data_file), "--pads", f"@{pads}", "--mode", "reflect", "-o", str(out)
    )
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), np.array(DOC_EXPECTED["reflect"], np.float32))


def test_string_tensor_in_pb(run_cli, tmp_path):
    from padconv_cli.tensor_sources import read_tensor
    from padconv_cli.tensorio import write_tensor

    source = tmp_path / "words.pb"
    write_tensor(np.array(["a", "bc"], dtype=object), str(source))
    out = tmp_path / "out.pb"
    result = run_cli(
        "pad", str(source), "--pads", "1", "1", "--constant-value", "zz", "-o", str(out)
    )
    assert result.exit_code == 0, result.stderr
    assert list(read_tensor(str(out))) == ["zz", "a", "bc", "zz"]


PAD_ERROR_CASES = [
    (["--pads", "0", "2", "0"], "pads"),
    (["--pads", "0", "2", "0", "0", "--mode", "symmetric"], "--mode"),
    (["--pads", "0", "2", "0", "0", "--axes", "5"], "axes"),
    (["--pads", "0", "2", "0", "0", "--axes", "1", "-1"], "axes"),
    (["--pads", "0", "-5", "0", "0"], "pads"),
    (["--pads", "0", "2", "0", "0", "--constant-value", "abc"], "constant"),
    (["--pads", "0", "2", "0", "0", "--max-output-bytes", "10"], "--max-output-bytes"),
    (["--pads", "0", "2", "0", "0", "--format", "tiff"], "--format"),
]


@pytest.mark.parametrize(("args", "needle"), PAD_ERROR_CASES)
def test_pad_errors_are_one_line_exit_2_and_write_nothing(
    run_cli, data_file, tmp_path, args, needle
):
    out = tmp_path / "out.npy"
    result = run_cli("pad", str(data_file), *args, "-o", str(out))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert needle in result.stderr
    assert not out.exists()


def test_missing_file_names_it(run_cli, tmp_path):
    result = run_cli("pad", str(tmp_path / "nope.npy"), "--pads", "1", "1")
    assert result.exit_code == 2
    assert "nope.npy" in result.stderr and result.stderr.count("\n") == 1


def test_failed_command_leaves_existing_output_untouched(run_cli, data_file, tmp_path):
    out = tmp_path / "out.npy"
    out.write_bytes(b"precious")
    result = run_cli("pad", str(data_file), "--pads", "0", "2", "0", "-o", str(out))
    assert result.exit_code == 2
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.npy", "out.npy"]


def test_bfloat16_to_npy_is_refused_naming_pb(run_cli, tmp_path):
    result = run_cli(
        "pad",
        "[1.0, 2.0]",
        "--dtype",
        "bfloat16",
        "--pads",
        "1",
        "1",
        "-o",
        str(tmp_path / "out.npy"),
    )
    assert result.exit_code == 2
    assert ".pb" in result.stderr
    assert not (tmp_path / "out.npy").exists()


# ``padconv conv`` as a user runs it.


X5 = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
W3 = np.ones((1, 1, 3, 3), dtype=np.float32)
WITH_PADDING = [
    [12.0, 21.0, 27.0, 33.0, 24.0],
    [33.0, 54.0, 63.0, 72.0, 51.0],
    [63.0, 99.0, 108.0, 117.0, 81.0],
    [93.0, 144.0, 153.0, 162.0, 111.0],
    [72.0, 111.0, 117.0, 123.0, 84.0],
]


@pytest.fixture
def xw(tmp_path):
    x, w = tmp_path / "x.npy", tmp_path / "w.npy"
    np.save(x, X5)
    np.save(w, W3)
    return x, w


def test_documented_padding_example(run_cli, xw, tmp_path):
    out = tmp_path / "y.npy"
    result = run_cli(
        "conv",
        str(xw[0]),
        str(xw[1]),
        "--kernel-shape",
        "3",
        "3",
        "--pads",
        "1",
        "1",
        "1",
        "1",
        "-o",
        str(out),
    )
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(out)[0, 0], WITH_PADDING)


def test_kernel_shape_taken_from_w_and_bias_literal(run_cli, xw):
    result = run_cli("conv", str(xw[0]), str(xw[1]), "[0.5]", "--auto-pad", "VALID", "-o", "-")
    assert result.exit_code == 0, result.stderr
    got = np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    np.testing.assert_array_equal(got[0, 0], np.array(WITH_PADDING)[1:4, 1:4] + 0.5)


def test_fp16_example_bit_exact(run_cli, tmp_path):
    for name, tensor in zip(("x", "w", "b"), fp16_spec_example()[:3], strict=True):
        np.save(tmp_path / f"{name}.npy", tensor)
    result = run_cli("conv", *(str(tmp_path / f"{n}.npy") for n in "xwb"), "--pads", "1,1,1,1",
                     "-o", "-")
    assert result.exit_code == 0, result.stderr
    got = np.load(io.BytesIO(result.stdout_bytes), allow_pickle=False)
    assert got.dtype == np.float16
    assert got.tobytes() == fp16_spec_example()[3].tobytes()


CONV_ERROR_CASES = [
    (["--kernel-shape", "2", "2"], "--kernel-shape"),
    (["--strides", "0", "1"], "strides"),
    (["--dilations", "1"], "dilations"),
    (["--pads", "1", "1", "1", "1", "--auto-pad", "SAME_UPPER"], "auto_pad"),
    (["--pads", "-1", "0", "0", "0"], "pads"),
    (["--group", "2"], "group"),
    (["--auto-pad", "SAME"], "--auto-pad"),
]


@pytest.mark.parametrize(("args", "needle"), CONV_ERROR_CASES)
def test_conv_errors_are_one_line_exit_2(run_cli, xw, tmp_path, args, needle):
    out = tmp_path / "y.npy"
    result = run_cli("conv", str(xw[0]), str(xw[1]), *args, "-o", str(out))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert needle in result.stderr
    assert not out.exists()


def test_integer_input_is_refused_with_advice(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3, 3), dtype=np.int64))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 3, 3), dtype=np.int64))
    result = run_cli("conv", str(tmp_path / "x.npy"), str(tmp_path / "w.npy"), "-o", "-")
    assert result.exit_code == 2
    assert "float" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize(("bias", "shape"), [("[0.5, 1.5]", "(2,)"), ("[[0.5]]", "(1, 1)")])
def test_bias_of_wrong_shape(run_cli, xw, bias, shape):
    result = run_cli("conv", str(xw[0]), str(xw[1]), bias, "-o", "-")
    assert result.exit_code == 2
    message = f"padconv conv: error: Conv bias B must have shape (M,) = (1,), got {shape}\n"
    assert result.stderr == message
    assert result.stdout_bytes == b""


# An operator's command comes from what its module declares: each declared input is an
# argument, each attribute a flag with its kind, choices and help, the texts are the help; what
# the declarations require is refused when missing, and the call runs through the pipeline.


def _invoke(command, *args):
    return CliRunner().invoke(command, list(args), catch_exceptions=False)


def _with_extra_declarations():
    """Conv declared with one more optional input and a choice attribute it ignores."""
    extra_input = Input("Z", required=OPTIONAL)
    extra = Attribute("rounding", "choice", "even", choices=("even", "away"),
                      show_default=True, help="How halfway values round.")
    texts = Command("ONNX Conv, declared anew.", "Convolve X with W.", "Examples:\n  here")
    return CONV._replace(inputs=(*CONV.inputs, extra_input),
                         attributes=(*CONV.attributes, extra), texts=texts,
                         typed=lambda attributes, dtype: {
                             k: v for k, v in attributes.items() if k != "rounding"})


def test_declared_inputs_attributes_and_texts_make_the_help():
    result = _invoke(operator_command(_with_extra_declarations()), "--help")
    assert result.exit_code == 0
    assert "[W] [B] [Z]" in result.output
    assert "--rounding [even|away]" in result.output
    assert "How halfway values round." in result.output and "[default: even]" in result.output
    assert "Convolve X with W." in result.output and "Examples:" in result.output


def test_a_choice_outside_the_declared_ones_is_refused_with_a_suggestion():
    result = _invoke(operator_command(_with_extra_declarations()), "x.npy", "w.npy",
                     "--rounding", "evn")
    assert result.exit_code == 2
    assert "did you mean 'even'?" in result.output


def test_what_the_declarations_require_is_refused_when_missing(tmp_path):
    declared = CONV._replace(
        attributes=(*CONV.attributes[:-1], CONV.attributes[-1]._replace(required=True)))
    command = operator_command(declared)
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3, 3), np.float32))
    missing_w = _invoke(command, str(tmp_path / "x.npy"))
    assert missing_w.exit_code == 2
    assert "Missing argument 'W' (or take it from a model with --from-model)" in missing_w.output
    missing_flag = _invoke(command, str(tmp_path / "x.npy"), str(tmp_path / "x.npy"))
    assert missing_flag.exit_code == 2
    assert "Missing option '--strides'" in missing_flag.output
    assert CONV.inputs[1].required == UNLESS_MODEL


def test_the_built_command_runs_the_call(tmp_path, monkeypatch):
    from padconv_cli import ops

    declared = _with_extra_declarations()
    monkeypatch.setitem(ops.OPERATORS, CONV.name, declared)  # the pipeline looks it up by name
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 3, 3), np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    result = _invoke(operator_command(declared), str(tmp_path / "x.npy"),
                     str(tmp_path / "w.npy"), "--rounding", "away", "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 0, result.output
    window_sums = [[x[0, 0, i:i + 3, j:j + 3].sum() for j in range(2)] for i in range(2)]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy")[0, 0], window_sums)


def test_the_declared_choices_are_the_values_the_kernels_accept():
    from padconv_cli.kernels.conv import AUTO_PAD_VALUES
    from padconv_cli.kernels.pad import PAD_MODES
    from padconv_cli.ops.pad import OPERATOR as PAD

    declared = {a.name: a.choices for a in (*PAD.attributes, *CONV.attributes) if a.choices}
    assert declared == {"mode": PAD_MODES, "auto_pad": AUTO_PAD_VALUES}


def test_the_commands_help_loads_no_numpy():
    import subprocess
    import sys

    code = ("import sys; from padconv_cli.cli.main import cli\n"
            "try:\n    cli(['conv', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('numpy' in sys.modules, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stderr.strip().splitlines()[-1] == "False", result.stderr


# Small things a new user trips on: --constant-value with a mode that does not use it gets a
# note; the --dtype help says what an empty literal becomes.


def test_constant_value_with_another_mode_is_noted(run_cli, tmp_path):
    out = tmp_path / "y.npy"
    result = run_cli("pad", "[1, 2]", "--pads", "1", "1", "--mode", "edge",
                     "--constant-value", "3", "-o", str(out))
    assert result.exit_code == 0
    assert result.stderr == (
        "padconv pad: note: --constant-value 3 is ignored: --mode edge fills from the data, "
        "only --mode constant uses it\n"
    )
    assert np.load(out).tolist() == [1, 1, 2, 2]


def test_the_note_is_quiet_with_q_and_absent_in_constant_mode(run_cli, tmp_path):
    out = str(tmp_path / "y.npy")
    args = ("pad", "[1, 2]", "--pads", "1", "1", "--constant-value", "3", "-o", out)
    assert run_cli(*args, "--mode", "edge", "-q").stderr == ""
    assert run_cli("-q", *args, "--mode", "edge").stderr == ""
    assert run_cli(*args).stderr == ""
    assert np.load(out).tolist() == [3, 1, 2, 3]


def test_dtype_help_matches_what_an_empty_literal_becomes(run_cli):
    shown = run_cli("show", "[]").stdout
    assert shown.startswith("[]: float32[0]")
    help_text = " ".join(run_cli("show", "--help").stdout.split())
    assert "float32 for numbers with a point and for []" in help_text
