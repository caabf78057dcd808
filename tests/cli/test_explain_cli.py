"""``--explain`` reports the output bytes of the format that will be written, and the resource
gate checks that same figure.

Rule (constant-mode Pad of python strings, each under 128 UTF-8 bytes, where the estimate is
exact): the file holds the explained bytes plus its format's framing and nothing else.

* ``.npy``: every element at the fixed width of the longest string (UTF-32), so the file is
  the explained bytes plus numpy's header, which ends on a multiple of 64 bytes (one line of
  64 or 128 bytes for a short header).
* ``.pb``: each string as its UTF-8 bytes plus a tag byte and a one-byte length; the file
  adds only the message's other fields: ``data_type`` (tag and value, 2 bytes) and each
  ``dims`` entry (a tag and a varint of at most 10 bytes).
"""

from __future__ import annotations

import json

import pytest

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
