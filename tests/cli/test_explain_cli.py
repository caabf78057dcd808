"""``--explain`` on the command line: the bytes of the written format, the engine it would take,
and wrapping at token boundaries on a narrow terminal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from pty_terminal import run_in_terminal

from padconv_cli.cli.options import wrap_at_tokens

# ``--explain`` reports the output bytes of the format that will be written, and the resource
# gate checks that same figure.
#
# Rule (constant-mode Pad of python strings, each under 128 UTF-8 bytes, where the estimate is
# exact): the file holds the explained bytes plus its format's framing and nothing else.
#
# * ``.npy``: every element at the fixed width of the longest string (UTF-32), so the file is
#   the explained bytes plus numpy's header, which ends on a multiple of 64 bytes (one line of
#   64 or 128 bytes for a short header).
# * ``.pb``: each string as its UTF-8 bytes plus a tag byte and a one-byte length; the file
#   adds only the message's other fields: ``data_type`` (tag and value, 2 bytes) and each
#   ``dims`` entry (a tag and a varint of at most 10 bytes).


# 2-D python strings, ASCII and not (é is 2 UTF-8 bytes, € is 3): one .npy element holds 5
# characters (20 bytes), while the .pb strings hold 2 + 5 + 2 + 3 bytes in all
DATA = '[["ab", "cdefg"], ["é", "€"]]'
PADS = ["--pads", "1", "0", "2", "3"]
PB_FIELD_BYTES = 2  # data_type: tag and value
PB_DIM_BYTES = 11  # one dims entry at most: tag and a 10-byte varint


def _explained_bytes(run_cli, output: str) -> int:
    result = run_cli("pad", DATA, *PADS, "--explain", "--json", "-o", output)
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["output"]["format"] == output.rsplit(".", 1)[1]
    return info["output"]["bytes"]


def _framing_of_written_file(run_cli, tmp_path, output: str, explained: int) -> int:
    result = run_cli("pad", DATA, *PADS, "-o", str(tmp_path / output))
    assert result.exit_code == 0, result.stderr
    return (tmp_path / output).stat().st_size - explained


def test_npy_and_pb_explain_the_bytes_their_files_hold(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    npy, pb = _explained_bytes(run_cli, "y.npy"), _explained_bytes(run_cli, "y.pb")
    count = (1 + 2 + 2) * (0 + 2 + 3)  # output shape [5, 5]
    assert npy == count * 4 * 5
    assert npy != pb
    header = _framing_of_written_file(run_cli, tmp_path, "y.npy", npy)
    assert header in (64, 128)
    framing = _framing_of_written_file(run_cli, tmp_path, "y.pb", pb)
    assert 0 < framing <= PB_FIELD_BYTES + 2 * PB_DIM_BYTES


def test_explain_text_names_the_written_format(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pb = _explained_bytes(run_cli, "y.pb")
    result = run_cli("pad", DATA, *PADS, "--explain", "-o", "y.pb")
    assert result.exit_code == 0, result.stderr
    assert f"output: string[5, 5], {pb} B written as pb" in result.stdout


@pytest.mark.parametrize("output", ["y.npy", "y.pb"])
def test_the_gate_limits_the_explained_output_bytes(run_cli, tmp_path, monkeypatch, output):
    monkeypatch.chdir(tmp_path)
    explained = _explained_bytes(run_cli, output)
    refused = run_cli("pad", DATA, *PADS, "--max-output-bytes", str(explained - 1), "-o", output)
    assert refused.exit_code == 2
    assert "--max-output-bytes" in refused.stderr and not (tmp_path / output).exists()
    done = run_cli("pad", DATA, *PADS, "--max-output-bytes", str(explained), "-o", output)
    assert done.exit_code == 0, done.stderr


def test_the_memory_explained_for_a_pb_of_many_strings_covers_the_written_run(run_cli, tmp_path,
                                                                               monkeypatch):
    """Serialising a TensorProto holds more than the message: each of its 3,000,001 strings
    costs about 58 bytes while it is built (measured). Rule: the child's peak, less the peak of
    the same command on one string (the interpreter and its modules), stays under the total
    --explain reports, which the gate checks."""
    from hostile.runner import run_padconv

    monkeypatch.chdir(tmp_path)
    args = ["pad", '["ab"]', "--pads", "0", "3000000", "-o", "y.pb"]
    result = run_cli(*args, "--explain", "--json")
    assert result.exit_code == 0, result.stderr
    explained = json.loads(result.stdout)["memory"]["total"]
    small = run_padconv(["pad", '["ab"]', "--pads", "0", "1", "-o", "s.pb"], cwd=tmp_path,
                        measure_memory=True)
    run = run_padconv(args, cwd=tmp_path, measure_memory=True)
    assert small.returncode == 0 and run.returncode == 0, run.stderr_text
    assert run.peak_rss_bytes - small.peak_rss_bytes <= explained


# ``--explain`` on a terminal narrower than its lines wraps them at token boundaries with a
# hanging indent, never inside a number or a name; piped and with --json it is unchanged.


QLINEAR = ["qlinear-conv", "x.npy", "s.npy", "z.npy", "x.npy", "s.npy", "z.npy", "s.npy",
           "z.npy", "--pads", "1", "1", "1", "1", "--explain"]
CONV_INTEGER = ["conv-integer", "[[[[1, 2, 3]]]]", "[[[[1, -1]]]]", "--dtype", "int8",
                "--explain"]
TOKEN = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|[A-Za-z_]\w*")


@pytest.fixture
def quantized_files(tmp_path):
    np.save(tmp_path / "x.npy", np.array([[[[1, 2], [3, 4]]]], dtype=np.uint8))
    np.save(tmp_path / "s.npy", np.array(0.5, dtype=np.float32))
    np.save(tmp_path / "z.npy", np.array(0, dtype=np.uint8))
    return tmp_path


def _piped(args: list[str], cwd) -> str:
    done = subprocess.run([sys.executable, "-m", "padconv_cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("args", [QLINEAR, CONV_INTEGER], ids=["qlinear-conv", "conv-integer"])
def test_explain_fits_80_columns_and_keeps_every_token_whole(quantized_files, args):
    unwrapped = _piped(args, quantized_files)
    assert max(len(line) for line in unwrapped.splitlines()) > 80  # piped: lines unchanged
    shown = run_in_terminal(*args, columns=80, cwd=quantized_files)
    assert shown.exit_code == 0, shown.text
    assert all(len(line) <= 80 for line in shown.lines), shown.lines
    assert "".join(shown.text.split()) == "".join(unwrapped.split())
    assert Counter(TOKEN.findall(shown.text)) == Counter(TOKEN.findall(unwrapped))


def test_explain_json_on_a_terminal_is_not_wrapped(quantized_files):
    shown = run_in_terminal(*QLINEAR, "--json", columns=80, cwd=quantized_files)
    assert shown.exit_code == 0, shown.text
    assert json.loads(shown.text) == json.loads(_piped([*QLINEAR, "--json"], quantized_files))


def test_continuation_lines_hang_under_their_line():
    text = "  ruling r: y = saturate(round(acc * x_scale) + y_zero_point), rounded once"
    assert wrap_at_tokens(text, 40).splitlines() == [
        "  ruling r: y = saturate(round(acc *",
        "      x_scale) + y_zero_point), rounded",
        "      once",
    ]


def test_no_break_inside_an_exponent_or_a_digit_group():
    text = "v=" + "+".join(["1e+05"] * 6) + ",1,000"
    for width in range(6, len(text)):
        pieces = "".join(wrap_at_tokens(text, width).split())
        assert pieces == text
        lines = [line.strip() for line in wrap_at_tokens(text, width).splitlines()]
        assert not any(line.startswith(("05", "000")) for line in lines), lines


def test_lines_that_fit_are_unchanged():
    text = "a = b + c\n  d, e"
    assert wrap_at_tokens(text, 80) == text


# ``--explain`` describes the run on the engine it would take: in memory, inputs + output +
# working memory; out of core (``tiled``), at most the memory limit held at once, the in-memory
# figures given beside it.  Nothing is computed or written either way.


LIMIT = "8M"
LIMIT_BYTES = 8 * 2**20


@pytest.fixture
def large_conv(tmp_path):
    """A Conv whose in-memory run (about 17 MiB) is over the 8 MiB limit: X, W, the output."""
    x, w = tmp_path / "x.npy", tmp_path / "w.npy"
    np.save(x, np.zeros((1, 8, 512, 512), np.float32))
    np.save(w, np.ones((8, 8, 3, 3), np.float32))
    return str(x), str(w), tmp_path / "y.npy"


@pytest.mark.parametrize("engine", ["auto", "tiled"])
def test_a_run_over_the_limit_is_explained_out_of_core(run_cli, large_conv, engine):
    x, w, y = large_conv
    result = run_cli("conv", x, w, "-o", str(y), "--memory-limit", LIMIT, "--engine", engine,
                     "--explain")
    assert result.exit_code == 0, result.stderr
    assert "engine: tiled" in result.stdout
    assert "at most 8.0 MiB held at once (the memory limit)" in result.stdout
    assert "in memory it would take 16.9 MiB" in result.stdout
    assert not y.exists()


def test_the_memory_engine_is_explained_with_its_own_figures(run_cli, large_conv):
    x, w, y = large_conv
    result = run_cli("conv", x, w, "-o", str(y), "--memory-limit", LIMIT, "--engine", "memory",
                     "--explain")
    assert result.exit_code == 0, result.stderr
    assert "engine: memory; memory: 16.9 MiB = inputs 8.0 MiB" in result.stdout
    assert "held at once" not in result.stdout
    assert not y.exists()


def test_json_names_the_engine_and_its_limit(run_cli, large_conv):
    x, w, y = large_conv
    result = run_cli("conv", x, w, "-o", str(y), "--memory-limit", LIMIT, "--explain", "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["engine"] == {"name": "tiled", "memory_limit": LIMIT_BYTES}
    assert info["memory"]["total"] > LIMIT_BYTES


def test_pad_over_the_limit_is_explained_out_of_core(run_cli, large_conv):
    x, _, y = large_conv
    result = run_cli("pad", x, "--pads", "0", "0", "1", "1", "0", "0", "1", "1", "-o", str(y),
                     "--memory-limit", LIMIT, "--explain")
    assert result.exit_code == 0, result.stderr
    assert "engine: tiled" in result.stdout
    assert not y.exists()
