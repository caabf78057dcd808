"""padconv's speed, accuracy and memory, side by side with its peers in one run.

From a checkout, after `pip install -e '.[bench]'` (a peer not installed is reported skipped):

    python benchmarks/bench.py                  # everything, as tables (about 20 minutes, 3 GB)
    python benchmarks/bench.py --quick          # sizes / 8, a few runs: checks it in a minute
    python benchmarks/bench.py --cases 'conv/*' --cases cli/large    # some cases (--list)
    python benchmarks/bench.py --json           # every measured row, machine-readable
    python benchmarks/bench.py --write-docs     # also rewrite docs/benchmarks.md's results
    python benchmarks/bench.py --isa avx2       # as on a machine without AVX-512 (below)

Exit status 1 when a result was wrong or padconv failed. docs/benchmarks.md says what is
measured and how; --write-docs [PATH] rewrites its part below the marker line (into PATH)."""

import argparse
import datetime
import importlib.util
import json
import math
import os
import shlex
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import bench_cases as bc
import bench_measure as bm
import numpy as np
from bench_cases import KERNEL_CASES, PEERS, Case, matches
from bench_report import all_tables, evaluate_targets, markdown, parts

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
MARKER = "<!-- Everything below is written by `python benchmarks/bench.py --write-docs`. -->"

# --isa avx2: what restricts each library to AVX2 (read when it loads): padconv's kernels,
# torch's oneDNN convolutions and ATen kernels, and numpy's OpenBLAS (the GEMM peak).
# onnxruntime has no such switch: its rows run AVX-512 and are left out of the ratios.
AVX2_ENV = {"PADCONV_NATIVE_ISA": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
            "ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell"}
NOT_RESTRICTED = "onnxruntime has no switch to leave AVX-512 unused: shown, not compared"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags of the usage above."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", action="append", default=[], metavar="PATTERN",
                        help="only cases whose name contains PATTERN or matches it as a glob "
                        "('pad/*'); repeatable")
    parser.add_argument("--quick", action="store_true", help="spatial sizes / 8, a few runs")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--write-docs", nargs="?", const=DOCS, type=Path, metavar="PATH",
                        help="write the Markdown report (default: docs/benchmarks.md)")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native",
                        help="avx2: padconv, torch and numpy's BLAS restricted to AVX2, as on a "
                        "machine without AVX-512 (onnxruntime cannot be: not compared)")
    return parser.parse_args(argv)


def check_checkout() -> None:
    """Warn when the padconv measured is not this checkout's (pip install -e . fixes it)."""
    spec = importlib.util.find_spec("padconv_cli")
    if spec is None or not Path(spec.origin).resolve().is_relative_to(DOCS.parents[1]):
        where = "is not installed" if spec is None else f"comes from {spec.origin}"
        print(f"warning: padconv_cli {where}, not from this checkout", file=sys.stderr)


def run(patterns: list[str], s: bm.Settings, peers: tuple = PEERS,
        isa: str = "native") -> dict[str, Any]:
    """Measure the cases matching `patterns`: the parts of bench_report, and "targets"."""
    rng, result = np.random.default_rng(0), {"conv": {}, "pad": {}, "family": {}}
    cases = [c.shrunk() if s.quick else c for c in KERNEL_CASES if matches(c.name, patterns)]
    measure_kernels(cases, s, list(peers), isa, rng, result)
    for name, (key, measure) in bm.PROCESSES.items():
        if matches(name, patterns):
            print(f"{name}: whole processes", file=sys.stderr)
            with tempfile.TemporaryDirectory(prefix="padconv-bench-") as tmp:
                result[key] = measure(s, rng, Path(tmp))
    return result | {"targets": evaluate_targets(result)}


def measure_kernels(cases: list[Case], s: bm.Settings, peers: list, isa: str,
                    rng: np.random.Generator, result: dict[str, Any]) -> None:
    """Every case's rows, and the machine's "limits" when there are Conv cases, into `result`:
    every result is verified first; then all the cases, and the limits, are timed in the same
    rounds (bench_measure.time_in_turns). Their inputs (gigabytes in a full run) are freed on
    return, before any whole process is timed."""
    groups = {}
    for i, case in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] {case.name}: {case.describe()}", file=sys.stderr)
        rows, groups[case.name] = bm.prepare_case(case, peers, s, rng)
        result[case.part][case.name] = {"label": case.label, "kind": case.kind,
                                        "describe": case.describe(), "rows": rows}
        if isa != "native" and bc.ORT in rows:
            rows[bc.ORT] |= {"compared": False, "why": NOT_RESTRICTED}
    floats_at = {case.name: case_floats(case) for case in cases if case.kind == "conv"}
    if floats_at:
        groups[LIMITS] = bm.limit_entries(floats_at, s.quick)
    if not groups:
        return
    times = bm.time_in_turns(groups, s, progress=report_round)
    for case in cases:
        bm.fill_rows(case, result[case.part][case.name]["rows"], times[case.name])
    if floats_at:
        result["limits"], at_size = bm.limits_from(times[LIMITS], floats_at, s.quick)
        for case in cases:
            if case.kind == "conv":
                result["conv"][case.name] |= case_bound(case, at_size[case.name])


