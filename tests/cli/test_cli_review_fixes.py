"""Review findings of the CLI layer: each test here failed before its fix."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from padconv_cli import resources
from padconv_cli.cli import options
from padconv_cli.cli.main import ALIASES, COMMANDS
from padconv_cli.errors import InputError, OutputError
from padconv_cli.tensorio import read_tensor
from padconv_cli.tensorio.writing import resolve_format

REPO = Path(__file__).resolve().parents[2]
OOM_LINE = (
    "padconv pad: error: out of memory while computing the result "
    "(try --engine tiled with --memory-limit, or a smaller input)\n"
)


@pytest.fixture
def data_file(tmp_path) -> Path:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    return path


# 1. MemoryError and the memory estimate ------------------------------------------------------


def _raise_numpy_memory_error(*args, **kwargs):
    np.empty((2**25, 2**25), dtype=np.uint8)  # numpy's _ArrayMemoryError, a MemoryError


def _raise_memory_error(*args, **kwargs):
    raise MemoryError()


@pytest.mark.parametrize("raiser", [_raise_numpy_memory_error, _raise_memory_error])
def test_memory_error_is_one_line_exit_2(run_cli, data_file, tmp_path, monkeypatch, raiser):
    monkeypatch.setattr("padconv_cli.cli.output.emit_result", raiser)
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


# 2. --emit-onnx only when the run can succeed; the shared pipeline ----------------------------


def test_emit_onnx_is_not_written_when_the_output_is_too_large(run_cli, data_file, tmp_path):
    model, output = tmp_path / "m.onnx", tmp_path / "y.npy"
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "--max-output-bytes",
                     "8", "--emit-onnx", str(model), "-o", str(output))
    assert result.exit_code == 2 and "--max-output-bytes" in result.stderr
    assert not model.exists() and not output.exists()


def test_conv_emit_onnx_is_not_written_when_the_output_is_too_large(run_cli, tmp_path):
    model = tmp_path / "m.onnx"
    result = run_cli("conv", "[[[[1.0, 2.0], [3.0, 4.0]]]]", "[[[[1.0]]]]", "--max-output-bytes",
                     "4", "--emit-onnx", str(model), "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert not model.exists()


def test_explain_with_emit_still_writes_the_model(run_cli, data_file, tmp_path):
    model = tmp_path / "m.onnx"
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "--max-output-bytes",
                     "8", "--emit-onnx", str(model), "--explain")
    assert result.exit_code == 0, result.stderr
    assert onnx.load(str(model)).graph.node[0].op_type == "Pad"


def test_both_commands_use_the_shared_pipeline():
    from padconv_cli.cli import conv_cmd, model_options, pad_cmd

    assert pad_cmd.run_operator is model_options.run_operator
    assert conv_cmd.run_operator is model_options.run_operator
    assert not hasattr(model_options, "prepare")


# 3. verify exits 1 when nothing was verified ----------------------------------------------


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_verify_with_nothing_verified_exits_1(run_cli, unsupported_dir, extra):
    result = run_cli("verify", str(unsupported_dir), *extra)
    assert result.exit_code == 1
    assert "nothing was verified" in result.stderr


def test_verify_help_states_the_exit_rule(run_cli):
    text = " ".join(run_cli("verify", "--help").stdout.split())
    assert "nothing was verified" in text and "Exit status" in text


# 4. --format against the -o suffix ------------------------------------------------------------


@pytest.mark.parametrize(("target", "fmt", "implied"), [("y.npy", "pb", "npy"),
                                                      ("out/y.PB", "npy", "pb")])
def test_format_contradicting_suffix_is_refused(target, fmt, implied):
    with pytest.raises(OutputError) as excinfo:
        resolve_format(target, fmt)
    assert str(excinfo.value) == (
        f"-o {target}: suffix says {implied} but --format {fmt}; make them agree"
    )


@pytest.mark.parametrize(("target", "fmt"), [("y.npy", "npy"), ("y.pb", "pb"), ("y", "pb"),
                                             ("-", "pb"), ("y.bin", "npy")])
def test_format_agreeing_or_without_known_suffix_is_accepted(target, fmt):
    assert resolve_format(target, fmt) == fmt


def test_cli_format_contradiction_writes_nothing(run_cli, data_file, tmp_path):
    output, model = tmp_path / "y.npy", tmp_path / "m.onnx"
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "--format", "pb",
                     "-o", str(output), "--emit-onnx", str(model))
    assert result.exit_code == 2
    assert "suffix says npy but --format pb" in result.stderr
    assert result.stderr.count("\n") == 1
    assert not output.exists() and not model.exists()


# 5. npz on stdin: a hint that can be typed ------------------------------------------------


def _two_member_npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, a=np.ones((2, 2), np.float32), b=np.zeros(3, np.float32))
    return buffer.getvalue()


def test_stdin_npz_ambiguity_names_a_typeable_form(run_cli):
    result = run_cli("pad", "--pads", "1", "1", "-", "-o", "-", input=_two_member_npz())
    assert result.exit_code == 2
    assert "pick one with -:NAME (after --, e.g. padconv pad --pads 1 1 -- -:NAME)" in (
        result.stderr
    )
    assert "<stdin>:NAME" not in result.stderr


def test_the_suggested_stdin_member_form_works(run_cli):
    result = run_cli("pad", "--pads", "1", "1", "-o", "-", "--", "-:b", input=_two_member_npz())
    assert result.exit_code == 0, result.stderr
    assert np.load(io.BytesIO(result.stdout_bytes)).shape == (5,)


# 6. conv: stdin at most once ----------------------------------------------------------------


@pytest.mark.parametrize("sources", [("-", "-"), ("-", "[[[1.0]]]", "-"), ("x", "-", "-")])
def test_conv_refuses_stdin_twice(run_cli, sources):
    result = run_cli("conv", *sources, input=b"")
    assert result.exit_code == 2
    assert "only one of X, W, B can be - (stdin)" in result.stderr
    assert result.stderr.count("\n") == 1


# 7. no arguments: the help -------------------------------------------------------------------


def test_no_arguments_prints_help_and_exits_0(run_cli):
    result = run_cli()
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: padconv")
    assert "Commands:" in result.stdout
    assert result.stderr == ""


# 8. shared tolerance options, env_flag, one_line, dead code -------------------------------


@pytest.mark.parametrize("command", ["compare", "verify"])
def test_tolerance_help_comes_from_the_default_table(run_cli, command):
    from padconv_cli.verification.compare import DEFAULT_TOLERANCES

    text = " ".join(run_cli(command, "--help").stdout.split())
    for name, (rtol, atol) in DEFAULT_TOLERANCES.items():
        for value in (rtol, atol):
            shown = re.sub(r"e([+-])0(\d)", r"e\1\2", f"{value:g}")
            assert f"{name} {shown}" in text


@pytest.mark.parametrize("command", ["compare", "verify"])
@pytest.mark.parametrize("value", ["-1", "nan"])
def test_tolerance_validation_is_shared(run_cli, command, value):
    args = ("[1.0]", "[1.0]") if command == "compare" else ()
    result = run_cli(command, *args, "--atol", value)
    assert result.exit_code == 2
    assert "is not a tolerance (needs a number >= 0)" in result.stderr


def test_tolerance_options_are_one_decorator():
    from padconv_cli.cli.compare_cmd import compare_command
    from padconv_cli.cli.verify_cmd import verify_command

    for command in (compare_command, verify_command):
        kinds = {p.name: type(p) for p in command.params}
        assert kinds["rtol"] is options.ToleranceOption
        assert kinds["atol"] is options.ToleranceOption


def test_verify_honours_no_color_through_env_flag(monkeypatch):
    from padconv_cli.cli import verify_cmd

    seen = []
    monkeypatch.setattr(verify_cmd, "env_flag", lambda name: seen.append(name) or True)
    assert verify_cmd._use_colour(False) is False
    assert seen == ["NO_COLOR"]


def test_zarr_errors_use_the_shared_one_line(monkeypatch, tmp_path):
    import zarr

    from padconv_cli.engines import dask_io

    def broken(*args, **kwargs):
        raise ValueError("bad\nmetadata\x01here")

    monkeypatch.setattr(zarr, "open_array", broken)
    with pytest.raises(InputError) as excinfo:
        dask_io.open_zarr_input(str(tmp_path / "a.zarr"))
    assert "bad metadata\\x01here" in str(excinfo.value)
    assert not hasattr(dask_io, "_one_line")
    assert not hasattr(dask_io, "open_dask_input")


# 9. help texts --------------------------------------------------------------------------------


def test_show_examples_name_existing_samples(run_cli):
    text = run_cli("show", "--help").stdout
    samples = re.findall(r"samples/[\w.]+", text)
    assert samples
    for sample in samples:
        assert (REPO / sample).is_file(), sample


def test_group_help_shows_whole_short_helps(run_cli):
    text = run_cli("--help").stdout
    commands = text.split("Commands:")[1].strip().splitlines()
    assert len(commands) == len(COMMANDS) + len(ALIASES)
    for line in commands:
        assert not line.rstrip().endswith("..."), line


# 10. -o onto devices and FIFOs ---------------------------------------------------------


def test_output_to_dev_null(run_cli, data_file):
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o", "/dev/null")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""


def test_output_to_dev_stdout_in_a_pipe():
    done = subprocess.run(
        [sys.executable, "-m", "padconv_cli", "pad", "[[1, 2]]", "--pads", "1", "1", "1", "1",
         "-o", "/dev/stdout"],
        capture_output=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert np.load(io.BytesIO(done.stdout)).shape == (3, 4)


def test_output_to_a_fifo_is_written_through(run_cli, data_file, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # the read end is open before padconv starts (a reader thread might not be there yet, and
    # a FIFO nobody reads is refused); the small result fits in the pipe's buffer
    read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o", str(fifo))
        received = os.read(read_end, 1 << 16)
    finally:
        os.close(read_end)
    assert result.exit_code == 0, result.stderr
    assert np.load(io.BytesIO(received)).shape == (4, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "x.npy"]


def test_socket_target_is_refused_without_proc_paths(run_cli, data_file, tmp_path):
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o", str(path))
    finally:
        server.close()
    assert result.exit_code == 2
    assert "not a regular file" in result.stderr and "/proc" not in result.stderr


def test_regular_file_stays_atomic(run_cli, data_file, tmp_path):
    output = tmp_path / "y.npy"
    output.write_bytes(b"old")
    result = run_cli("pad", str(data_file), "--pads", "1", "1", "1", "1", "-o", str(output))
    assert result.exit_code == 0
    assert read_tensor(str(output)).shape == (4, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy", "y.npy"]
