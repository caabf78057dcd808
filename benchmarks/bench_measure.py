"""How it is measured: kernel calls verified then timed in turns in one process; whole
processes (wall time and peak RSS) in turns, their outputs verified; and the machine."""

import functools
import gc
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import bench_cases as bc
import numpy as np

try:  # the cluster measurement's
    import zarr
except ImportError:
    zarr = None


@dataclass(frozen=True)
class Settings:
    """Every knob of a run; docs/benchmarks.md ("How") says what each does."""

    repeat: int = 100  # turns per implementation and case
    timed: int = 1  # timed calls per turn, each timed alone (the median and p90 are over all)
    allocations: int = 3  # copies of the inputs, each freshly allocated; turn t uses copy t % 3
    warmup: int = 2  # untimed calls at least, per turn
    warmup_s: float = 0.02  # untimed seconds at least, per turn
    settle_s: float = 0.1  # pause after each turn
    budget_s: float = 6.0  # an implementation stops after 3 calls once it spent this
    reference_repeat: int = 3  # calls of onnx.reference
    process_runs: int = 10  # rounds of the start-up commands
    large_runs: int = 3  # rounds of the large-tensor and cluster commands
    quick: bool = False  # sizes / 8 (Case.shrunk)


FULL = Settings()
QUICK = Settings(3, 2, 2, 1, 0.0, 0.0, 0.5, 1, 2, 1, True)


@dataclass(frozen=True)
class Timed:
    """What one implementation of one case runs in its turns: one call per input allocation;
    `capped`, a slow reference (no warm-up, a few calls); `settle`, a pause after each turn
    (for libraries whose threads keep spinning after a call), of `pause_s` when that is longer
    than Settings.settle_s."""

    calls: list[Callable]
    capped: bool = False
    settle: bool = True
    pause_s: float = 0.0


def time_in_turns(groups: dict[str, dict[str, Timed]], s: Settings,
                  progress: Callable[[int], None] | None = None) -> dict[str, dict[str, list]]:
    """{group: {name: timed durations}} of {group: {name: Timed}}, in turns as Settings says
    (garbage collection off meanwhile). In round t every group (a case) takes its turn, and
    within it each implementation, in an order rotated by t (none always follows another), on
    input allocation t mod their number. Interleaving the cases spreads the machine's slow
    spells over all of them alike, rather than over whichever case was being measured when one
    came. `progress(t)` is called before round t."""
    times = {group: {name: [] for name in entries} for group, entries in groups.items()}
    gc.collect()
    gc.disable()
    try:
        for turn in range(s.repeat):
            if progress:
                progress(turn)
            for group, entries in groups.items():
                names = list(entries)
                for name in names[turn % len(names):] + names[:turn % len(names)]:
                    _take_turn(entries[name], times[group][name], turn, s)
    finally:
        gc.enable()
    return times


