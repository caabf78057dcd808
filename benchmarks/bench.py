"""padconv speed and memory, measured side by side with its peers in one process and one run.

    python benchmarks/bench.py                      # everything, printed as tables
    python benchmarks/bench.py --quick --cases conv/resnet --cases 'pad/*'
    python benchmarks/bench.py --json               # machine-readable result on stdout
    python benchmarks/bench.py --write-docs         # also regenerate docs/benchmarks.md

Kernel cases compare padconv's Python API with onnxruntime (CPU, 2 intra-op threads),
onnx.reference, numpy.pad, a strided-copy floor and torch (when installed); each peer's result
is checked against padconv's before anything is timed.  Whole-process cases run the `padconv`
command: start-up of small runs and the peak resident set of a large Conv.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_cases import PROCESS_CASES, matches, select_cases
from bench_kernels import TimingSettings, measure_case
from bench_machine import describe_machine, load_average, machine_lines
from bench_peers import ORT_INTER_OP_THREADS, ORT_INTRA_OP_THREADS, default_peers
from bench_process import measure_peak_rss, measure_startup
from bench_report import all_tables, markdown, print_tables
from bench_roofline import PEAK_RUNS, PEAK_SIZE, measure_gemm_peak, roofline_rows
from bench_targets import evaluate_targets
from bench_timing import ROUNDS, SETTLE_S, WARMUP_S

DOCS_PATH = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SEED = 0


@dataclass(frozen=True)
class RunSettings:
    """Every knob of one benchmark run (recorded in the output)."""

    warmup: int
    repeat: int
    budget_s: float
    reference_repeat: int
    reference_timeout_s: float
    startup_runs: int
    rss_runs: int


FULL = RunSettings(warmup=2, repeat=15, budget_s=6.0, reference_repeat=3,
                   reference_timeout_s=30.0, startup_runs=10, rss_runs=3)
QUICK = RunSettings(warmup=1, repeat=5, budget_s=2.0, reference_repeat=1,
                    reference_timeout_s=10.0, startup_runs=5, rss_runs=1)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", action="append", default=[], metavar="PATTERN",
                        help="Run only cases whose name contains PATTERN (or matches it as a "
                        "glob, e.g. 'pad/*'); repeatable. Names: conv/..., pad/..., "
                        f"{', '.join(PROCESS_CASES)}.")
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help="Timed runs per case and peer (medians are reported).")
    parser.add_argument("--warmup", type=int, default=None, metavar="N",
                        help="Untimed runs at the start of each block of timed runs (besides the "
                        "verification run).")
    parser.add_argument("--quick", action="store_true", help="Fewer repetitions.")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    parser.add_argument("--write-docs", action="store_true",
                        help=f"Regenerate {DOCS_PATH.relative_to(DOCS_PATH.parent.parent)}.")
    parser.add_argument("--list", action="store_true", help="List the case names and exit.")
    return parser.parse_args(argv)


def run_settings(args: argparse.Namespace) -> RunSettings:
    """QUICK or FULL, with --repeat/--warmup overriding."""
    base = asdict(QUICK if args.quick else FULL)
    if args.repeat is not None:
        base["repeat"] = max(1, args.repeat)
    if args.warmup is not None:
        base["warmup"] = max(0, args.warmup)
    return RunSettings(**base)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_benchmarks(patterns: list[str], settings: RunSettings,
                   peers: list | None = None) -> dict[str, Any]:
    """Measure the selected cases; returns kernels/startup/peak_rss rows and target verdicts."""
    rng = np.random.default_rng(SEED)
    if peers is None:
        peers = default_peers(settings.reference_repeat, settings.reference_timeout_s)
    timing = TimingSettings(settings.warmup, settings.repeat, settings.budget_s)
    cases = select_cases(patterns)
    kernel_rows = []
    for index, case in enumerate(cases, 1):
        progress(f"[{index}/{len(cases)}] {case.name}: {case.describe()}")
        kernel_rows += measure_case(case, peers, timing, rng)
    roofline = None
    if any(row["kind"] == "conv" for row in kernel_rows):
        progress(f"machine/gemm-peak: float32 {PEAK_SIZE}x{PEAK_SIZE} products on numpy's BLAS")
        peak = measure_gemm_peak()
        roofline = peak | {"rows": roofline_rows(kernel_rows, peak["gflops"])}
    startup_rows: list[dict[str, Any]] = []
    if matches("cli/startup", patterns):
        progress("cli/startup: padconv pad / padconv conv vs python -c 'import numpy'")
        startup_rows = measure_startup(settings.startup_runs, rng)
    rss_row = None
    if matches("cli/peak-rss", patterns):
        progress("cli/peak-rss: padconv conv on 1x64x512x512")
        rss_row = measure_peak_rss(settings.rss_runs, rng)
    return {
        "kernels": kernel_rows,
        "startup": startup_rows,
        "peak_rss": rss_row,
        "roofline": roofline,
        "targets": evaluate_targets(kernel_rows, startup_rows, rss_row, roofline),
    }


def docs_text(result: dict[str, Any], command: str) -> str:
    """docs/benchmarks.md: how to regenerate, method, machine, then every table."""
    settings = result["settings"]
    sections = [
        "# Benchmarks\n",
        "Generated by `benchmarks/bench.py`; do not edit by hand. Numbers are medians of one run "
        "on the machine below, which was shared with other work, so expect some noise.\n",
        "## How to regenerate\n",
        "```\npip install -e '.[bench]'\npython benchmarks/bench.py --write-docs\n```\n",
        f"This file came from `{command}` on {result['date']}. `--quick` and `--cases PATTERN` "
        "give a faster partial run; `--json` prints every measured row.\n",
        *partial_run_warning(settings),
        *busy_machine_warning(result["machine"]),
        "## Machine\n",
        "\n".join(f"- {line}" for line in machine_lines(result["machine"])) + "\n",
        "## Method\n",
        method_text(settings) + "\n",
    ]
    sections += [markdown(table) for table in all_tables(result)]
    return "\n".join(sections)


def busy_machine_warning(machine: dict[str, Any]) -> list[str]:
    """A warning paragraph when the 1-minute load average at start reached the core count."""
    try:
        load_now = float(str(machine["load_average"]).split()[0])
    except (ValueError, IndexError):
        return []
    if load_now < machine["cores"]:
        return []
    return [f"**Busy machine:** the load average was {load_now:.1f} on {machine['cores']} cores "
            "when this run started; other work competed for the CPU, so absolute times are "
            "inflated and ratios noisy.\n"]


def partial_run_warning(settings: dict[str, Any]) -> list[str]:
    """A warning paragraph when the docs come from a --quick or --cases run."""
    reasons = []
    if settings["quick"]:
        reasons.append("--quick (fewer repetitions)")
    if settings["cases"]:
        reasons.append("--cases " + " ".join(settings["cases"]) + " (not every case)")
    if not reasons:
        return []
    return [f"**Partial run:** {'; '.join(reasons)}. Regenerate without them for the record.\n"]


def method_text(settings: dict[str, Any]) -> str:
    """What exactly is timed, and how."""
    return "\n".join([
        f"- Kernel cases run in one process: up to {settings['repeat']} timed runs per "
        f"implementation, in blocks of consecutive runs taken in turns over {ROUNDS} rounds, so "
        "that load changes hit every implementation alike. Each block starts with at least "
        f"{settings['warmup']} untimed warm-up run(s) lasting at least {WARMUP_S * 1000:g} ms "
        f"(the cores need some work to reach full speed) and is followed by a {SETTLE_S * 1000:g}"
        " ms pause, so that the worker threads a library leaves spinning after its calls "
        "(onnxruntime's pool, OpenBLAS's threads) do not take a core from the next one; "
        "an implementation stops early after 3 runs once it has used "
        f"{settings['budget_s']:g} s. The median over all timed runs is reported. Pad is also "
        "timed as pad(x, out=buf) into a preallocated result, like the strided-copy floor.",
        "- Inputs are float32 drawn uniformly from [-1, 1) (seed 0); Conv has no bias.",
        "- Before timing, each peer's result is compared with padconv's: Pad must be bit-exact, "
        "Conv must satisfy allclose(rtol=1e-4, atol=2e-6 * C/group * prod(kernel)). A mismatch "
        "is shown instead of a time.",
        f"- onnxruntime: CPU provider, intra_op_num_threads={ORT_INTRA_OP_THREADS}, "
        f"inter_op_num_threads={ORT_INTER_OP_THREADS}, a one-node model (opset 22) whose X and W "
        "(Conv) or data (Pad) are graph inputs fed on every call, like padconv's; Pad's pads are "
        "an initializer. Only `session.run` is timed.",
        f"- onnx.reference: ReferenceEvaluator on the same model, at most "
        f"{settings['reference_repeat']} timed run(s), a single call limited to "
        f"{settings['reference_timeout_s']:g} s (a time-out gives a bound, shown with '>').",
        "- strided copy: `out[interior] = x` into an output allocated before timing; the floor "
        "a Pad cannot beat (it writes no border). `empty + copy` also allocates the output "
        "inside the timed call, as every Pad implementation must (information only: it shows "
        "how much of a gap to the floor is the cost of fresh output memory).",
        "- GFLOP/s = 2*N*M*C/group*prod(kernel)*prod(output spatial) / time; "
        "GB/s = (input bytes + output bytes) / time.",
        f"- GEMM peak: the best of {PEAK_RUNS} float32 {PEAK_SIZE}x{PEAK_SIZE} matrix products "
        "on numpy's BLAS (all its threads), measured in the same run after the kernel cases. "
        "A convolution doing the direct count of F FLOP takes at least F / peak on this "
        "machine, so it cannot be more than t(onnx.reference) * peak / F times faster than "
        "the reference (roofline table; a fast algorithm such as Winograd's does fewer "
        "operations on some kernels, a 1x1 conv is one matrix product).",
        f"- Whole process: the `padconv` command on small .npy files, output to a file in a temp "
        f"dir, {settings['startup_runs']} runs interleaved with `python -c \"import numpy\"` after "
        "one discarded round (which may write the bytecode caches, as an install does); peak "
        "resident set from getrusage(RUSAGE_CHILDREN) of a probe process, median of "
        f"{settings['rss_runs']} run(s).",
    ])


def main(argv: list[str] | None = None) -> int:
    """Run, print (table or JSON), optionally write the docs; exit 1 if any result mismatched."""
    args = parse_args(argv)
    if args.list:
        from bench_cases import KERNEL_CASES

        print("\n".join([case.name for case in KERNEL_CASES] + list(PROCESS_CASES)))
        return 0
    settings = run_settings(args)
    machine = describe_machine()
    for line in busy_machine_warning(machine):
        progress(line.replace("**", "").strip())
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "settings": asdict(settings) | {"quick": args.quick, "cases": args.cases},
    }
    result |= run_benchmarks(args.cases, settings)
    machine["load_average_end"] = load_average()
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print_tables(all_tables(result), machine_lines(machine))
    if args.write_docs:
        command = shlex.join(["python", "benchmarks/bench.py", *(argv or sys.argv[1:])])
        DOCS_PATH.write_text(docs_text(result, command))
        progress(f"wrote {DOCS_PATH}")
    mismatched = [row for row in result["kernels"] if row["status"] == "mismatch"]
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
