"""Coverage-guided fuzzing of padconv's tensor readers (.npy, .npz, .pb, sniffed stdin, files).

The property under test: for any input bytes a reader returns an array or raises a one-line
``PadconvError``; anything else (another exception, a multi-line message, a hang, a huge
allocation) is a finding.  See fuzz/README.md for how to run it and what to do with findings.

The first byte of a fuzz input picks the target (its value modulo the number of targets), the
rest is the payload.  Findings are saved as ``TARGET-SHA1.bin`` holding the payload only, the
form tests/hostile/regressions/ keeps them in.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import io
import random
import re
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRATCH = Path(tempfile.mkdtemp(prefix="padconv-fuzz-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def _instrumented_imports():
    """Import the readers, instrumented for coverage when atheris is available."""
    try:
        import atheris
    except ImportError:
        atheris = None
    with atheris.instrument_imports() if atheris else contextlib.nullcontext():
        from padconv_cli import tensor_sources
        from padconv_cli.errors import PadconvError
        from padconv_cli.tensorio import npy, npz, protobuf, sniff
    return atheris, PadconvError, tensor_sources, npy, npz, protobuf, sniff


atheris, PadconvError, tensor_sources, npy, npz, protobuf, sniff = _instrumented_imports()


def _read_file(suffix: str) -> Callable[[bytes], object]:
    """A target writing the payload to SCRATCH/input<suffix> and reading it with read_tensor."""

    def target(payload: bytes) -> object:
        path = SCRATCH / f"input{suffix}"
        path.write_bytes(payload)
        return tensor_sources.read_tensor(str(path))

    return target


TARGETS: dict[str, Callable[[bytes], object]] = {
    "npy": lambda payload: npy.read_npy_bytes(payload, "fuzz.npy"),
    "pb": lambda payload: protobuf.read_pb_bytes(payload, "fuzz.pb", None),
    "npz": lambda payload: npz.read_npz_bytes(payload, None, "fuzz.npz"),
    "sniff": lambda payload: sniff.read_sniffed_bytes(payload, "<stdin>"),
    "file-pb": _read_file(".pb"),
    "file-npy": _read_file(".npy"),
    # stdin as padconv reads it: header first, a TensorProto field by field, against the limit
    "stream": lambda payload: sniff.read_stdin_stream(io.BytesIO(payload)),
}
TARGET_NAMES = list(TARGETS)


class Finding(Exception):
    """A reader broke its contract on one input."""


def check_one(target_name: str, payload: bytes) -> None:
    """Run one target on one payload; raise :class:`Finding` if the contract is broken."""
    try:
        TARGETS[target_name](payload)
    except PadconvError as error:
        message = str(error)
        if "\n" in message or not message.strip():
            raise Finding(f"{target_name}: error message is not one line: {message!r}") from None
    except Exception as error:  # the contract: nothing but PadconvError may escape
        raise Finding(f"{target_name}: {type(error).__name__}: {error}") from error


def split_input(data: bytes) -> tuple[str, bytes]:
    """(target name, payload) of a fuzz input: the first byte picks the target."""
    if not data:
        return TARGET_NAMES[0], b""
    return TARGET_NAMES[data[0] % len(TARGET_NAMES)], data[1:]


def test_one_input(data: bytes) -> None:
    """The libFuzzer entry point."""
    check_one(*split_input(data))


# --- seeds -----------------------------------------------------------------------------------


def seed_payloads() -> dict[str, list[bytes]]:
    """Valid images of every format, the fuzzer's starting points (built, not stored)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    arrays = [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.asfortranarray(np.arange(12, dtype=">i8").reshape(3, 4)),
        np.array([True, False]),
        np.array(["ab", "c"]),
        np.zeros((0, 2), np.float16),
        np.array(1.5),
    ]
    npys = []
    for array in arrays:
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        npys.append(buffer.getvalue())
    npzs = []
    for compress in (np.savez, np.savez_compressed):
        buffer = io.BytesIO()
        compress(buffer, a=arrays[0], b=arrays[1])
        npzs.append(buffer.getvalue())
    native = [a.astype(a.dtype.newbyteorder("=")) for a in arrays[:3]]
    pbs = [numpy_helper.from_array(a).SerializeToString() for a in native]
    pbs.append(helper.make_tensor("t", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4]).SerializeToString())
    pbs.append(helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"b"]).SerializeToString())
    external = TensorProto(data_type=TensorProto.FLOAT, dims=[2])
    external.data_location = TensorProto.EXTERNAL
    external.external_data.add(key="location", value="data.bin")
    pbs.append(external.SerializeToString())
    return {
        "npy": npys,
        "pb": pbs,
        "npz": npzs,
        "sniff": npys[:2] + pbs[:2] + npzs[:1],
        "file-pb": pbs,
        "file-npy": npys,
        "stream": npys[:2] + pbs + npzs[:1],
    }


