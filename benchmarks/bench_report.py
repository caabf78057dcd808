"""What the numbers say: each target judged from the measured rows, and the tables (plain text
on the terminal, Markdown for docs/benchmarks.md)."""

import math
from dataclasses import dataclass, field
from typing import Any

from bench_cases import COPY, NUMPY_PAD, ORT, PADCONV, PADCONV_OUT, REFERENCE, TORCH

MIB = 2**20
FAILED = ("mismatch", "error")
PEER_COLUMNS = {"conv": (ORT, TORCH, REFERENCE),
                "pad": (PADCONV_OUT, NUMPY_PAD, COPY, ORT, TORCH, REFERENCE)}


def by_case(rows: list[dict], kind: str) -> dict[str, dict[str, dict]]:
    """{case: {peer: row}} of one kind, in run order."""
    cases: dict[str, dict[str, dict]] = {}
    for row in rows:
        if row["kind"] == kind:
            cases.setdefault(row["case"], {})[row["peer"]] = row
    return cases


def ratio(peers: dict[str, dict], peer: str, ours: str = PADCONV) -> float | None:
    """padconv median / peer median (below 1: padconv is faster); inf when padconv's result was
    wrong or it failed; None when the peer has no time."""
    mine, theirs = peers.get(ours, {}), peers.get(peer, {})
    if mine.get("status") in FAILED:
        return math.inf
    return mine["median_s"] / theirs["median_s"] if mine.get("median_s") and theirs.get(
        "median_s") else None


def worst(values: Any, every: bool = False) -> float | None:
    """The largest of the values given; None if there is none (or, `every`, if one is None)."""
    values = list(values)
    known = [v for v in values if v is not None]
    return None if not known or (every and len(known) < len(values)) else max(known)


def vs_faster_peer(peers: dict[str, dict]) -> float | None:
    """padconv / the faster of onnxruntime and torch on this case."""
    return worst(ratio(peers, p) for p in (ORT, TORCH))


def target(name: str, value: float | None, limit: float, detail: str = "") -> dict[str, str]:
    """MET when value <= limit, MISSED above it, NOT MEASURED when None."""
    status = "NOT MEASURED" if value is None else "MET" if value <= limit else "MISSED"
    shown = "not run" if value is None else f"{value:.3g}{detail}"
    return {"target": name, "status": status, "measured": shown}


def evaluate_targets(result: dict[str, Any]) -> list[dict[str, str]]:
    """Every target, in the order of the documentation (value <= limit: MET)."""
    conv, pad = by_case(result["kernels"], "conv"), by_case(result["kernels"], "pad")
    best = {case: vs_faster_peer(peers) for case, peers in conv.items()}
    geo = worst(best.values(), every=True) and math.exp(
        sum(map(math.log, best.values())) / len(best))
    slowest = max(best, key=lambda c: best[c] or 0, default="")
    depthwise = conv.get("conv/depthwise", {})
    errors = [peers[PADCONV]["error_ratio"] if peers[PADCONV]["status"] not in FAILED
              else math.inf for peers in conv.values()]
    targets = [
        target("Conv: geo-mean of padconv / faster peer <= 1.0", geo, 1.0,
               f" over {len(best)} cases"),
        target("Conv: no case of padconv / faster peer above 1.25", worst(best.values(), True),
               1.25, f" ({slowest})"),
        target("Conv: depthwise <= 1.0 against onnxruntime and torch", worst(
            (ratio(depthwise, ORT), ratio(depthwise, TORCH)), every=True), 1.0),
        target("Conv: every result within the dot-product error bound", worst(errors, True), 1.0,
               " of the bound at worst"),
    ]
    for peer, limit in ((COPY, 1.3), (NUMPY_PAD, 1.0), (ORT, 1.0)):
        found = [ratio(peers, peer, ours) for peers in pad.values() for ours in (PADCONV,
                                                                                  PADCONV_OUT)]
        targets.append(target(f"Pad: every mode (and out=) within {limit}x of {peer}",
                              worst(found, every=True), limit))
    return targets + process_targets(result)