LIMITS = "machine limits"  # the group of limit_entries in the turns


def report_round(turn: int) -> None:
    """Every tenth round's number, on stderr: the turns of a full run take minutes."""
    if turn % 10 == 0:
        print(f"round {turn + 1} of the turns", file=sys.stderr)


def case_floats(case: Case) -> int:
    """Elements of the larger of X and Y: the copy whose bandwidth bounds the case (one that
    fits in a cache is timed in it, as the case's own data would be)."""
    return max(math.prod(case.x_shape), math.prod(case.output_shape()))


def case_bound(case: Case, copy_gbs: float) -> dict[str, float]:
    """What bounds a Conv case on this machine: its FLOP, the bytes it must move (X, W and Y
    once, float32) and the copy bandwidth measured at its size (case_floats)."""
    moved = 4 * (math.prod(case.x_shape) + math.prod(case.w_shape)
                 + math.prod(case.output_shape()))
    return {"flop": case.work(), "bytes": moved, "copy_gbs_at_size": copy_gbs}


def docs_text(result: dict[str, Any], command: str) -> str:
    """docs/benchmarks.md: its hand-written part up to MARKER, then the command, the machine,
    the settings and every table of this run."""
    m, s = result["machine"], result["settings"]
    load = float(m["load_average"].split()[0])
    notes = [" **A partial run.**"] * bool(s["quick"] or s["cases"]) + [
        f" **A noisy host:** the load average was {load:.1f} on {m['cores']} cores at the start,"
        " so times are inflated and ratios unreliable (most for threads that spin-wait, as "
        "OpenBLAS's do): rerun on a quiet machine."] * (load >= 1)
    return "\n".join([DOCS.read_text().split(MARKER)[0] + MARKER + "\n",
                      f"## The run of {result['date']}\n", f"`{command}`.{''.join(notes)}\n",
                      *(f"- {k}: {v}" for k, v in m.items()),
                      *[f"- machine limits, measured in this run: float32 GEMM "
                        f"{lim['gemm_gflops']:.0f} GFLOP/s on every core, copy "
                        f"{lim['copy_gbs']:.1f} GB/s (read + write)"
                        for lim in [result.get("limits")] if lim],
                      "- settings: " + ", ".join(f"{k}={v}" for k, v in s.items()) + "\n",
                      *map(markdown, all_tables(result))])


def rerun_command(args: argparse.Namespace) -> str:
    """The command that measures the same cases again: the cases and --quick, not where the
    output went (a path of the machine that ran it)."""
    flags = ["--quick"] * args.quick + [w for case in args.cases or [] for w in ("--cases", case)]
    flags += ["--isa", args.isa] * (args.isa != "native")
    return shlex.join(["python", "benchmarks/bench.py", *flags])


def restrict_isa(isa: str, argv: list[str] | None) -> None:
    """For --isa avx2, run this script again with AVX2_ENV set (the libraries read it when
    they load, which has happened by now); nothing when it is set already."""
    if isa == "native" or all(os.environ.get(k) == v for k, v in AVX2_ENV.items()):
        return
    from padconv_cli.kernels import native

    if "avx2" not in native.available_isas():
        sys.exit("bench.py: --isa avx2: this CPU has no AVX2")
    os.execve(sys.executable, [sys.executable, __file__, *(sys.argv[1:] if argv is None else argv)],
              os.environ | AVX2_ENV)


def main(argv: list[str] | None = None) -> int:
    """Run, print the tables (or JSON), write the docs if asked; 1 when a result was wrong."""
    args = parse_args(argv)
    restrict_isa(args.isa, argv)
    if args.list:
        print("\n".join([c.name for c in KERNEL_CASES] + list(bm.PROCESSES)))
        return 0
    s = bm.QUICK if args.quick else bm.FULL
    check_checkout()
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": bm.describe_machine(), "settings": asdict(s) | {"cases": args.cases,
                                                                       "isa": args.isa}}
    result |= run(args.cases, s, isa=args.isa)
    result["machine"]["load_average_end"] = bm.load_average()
    tables = "\n".join(map(markdown, all_tables(result)))
    print(json.dumps(result, indent=1) if args.json else tables)
    if args.write_docs:
        args.write_docs.write_text(docs_text(result, rerun_command(args)))
    return 1 if any(row["status"] == "mismatch" or row["status"] == "error" and "padconv" in who
                    for part in parts(result) for who, row in part["rows"].items()) else 0


if __name__ == "__main__":
    sys.exit(main())