def write_seed_corpus(folder: Path) -> int:
    """Write the seeds as fuzz inputs (selector byte + payload) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, payloads in seed_payloads().items():
        selector = bytes([TARGET_NAMES.index(name)])
        for payload in payloads:
            data = selector + payload
            (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)
            count += 1
    return count


# --- the plain loop (no atheris) -------------------------------------------------------------


def mutate(data: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    """A few random edits: flip, insert, delete, repeat a chunk, splice with another input,
    set an interesting integer (0, -1, 2^31, ...)."""
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        at = rng.randint(0, max(len(buffer) - 1, 0))
        kind = rng.randrange(7)
        if kind == 0 and buffer:
            buffer[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            buffer[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == 2:
            del buffer[at : at + rng.randint(1, 16)]
        elif kind == 3:
            buffer[at:at] = buffer[at : at + rng.randint(1, 32)]
        elif kind == 4:
            other = rng.choice(pool)
            start = rng.randint(0, len(other))
            buffer[at:] = other[start:]
        elif kind == 5:
            value = rng.choice([0, 1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 2**31 - 1, 2**32 - 1, 2**63])
            width = rng.choice([1, 2, 4, 8])
            buffer[at : at + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
        elif buffer:
            buffer[at] = rng.choice(b"\x00\xff-.,:()[]{}'0123456789eE")
    return bytes(buffer)


def save_finding(folder: Path, data: bytes) -> Path:
    """Keep a finding as TARGET-SHA1.bin holding the payload (the regression-test form)."""
    name, payload = split_input(data)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{hashlib.sha1(payload).hexdigest()[:16]}.bin"
    path.write_bytes(payload)
    return path


_seen_signatures: set[str] = set()


def signature(finding: Exception) -> str:
    """What tells two findings apart: the target and the message up to its first digit."""
    return re.split(r"[0-9]", str(finding), maxsplit=1)[0][:80]


def record(finding: Exception, data: bytes, findings: Path) -> None:
    """Save and announce a finding unless one of the same signature was already saved."""
    if signature(finding) in _seen_signatures:
        return
    _seen_signatures.add(signature(finding))
    path = save_finding(findings, data)
    print(
        f"\nFINDING saved to {path}: {type(finding).__name__}: {finding}",
        file=sys.stderr,
        flush=True,
    )


def plain_loop(seconds: float, seed: int, findings: Path, memory_limit_mb: int) -> int:
    """Mutate the seeds at random for ``seconds``; returns the number of findings."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit_mb * 2**20,) * 2)
    rng = random.Random(seed)
    pool = [bytes([TARGET_NAMES.index(n)]) + p for n, ps in seed_payloads().items() for p in ps]
    found, runs, deadline = 0, 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        data = mutate(rng.choice(pool), rng, pool)
        runs += 1
        try:
            test_one_input(data)
        except (Finding, MemoryError) as finding:
            found += 1
            record(finding, data, findings)
        else:
            if rng.random() < 0.05:
                pool.append(data)  # keep some survivors to mutate further
    print(
        f"{runs} inputs in {seconds:.0f} s, {found} failing inputs of "
        f"{len(_seen_signatures)} kinds",
        file=sys.stderr,
    )
    return found


def main(argv: list[str]) -> int:
    """``--plain`` runs the pure-python loop; otherwise the arguments go to libFuzzer."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], add_help=False, allow_abbrev=False
    )
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--make-seeds", metavar="FOLDER")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--findings", default=str(HERE / "corpus" / "findings"))
    parser.add_argument("--memory-limit-mb", type=int, default=2048)
    parser.add_argument("--keep-going", action="store_true")
    known, rest = parser.parse_known_args(argv[1:])
    if known.make_seeds:
        print(f"{write_seed_corpus(Path(known.make_seeds))} seeds written")
        return 0
    if known.plain or atheris is None:
        if not known.plain:
            print("atheris is not installed: running the plain loop", file=sys.stderr)
        found = plain_loop(known.seconds, known.seed, Path(known.findings), known.memory_limit_mb)
        return 1 if found else 0
    findings = Path(known.findings)
    atheris.Setup([argv[0], *rest], lambda data: _atheris_entry(data, known.keep_going, findings))
    atheris.Fuzz()
    return 0


def _atheris_entry(data: bytes, keep_going: bool, findings: Path) -> None:
    try:
        test_one_input(data)
    except Finding as finding:
        if not keep_going:
            save_finding(findings, data)
            raise
        record(finding, data, findings)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
