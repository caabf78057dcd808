"""Each hostile input or flag set is refused by padconv: exit 2, one stderr line that names the
problem, no traceback, nothing written, payloads never run, bounded memory, and no hang."""

from __future__ import annotations

import pickletools

import pytest
from hostile.cases import (
    CASES,
    KNOWN_GAPS,
    SENTINEL_NAME,
    pickled_object_npy,
)
from hostile.runner import assert_refused_in_one_line


def _params():
    for case in CASES:
        marks = []
        if case.name in KNOWN_GAPS:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[case.name]))
        yield pytest.param(case.name, id=case.name, marks=marks)


def _describe(outcome) -> str:
    run = outcome.run
    return (
        f"padconv {' '.join(run.args)[:200]} -> exit {run.returncode}, "
        f"{run.wall_seconds:.2f} s, {run.peak_rss_bytes / 2**20:.0f} MiB, "
        f"stderr={run.stderr_text[:600]!r}"
    )


@pytest.mark.parametrize("case_name", list(_params()))
def test_hostile_case_is_refused_cleanly(case_name, corpus_outcomes):
    outcome = corpus_outcomes[case_name]
    detail = _describe(outcome)
    assert_refused_in_one_line(outcome.run, detail, outcome.case.must_mention,
                               outcome.case.any_of)
    assert not (outcome.root / SENTINEL_NAME).exists(), "a payload was executed: " + detail
    assert outcome.after == outcome.before, "files were created or changed: " + detail


def test_pickle_payload_is_live(tmp_path):
    """The pickled cases are real threats: the pickle calls builtins.exec on a file-creating
    statement (inspected with pickletools, never loaded)."""
    image = pickled_object_npy(tmp_path)
    stream = image[image.index(b"\n", 10) + 1 :]
    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(stream)]
    strings = [arg for _, arg in ops if isinstance(arg, str)]
    words = " ".join(strings).split()  # GLOBAL carries "builtins exec" as one argument
    assert "builtins" in words and "exec" in words
    assert any(name == "REDUCE" for name, _ in ops)
    assert any(str(tmp_path / SENTINEL_NAME) in s for s in strings)


def test_case_names_are_unique_identifiers():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    assert all(name.isidentifier() and name.islower() for name in names)


def test_memory_measure_sees_the_child_and_not_the_parent(tmp_path):
    """The peak-memory bound can fail: a child touching 200 MiB is reported as such, a small
    one is reported small even though this test process is larger."""
    import sys

    from hostile.runner import run_command

    hog = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])"
    big = run_command([sys.executable, "-c", hog], cwd=tmp_path, measure_memory=True)
    small = run_command([sys.executable, "-c", "pass"], cwd=tmp_path, measure_memory=True)
    assert big.returncode == 0 and small.returncode == 0
    assert big.peak_rss_bytes > 200 * 2**20
    assert 0 < small.peak_rss_bytes < 50 * 2**20


def test_forked_runs_are_padconv_runs_measured_on_their_own(tmp_path):
    """The corpora's forked runs (hostile/fork_server.py) behave as the command: a result is
    written with exit 0, a refusal is exit 2 with its line; each run's peak memory is its own
    (a 128 MiB result is seen, and the next, small run is not charged for it)."""
    import numpy as np
    from hostile.fork_server import forked_padconv

    np.save(tmp_path / "x.npy", np.zeros((4096, 4096), np.float64))
    np.save(tmp_path / "s.npy", np.zeros((2, 3), np.float64))
    with forked_padconv(1) as run:
        big = run(["pad", "x.npy", "--pads", "0", "0", "0", "0", "-o", "y.npy"], tmp_path)
        small = run(["pad", "s.npy", "--pads", "1", "-o", "z.npy"], tmp_path)
    assert (big.returncode, big.stderr) == (0, b""), big.stderr_text
    assert np.load(tmp_path / "y.npy", mmap_mode="r").shape == (4096, 4096)
    assert big.peak_rss_bytes > 128 * 2**20
    assert small.returncode == 2 and small.stderr_lines[0].startswith("padconv pad: error: ")
    assert 0 < small.peak_rss_bytes < 100 * 2**20, small.peak_rss_bytes
    assert not (tmp_path / "z.npy").exists()