def process_targets(result: dict[str, Any]) -> list[dict[str, str]]:
    """Tiled conv no slower than the onnxruntime script, outputs agreeing; in-memory conv peak
    RSS <= input + output + weights + 100 MiB over the interpreter; start-up within 1.5x."""
    large, startup = result.get("large"), result.get("startup")
    tiled = over = allowed = None
    if large:
        base, ours, memory, script = large["rows"]
        wrong = (large["agreement"] or 0) > 1
        tiled = math.inf if wrong or ours["note"] else elapsed_ratio(ours, script)
        over = math.inf if memory["note"] else (memory["peak_bytes"] - base["peak_bytes"]) / MIB
        allowed = large["tensor_bytes"] / MIB + 100
    starts = [elapsed_ratio(row, startup["rows"][0]) for row in startup["rows"][1:]] if startup \
        else []
    return [
        target("Large tensors: padconv --engine tiled / the onnxruntime script <= 1.0", tiled,
               1.0),
        target("Large tensors: padconv in memory, peak RSS over the interpreter <= input + "
               "output + weights + 100 MiB", over, allowed or 0,
               f" MiB (allowed {allowed:.0f})" if large else ""),
        target('Start-up: padconv pad and conv / python -c "import numpy" <= 1.5',
               worst(starts, every=True), 1.5),
    ]


def elapsed_ratio(row: dict, base: dict) -> float | None:
    """row median / base median: inf when row failed, None when base has no time."""
    if row["note"]:
        return math.inf
    return row["median_s"] / base["median_s"] if base["median_s"] and row["median_s"] else None


@dataclass
class Table:
    """Title, headers, string cells, numbered footnotes and a legend."""

    title: str
    headers: list[str]
    legend: str = ""
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> str:
        """The footnote marker of `text`, added the first time."""
        self.notes += [] if text in self.notes else [text]
        return f"[{self.notes.index(text) + 1}]"


def ms(seconds: float | None) -> str:
    """Milliseconds, about three significant digits."""
    v = (seconds or 0) * 1e3
    return "-" if not v else f"{v:.0f} ms" if v >= 100 else f"{v:.1f} ms" if v >= 10 else (
        f"{v:.2f} ms")


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x" if value < 0.1 else f"{value:.2f}x"


def cell(table: Table, peers: dict[str, dict], peer: str) -> str:
    """'median (padconv / peer)', or the status with a footnote saying why."""
    row = peers.get(peer)
    if row is None or row["status"] != "ok":
        return "n/a" if row is None else f"{row['status']} {table.note(peer + ': ' + row['note'])}"
    return ms(row["median_s"]) + ("" if peer == PADCONV else f" ({times(ratio(peers, peer))})")


def kernel_table(rows: list[dict], kind: str) -> Table | None:
    """One line per case: padconv, its rate, each peer; Conv adds padconv / faster peer and the
    worst error / bound of padconv, onnxruntime and torch."""
    cases = by_case(rows, kind)
    extra = ["vs faster peer", "error / bound: padconv, ort, torch"] if kind == "conv" else []
    table = Table(f"{kind.capitalize()} (float32)", ["Case", "Shapes", "padconv", {
        "conv": "GFLOP/s", "pad": "GB/s"}[kind], *PEER_COLUMNS[kind], *extra],
        "Peer cells: median time (padconv time / peer time: below 1, padconv is faster).")
    for peers in cases.values():
        ours = peers[PADCONV]
        line = [ours["label"], ours["describe"], cell(table, peers, PADCONV),
                f"{ours['rate']:.1f}" if ours["rate"] else "-",
                *(cell(table, peers, p) for p in PEER_COLUMNS[kind])]
        if extra:
            line += [times(vs_faster_peer(peers)), ", ".join(
                "-" if peers.get(p, {}).get("error_ratio") is None
                else f"{peers[p]['error_ratio']:.2g}" for p in (PADCONV, ORT, TORCH))]
        table.rows.append(line)
    return table if cases else None