def _take_turn(entry: Timed, done: list[float], turn: int, s: Settings) -> None:
    """One turn of one implementation: warm-up, the timed calls appended to `done`, the pause;
    nothing once it has its calls (capped) or has spent the budget."""
    call = entry.calls[turn % len(entry.calls)]
    if entry.capped and len(done) >= s.reference_repeat or (
            not entry.capped and len(done) >= 3 and sum(done) >= s.budget_s):
        return
    started, warm = time.perf_counter(), 0
    while not entry.capped and (warm < s.warmup or time.perf_counter() - started < s.warmup_s):
        call()
        warm += 1
    for _ in range(1 if entry.capped else s.timed):
        started = time.perf_counter()
        call()
        done.append(time.perf_counter() - started)
    if entry.settle:
        time.sleep(max(s.settle_s, entry.pause_s if s.settle_s else 0.0))


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile of `values`, linear between the two nearest ranks (None if empty)."""
    return float(np.percentile(values, q)) if values else None


def prepare_case(case: bc.Case, peers: list, s: Settings,
                 rng: np.random.Generator) -> tuple[dict, dict[str, Timed]]:
    """({peer: row}, {peer: Timed}) for the peers of the case's kind: each result verified
    once; the peers that passed get their calls over `s.allocations` copies of the inputs
    (where an array lies changes some peers' times: every copy is a fresh allocation, as a
    user's arrays are)."""
    inputs = case.make_inputs(rng)
    copies = [inputs] + [{k: v.copy() for k, v in inputs.items()}
                         for _ in range(s.allocations - 1)]
    want, rows, calls = bc.expected(case, inputs), {}, {}
    for peer in (p for p in peers if case.kind in p.kinds):
        rows[peer.name] = row = {"status": "ok", "note": "", "error_ratio": None,
                                 "median_s": None, "p90_s": None, "runs": 0, "rate": None}
        try:
            call = peer.prepare(case, inputs)
            got = call()
        except ImportError as exc:  # a peer not installed is skipped; padconv itself fails
            row.update(status="error" if bc.PADCONV in peer.name else "skipped", note=str(exc))
            continue
        except Exception as exc:  # a peer that fails is reported, not fatal
            row.update(status="error", note=f"{type(exc).__name__}: {str(exc)[:150]}")
            continue
        if not peer.floor:
            row["status"], row["error_ratio"], row["note"] = bc.verify(case, want, got,
                                                                       peer.name)
        if row["status"] == "ok":
            others = [] if peer.capped else [peer.prepare(case, c) for c in copies[1:]]
            calls[peer.name] = Timed([call, *others], peer.capped, pause_s=peer.pause_s)
    return rows, calls


def fill_rows(case: bc.Case, rows: dict, times: dict[str, list]) -> None:
    """Each timed peer's row: median, 90th percentile, calls and rate (GFLOP/s or GB/s)."""
    for name, durations in times.items():
        median = statistics.median(durations) if durations else None
        rows[name].update(median_s=median, p90_s=percentile(durations, 90), runs=len(durations),
                          rate=median and case.work() / median / 1e9)


def cli_argv(case: bc.Case, paths: list[Path], out: Path, *flags: str) -> list[str]:
    """`padconv pad|conv INPUTS FLAGS --attribute v... -o OUT` (the script beside this Python,
    else `python -m padconv_cli`)."""
    script = Path(sys.executable).with_name("padconv")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "padconv_cli"]
    for key, value in case.attributes().items():
        flags += (f"--{key}", *map(str, value if isinstance(value, list) else [value]))
    return [*argv, case.kind, *map(str, paths), *flags, "-o", str(out)]


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
# ... and on CLUSTER_CONV, with dask (argv: SCHEDULER X.zarr W.npy Y.zarr). ONNX Conv is a
# cross-correlation: scipy.ndimage.convolve would flip the kernel.
DASK_SCRIPT = """\
import sys, numpy as np, dask.array as da, scipy.ndimage
from distributed import Client
k = np.load(sys.argv[3])[0, 0]
with Client(sys.argv[1]):
    x = da.from_zarr(sys.argv[2])[0, 0]
    y = x.map_overlap(scipy.ndimage.correlate, depth=1, boundary=0, weights=k, mode="constant")
    y[None, None].to_zarr(sys.argv[4], overwrite=True)
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


def process_row(argv: list[str], **values: Any) -> dict[str, Any]:
    """A whole-process row, `values` over its defaults; the command shown with a script as
    SCRIPT and paths by their file names."""
    command = shlex.join("SCRIPT" if "\n" in a else Path(a).name if "/" in a else a for a in argv)
    return {"status": "ok", "note": "", "runs": 0, "median_s": None, "peak_bytes": None,
            "error_ratio": None, "command": command} | values


def measure_processes(commands: dict[str, list[str]], outputs: dict[str, tuple], s: Settings,
                      runs: int) -> dict[str, dict]:
    """{label: row}: median wall time and peak RSS of each command over `runs` rounds in turns,
    after one discarded round (which may write bytecode caches, as an install does) unless
    --quick; then the output file of each {label: (case, inputs, path)} (`.npy` or Zarr)
    verified like a kernel case's result."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done, failed = {label: [] for label in commands}, dict.fromkeys(commands, "")
    for round_ in range(runs + (not s.quick)):
        for label, argv in commands.items():
            if not failed[label]:
                *measured, failed[label] = run_process(argv, env if round_ == 0 else None)
                done[label] += [measured] if round_ or s.quick else []
    rows = {label: process_row(commands[label], status="error" if failed[label] else "ok",
                               note=failed[label], runs=len(d),
                               median_s=statistics.median(r[0] for r in d) if d else None,
                               peak_bytes=statistics.median(r[1] for r in d) if d else None)
            for label, d in done.items()}
    wanted: dict[bc.Case, Any] = {}
    for label, (case, inputs, path) in outputs.items():
        if label in rows and rows[label]["status"] == "ok":
            if case not in wanted:
                wanted[case] = bc.expected(case, inputs)
            got = np.load(path) if path.suffix == ".npy" else zarr.open_array(path)[...]
            status, rows[label]["error_ratio"], why = bc.verify(case, wanted[case], got)
            rows[label].update(status=status, note=why and f"wrong output: {why}")
    return rows


def on_disk(case: bc.Case, folder: Path, rng: np.random.Generator) -> tuple[dict, list[Path]]:
    """The case's inputs, and their `.npy` files in `folder`."""
    inputs = case.make_inputs(rng)
    paths = [folder / f"{case.kind}_{name}.npy" for name in inputs]
    for path, array in zip(paths, inputs.values(), strict=True):
        np.save(path, array)
    return inputs, paths


