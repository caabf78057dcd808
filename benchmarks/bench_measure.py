"""How it is measured: kernel calls verified then timed in turns in one process, whole
`padconv` processes (wall time and peak RSS), and the machine."""

import gc
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_cases as bc
import numpy as np


@dataclass(frozen=True)
class Settings:
    """Every knob of a run; docs/benchmarks.md ("How") says what each does."""

    repeat: int = 15  # turns per implementation and case, one timed call each
    warmup: int = 2  # untimed calls at least, per turn
    warmup_s: float = 0.15  # untimed seconds at least, per turn
    settle_s: float = 0.3  # pause after each turn
    budget_s: float = 6.0  # an implementation stops after 3 calls once it spent this
    reference_repeat: int = 3  # calls of onnx.reference
    process_runs: int = 10  # rounds of the start-up commands
    large_runs: int = 3  # rounds of the large-tensor commands
    quick: bool = False  # sizes / 8 (Case.shrunk)


FULL = Settings()
QUICK = Settings(3, 1, 0.0, 0.0, 0.5, 1, 2, 1, True)


def time_in_turns(calls: dict[str, tuple[Callable, bool]], s: Settings) -> dict[str, list]:
    """{name: timed durations} of {name: (call, capped)}, in turns as Settings says (garbage
    collection off meanwhile)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    gc.collect()
    gc.disable()
    try:
        for _ in range(s.repeat):
            for name, (call, capped) in calls.items():
                done = times[name]
                if capped and len(done) >= s.reference_repeat or (
                        not capped and len(done) >= 3 and sum(done) >= s.budget_s):
                    continue
                started, warm = time.perf_counter(), 0
                while not capped and (warm < s.warmup
                                      or time.perf_counter() - started < s.warmup_s):
                    call()
                    warm += 1
                started = time.perf_counter()
                call()
                done.append(time.perf_counter() - started)
                time.sleep(s.settle_s)
    finally:
        gc.enable()
    return times


def expected(case: bc.Case, inputs: dict) -> Any:
    """Conv: (y64, conv64(|x|, |w|)), the oracle and its bound's scale; Pad: numpy.pad's."""
    if case.kind == "pad":
        return np.pad(inputs["data"], case.width(), mode=case.mode)
    x, w = inputs["X"], inputs["W"]
    return bc.conv64(case, x, w), bc.conv64(case, np.abs(x), np.abs(w))


def verify(case: bc.Case, want: Any, got: Any) -> tuple[str, float | None, str]:
    """(status, error ratio, note): Conv within the dot-product bound (error ratio <= 1), Pad
    bit for bit equal to numpy.pad."""
    got = np.asarray(got)
    if case.kind == "conv":
        ratio = bc.conv_error_ratio(case, got, *want)
        return ("ok", ratio, "") if ratio <= 1 else ("mismatch", ratio,
                                                     f"error {ratio:.3g}x the bound")
    same = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    return ("ok", None, "") if same else ("mismatch", None, "differs from numpy.pad")


def measure_case(case: bc.Case, peers: list, s: Settings, rng: np.random.Generator) -> list:
    """One row per peer of the case's kind: each result verified once, then timed in turns."""
    inputs = case.make_inputs(rng)
    want, rows, calls = expected(case, inputs), {}, {}
    for peer in (p for p in peers if case.kind in p.kinds):
        rows[peer.name] = row = {
            "case": case.name, "kind": case.kind, "label": case.label, "peer": peer.name,
            "describe": case.describe(), "status": "ok", "note": "", "error_ratio": None,
            "median_s": None, "runs": 0, "rate": None}
        try:
            call = peer.prepare(case, inputs)
            got = call()
        except (bc.PeerSkipped, ImportError) as exc:
            row.update(status="skipped", note=str(exc))
            continue
        except Exception as exc:  # a peer that fails is reported, not fatal
            row.update(status="error", note=f"{type(exc).__name__}: {str(exc)[:150]}")
            continue
        if not peer.floor:
            row["status"], row["error_ratio"], row["note"] = verify(case, want, got)
        if row["status"] == "ok":
            calls[peer.name] = (call, peer.capped)
    for name, durations in time_in_turns(calls, s).items():
        median = statistics.median(durations) if durations else None
        rows[name].update(median_s=median, runs=len(durations),
                          rate=median and case.work() / median / 1e9)
    return list(rows.values())