def roofline_table(rows: list[dict], peak: dict | None) -> Table | None:
    """Per Conv case: GFLOP, its time at the GEMM peak, and the share of that peak reached
    (time at the peak / time taken) by padconv, onnxruntime and torch."""
    table = Table("Roofline (Conv)", ["Case", "GFLOP", "At the GEMM peak",
                                      "Share of peak: padconv / onnxruntime / torch"],
                  peak and f"GEMM peak: {peak['gflops']:.0f} GFLOP/s (best float32 {peak['size']}"
                  "-square product on numpy's BLAS in this run). Above 100%: fewer operations "
                  "than the direct count.")
    for peers in by_case(rows, "conv").values():
        timed = [row for row in peers.values() if row["rate"]]
        if timed and peak:
            gflop = timed[0]["rate"] * timed[0]["median_s"]
            at_peak = gflop / peak["gflops"]
            table.rows.append([timed[0]["label"], f"{gflop:.3f}", ms(at_peak), " / ".join(
                f"{at_peak / peers[p]['median_s']:.0%}" if peers.get(p, {}).get("median_s")
                else "-" for p in (PADCONV, ORT, TORCH))])
    return table if table.rows else None


def process_table(title: str, part: dict | None, legend: str, base: int = 0) -> Table | None:
    """Whole-process commands: median wall time, peak RSS, ratio to the row `base`."""
    vs = part["rows"][base]["label"] if part else ""
    table = Table(title, ["Command", "Median", "Peak RSS", "Runs", f"vs {vs}"], legend)
    for row in part["rows"] if part else []:
        median = f"failed {table.note(row['note'])}" if row["note"] else ms(row["median_s"])
        peak = f"{row['peak_bytes'] / MIB:.0f} MiB" if row["peak_bytes"] else "-"
        table.rows.append([row["command"], median, peak, str(row["runs"]),
                           times(elapsed_ratio(row, part["rows"][base]))])
    return table if table.rows else None


def all_tables(result: dict[str, Any]) -> list[Table]:
    """Every table of a result, in display order."""
    large = result.get("large")
    tables = [
        kernel_table(result["kernels"], "conv"),
        roofline_table(result["kernels"], result.get("gemm_peak")),
        kernel_table(result["kernels"], "pad"),
        process_table("Large tensors (whole processes)", large, large and (
            f"{large['describe']}, .npy in and out; input + output + weights: "
            f"{large['tensor_bytes'] / MIB:.0f} MiB. The outputs differ by at most "
            f"{times(large['agreement'])} of twice the dot-product bound (at most 1)."), base=3),
        process_table("Start-up (whole processes)", result.get("startup"),
                      "Small .npy files in, a .npy file out."),
        Table("Targets", ["Target", "Verdict", "Measured"],
              rows=[[t["target"], t["status"], t["measured"]] for t in result["targets"]]),
    ]
    return [table for table in tables if table]


def markdown(table: Table) -> str:
    """The table as a Markdown section."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [f"## {table.title}", ""] + ([table.legend, ""] if table.legend else [])
    out += [line(table.headers), "|" + "---|" * len(table.headers), *map(line, table.rows)]
    return "\n".join(out + [""] * bool(table.notes) + [
        f"{i}. {text}" for i, text in enumerate(table.notes, 1)]) + "\n"


def plain(table: Table) -> str:
    """The table as aligned plain text."""
    widths = [max(map(len, column)) for column in zip(table.headers, *table.rows, strict=True)]
    lines = [table.title, "-" * len(table.title)] + [table.legend] * bool(table.legend)
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in (table.headers, *table.rows)]
    return "\n".join(lines + [f"[{i}] {t}" for i, t in enumerate(table.notes, 1)]) + "\n"
