"""Errors name the flag or file, say what to do where it is clear, and share one style:
``padconv CMD: error: ...`` on one line, exit 2, whether click or padconv found the problem."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def x4(tmp_path):
    path = tmp_path / "x4.npy"
    np.save(path, np.ones((1, 1, 3, 3), np.float32))
    return path


def one_error_line(result, command: str) -> str:
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"padconv {command}: error: "), lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("word", ["x", "1.5", "1e3", "0x10"])
def test_a_non_integer_in_a_list_flag_is_named(run_cli, x4, word):
    result = run_cli("pad", str(x4), "--pads", "0", "0", "1", "1", "0", "0", "1", word)
    line = one_error_line(result, "pad")
    assert f"--pads: {word!r} is not an integer" in line


def test_a_file_after_a_list_flag_is_still_the_data_argument(run_cli, x4, tmp_path):
    out = tmp_path / "y.npy"
    result = run_cli("pad", "--pads", "0", "0", "1", "1", "0", "0", "1", "1", str(x4),
                     "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert np.load(out).shape == (1, 1, 5, 5)


def test_pad_count_names_the_flag_and_suggests_axes(run_cli, x4):
    line = one_error_line(run_cli("pad", str(x4), "--pads", "1", "1"), "pad")
    assert "--pads has 2 values" in line
    assert "--axes" in line


def test_kernel_shape_mismatch_says_to_drop_the_flag(run_cli, x4):
    line = one_error_line(run_cli("conv", str(x4), str(x4), "--kernel-shape", "2", "2"), "conv")
    assert "--kernel-shape" in line
    assert "drop --kernel-shape" in line and "comes from W" in line


def test_dtype_mismatch_names_the_files(run_cli, x4, tmp_path):
    w64 = tmp_path / "w64.npy"
    np.save(w64, np.ones((1, 1, 2, 2)))
    line = one_error_line(run_cli("conv", str(x4), str(w64)), "conv")
    assert str(x4) in line and str(w64) in line
    assert "float32" in line and "float64" in line


def test_a_library_error_with_param_and_source_is_rendered_with_the_flag(run_cli, monkeypatch,
                                                                         x4):
    from padconv_cli.errors import AttributeValueError

    def refuse(*args, **kwargs):
        raise AttributeValueError("axes repeats axis 1", param="axes", source="axes.npy")

    monkeypatch.setattr("padconv_cli.pipeline.plain_call", refuse)
    line = one_error_line(run_cli("pad", str(x4), "--pads", "1", "1", "--axes", "1", "1"),
                          "pad")
    assert line == "padconv pad: error: axes.npy: --axes repeats axis 1"


@pytest.mark.parametrize(
    ("command", "flag", "typed", "meant"),
    [("pad", "--mode", "Reflect", "reflect"), ("pad", "--mode", "EDGE", "edge"),
     ("conv", "--auto-pad", "same_upper", "SAME_UPPER"), ("conv", "--auto-pad", "Valid", "VALID")],
)
def test_choices_are_case_insensitive(run_cli, x4, tmp_path, command, flag, typed, meant):
    out, expected = tmp_path / "y.npy", tmp_path / "expected.npy"
    inputs = [str(x4)] if command == "pad" else [str(x4), str(x4)]
    pads = ["--pads", "0", "0", "1", "1", "0", "0", "1", "1"] if command == "pad" else []
    assert run_cli(command, *inputs, *pads, flag, typed, "-o", str(out)).exit_code == 0
    assert run_cli(command, *inputs, *pads, flag, meant, "-o", str(expected)).exit_code == 0
    np.testing.assert_array_equal(np.load(out), np.load(expected))


@pytest.mark.parametrize(
    ("command", "flag", "typo", "suggested"),
    [("pad", "--mode", "reflct", "reflect"), ("conv", "--auto-pad", "SAME_UPPR", "SAME_UPPER")],
)
def test_a_choice_typo_gets_a_suggestion(run_cli, x4, command, flag, typo, suggested):
    inputs = [str(x4)] if command == "pad" else [str(x4), str(x4)]
    line = one_error_line(run_cli(command, *inputs, "--pads", "1", "1", "1", "1", flag, typo),
                          command)
    assert f"{flag}: {typo!r} is not one of" in line
    assert f"did you mean {suggested!r}?" in line


@pytest.mark.parametrize(
    ("literal", "needle"),
    [("[1, a]", "'a' is not allowed"), ("[1, 2", "unbalanced brackets"),
     ("[1, 2]]", "unbalanced brackets"), ("[1, f(2)]", "'f(2)' is not allowed")],
)
def test_literal_errors_speak_no_python(run_cli, literal, needle):
    line = one_error_line(run_cli("pad", literal, "--pads", "1", "1"), "pad")
    assert needle in line
    for python_word in ("Name", "Call", "<unknown>", "line 1", "never closed"):
        assert python_word not in line


@pytest.mark.parametrize(
    ("args", "command"),
    [(("pad", "missing.npy", "--pads", "1", "1"), "pad"),  # padconv found it
     (("pad", "x.npy"), "pad"),  # click found it (missing --pads)
     (("show", "missing.npy"), "show"),
     (("compare", "-", "-"), "compare"),
     (("verify", "-k", "no_such_case"), "verify"),
     (("verify", "--no-such-flag"), "verify")],
)
def test_one_error_style_for_every_command(run_cli, args, command):
    one_error_line(run_cli(*args), command)