def cli_argv(case: bc.Case, paths: list[Path], out: Path, *flags: str) -> list[str]:
    """`padconv pad|conv INPUTS --attribute v... FLAGS -o OUT` (the script beside this Python,
    else `python -m padconv_cli`)."""
    script = Path(sys.executable).with_name("padconv")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "padconv_cli"]
    argv += [case.kind, *map(str, paths)]
    attrs = case.attributes() if case.kind == "conv" else {"pads": case.pads, "mode": [case.mode]}
    for key, value in attrs.items():
        argv += [f"--{key}", *map(str, value)] if value != 1 else []
    return [*argv, *flags, "-o", str(out)]


# What a user would write instead of `padconv conv` on LARGE_CONV (argv: X.npy W.npy Y.npy).
ORT_SCRIPT = """\
import sys, numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto
x, w = np.load(sys.argv[1]), np.load(sys.argv[2])
node = helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1])
f = lambda n, a: helper.make_tensor_value_info(n, TensorProto.FLOAT, a)
g = helper.make_graph([node], "g", [f("X", x.shape), f("W", w.shape)], [f("Y", None)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
o = ort.SessionOptions(); o.intra_op_num_threads = 2
s = ort.InferenceSession(m.SerializeToString(), o, providers=["CPUExecutionProvider"])
np.save(sys.argv[3], s.run(None, {"X": x, "W": w})[0])
"""
# Runs argv as its only child; prints [wall seconds, the child's peak RSS (KiB on Linux), exit
# code, last stderr line]. A child of this small process, not of the benchmark: a child's
# ru_maxrss starts from its parent's size at fork.
PROBE = """import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
print(json.dumps([time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
                  .ru_maxrss, done.returncode, (done.stderr.strip() or "?").splitlines()[-1]]))"""
BASELINE = {bc.INTERPRETER: [sys.executable, "-c", "import numpy"]}


def run_process(argv: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak resident set in bytes, '' or why it failed) of one process."""
    probe = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True,
                           text=True, env=env)
    wall, kib, code, tail = json.loads(probe.stdout)
    return wall, 1024 * kib, f"exit {code}: {tail[:200]}" if code else ""


def interleaved(commands: dict[str, list[str]], runs: int) -> dict[str, dict[str, Any]]:
    """Median wall time and peak RSS of each command over `runs` rounds in turns, after one
    discarded round (which may write bytecode caches, as an install does)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    failed = {label: run_process(argv, env)[2] for label, argv in commands.items()}
    done: dict[str, list] = {label: [] for label in commands}
    for _ in range(runs):
        for label, argv in commands.items():
            done[label] += [] if failed[label] else [run_process(argv)]
    return {label: {"note": failed[label], "runs": len(d),
                    "status": "error" if failed[label] else "ok",
                    "command": shlex.join("SCRIPT" if "\n" in a else Path(a).name if "/" in a
                                          else a for a in commands[label]),
                    "median_s": statistics.median(r[0] for r in d) if d else None,
                    "peak_bytes": statistics.median(r[1] for r in d) if d else None}
            for label, d in done.items()}


