"""Making sure every dask worker reads the client's input and writes the client's output.

A worker resolves a path in its own file system and working folder: a relative path, or an
absolute one that exists only on the client, would make it read another file (or, for Zarr,
no chunk at all, which reads as the fill value) and the result would be wrong with exit 0.
Rules:

* every local path is made absolute on the client (:func:`absolute`); URLs are kept;
* the client takes a fingerprint of each input (:func:`fingerprint`): for a ``.npy`` file its
  size, mtime (ns), shape, dtype and the SHA-256 of the header and of up to three byte ranges
  of 64 KiB (start, middle and end of the data); for a Zarr store its shape, dtype, chunk
  grid, the SHA-256 of its metadata document, the number of stored chunks and the SHA-256 of
  up to three of them (first, middle and last in key order);
* before any block is computed every connected worker takes the same fingerprint at the same
  path and compares (:func:`confirm_on_workers`); each block task repeats the check once per
  worker process (:func:`ensure_confirmed`), which covers workers that join later;
* a Zarr chunk that the client's store holds must exist for the worker that reads it: each
  block task checks the stored chunks its box touches before reading (:func:`check_chunks`);
* the output is the client's temporary target: workers confirm they see it (``probe``) before
  the first block is computed.

A refusal names the worker and the path.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

from padconv_cli.errors import InputError

SAMPLE_BYTES = 64 * 2**10
SHARED_HINT = (
    "every worker must see the client's files at the same absolute path "
    "(a shared file system or object store)"
)


def is_url(path: str) -> bool:
    """True for an fsspec URL such as ``s3://bucket/x.zarr`` (``scheme://``)."""
    head, sep, _ = path.partition("://")
    return bool(sep) and head.isidentifier()


def absolute(path: str) -> str:
    """``path`` made absolute on the client (URLs unchanged)."""
    return path if is_url(path) else os.path.abspath(path)


@dataclass(frozen=True)
class Fingerprint:
    """What identifies one input: its kind, path and the facts compared between machines."""

    kind: str
    path: str
    facts: tuple[tuple[str, str], ...]

    def difference(self, other: Fingerprint) -> str | None:
        """The first fact in which ``other`` differs from this one (None when equal)."""
        theirs = dict(other.facts)
        for name, value in self.facts:
            if theirs.get(name) != value:
                return f"{name} is {theirs.get(name, 'unknown')}, the client's is {value}"
        return None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def sample_ranges(start: int, length: int, size: int = SAMPLE_BYTES) -> list[tuple[int, int]]:
    """Up to three ``(offset, count)`` byte ranges: the start, middle and end of
    ``[start, start + length)``, each at most ``size`` bytes."""
    if length <= 0:
        return []
    count = min(size, length)
    offsets = {start, start + (length - count) // 2, start + length - count}
    return [(offset, count) for offset in sorted(offsets)]


def npy_fingerprint(path: str, data_offset: int, shape: tuple, dtype: Any) -> Fingerprint:
    """Fingerprint of a ``.npy`` file (module docstring): raises OSError when unreadable."""
    info = os.stat(path)
    digests = []
    with open(path, "rb") as stream:
        digests.append(_digest(stream.read(data_offset)))
        for offset, count in sample_ranges(data_offset, info.st_size - data_offset):
            stream.seek(offset)
            digests.append(_digest(stream.read(count)))
    facts = (
        ("size", str(info.st_size)),
        ("mtime", str(info.st_mtime_ns)),
        ("shape", str(tuple(shape))),
        ("dtype", str(dtype)),
        ("content digest", ",".join(digests)),
    )
    return Fingerprint("npy", path, facts)


def zarr_fingerprint(array: Any, path: str) -> Fingerprint:
    """Fingerprint of an open Zarr array (module docstring)."""
    from padconv_cli.engines import zarr_store

    keys = sorted(zarr_store.stored_chunk_keys(array))
    samples = sorted({keys[0], keys[len(keys) // 2], keys[-1]}) if keys else []
    digests = [_digest(zarr_store.read_key(array, key) or b"") for key in samples]
    facts = (
        ("shape", str(tuple(array.shape))),
        ("dtype", str(array.dtype)),
        ("chunk grid", str(zarr_store.chunk_grid_shape(array))),
        ("metadata digest", _digest(zarr_store.metadata_bytes(array))),
        ("stored chunks", str(len(keys))),
        ("chunk digests", ",".join(f"{k}:{d}" for k, d in zip(samples, digests, strict=True))),
    )
    return Fingerprint("zarr", path, facts)


def fingerprint(kind: str, path: str) -> Fingerprint:
    """Take the fingerprint of the input ``path`` of ``kind`` (``npy`` or ``zarr``) here."""
    if kind == "zarr":
        from padconv_cli.engines.zarr_store import open_zarr_input

        return zarr_fingerprint(open_zarr_input(path), path)
    from padconv_cli.outofcore.npy_blocks import open_npy_input

    source = open_npy_input(path)
    header = source.header
    return npy_fingerprint(path, header.data_offset, header.shape, header.dtype)


def here() -> str:
    """The address of the dask worker running this code (or ``this process``)."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return "this process"


def problem_with(expected: Fingerprint) -> str | None:
    """Why this process does not see the client's input ``expected`` (None when it does)."""
    try:
        found = fingerprint(expected.kind, expected.path)
    except Exception as exc:  # any failure to read (missing file, no credentials...) refuses
        from padconv_cli.tensorio.files import one_line

        return f"cannot read it ({one_line(exc, 160)})"
    difference = expected.difference(found)
    return None if difference is None else f"not the client's file: {difference}"


def refusal(worker: str, path: str, problem: str) -> InputError:
    """The one-line error for a worker that does not see the client's ``path``."""
    return InputError(f"worker {worker}: {path}: {problem}; {SHARED_HINT}", source=path)


_CONFIRMED: set[Fingerprint] = set()


def ensure_confirmed(expected: Fingerprint) -> None:
    """Check ``expected`` in this worker process once (later calls return at once)."""
    if expected in _CONFIRMED:
        return
    problem = problem_with(expected)
    if problem is not None:
        raise refusal(here(), expected.path, problem)
    _CONFIRMED.add(expected)


def worker_problems(inputs: list[Fingerprint], outputs: list[Any]) -> list[tuple[str, str]]:
    """``(path, problem)`` for every input or output this worker does not share."""
    problems = []
    for expected in inputs:
        problem = problem_with(expected)
        if problem is None:
            _CONFIRMED.add(expected)
        else:
            problems.append((expected.path, problem))
    for output in outputs:
        problem = output.probe()
        if problem is not None:
            problems.append((output.shown_path, problem))
    return problems


def confirm_on_workers(client: Any, inputs: list[Fingerprint], outputs: list[Any]) -> None:
    """Every worker of ``client`` confirms the inputs and outputs (module docstring); raises
    :class:`InputError` naming the first worker and path that differ."""
    answers = client.run(worker_problems, inputs, outputs)
    for worker in sorted(answers):
        for path, problem in answers[worker]:
            raise refusal(worker, path, problem)


def check_chunks(array: Any, path: str, keys: list[str]) -> None:
    """Every chunk key in ``keys`` (stored in the client's store) exists here: a missing
    chunk would be read as the fill value."""
    from padconv_cli.engines import zarr_store

    for key in keys:
        if not zarr_store.has_key(array, key):
            raise refusal(
                here(), path, f"chunk {key} is stored in the client's store but missing here"
            )
