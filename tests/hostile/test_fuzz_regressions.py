"""Inputs the fuzzer (fuzz/fuzz_readers.py) found, replayed through the readers in every run.

Each file in regressions/ is named ``TARGET-HASH.bin`` and holds the payload the TARGET reader
was given; the contract is the fuzzer's: an array, or a one-line PadconvError without raw
control characters, and nothing else.  A new finding is one more file there.

What the kept findings exposed: ``file-pb-e7dd15b5cf8a6096.bin``, an external-data location that
is not valid UTF-8 came back from protobuf as bytes and raised TypeError (a traceback in the
CLI); ``file-pb-82e3828a8c0ee874.bin`` and ``npz-0407646590de1961.bin``, an external-data
location or a zip member name holding a newline was quoted raw (a two-line message).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hostile.cases import KNOWN_GAPS

from padconv_cli.errors import PadconvError
from padconv_cli.tensor_sources import read_tensor
from padconv_cli.tensorio.npy import read_npy_bytes
from padconv_cli.tensorio.npz import read_npz_bytes
from padconv_cli.tensorio.sniff import read_sniffed_bytes, read_stdin_stream

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def _read_pb_bytes(payload: bytes, folder: Path):
    from padconv_cli.tensorio.protobuf import read_pb_bytes

    return read_pb_bytes(payload, "fuzz.pb", None)


def _through_a_file(suffix: str):
    def read(payload: bytes, folder: Path):
        path = folder / f"input{suffix}"
        path.write_bytes(payload)
        return read_tensor(str(path))

    return read


READERS = {
    "npy": lambda payload, folder: read_npy_bytes(payload, "fuzz.npy"),
    "pb": _read_pb_bytes,
    "npz": lambda payload, folder: read_npz_bytes(payload, None, "fuzz.npz"),
    "sniff": lambda payload, folder: read_sniffed_bytes(payload, "<stdin>"),
    "file-pb": _through_a_file(".pb"),
    "file-npy": _through_a_file(".npy"),
    "stream": lambda payload, folder: read_stdin_stream(io.BytesIO(payload)),
}


def _target(path: Path) -> str:
    return path.name.rsplit("-", 1)[0]


def _params():
    for path in sorted(REGRESSIONS.glob("*.bin")):
        marks = []
        if path.name in KNOWN_GAPS:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[path.name]))
        yield pytest.param(path, id=path.name, marks=marks)


def test_regression_files_name_a_known_reader():
    files = sorted(REGRESSIONS.glob("*.bin"))
    assert files, "the fuzzing findings are kept here"
    assert {_target(path) for path in files} <= set(READERS)


@pytest.mark.parametrize("path", list(_params()))
def test_fuzz_finding_fails_cleanly(path, tmp_path):
    try:
        READERS[_target(path)](path.read_bytes(), tmp_path)
    except PadconvError as error:
        message = str(error)
        assert message.strip(), "empty message"
        assert not CONTROL_CHARACTERS.search(message), repr(message)
