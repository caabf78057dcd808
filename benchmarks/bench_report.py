"""What the numbers say: each target judged from the measured rows, and the tables (Markdown
with aligned columns, for the terminal and for docs/benchmarks.md)."""

import math
from dataclasses import dataclass, field
from typing import Any

import bench_cases as bc

MIB = 2**20
FAILED = ("mismatch", "error")
PEER_COLUMNS = {"conv": (bc.ORT, bc.TORCH, bc.REFERENCE),
                "pad": (bc.PADCONV_OUT, bc.NUMPY_PAD, bc.COPY, bc.ORT, bc.TORCH, bc.REFERENCE)}


def by_case(rows: list[dict], kind: str) -> dict[str, dict[str, dict]]:
    """{case: {peer: row}} of one kind, in run order."""
    cases: dict[str, dict[str, dict]] = {}
    for row in rows:
        if row["kind"] == kind:
            cases.setdefault(row["case"], {})[row["peer"]] = row
    return cases


def ratio(peers: dict[str, dict], peer: str, ours: str = bc.PADCONV) -> float | None:
    """padconv median / peer median (below 1: padconv is faster); inf when padconv's result was
    wrong or it failed; None when either has no time."""
    mine, theirs = peers.get(ours, {}), peers.get(peer, {})
    if mine.get("status") in FAILED:
        return math.inf
    both = mine.get("median_s") and theirs.get("median_s")
    return mine["median_s"] / theirs["median_s"] if both else None


def worst(values: Any, every: bool = False) -> float | None:
    """The largest value given; None if there is none (`every`: if any is None)."""
    values = list(values)
    known = [v for v in values if v is not None]
    return None if not known or (every and len(known) < len(values)) else max(known)


def vs_faster_peer(peers: dict[str, dict]) -> float | None:
    """padconv / the faster of onnxruntime and torch on this case."""
    return worst(ratio(peers, p) for p in (bc.ORT, bc.TORCH))


def target(name: str, value: float | None, limit: float, detail: str = "") -> dict[str, str]:
    """MET when value <= limit, MISSED above it, NOT MEASURED when None."""
    status = "NOT MEASURED" if value is None else "MET" if value <= limit else "MISSED"
    shown = "not run" if value is None else f"{value:.3g}{detail}"
    return {"target": name, "status": status, "measured": shown}


def evaluate_targets(result: dict[str, Any]) -> list[dict[str, str]]:
    """Every target of docs/benchmarks.md, in its order."""
    conv, pad = by_case(result["kernels"], "conv"), by_case(result["kernels"], "pad")
    best = {case: vs_faster_peer(peers) for case, peers in conv.items()}
    slowest = max(best, key=lambda case: best[case] or 0, default="")
    geo = worst(best.values(), every=True) and math.exp(
        sum(map(math.log, best.values())) / len(best))
    depthwise = conv.get("conv/depthwise", {})
    ours = [peers[bc.PADCONV] for peers in conv.values()]
    errors = [math.inf if row["status"] in FAILED else row["error_ratio"] for row in ours]
    targets = [
        target("Conv: padconv / faster peer, geometric mean <= 1.0", geo, 1.0,
               f" over {len(best)} cases"),
        target("Conv: padconv / faster peer <= 1.25 on every case", best.get(slowest), 1.25,
               f" at worst ({slowest})"),
        target("Conv: depthwise <= 1.0 against onnxruntime and against torch",
               worst([ratio(depthwise, bc.ORT), ratio(depthwise, bc.TORCH)], every=True), 1.0),
        target("Conv: every padconv result within the dot-product error bound",
               worst(errors, every=True), 1.0, " of the bound at worst"),
    ]
    for peer, limit in ((bc.COPY, 1.3), (bc.NUMPY_PAD, 1.0), (bc.ORT, 1.0)):
        found = [ratio(peers, peer, ours) for peers in pad.values()
                 for ours in (bc.PADCONV, bc.PADCONV_OUT)]
        targets.append(target(f"Pad: every mode, new array or out=, / {peer} <= {limit}",
                              worst(found, every=True), limit, " at worst"))
    return targets + process_targets(result.get("large"), result.get("startup"))


