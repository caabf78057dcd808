"""Coverage-guided fuzzing of padconv's model side: ``--from-model`` node extraction, the
constants a node can see (initializers, Constant nodes, subgraphs), external data of model
initializers, and ``verify`` case folders.

The property under test: for any input bytes the code returns or raises a one-line
``PadconvError``; anything else (another exception, a multi-line message, a hang, a huge
allocation) is a finding, and so is any value read from ``outside.bin``, a file next to the
model's folder that external data must never reach (directly, through ``..``, a symlink or a
hard link).  See fuzz/README.md.

The first byte of a fuzz input picks the target (modulo the number of targets), the rest is the
payload; findings are saved as ``TARGET-SHA1.bin`` holding the payload only.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import os
import random
import re
import resource
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRATCH = Path(tempfile.mkdtemp(prefix="padconv-fuzz-models-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
MODEL_DIR = SCRATCH / "model"
OUTSIDE_VALUE = 1.2345e30  # every float of outside.bin; no result may hold it
MAX_NODES = 8


def _instrumented_imports():
    try:
        import atheris
    except ImportError:
        atheris = None
    with atheris.instrument_imports() if atheris else contextlib.nullcontext():
        import numpy as np

        from padconv_cli import models, onnx_nodes  # noqa: F401
        from padconv_cli import ops as operators
        from padconv_cli.errors import PadconvError
        from padconv_cli.kernels import conv, pad  # noqa: F401  (validation in the kernels)
        from padconv_cli.tensorio import protobuf  # noqa: F401
        from padconv_cli.verification import onnx_suite
    return atheris, np, operators, models, PadconvError, onnx_suite


atheris, np, operators, models, PadconvError, onnx_suite = _instrumented_imports()


def _lay_out_folders() -> None:
    """SCRATCH/outside.bin (off limits), SCRATCH/model/{data.bin, hard.bin -> outside.bin,
    link.bin -> ../outside.bin}: the places external-data locations can name."""
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    outside = SCRATCH / "outside.bin"
    outside.write_bytes(np.full(64, OUTSIDE_VALUE, "<f4").tobytes())
    (MODEL_DIR / "data.bin").write_bytes(np.arange(64, dtype="<f4").tobytes())
    with contextlib.suppress(FileExistsError):
        os.link(outside, MODEL_DIR / "hard.bin")
    with contextlib.suppress(FileExistsError):
        (MODEL_DIR / "link.bin").symlink_to("../outside.bin")


_lay_out_folders()


class Finding(Exception):
    """The code broke its contract on one input."""


def _check_values(array) -> None:
    array = np.asarray(array)
    if array.dtype == np.float32 and array.size and np.any(array == np.float32(OUTSIDE_VALUE)):
        raise Finding("a value of outside.bin was read: confinement broken")


def _model_path(payload: bytes) -> str:
    path = MODEL_DIR / "m.onnx"
    path.write_bytes(payload)
    return str(path)


def _command_line_arrays(op_type: str) -> tuple:
    if op_type == "Pad":
        return (np.ones((2, 3), np.float32),)
    return (np.ones((1, 1, 3, 3), np.float32), None, None)


def target_nodes(payload: bytes) -> None:
    """``--from-model`` without flags: every Pad/Conv node resolved and planned (not run)."""
    path = _model_path(payload)
    for node in models.model_nodes(path)[:MAX_NODES]:
        try:
            resolved = models.resolve_call(node.op_type, _command_line_arrays(node.op_type), {},
                                           node)
            for array in resolved.call.arrays:
                if array is not None:
                    _check_values(array)
            operators.plan_call(resolved.call)
        except PadconvError:
            continue  # one bad node must not hide the others


def target_constants(payload: bytes) -> None:
    """Every constant every Pad/Conv node can see, and every initializer of the main graph."""
    path = _model_path(payload)
    for node in models.model_nodes(path)[:MAX_NODES]:
        for name in list(node.constants)[:64]:
            with contextlib.suppress(PadconvError):
                _check_values(node.constants[name]())
    for _name, array in models.model_initializers(path):
        _check_values(array)


def _split_three(payload: bytes) -> tuple[bytes, bytes, bytes]:
    """model, input_0.pb, output_0.pb: two little-endian u16 lengths, then the parts."""
    if len(payload) < 4:
        return payload, b"", b""
    first, second = struct.unpack("<HH", payload[:4])
    rest = payload[4:]
    return rest[:first], rest[first:first + second], rest[first + second:]


def target_verify(payload: bytes) -> None:
    """A ``verify DIR`` case folder: load it and translate and plan its node (not run)."""
    from padconv_cli.onnx_nodes import kernel_call

    case_dir = SCRATCH / "verify" / "test_case"
    data_dir = case_dir / "test_data_set_0"
    data_dir.mkdir(parents=True, exist_ok=True)
    model, given, expected = _split_three(payload)
    (case_dir / "model.onnx").write_bytes(model)
    (data_dir / "input_0.pb").write_bytes(given)
    (data_dir / "output_0.pb").write_bytes(expected)
    for case in onnx_suite.cases_from_user_dir(str(case_dir)):
        if case.unsupported:
            continue
        with contextlib.suppress(PadconvError):
            operators.plan_call(kernel_call(case.op, case.attributes, case.inputs,
                                          opset=case.opset))


TARGETS: dict[str, Callable[[bytes], None]] = {
    "nodes": target_nodes,
    "constants": target_constants,
    "external": target_constants,  # the same code, started from external-data seeds
    "verify": target_verify,
}
TARGET_NAMES = list(TARGETS)


def check_one(target_name: str, payload: bytes) -> None:
    """Run one target on one payload; raise :class:`Finding` if the contract is broken."""
    try:
        TARGETS[target_name](payload)
    except Finding:
        raise
    except PadconvError as error:
        message = str(error)
        if "\n" in message or not message.strip() or len(message) > 2000:
            raise Finding(f"{target_name}: error message is not one short line: "
                          f"{message[:300]!r}") from None
    except RecursionError as error:  # protobuf's nesting limit reached through our walk
        raise Finding(f"{target_name}: RecursionError: {error}") from error
    except Exception as error:  # the contract: nothing but PadconvError may escape
        raise Finding(f"{target_name}: {type(error).__name__}: {error}") from error


def split_input(data: bytes) -> tuple[str, bytes]:
    if not data:
        return TARGET_NAMES[0], b""
    return TARGET_NAMES[data[0] % len(TARGET_NAMES)], data[1:]


def test_one_input(data: bytes) -> None:
    """The libFuzzer entry point."""
    check_one(*split_input(data))


# --- seeds -----------------------------------------------------------------------------------


def _model(nodes, initializers=(), opset: int = 13, inputs=(("X", [2, 3]),)) -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]) \
        .SerializeToString()


def _external(name: str, location: str, dims=(1, 1, 2, 2)):
    from onnx import TensorProto

    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(dims))
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    tensor.external_data.add(key="length", value=str(4 * int(np.prod(dims))))
    return tensor


def model_seeds() -> list[bytes]:
    from onnx import helper, numpy_helper

    pads = numpy_helper.from_array(np.array([1, 1, 1, 1], np.int64), "pads")
    w = numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32), "W")
    b = numpy_helper.from_array(np.zeros(1, np.float32), "B")
    empty = helper.make_graph([], "e", [], [])
    inner = helper.make_graph([helper.make_node("Pad", ["X", "pads"], ["Y"], name="deep")],
                              "inner", [], [])
    return [
        _model([helper.make_node("Pad", ["X"], ["Y"], pads=[0, 1, 0, 1], mode="reflect")],
               opset=2),
        _model([helper.make_node("Constant", [], ["pads"], value_ints=[1, 0, 1, 0]),
                helper.make_node("Pad", ["X", "pads"], ["Y"], name="p")]),
        _model([helper.make_node("Pad", ["X", "pads", "", "axes"], ["Y"], mode="edge")],
               [numpy_helper.from_array(np.array([1, 2], np.int64), "pads"),
                numpy_helper.from_array(np.array([1], np.int64), "axes")], opset=18),
        _model([helper.make_node("Conv", ["X", "W", "B"], ["Y"], pads=[1, 1, 1, 1],
                                 strides=[2, 1], group=1, auto_pad="NOTSET")], [w, b],
               inputs=(("X", [1, 1, 3, 3]),)),
        _model([helper.make_node("Constant", [], ["pads"], value=pads),
                helper.make_node("If", ["c"], [], then_branch=inner, else_branch=empty)]),
        _model([helper.make_node("Conv", ["X", "W"], ["Y"], auto_pad="SAME_UPPER",
                                 dilations=[2, 2])], [w], inputs=(("X", [1, 1, 3, 3]),)),
    ]


def external_seeds() -> list[bytes]:
    from onnx import helper

    conv = helper.make_node("Conv", ["X", "W"], ["Y"], name="c")
    return [_model([conv], [_external("W", location)], inputs=(("X", [1, 1, 3, 3]),))
            for location in ("data.bin", "hard.bin", "link.bin", "../outside.bin",
                             "sub/../data.bin", "/etc/passwd")]


def verify_seeds() -> list[bytes]:
    from onnx import numpy_helper

    seeds = []
    for model in model_seeds()[:4]:
        given = numpy_helper.from_array(np.ones((2, 3), np.float32), "x").SerializeToString()
        expected = numpy_helper.from_array(np.ones((4, 5), np.float32), "y").SerializeToString()
        seeds.append(struct.pack("<HH", len(model), len(given)) + model + given + expected)
    return seeds


def seed_inputs() -> list[bytes]:
    """Selector byte + payload for every seed."""
    groups = {"nodes": model_seeds(), "constants": model_seeds(), "external": external_seeds(),
              "verify": verify_seeds()}
    return [bytes([TARGET_NAMES.index(name)]) + p for name, ps in groups.items() for p in ps]


def write_seed_corpus(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    seeds = seed_inputs()
    for data in seeds:
        (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(seeds)


# --- findings and the plain loop -------------------------------------------------------------


def save_finding(folder: Path, data: bytes) -> Path:
    name, payload = split_input(data)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"model-{name}-{hashlib.sha1(payload).hexdigest()[:16]}.bin"
    path.write_bytes(payload)
    return path


_seen: set[str] = set()
STATS = {"inputs": 0, "findings": 0}


def record(finding: Exception, data: bytes, findings: Path) -> None:
    STATS["findings"] += 1
    key = re.split(r"[0-9]", str(finding), maxsplit=1)[0][:80]
    if key in _seen:
        return
    _seen.add(key)
    path = save_finding(findings, data)
    print(f"\nFINDING saved to {path}: {finding}", file=sys.stderr, flush=True)


def mutate(data: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        at = rng.randint(1, max(len(buffer) - 1, 1))
        kind = rng.randrange(6)
        if kind == 0 and len(buffer) > 1:
            buffer[at % len(buffer)] ^= 1 << rng.randrange(8)
        elif kind == 1:
            buffer[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == 2:
            del buffer[at:at + rng.randint(1, 16)]
        elif kind == 3:
            buffer[at:at] = buffer[at:at + rng.randint(1, 64)]
        elif kind == 4:
            other = rng.choice(pool)
            buffer[at:] = other[rng.randint(1, len(other)):]
        else:
            value = rng.choice([0, 1, 0x7F, 0xFF, 2**31 - 1, 2**32 - 1, 2**62, 2**63 - 1])
            width = rng.choice([1, 2, 4, 8])
            buffer[at:at + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
    return bytes(buffer)


def plain_loop(seconds: float, seed: int, findings: Path) -> int:
    rng = random.Random(seed)
    pool = seed_inputs()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        data = mutate(rng.choice(pool), rng, pool)
        STATS["inputs"] += 1
        try:
            test_one_input(data)
        except (Finding, MemoryError) as finding:
            record(finding, data, findings)
        else:
            if rng.random() < 0.05:
                pool.append(data)
    print(f"{STATS['inputs']} inputs in {seconds:.0f} s, {STATS['findings']} failing inputs "
          f"of {len(_seen)} kinds", file=sys.stderr)
    return STATS["findings"]


def _atheris_entry(data: bytes, findings: Path) -> None:
    STATS["inputs"] += 1
    try:
        test_one_input(data)
    except Finding as finding:
        record(finding, data, findings)


def _report_at_exit() -> None:
    print(f"\n{STATS['inputs']} inputs, {STATS['findings']} failing inputs of {len(_seen)} "
          "kinds", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    """``--plain`` runs the pure-python loop; otherwise the arguments go to libFuzzer (findings
    are saved and the run goes on)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False,
                                     allow_abbrev=False)
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--make-seeds", metavar="FOLDER")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--findings", default=str(HERE / "corpus" / "findings"))
    parser.add_argument("--memory-limit-mb", type=int, default=3072)
    known, rest = parser.parse_known_args(argv[1:])
    if known.make_seeds:
        print(f"{write_seed_corpus(Path(known.make_seeds))} seeds written")
        return 0
    resource.setrlimit(resource.RLIMIT_AS, (known.memory_limit_mb * 2**20,) * 2)
    if known.plain or atheris is None:
        return 1 if plain_loop(known.seconds, known.seed, Path(known.findings)) else 0
    atexit.register(_report_at_exit)
    findings = Path(known.findings)
    atheris.Setup([argv[0], *rest], lambda data: _atheris_entry(data, findings))
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
