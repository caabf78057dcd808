"""padconv's speed, accuracy and memory, side by side with its peers in one run.

Usage, from a checkout (after `pip install -e '.[bench]'`; a peer that is not installed is
reported as skipped):

    python benchmarks/bench.py                  # everything, as tables (about 10 minutes)
    python benchmarks/bench.py --quick          # sizes / 8, a few runs: checks it in seconds
    python benchmarks/bench.py --cases 'conv/*' --cases cli/large    # some cases (--list)
    python benchmarks/bench.py --json           # every measured row, machine-readable
    python benchmarks/bench.py --write-docs     # also regenerate docs/benchmarks.md

Exit status 1 when any result was wrong. What is measured, and how:

- Kernel cases (conv/..., pad/...): padconv's Python API (`padconv_cli.conv`, `pad`, and
  `pad(..., out=buf)`) and each peer, in one process: onnxruntime (CPU provider,
  intra_op_num_threads=2, a one-node opset-22 model whose tensors are fed on every call; only
  `session.run` is timed), torch (`torch.nn.functional.conv{1,2,3}d` and `pad`, edge =
  replicate, wrap = circular, `torch.set_num_threads(2)`, inference mode), onnx.reference (for
  information), numpy.pad, and the strided copy `out[interior] = x` into a buffer made once
  (the floor of Pad: it writes no border; "empty + copy" makes the buffer in every call).
- Inputs are float32, uniform on [-1, 1), seed 0; Conv has no bias.
- Every result is verified before it is timed: Pad bit for bit against numpy.pad; Conv against
  a float64 oracle (the ONNX formula summed kernel tap by tap) within the dot-product error
  bound |y - y64| <= n * eps * sum(|x| * |w|) over each receptive field (n = C/group *
  prod(kernel), eps = 2**-23), which a float32 sum in any order meets. A result outside it is
  a mismatch and is not timed; "error / bound" is the worst ratio of each implementation.
- Timing: each implementation gets its turns in a row: untimed warm-up calls, its share of the
  timed calls, a pause (the threads a library leaves spinning must not slow the next one). The
  median is reported. onnx.reference gets no warm-up and a few calls. Settings below.
- GFLOP/s = 2 * N * M * n * prod(output spatial) / time; GB/s = (input + output bytes) / time.
  The GEMM peak, the best float32 2048x2048 product on numpy's BLAS, bounds any convolution
  that does the direct count of operations (roofline table).
- Whole processes (cli/...): medians of runs taken in turns after a discarded round. Start-up:
  small `padconv pad` / `padconv conv` runs against `python -c "import numpy"`. Large tensors:
  `padconv conv --engine tiled` on a 1x16x1024x4096 .npy (W 16x16x3x3, pads 1) against the
  onnxruntime script a user would write (load both .npy, run the model in memory, save); their
  outputs must agree within twice the bound. Peak memory: an in-memory `padconv conv` on
  1x64x512x512 (W 64x64x3x3). Peak RSS: ru_maxrss of a small probe process's child.
"""

import argparse
import datetime
import json
import shlex
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import bench_measure as bm
import numpy as np
from bench_cases import KERNEL_CASES, PEERS, PROCESS_CASES, matches
from bench_report import all_tables, evaluate_targets, markdown, plain

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags of the usage above."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", action="append", default=[], metavar="PATTERN",
                        help="only cases whose name contains PATTERN or matches it as a glob "
                        "('pad/*'); repeatable")
    parser.add_argument("--quick", action="store_true", help="spatial sizes / 8, a few runs")
    parser.add_argument("--repeat", type=int, metavar="N", help="timed calls per kernel peer")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--write-docs", nargs="?", const=DOCS, type=Path, metavar="PATH",
                        help="write the Markdown report (default: docs/benchmarks.md)")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    return parser.parse_args(argv)


def run(patterns: list[str], s: bm.Settings, peers: tuple = PEERS) -> dict[str, Any]:
    """Measure the cases matching `patterns` into {"kernels", "gemm_peak", "startup", "large",
    "peak_rss", "targets"}."""
    rng, result = np.random.default_rng(0), {"kernels": []}
    cases = [c.shrunk() if s.quick else c for c in KERNEL_CASES if matches(c.name, patterns)]
    for i, case in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] {case.name}: {case.describe()}", file=sys.stderr)
        result["kernels"] += bm.measure_case(case, list(peers), s, rng)
    if any(case.kind == "conv" for case in cases):
        result["gemm_peak"] = bm.gemm_peak(256 if s.quick else 2048, 3 if s.quick else 10)
    for name, key, measure in (("cli/startup", "startup", bm.measure_startup),
                               ("cli/large", "large", bm.measure_large),
                               ("cli/peak-rss", "peak_rss", bm.measure_peak_rss)):
        if matches(name, patterns):
            print(f"{name}: whole processes", file=sys.stderr)
            result[key] = measure(s, rng)
    return result | {"targets": evaluate_targets(result)}


def docs_text(result: dict[str, Any], command: str) -> str:
    """docs/benchmarks.md: how to regenerate it, the machine, the method, every table."""
    m, s = result["machine"], result["settings"]
    partial = " (**a partial run**)" if s["quick"] or s["cases"] else ""
    return "\n".join([
        "# Benchmarks\n", "Generated by `benchmarks/bench.py`; do not edit by hand. "
        "Regenerate with:\n", "```\npip install -e '.[bench]'\npython benchmarks/bench.py "
        "--write-docs\n```\n", f"This file came from `{command}` on {result['date']}{partial}. "
        "**A noisy shared host:** other jobs shared the cores during the run, so absolute times "
        "are inflated and ratios move between runs; compare implementations within one run.\n",
        "## Machine\n", f"- CPU: {m['cpu']}, {m['cores']} usable cores; load average (1, 5, "
        f"15 min) {m['load_average']} at the start, {m['load_average_end']} at the end",
        f"- Python {m['python']} on {m['platform']}; numpy's BLAS: {m['numpy_blas']}",
        "- " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + "\n",
        "## Method\n", __doc__.split("What is measured, and how:\n\n")[1],
        "Settings: " + ", ".join(f"{k}={v}" for k, v in s.items()) + "\n",
        *map(markdown, all_tables(result))])


def main(argv: list[str] | None = None) -> int:
    """Run, print the tables (or JSON), write the docs if asked; 1 when a result was wrong."""
    args = parse_args(argv)
    if args.list:
        print("\n".join([c.name for c in KERNEL_CASES] + list(PROCESS_CASES)))
        return 0
    s = replace(bm.QUICK if args.quick else bm.FULL, **{"repeat": args.repeat} if args.repeat
                else {})
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": bm.describe_machine(), "settings": asdict(s) | {"cases": args.cases}}
    result |= run(args.cases, s)
    result["machine"]["load_average_end"] = bm.load_average()
    print(json.dumps(result, indent=1) if args.json else "\n".join(map(plain, all_tables(result))))
    if args.write_docs:
        command = shlex.join(["python", "benchmarks/bench.py", *(argv or sys.argv[1:])])
        args.write_docs.write_text(docs_text(result, command))
    wrong = [r for r in result["kernels"] if r["status"] == "mismatch"]
    wrong += [r for r in (result.get("startup") or {"rows": []})["rows"] if "wrong" in r["note"]]
    return 1 if wrong or ((result.get("large") or {}).get("agreement") or 0) > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
