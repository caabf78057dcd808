"""An attacker's and a careless user's corpus, kept apart from ``hostile.cases``: each case lays
out its files in ROOT/case (beside ROOT/secret.bin, which must stay out of reach), runs the
installed ``padconv`` there as a child process (environment variables through ``env``), and
states what must happen:

* :class:`Refused`: exit 2, one stderr line ``padconv CMD: error: ...`` naming the given words,
  no traceback, nothing on stdout, no file created or changed under ROOT;
* :class:`Accepted`: exit 0 and the written ``out.npy`` equal to an oracle (numpy for Pad,
  the float64 loop oracle within the dot-product bound for Conv), inputs untouched;
* :class:`Exits`: a report command's own exit code (``compare``: 1 for a difference).

Every child's peak resident memory is measured (``wait4``) and bounded by runner.MAX_PEAK_RSS_BYTES.
Cases run two at a time, once per session, before the tests inspect them.
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import sys
import zipfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hostile.fork_server import forked_padconv
from hostile.runner import ChildRun, listing, padconv_command, run_command

SECRET = b"bytes outside the case folder\n" * 8
OUT = ("-o", "out.npy")
FLOAT, UINT8, INT8, INT16, BOOL, FLOAT16, UINT32 = 1, 2, 3, 5, 9, 10, 12
COMPLEX64, BFLOAT16, FLOAT8E4M3FN, INT4 = 14, 16, 17, 22

Builder = Callable[[Path], None]
Content = bytes | Callable[[Path], bytes]


@dataclass(frozen=True)
class Refused:
    """Exit 2, one line naming every word of ``words`` (case-insensitive)."""

    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class Accepted:
    """Exit 0; ``check(case_dir)`` raises AssertionError when the result is wrong."""

    check: Callable[[Path], None]


@dataclass(frozen=True)
class Exits:
    """Exit ``code`` with no traceback and at most ``stderr_lines`` lines on stderr."""

    code: int
    stderr_lines: int = 0


@dataclass(frozen=True)
class Case:
    """One attack: its files, command line, environment and stdin, and the expectation."""

    name: str
    args: tuple[str, ...]
    expect: Refused | Accepted | Exits
    files: dict[str, Content] = field(default_factory=dict)
    build: Builder | None = None
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None


@dataclass(frozen=True)
class Outcome:
    """What a case's run did, and the case folder's listing before and after it."""

    case: Case
    root: Path
    run: ChildRun
    before: dict
    after: dict

    @property
    def case_dir(self) -> Path:
        return self.root / "case"

    def describe(self) -> str:
        run = self.run
        return (f"padconv {' '.join(self.case.args)[:200]} (env {self.case.env}) -> exit "
                f"{run.returncode}, {run.peak_rss_bytes / 2**20:.0f} MiB, "
                f"stderr={run.stderr_text[:600]!r}")


# --- byte builders ----------------------------------------------------------------------------


def npy(array: np.ndarray) -> bytes:
    """``array`` as ``.npy`` bytes."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npz(members: Iterable[tuple[str, bytes]], method: int = zipfile.ZIP_STORED) -> bytes:
    """A zip holding the given (name, bytes) entries in order; repeated names are kept."""
    buffer = io.BytesIO()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about a duplicate name: that is the point
        with zipfile.ZipFile(buffer, "w", method) as archive:
            for name, content in members:
                archive.writestr(name, content)
    return buffer.getvalue()


def zip_with_method(content: bytes, method_id: int, flags: int = 0) -> bytes:
    """A one-entry zip (``a.npy``) whose headers claim compression ``method_id`` and ``flags``."""
    image = bytearray(npz([("a.npy", content)]))
    local, central = image.find(b"PK\x03\x04"), image.find(b"PK\x01\x02")
    image[local + 8 : local + 10] = struct.pack("<H", method_id)
    image[central + 10 : central + 12] = struct.pack("<H", method_id)
    image[local + 6] |= flags
    image[central + 8] |= flags
    return bytes(image)


def tensor_proto(data_type: int, dims, external=None, **fields) -> bytes:
    """A serialized TensorProto with exactly these fields (``external``: (key, value) pairs,
    repeats kept)."""
    from onnx import TensorProto

    proto = TensorProto()
    proto.data_type = data_type
    proto.dims.extend(dims)
    for name, value in fields.items():
        if isinstance(value, list):
            getattr(proto, name).extend(value)
        else:
            setattr(proto, name, value)
    if external is not None:
        proto.data_location = TensorProto.EXTERNAL
        for key, value in external:
            entry = proto.external_data.add()
            entry.key, entry.value = key, value
    return proto.SerializeToString()


