"""Whole-process measurements of the `padconv` command: start-up time and peak resident set."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_cases import FLOAT32_BYTES, ConvCase, PadCase
from bench_kernels import compare_outputs
from bench_peers import ort_peer

MIB = 1024 * 1024
BASELINE_COMMAND = (sys.executable, "-c", "import numpy")
BASELINE_LABEL = 'python -c "import numpy"'
MEMORY_ALLOWANCE_BYTES = 100 * MIB

STARTUP_PAD = PadCase(
    "cli/startup", "padconv pad", (1, 3, 8, 8), (0, 0, 1, 1, 0, 0, 1, 1), "reflect"
)
STARTUP_CONV = ConvCase("cli/startup", "padconv conv", (1, 3, 8, 8), (4, 3, 3, 3), pads=(1,) * 4)
MEMORY_CONV = ConvCase(
    "cli/peak-rss", "padconv conv", (1, 64, 512, 512), (64, 64, 3, 3), pads=(1,) * 4
)

# Runs a command as its only child and prints {"rc": ..., "maxrss_kib": ...}; ru_maxrss of
# RUSAGE_CHILDREN is the peak resident set of the largest waited-for child (KiB on Linux).
RSS_PROBE = (
    "import json, resource, subprocess, sys\n"
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
    "print(json.dumps({'rc': rc,"
    " 'maxrss_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))\n"
)


@dataclass(frozen=True)
class CliRun:
    """A prepared `padconv` invocation and the check of the file it writes."""

    label: str
    argv: list[str]
    check: Callable[[], str]  # "" when the output file is right, else the reason


def padconv_command() -> list[str]:
    """The `padconv` console script of this interpreter's environment, else `python -m`."""
    beside = Path(sys.executable).with_name("padconv")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("padconv")
    return [found] if found else [sys.executable, "-m", "padconv_cli"]


def pad_argv(x_path: Path, case: PadCase, out_path: Path) -> list[str]:
    """`padconv pad DATA --pads ... --mode ... -o OUT` for the case."""
    pads = ",".join(map(str, case.pads))
    return [*padconv_command(), "pad", str(x_path), "--pads", pads, "--mode", case.mode,
            "-o", str(out_path)]


def conv_argv(x_path: Path, w_path: Path, case: ConvCase, out_path: Path) -> list[str]:
    """`padconv conv X W --pads ... [--strides ...] -o OUT` for the case."""
    argv = [*padconv_command(), "conv", str(x_path), str(w_path)]
    for key, value in case.attributes().items():
        if key == "group":
            if value != 1:
                argv += ["--group", str(value)]
            continue
        argv += [f"--{key}", ",".join(map(str, value))]
    return [*argv, "-o", str(out_path)]