def measure_startup(s: Settings, rng: np.random.Generator, tmp: Path) -> dict[str, Any]:
    """Small `padconv pad` and `padconv conv` runs in turns with `python -c "import numpy"`."""
    commands, outputs = dict(BASELINE), {}
    for case in bc.STARTUP:
        inputs, paths = on_disk(case, tmp, rng)
        outputs[case.label] = (case, inputs, tmp / f"{case.kind}_out.npy")
        commands[case.label] = cli_argv(case, paths, outputs[case.label][2])
    return {"title": "Start-up (whole processes)", "vs": bc.INTERPRETER,
            "legend": "Small .npy files in, a .npy file out.",
            "rows": measure_processes(commands, outputs, s, s.process_runs)}


def measure_large(s: Settings, rng: np.random.Generator, tmp: Path) -> dict[str, Any]:
    """`padconv conv` on LARGE_CONV, tiled and in memory, in turns with ORT_SCRIPT and `python
    -c "import numpy"`."""
    case = bc.LARGE_CONV.shrunk() if s.quick else bc.LARGE_CONV
    inputs, paths = on_disk(case, tmp, rng)
    labels = ("padconv tiled", "padconv memory", bc.ORT_SCRIPT)
    outputs = {label: (case, inputs, tmp / f"y{i}.npy") for i, label in enumerate(labels)}
    commands = BASELINE | {label: cli_argv(case, paths, outputs[label][2], "-q", "--engine",
                                           label.split()[1]) for label in labels[:2]}
    commands[bc.ORT_SCRIPT] = [sys.executable, "-c", ORT_SCRIPT, *map(str, paths),
                               str(outputs[bc.ORT_SCRIPT][2])]
    size = 4 * sum(map(math.prod, (case.x_shape, case.w_shape, case.output_shape())))
    return {"title": "Large tensors (whole processes)", "vs": bc.ORT_SCRIPT, "tensor_bytes": size,
            "legend": f"{case.describe()}, .npy in and out; input + output + weights: "
            f"{size / 2**20:.0f} MiB.", "rows": measure_processes(commands, outputs, s,
                                                                  s.large_runs)}


