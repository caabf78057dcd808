"""``padconv pad`` as a user runs it: files in, files or bytes out, one-line errors."""

from __future__ import annotations

import io

import numpy as np
import pytest

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


ERROR_CASES = [
    (["--pads", "0", "2", "0"], "pads"),
    (["--pads", "0", "2", "0", "0", "--mode", "symmetric"], "--mode"),
    (["--pads", "0", "2", "0", "0", "--axes", "5"], "axes"),
    (["--pads", "0", "2", "0", "0", "--axes", "1", "-1"], "axes"),
    (["--pads", "0", "-5", "0", "0"], "pads"),
    (["--pads", "0", "2", "0", "0", "--constant-value", "abc"], "constant"),
    (["--pads", "0", "2", "0", "0", "--max-output-bytes", "10"], "--max-output-bytes"),
    (["--pads", "0", "2", "0", "0", "--format", "tiff"], "--format"),
]


@pytest.mark.parametrize(("args", "needle"), ERROR_CASES)
def test_errors_are_one_line_exit_2_and_write_nothing(run_cli, data_file, tmp_path, args, needle):
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