def expected_output(case: ConvCase | PadCase, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The trusted result: numpy.pad for Pad, onnxruntime for Conv."""
    if isinstance(case, PadCase):
        return np.pad(inputs["data"], case.numpy_pad_width(), mode=case.mode)
    return ort_peer().prepare(case, inputs).run()


def output_checker(case: ConvCase | PadCase, inputs: dict, out_path: Path) -> Callable[[], str]:
    """A check that the CLI wrote the expected tensor to `out_path`."""

    def check() -> str:
        if not out_path.exists():
            return f"no output file {out_path.name}"
        actual = np.load(out_path, allow_pickle=False)
        agree, _, reason = compare_outputs(case, expected_output(case, inputs), actual)
        return "" if agree else reason

    return check


def prepare_startup_runs(workdir: Path, rng: np.random.Generator) -> list[CliRun]:
    """The two small CLI invocations whose start-up is measured, with their input files."""
    pad_inputs = STARTUP_PAD.make_inputs(rng)
    conv_inputs = STARTUP_CONV.make_inputs(rng)
    paths = {name: workdir / f"{name}.npy" for name in ("data", "X", "W")}
    np.save(paths["data"], pad_inputs["data"])
    np.save(paths["X"], conv_inputs["X"])
    np.save(paths["W"], conv_inputs["W"])
    pad_out, conv_out = workdir / "pad_out.npy", workdir / "conv_out.npy"
    return [
        CliRun("padconv pad", pad_argv(paths["data"], STARTUP_PAD, pad_out),
               output_checker(STARTUP_PAD, pad_inputs, pad_out)),
        CliRun("padconv conv", conv_argv(paths["X"], paths["W"], STARTUP_CONV, conv_out),
               output_checker(STARTUP_CONV, conv_inputs, conv_out)),
    ]


def run_command(
    argv: list[str], env: dict[str, str] | None = None
) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, completed process) of one command, output captured; ``env`` replaces the
    environment (None: this process's)."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    return time.perf_counter() - start, done


def measure_startup(runs: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Median wall time of small `padconv pad`/`padconv conv` runs vs `python -c "import numpy"`.

    The three commands are interleaved run by run after one discarded warm-up round; the ratio
    is padconv median / baseline median.
    """
    with tempfile.TemporaryDirectory(prefix="padconv-bench-") as tmp:
        cli_runs = prepare_startup_runs(Path(tmp), rng)
        commands = {BASELINE_LABEL: list(BASELINE_COMMAND)}
        commands.update({run.label: run.argv for run in cli_runs})
        failures = _first_round_failures(commands, cli_runs)
        times: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(runs):
            for label, argv in commands.items():
                if label not in failures:
                    times[label].append(run_command(argv)[0])
    baseline = statistics.median(times[BASELINE_LABEL])
    return [_startup_row(label, commands[label], times[label], baseline, failures.get(label, ""))
            for label in commands]


def _first_round_failures(commands: dict[str, list[str]], cli_runs: list[CliRun]) -> dict:
    """Run every command once (discarded warm-up) and collect why any of them failed.

    This round may write the bytecode caches of what the commands import, as installing a
    package does: with PYTHONDONTWRITEBYTECODE set and a stale cache (a source edited in an
    editable install), every timed run would compile those modules again."""
    checks = {run.label: run.check for run in cli_runs}
    failures = {}
    writing_bytecode = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for label, argv in commands.items():
        _, done = run_command(argv, writing_bytecode)
        if done.returncode != 0:
            failures[label] = f"exit {done.returncode}: {_last_line(done.stderr)}"
        elif label in checks and (reason := checks[label]()):
            failures[label] = f"wrong output: {reason}"
    return failures


def _startup_row(label: str, argv: list[str], times: list[float], baseline: float,
                 failure: str) -> dict[str, Any]:
    median = statistics.median(times) if times else None
    return {
        "case": "cli/startup", "label": label, "command": _display(argv),
        "status": "error" if failure else "ok", "median_s": median,
        "best_s": min(times) if times else None, "runs": len(times),
        "ratio": median / baseline if median else None, "note": failure,
    }


def peak_rss_kib(argv: list[str]) -> tuple[int, int]:
    """(exit code, peak resident set in KiB) of `argv` run as the only child of a probe."""
    probe = subprocess.run([sys.executable, "-c", RSS_PROBE, *argv],
                           capture_output=True, text=True, check=True)
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    return result["rc"], result["maxrss_kib"]


def measure_peak_rss(runs: int, rng: np.random.Generator) -> dict[str, Any]:
    """Peak RSS of `padconv conv` on 1x64x512x512 (W 64x64x3x3, pads 1) vs the interpreter.

    Target: peak - baseline <= input + output + weight bytes + 100 MiB.
    """
    case = MEMORY_CONV
    shapes = (case.x_shape, case.w_shape, case.output_shape())
    tensor_bytes = FLOAT32_BYTES * sum(math.prod(shape) for shape in shapes)
    row: dict[str, Any] = {
        "case": case.name, "label": case.label, "describe": case.describe(),
        "tensor_bytes": int(tensor_bytes),
        "allowed_over_baseline_bytes": int(tensor_bytes) + MEMORY_ALLOWANCE_BYTES,
        "method": "resource.getrusage(RUSAGE_CHILDREN).ru_maxrss of a probe process",
    }
    with tempfile.TemporaryDirectory(prefix="padconv-bench-") as tmp:
        workdir = Path(tmp)
        inputs = case.make_inputs(rng)
        np.save(workdir / "X.npy", inputs["X"])
        np.save(workdir / "W.npy", inputs["W"])
        out = workdir / "Y.npy"
        argv = conv_argv(workdir / "X.npy", workdir / "W.npy", case, out)
        row["command"] = _display(argv)
        baselines = [peak_rss_kib(list(BASELINE_COMMAND))[1] for _ in range(runs)]
        peaks, walls, failure = [], [], ""
        for _ in range(runs):
            start = time.perf_counter()
            rc, kib = peak_rss_kib(argv)
            walls.append(time.perf_counter() - start)
            if rc != 0:
                failure = f"exit {rc}: {_last_line(run_command(argv)[1].stderr)}"
                break
            peaks.append(kib)
        if not failure:
            failure = output_checker(case, inputs, out)()
            failure = f"wrong output: {failure}" if failure else ""
    row.update(_rss_fields(baselines, peaks, walls, failure))
    return row


def _rss_fields(baselines: list[int], peaks: list[int], walls: list[float],
                failure: str) -> dict[str, Any]:
    baseline = 1024 * int(statistics.median(baselines))
    peak = 1024 * int(statistics.median(peaks)) if peaks and not failure else None
    return {
        "status": "error" if failure else "ok", "note": failure,
        "baseline_rss_bytes": baseline, "peak_rss_bytes": peak,
        "over_baseline_bytes": peak - baseline if peak is not None else None,
        "wall_s": statistics.median(walls) if walls else None, "runs": len(peaks),
    }


def _display(argv: list[str]) -> str:
    """The command line with the temp paths shortened to their file names."""
    shown = [Path(arg).name if "/" in arg else arg for arg in argv]
    return shlex.join(shown)


def _last_line(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no message)"