def measure_cluster(s: Settings, rng: np.random.Generator, tmp: Path) -> dict[str, Any]:
    """`padconv conv --engine dask` on CLUSTER_CONV, Zarr or `.npy` in and out, in turns with
    DASK_SCRIPT on one LocalCluster (worker processes on 127.0.0.1, one thread each)."""
    case = bc.CLUSTER_CONV.shrunk() if s.quick else bc.CLUSTER_CONV
    found = {"title": "Cluster (whole processes)", "vs": bc.DASK_SCRIPT, "rows": {}, "legend": (
        f"{case.describe()}, Zarr ({bc.CLUSTER_CHUNKS}x{bc.CLUSTER_CHUNKS} chunks) or .npy in "
        f"and out; one LocalCluster of {bc.CLUSTER_WORKERS} worker processes, one thread each, "
        "shared by every command (peak RSS: the client's).")}
    try:  # padconv's dask extra
        from distributed import LocalCluster
        from zarr import create_array
    except ImportError as exc:
        return found | {"skipped": str(exc)}
    try:
        import scipy.ndimage  # noqa: F401  (DASK_SCRIPT's: a peer, skipped when missing)
    except ImportError as exc:
        found["rows"][bc.DASK_SCRIPT] = process_row(["python", "-c", DASK_SCRIPT],
                                                    status="skipped", note=str(exc))
    inputs, (x_npy, w_npy) = on_disk(case, tmp, rng)
    x_zarr, chunk = tmp / "x.zarr", case.x_shape[-1] // bc.CLUSTER_CHUNKS
    create_array(x_zarr, shape=case.x_shape, chunks=(1, 1, chunk, chunk), dtype="f4")[...] = (
        inputs["X"])
    runs = {"padconv zarr->zarr": (x_zarr, "y.zarr"), "padconv zarr->npy": (x_zarr, "y.npy"),
            "padconv npy->npy": (x_npy, "y2.npy"), bc.DASK_SCRIPT: (x_zarr, "h.zarr")}
    outputs = {label: (case, inputs, tmp / name) for label, (_, name) in runs.items()}
    with LocalCluster(n_workers=bc.CLUSTER_WORKERS, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", memory_limit="4GiB") as cluster:
        at = cluster.scheduler_address
        commands = {label: cli_argv(case, [x, w_npy], outputs[label][2], "-q", "--engine", "dask",
                                    "--scheduler", at) if "padconv" in label else [
            sys.executable, "-c", DASK_SCRIPT, at, str(x), str(w_npy), str(outputs[label][2])]
            for label, (x, _) in runs.items() if label not in found["rows"]}
        found["rows"] = measure_processes(commands, outputs, s, s.large_runs) | found["rows"]
    for row in found["rows"].values():
        row["command"] = row["command"].replace(at.rsplit("/", 1)[-1], "SCHEDULER")
    return found


PROCESSES = {"cli/startup": ("startup", measure_startup), "cli/large": ("large", measure_large),
             "cluster/dask": ("cluster", measure_cluster)}


def instruction_sets() -> str:
    """The vector instruction set padconv's kernels and torch's ATen kernels run on."""
    from padconv_cli.kernels import native

    try:
        import torch
    except ImportError:
        torch = None
    return f"padconv {native.selected_isa()}" + (
        f", torch {torch.backends.cpu.get_cpu_capability()}" if torch else "")


def describe_machine() -> dict[str, Any]:
    """CPU, usable cores, load average, Python, numpy's BLAS, the packages' versions and the
    instruction sets they run on."""
    cpu = next((line.split(":")[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    installed = {(d.metadata["Name"] or "").lower(): d.version for d in metadata.distributions()}
    return {"cpu": cpu, "cores": len(os.sched_getaffinity(0)), "load_average": load_average(),
            "python": f"{platform.python_version()} on {platform.platform()}",
            "numpy_blas": f"{blas['name']} {blas['version']}", "versions": ", ".join(
                f"{name} {installed.get(name, 'not installed')}" for name in (
                    "numpy", "onnx", "onnxruntime", "torch", "dask", "padconv")),
            "instruction_sets": instruction_sets()}


def limit_entries(floats_at: dict[str, int], quick: bool = False) -> dict[str, Timed]:
    """What measures the machine's practical limits, timed in the same turns as the cases:
    "gemm", a float32 n^3 matrix product through numpy's BLAS on every core; and for every
    copy of _limit_sizes (256 MiB, and floats_at[name] float32 values for each name), the copy
    on one thread and split over the usable cores (numpy releases the GIL while it copies; for
    a small copy, handing it to threads costs more than it saves)."""
    n, sizes = _limit_sizes(floats_at, quick)
    a, b = (np.random.default_rng(1).uniform(-1, 1, (n, n)).astype(np.float32) for _ in "ab")
    entries = {"gemm": Timed([lambda: np.matmul(a, b)], pause_s=bc.BLAS_PAUSE_S)}
    for name, floats in sizes.items():
        single, split = _copies(floats)
        entries[f"{name} on one thread"] = Timed([single], settle=False)
        entries[f"{name} split"] = Timed([split], settle=False)
    return entries


def limits_from(times: dict[str, list], floats_at: dict[str, int],
                quick: bool = False) -> tuple[dict[str, float], dict[str, float]]:
    """({"gemm_gflops": 2 n^3 / the product's median time, "copy_gbs": the 256 MiB copy's
    bytes read plus written per second}, {name: the same at floats_at[name]}) from the
    durations of limit_entries' calls; a copy's time is the faster median of its two ways."""
    n, sizes = _limit_sizes(floats_at, quick)
    rates = {name: 2 * 4 * floats / min(statistics.median(times[f"{name} {how}"])
                                         for how in ("on one thread", "split")) / 1e9
             for name, floats in sizes.items()}
    return ({"gemm_gflops": 2 * n**3 / statistics.median(times["gemm"]) / 1e9,
             "copy_gbs": rates.pop("copy")}, rates)


def _limit_sizes(floats_at: dict[str, int], quick: bool) -> tuple[int, dict[str, int]]:
    """(n of the GEMM: 2048, 1024 with --quick; {copy: float32 values}): "copy", 256 MiB (32 MiB
    with --quick), then floats_at."""
    return 1024 if quick else 2048, {"copy": (32 if quick else 256) * 2**20 // 4} | floats_at


@functools.cache
def _copy_pool(cores: int) -> ThreadPoolExecutor:
    """The threads of the split copies, made once."""
    return ThreadPoolExecutor(cores)


def _copies(floats: int) -> tuple[Callable, Callable]:
    """(copy on one thread, copy split over the usable cores) of `floats` float32 values
    between two buffers made once."""
    cores = len(os.sched_getaffinity(0))
    pool = _copy_pool(cores)
    src, dst = np.ones(floats, np.float32), np.zeros(floats, np.float32)
    cuts = np.linspace(0, floats, cores + 1).astype(int)

    def split() -> None:
        list(pool.map(lambda i: np.copyto(dst[cuts[i]:cuts[i + 1]], src[cuts[i]:cuts[i + 1]]),
                      range(cores)))

    return (lambda: np.copyto(dst, src)), split


def load_average() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())