def conv_model(w: np.ndarray, b: np.ndarray | None = None, opset: int = 13,
               x_shape: tuple[int, ...] | None = None, **attrs) -> bytes:
    """A one-Conv model (node ``c``) storing W (and B) as initializers; X of ``x_shape``."""
    from onnx import helper, numpy_helper

    stored = [numpy_helper.from_array(w, "W")]
    inputs = ["X", "W"]
    if b is not None:
        stored.append(numpy_helper.from_array(b, "B"))
        inputs.append("B")
    graph = helper.make_graph(
        [helper.make_node("Conv", inputs, ["Y"], name="c", **attrs)], "g",
        [helper.make_tensor_value_info("X", 1, None if x_shape is None else list(x_shape))],
        [helper.make_tensor_value_info("Y", 1, None)], stored)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


X23 = np.arange(6, dtype=np.float32).reshape(2, 3)
X_NPY = npy(X23)
X4 = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5) / 7
W4 = (np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3) - 4) / 3
CONV_FILES = {"x.npy": npy(X4), "w.npy": npy(W4), "b.npy": npy(np.array([0.5], np.float32))}


# --- folder builders --------------------------------------------------------------------------


def _fifo(name: str) -> Builder:
    return lambda case_dir: os.mkfifo(case_dir / name)


def _directory(name: str) -> Builder:
    return lambda case_dir: (case_dir / name).mkdir()


def _symlink(name: str, target: str) -> Builder:
    return lambda case_dir: (case_dir / name).symlink_to(target)


def _hardlink(name: str, existing: str) -> Builder:
    return lambda case_dir: os.link(case_dir / existing, case_dir / name)


def _all(*builders: Builder) -> Builder:
    def build(case_dir: Path) -> None:
        for builder in builders:
            builder(case_dir)

    return build


def zarr_store(name: str, array: np.ndarray, chunks: tuple[int, ...], *, compressor=None,
               edit: Callable[[Path], None] | None = None, order: str = "C") -> Builder:
    """case/NAME, a Zarr v2 store of ``array`` (uncompressed unless ``compressor``), then
    ``edit(store folder)`` (replace a chunk by a symlink, a FIFO, garbage ...)."""

    def build(case_dir: Path) -> None:
        import zarr

        store = zarr.open_array(case_dir / name, mode="w", shape=array.shape, chunks=chunks,
                                dtype=array.dtype, zarr_format=2, compressor=compressor,
                                order=order)
        store[...] = array
        if edit is not None:
            edit(case_dir / name)

    return build


def lay_out(case: Case, root: Path) -> None:
    """ROOT/secret.bin, ROOT/outside/ (a folder a symlink may lead to) and ROOT/case/ with the
    case's files."""
    case_dir = root / "case"
    case_dir.mkdir(parents=True)
    (root / "secret.bin").write_bytes(SECRET)
    (root / "outside").mkdir()
    (root / "outside" / "d.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    for name, content in case.files.items():
        (case_dir / name).write_bytes(content(root) if callable(content) else content)
    if case.build is not None:
        case.build(case_dir)


def run_case(case: Case, root: Path, run_forked: Callable[..., ChildRun]) -> Outcome:
    """Lay the case out under ``root`` and run it once, measuring the child's peak memory:
    forked from a fork server, or, with environment variables, as the installed command."""
    lay_out(case, root)
    before = listing(root)
    if case.env:
        env_words = [f"{key}={value}" for key, value in case.env.items()]
        command = [shutil.which("env") or "/usr/bin/env", *env_words, *padconv_command(),
                   *case.args]
        run = run_command(command, cwd=root / "case", stdin=case.stdin, measure_memory=True)
    else:
        run = run_forked(case.args, root / "case", case.stdin)
    return Outcome(case, root, run, before, listing(root))


def run_all(cases: list[Case], base: Path) -> dict[str, Outcome]:
    """Every case, two at a time, each in base/NAME."""
    with forked_padconv(2) as run, ThreadPoolExecutor(2) as pool:
        outcomes = pool.map(lambda case: run_case(case, base / case.name, run), cases)
        return {case.name: outcome for case, outcome in zip(cases, outcomes, strict=True)}


def python_executable() -> str:
    """This interpreter (oracles that need a helper process use it)."""
    return sys.executable