def process_targets(large: dict | None, startup: dict | None) -> list[dict[str, str]]:
    """Tiled conv no slower than the onnxruntime script (outputs agreeing); in-memory conv peak
    RSS <= input + output + weights + 100 MiB over the interpreter; start-up within 1.5x."""
    tiled = over = allowed = None
    if large:
        rows, wrong = large["rows"], (large["agreement"] or 0) > 1
        tiled = math.inf if wrong else ratio(rows, bc.ORT_SCRIPT, "padconv tiled")
        memory, base = rows["padconv memory"], rows[bc.INTERPRETER]
        over = math.inf if memory["note"] else (memory["peak_bytes"] - base["peak_bytes"]) / MIB
        allowed = large["tensor_bytes"] / MIB + 100
    starts = [ratio(startup["rows"], bc.INTERPRETER, label) for label in startup["rows"]
              if label != bc.INTERPRETER] if startup else []
    return [
        target("Large tensors: padconv --engine tiled / the onnxruntime script <= 1.0", tiled,
               1.0),
        target("Large tensors: padconv in memory, peak RSS over the interpreter's <= input + "
               "output + weights + 100 MiB", over, allowed or 0,
               f" MiB (allowed {allowed or 0:.0f})"),
        target('Start-up: padconv pad and conv / python -c "import numpy" <= 1.5',
               worst(starts, every=True), 1.5, " at worst"),
    ]


@dataclass
class Table:
    """Title, headers, string cells, a legend and numbered footnotes."""

    title: str
    headers: list[str]
    legend: str = ""
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> str:
        """The footnote marker of `text`, added the first time."""
        if text not in self.notes:
            self.notes.append(text)
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
    return ms(row["median_s"]) + ("" if peer == bc.PADCONV else f" ({times(ratio(peers, peer))})")


def kernel_table(rows: list[dict], kind: str) -> Table | None:
    """One line per case: padconv, its rate, each peer; Conv adds padconv / the faster peer and
    the worst error / bound of padconv, onnxruntime and torch."""
    conv = kind == "conv"
    extra = ["vs faster peer", "error / bound: padconv, ort, torch"]
    legend = "Peer cells: median time (padconv time / peer time: below 1, padconv is faster)."
    table = Table(f"{kind.capitalize()} (float32)", ["Case", "Shapes", "padconv", "GFLOP/s"
                  if conv else "GB/s", *PEER_COLUMNS[kind], *(extra if conv else [])], legend)
    for peers in by_case(rows, kind).values():
        ours = peers[bc.PADCONV]
        line = [ours["label"], ours["describe"], cell(table, peers, bc.PADCONV),
                f"{ours['rate']:.1f}" if ours["rate"] else "-",
                *(cell(table, peers, p) for p in PEER_COLUMNS[kind])]
        if conv:
            errors = [peers.get(p, {}).get("error_ratio") for p in (bc.PADCONV, bc.ORT, bc.TORCH)]
            line += [times(vs_faster_peer(peers)),
                     ", ".join("-" if e is None else f"{e:.2g}" for e in errors)]
        table.rows.append(line)
    return table if table.rows else None


def process_table(title: str, part: dict | None, legend: str, vs: str) -> Table | None:
    """Whole-process commands: median wall time, peak RSS, and time / that of command `vs`."""
    if not part:
        return None
    rows = part["rows"]
    table = Table(title, ["Command", "Median", "Peak RSS", "Runs", f"vs {vs}"], legend)
    for label, row in rows.items():
        median = f"failed {table.note(row['note'])}" if row["note"] else ms(row["median_s"])
        peak = f"{row['peak_bytes'] / MIB:.0f} MiB" if row["peak_bytes"] else "-"
        table.rows.append([row["command"], median, peak, str(row["runs"]),
                           times(ratio(rows, vs, label))])
    return table


def all_tables(result: dict[str, Any]) -> list[Table]:
    """Every table of a result, in display order."""
    large = result.get("large")
    tables = [
        kernel_table(result["kernels"], "conv"),
        kernel_table(result["kernels"], "pad"),
        process_table("Large tensors (whole processes)", large, large and (
            f"{large['describe']}, .npy in and out; input + output + weights: "
            f"{large['tensor_bytes'] / MIB:.0f} MiB. The outputs differ by at most "
            f"{times(large['agreement'])} of twice the bound (at most 1)."), bc.ORT_SCRIPT),
        process_table("Start-up (whole processes)", result.get("startup"),
                      "Small .npy files in, a .npy file out.", bc.INTERPRETER),
        Table("Targets", ["Target", "Verdict", "Measured"],
              rows=[[t["target"], t["status"], t["measured"]] for t in result["targets"]]),
    ]
    return [table for table in tables if table]


def markdown(table: Table) -> str:
    """The table as a Markdown section, its columns aligned so that it reads as plain text."""
    cells = [[c.replace("|", "\\|") for c in row] for row in (table.headers, *table.rows)]
    widths = [max(map(len, column)) for column in zip(*cells, strict=True)]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
             for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    notes = [f"{i}. {text}" for i, text in enumerate(table.notes, 1)]
    return "\n".join([f"## {table.title}\n", *([table.legend, ""] if table.legend else []),
                      *lines, *([""] + notes if notes else [])]) + "\n"
