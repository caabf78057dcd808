"""Errors: one line naming the flag or file and the rule, exit 2, in one style whether click or
padconv found the problem; the library speaks parameter names, the CLI flags; a missing argument
says what it takes; values from the environment are shown escaped."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pty_terminal import run_in_terminal

from padconv_cli import resources

# The library words its messages in parameter names (``memory_limit``); only the CLI layer
# renders them as flags (``--memory-limit``), so Python callers never read a flag they did not
# type, and the command line always does.


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
LITERAL_X = "[[[[1.0, 2.0, 3.0]]]]"
LITERAL_W = "[[[[1.0]]]]"


def _library_calls(folder: Path) -> dict[str, tuple[dict, str]]:
    """Bad calls of the library's pipeline: name -> (Request fields, the parameter the message
    names).  Attributes, limits, engines, outputs and sources, for several operators."""
    x = str(folder / "x.npy")
    np.save(x, np.zeros((64, 64), np.float32))
    y = str(folder / "y.npy")
    vector = ("[1.0, 2.0]",)
    return {
        "pads": ({"operator": "Pad", "inputs": vector, "attributes": {"pads": [1]}}, "pads"),
        "mode": ({"operator": "Pad", "inputs": vector,
                  "attributes": {"pads": [1, 1], "mode": "symmetric"}}, "mode"),
        "axes": ({"operator": "Pad", "inputs": vector,
                  "attributes": {"pads": [1, 1], "axes": [3]}}, "axes"),
        "constant_value": ({"operator": "Pad", "inputs": ("[1, 2]",), "dtype": "int8",
                            "attributes": {"pads": [1, 1], "constant_value": "abc"}},
                           "constant_value"),
        "max_output_bytes": ({"operator": "Pad", "inputs": vector,
                              "attributes": {"pads": [0, 100]}, "max_output_bytes": 8},
                             "max_output_bytes"),
        "strides": ({"operator": "Conv", "inputs": (LITERAL_X, LITERAL_W),
                     "attributes": {"strides": [0, 1]}}, "strides"),
        "auto_pad": ({"operator": "Conv", "inputs": (LITERAL_X, LITERAL_W),
                      "attributes": {"auto_pad": "SAME"}}, "auto_pad"),
        "kernel_shape": ({"operator": "Conv", "inputs": (LITERAL_X, LITERAL_W),
                          "attributes": {"kernel_shape": [2, 2]}}, "kernel_shape"),
        "output_padding": ({"operator": "ConvTranspose", "inputs": (LITERAL_X, LITERAL_W),
                            "attributes": {"strides": [1, 1], "output_padding": [3, 3]}},
                           "output_padding"),
        "memory_limit": ({"operator": "Pad", "inputs": (x,), "attributes": {"pads": [1] * 4},
                          "engine": "tiled", "output": y, "memory_limit": 64}, "memory_limit"),
        "engine": ({"operator": "Pad", "inputs": vector, "attributes": {"pads": [1, 1]},
                    "engine": "warp"}, "engine"),
        "output": ({"operator": "Pad", "inputs": (x,), "attributes": {"pads": [1] * 4},
                    "engine": "tiled"}, "output"),
    }


@pytest.mark.parametrize("name", [
    "pads", "mode", "axes", "constant_value", "max_output_bytes", "strides", "auto_pad",
    "kernel_shape", "output_padding", "memory_limit", "engine", "output"])
def test_library_errors_name_parameters_never_flags(tmp_path, name):
    """A Python caller reads the parameter it passed, never a flag it did not type."""
    from padconv_cli.errors import PadconvError
    from padconv_cli.pipeline import Request, run

    fields, parameter = _library_calls(tmp_path)[name]
    with pytest.raises(PadconvError) as error:
        run(Request(**fields))
    message = str(error.value)
    assert FLAG.findall(message) == [], message
    assert parameter in message, message


def test_tiled_memory_limit_message_names_the_flag_on_the_command_line(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((64, 64), np.float32))
    result = run_cli("pad", str(tmp_path / "x.npy"), "--pads", "1", "1", "1", "1", "--engine",
                     "tiled", "--memory-limit", "64", "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("padconv pad: error: --memory-limit 64 B is too small")
    assert line.endswith("or more") and "; give --memory-limit " in line
    assert "memory_limit" not in line


def test_library_message_names_the_parameter(tmp_path):
    import pytest

    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.outofcore.pad_tiles import tiled_pad

    np.save(tmp_path / "x.npy", np.zeros((64, 64), np.float32))
    with pytest.raises(OutputTooLargeError, match=r"^memory_limit 64 B is too small") as error:
        tiled_pad(str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), [1, 1, 1, 1],
                  memory_limit=64)
    assert error.value.param == "memory_limit" and "--" not in str(error.value)


def test_pad_input_computed_at_run_time_names_the_flag(run_cli, tmp_path):
    import onnx
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "p"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("p", onnx.TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
              str(tmp_path / "m.onnx"))
    result = run_cli("pad", "[1.0, 2.0]", "--from-model", str(tmp_path / "m.onnx"))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.endswith("not stored in the model; give --pads"), line


def test_engine_and_output_both_render_as_flags(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(4))
    result = run_cli("pad", str(tmp_path / "x.npy"), "--pads", "1,1", "--engine", "tiled",
                     "--format", "npy")
    assert result.exit_code == 2
    assert result.stderr == (
        "padconv pad: error: stdout: not a .npy file; --engine tiled writes a .npy file, "
        "give --output FILE.npy\n"
    )


def test_audit_symbolic_dim_names_the_flag(run_cli, tmp_path):
    import exported_models as em

    path = em.save(em.symbolic_batch_model(), tmp_path / "m.onnx")
    result = run_cli("audit", str(path), "--dim", "batch=100000000000")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "; give smaller sizes with --dim NAME=VALUE" in line


# Errors name the flag or file, say what to do where it is clear, and share one style:
# ``padconv CMD: error: ...`` on one line, exit 2, whether click or padconv found the problem.


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


# Out of memory is one line, exit 2; the memory estimate takes the smallest known bound.


OOM_LINE = (
    "padconv pad: error: out of memory while computing the result "
    "(try --engine tiled with --memory-limit, or a smaller input)\n"
)


@pytest.fixture
def data_file(tmp_path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    return path


def _raise_numpy_memory_error(*args, **kwargs):
    np.empty((2**25, 2**25), dtype=np.uint8)  # numpy's _ArrayMemoryError, a MemoryError


def _raise_memory_error(*args, **kwargs):
    raise MemoryError()


@pytest.mark.parametrize("raiser", [_raise_numpy_memory_error, _raise_memory_error])
def test_memory_error_is_one_line_exit_2(run_cli, data_file, tmp_path, monkeypatch, raiser):
    monkeypatch.setattr("padconv_cli.cli.options.emit_result", raiser)
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o",
                     str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert result.stderr == OOM_LINE
    assert not (tmp_path / "y.npy").exists()


def test_available_memory_is_the_smallest_known_bound(monkeypatch):
    monkeypatch.setattr(resources, "_meminfo_available", lambda: 10 * 2**30)
    monkeypatch.setattr(resources, "_cgroup_headroom", lambda: 3 * 2**30)
    monkeypatch.setattr(resources, "_address_space_headroom", lambda: 2 * 2**30)
    assert resources.available_memory_bytes() == 2 * 2**30
    monkeypatch.setattr(resources, "_address_space_headroom", lambda: None)
    assert resources.available_memory_bytes() == 3 * 2**30
    monkeypatch.setattr(resources, "_cgroup_headroom", lambda: None)
    monkeypatch.setattr(resources, "_meminfo_available", lambda: None)
    assert resources.available_memory_bytes() == resources.FALLBACK_MEMORY_BYTES


@pytest.mark.parametrize(
    ("limit", "current", "expected"),
    [("max", "100", None), ("1000", "400", 600), ("1000", "5000", 0), ("1000", None, 1000)],
)
def test_cgroup_headroom(tmp_path, limit, current, expected):
    (tmp_path / "memory.max").write_text(limit + "\n")
    if current is not None:
        (tmp_path / "memory.current").write_text(current + "\n")
    assert resources._cgroup_headroom(str(tmp_path)) == expected


def test_address_space_limit_bounds_the_estimate():
    """Under ``ulimit -v`` (RLIMIT_AS = 1.5 GiB) the estimate stays below the limit."""
    limit = 1536 * 2**20
    code = (
        "import resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n"
        "from padconv_cli.resources import available_memory_bytes\n"
        "print(available_memory_bytes())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert 0 < int(done.stdout) < limit


# The error line on a terminal: a value from the environment holding an escape sequence is
# shown escaped, never sent to the terminal (click strips styles only when stderr is not one).


def test_an_escape_sequence_in_an_environment_variable_is_escaped(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3), np.float32))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 1), np.float32))
    run = run_in_terminal("conv", "x.npy", "w.npy", "-o", "y.npy", cwd=tmp_path,
                          env={"PADCONV_NATIVE_ISA": "a\x1b[2jcleared", "NO_COLOR": "1"})
    assert run.exit_code == 2, run.text
    assert "\x1b[2j" not in run.text
    assert "PADCONV_NATIVE_ISA=a\\x1b[2jcleared" in run.text, run.text
    assert len(run.lines) == 1, run.text


def _line_of(tmp_path, *args: str) -> str:
    import subprocess

    from hostile.runner import padconv_command

    result = subprocess.run([*padconv_command(), *args], cwd=tmp_path, capture_output=True,
                            stdin=subprocess.DEVNULL, timeout=60)
    text = result.stderr.decode()
    assert result.returncode == 2, text
    assert len(text.splitlines()) == 1, text[:300]
    return text


def test_a_list_echoed_from_a_huge_argument_is_cut(tmp_path):
    """50,000 strides: the values were all listed (a 340 KB line)."""
    np.save(tmp_path / "x.npy", np.ones((1, 1, 3, 3), np.float32))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 1, 1), np.float32))
    text = _line_of(tmp_path, "conv", "x.npy", "w.npy", "--strides",
                    *map(str, range(1, 50001)), "-o", "y.npy")
    assert "--strides" in text and "and 49988 more" in text and len(text) < 300, text


def test_a_huge_value_echoed_whole_is_cut_in_the_middle(tmp_path):
    """Every error line is at most about 2,000 characters; its start (the flag) and its end
    (the rule) stay."""
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    text = _line_of(tmp_path, "pad", "x.npy", "--pads", "1", "1", "1", "1",
                    "--constant-value", "9" * 50000, "-o", "y.npy")
    assert len(text) < 2100, len(text)
    assert "--constant-value" in text[:100] and "characters cut" in text
    assert text.rstrip().endswith("does not fit float32 [-3.40282e+38, 3.40282e+38]"), text[-200:]


# A command run without its required argument says which argument is missing and what it
# takes, in one line, exit 2 (not click's empty ``DATA:``).


@pytest.mark.parametrize(("command", "label", "what"), [
    ("pad", "DATA", "a tensor file, '-' for stdin, or a literal"),
    ("conv", "X", "a tensor file, '-' for stdin, or a literal"),
    ("compare", "A", "a tensor file, '-' for stdin, or a literal"),
    ("audit", "MODEL.onnx", "an ONNX model file"),
    ("show", "FILE", "a tensor file or an ONNX model"),
    ("convert", "IN", "a tensor file, '-' for stdin, or a literal"),
])
def test_missing_argument_is_named_with_what_it_takes(run_cli, command, label, what):
    result = run_cli(command)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"padconv {command}: error: missing argument {label}: {what} "
        f"(see 'padconv {command} --help')"
    ]


def test_compare_names_its_second_argument(run_cli):
    result = run_cli("compare", "[1.0]")
    assert result.exit_code == 2
    assert "missing argument B: a tensor file" in result.stderr


@pytest.mark.parametrize("command, w_shape, named", [
    ("conv", (2, 4, 3, 3), "W is w.npy)"),  # names W only inside W.shape[1]
    ("conv-transpose", (3, 2, 0, 3), "w.npy: "),  # param="W": the file comes first
])
def test_an_error_about_an_input_names_the_file_given_for_it(run_cli, tmp_path, monkeypatch,
                                                             command, w_shape, named):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.ones((1, 3, 5, 5), np.float32))
    np.save("w.npy", np.ones(w_shape, np.float32))
    result = run_cli(command, "x.npy", "w.npy")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and named in result.stderr, result.stderr