def conv_pair_ratio(case: bc.Case, x: np.ndarray, w: np.ndarray, a: Path, b: Path) -> float:
    """max |a - b| / (2 * n * eps32 * max|x| * sum |w_m|), output channel m by channel: two
    float32 results within the dot-product bound of the exact one give at most 1."""
    ya, yb = np.load(a, mmap_mode="r"), np.load(b, mmap_mode="r")
    if ya.shape != yb.shape or {ya.dtype, yb.dtype} != {np.dtype(np.float32)}:
        return math.inf
    bound = (2 * case.reduction_size() * bc.EPS32 * float(np.max(np.abs(x)))
             * np.abs(w.astype(np.float64)).reshape(len(w), -1).sum(axis=1))
    worst = max(float(np.max(np.abs(ya[:, m] - yb[:, m].astype(np.float64)))) / bound[m]
                for m in range(len(w)))
    return worst if math.isfinite(worst) else math.inf


def _on_disk(case: bc.Case, folder: str, rng: np.random.Generator) -> tuple[dict, list[Path]]:
    inputs = case.make_inputs(rng)
    paths = [Path(folder) / f"{case.kind}_{name}.npy" for name in inputs]
    for path, array in zip(paths, inputs.values(), strict=True):
        np.save(path, array)
    return inputs, paths


def measure_startup(s: Settings, rng: np.random.Generator) -> dict[str, Any]:
    """Small `padconv pad` and `padconv conv` runs in turns with `python -c "import numpy"`,
    their outputs verified like the kernel cases'."""
    with tempfile.TemporaryDirectory(prefix="padconv-bench-") as tmp:
        commands, checks = dict(BASELINE), {}
        for case in bc.STARTUP:
            inputs, paths = _on_disk(case, tmp, rng)
            out = Path(tmp) / f"{case.kind}_out.npy"
            commands[case.label] = cli_argv(case, paths, out)
            checks[case.label] = (case, expected(case, inputs), out)
        rows = interleaved(commands, s.process_runs)
        for label, (case, want, out) in checks.items():
            row = rows[label]
            if not row["note"] and (why := verify(case, want, np.load(out))[2]):
                row.update(note=f"wrong output: {why}", status="mismatch")
    return {"rows": rows}


def measure_large(s: Settings, rng: np.random.Generator) -> dict[str, Any]:
    """`padconv conv` on LARGE_CONV, tiled and in memory, in turns with ORT_SCRIPT and `python
    -c "import numpy"`; each output must agree with the script's within twice the bound."""
    case = bc.LARGE_CONV.shrunk() if s.quick else bc.LARGE_CONV
    with tempfile.TemporaryDirectory(prefix="padconv-bench-") as tmp:
        inputs, paths = _on_disk(case, tmp, rng)
        out = {name: Path(tmp) / f"y_{name}.npy" for name in ("tiled", "memory", "ort")}
        commands = BASELINE | {f"padconv {engine}": cli_argv(case, paths, out[engine], "-q",
                                                             "--engine", engine)
                               for engine in ("tiled", "memory")}
        commands[bc.ORT_SCRIPT] = [sys.executable, "-c", ORT_SCRIPT, *map(str, paths),
                                   str(out["ort"])]
        rows = interleaved(commands, s.large_runs)
        agreement = None if any(row["note"] for row in rows.values()) else max(
            conv_pair_ratio(case, inputs["X"], inputs["W"], out[e], out["ort"])
            for e in ("tiled", "memory"))
    shapes = (case.x_shape, case.w_shape, case.output_shape())
    return {"describe": case.describe(), "rows": rows, "agreement": agreement,
            "tensor_bytes": 4 * sum(math.prod(shape) for shape in shapes)}


def describe_machine() -> dict[str, Any]:
    """CPU, usable cores, load average, Python, package versions and numpy's BLAS."""
    cpu = next((line.split(":")[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())
    versions = {}
    for name in ("numpy", "onnx", "onnxruntime", "torch", "padconv_cli"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            versions[name] = "not installed"
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    return {"cpu": cpu, "cores": len(os.sched_getaffinity(0)), "load_average": load_average(),
            "python": platform.python_version(), "platform": platform.platform(),
            "versions": versions, "numpy_blas": f"{blas['name']} {blas['version']}"}


def load_average() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())
