"""Output targets that cannot mean what was typed are usage errors, refused before any work."""

from __future__ import annotations

import numpy as np
import pytest

from padconv_cli.cli.options import parse_size


@pytest.fixture
def x_npy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    return "x.npy"


@pytest.mark.parametrize("empty", ["", " "])
def test_empty_output_path_is_a_usage_error(run_cli, x_npy, tmp_path, empty):
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", empty)
    assert result.exit_code == 2
    assert "-o/--output is empty" in result.stderr
    assert result.stdout_bytes == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def test_empty_emit_onnx_path_is_a_usage_error(run_cli, x_npy):
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", "y.npy",
                     "--emit-onnx", "")
    assert result.exit_code == 2
    assert "--emit-onnx is empty" in result.stderr


@pytest.mark.parametrize("emit", ["f.npy", "./f.npy", "sub/../f.npy"])
def test_output_and_emitted_model_on_one_file_is_refused(run_cli, x_npy, tmp_path, emit):
    (tmp_path / "sub").mkdir()
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", "f.npy",
                     "--emit-onnx", emit)
    assert result.exit_code == 2
    assert "-o and --emit-onnx both name f.npy" in result.stderr
    assert not (tmp_path / "f.npy").exists()


def test_output_and_emitted_model_through_a_hardlink_is_refused(run_cli, x_npy, tmp_path):
    (tmp_path / "f.npy").write_bytes(b"old")
    (tmp_path / "link.onnx").hardlink_to(tmp_path / "f.npy")
    result = run_cli("conv", x_npy, "[[[[1.0]]]]", "-o", "f.npy", "--emit-onnx", "link.onnx")
    assert result.exit_code == 2
    assert (tmp_path / "f.npy").read_bytes() == b"old"


def test_distinct_output_and_model_are_both_written(run_cli, x_npy, tmp_path):
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", "f.npy",
                     "--emit-onnx", "f.onnx")
    assert result.exit_code == 0, result.stderr
    assert np.load(tmp_path / "f.npy").shape == (4, 5)
    assert (tmp_path / "f.onnx").stat().st_size > 0


@pytest.mark.parametrize("text", ["9" * 400, "9" * 400 + "G", "1" + "0" * 19, "9" * 5000,
                                  "99999999999T", "8388608T"], ids=lambda text: text[:12])
def test_absurd_sizes_are_refused(text):
    with pytest.raises(ValueError, match="too large|not a size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.5G", 3 * 2**29), ("0.5k", 512), ("8388607T", 8388607 * 2**40),
     ("1." + "9" * 5000, 1), ("9223372036854775807", 2**63 - 1)],
    ids=lambda value: str(value)[:12],
)
def test_sizes_are_exact(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("flag", ["--memory-limit", "--max-output-bytes"])
def test_size_flag_of_400_nines_is_one_line(run_cli, x_npy, flag):
    result = run_cli("pad", x_npy, "--pads", "1", "1", "1", "1", "-o", "y.npy", flag, "9" * 400)
    assert result.exit_code == 2
    assert "too large" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert len(result.stderr) < 300
