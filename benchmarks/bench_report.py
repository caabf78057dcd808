"""What the numbers say: each target judged from the measured rows, and the tables (Markdown
with aligned columns, for the terminal and for docs/benchmarks.md).

A result holds parts: one per kernel case (under "conv", "pad" and "family", by case name) and
one per whole-process measurement ("large", "cluster", "startup"); a part's "rows"
are {who: row}."""

import math
from dataclasses import dataclass, field
from typing import Any

import bench_cases as bc

MIB = 2**20
FAILED = ("mismatch", "error")
PEER_COLUMNS = {"conv": (bc.ORT, bc.TORCH, bc.REFERENCE),
                "pad": (bc.PADCONV_OUT, bc.NUMPY_PAD, bc.COPY, bc.ORT, bc.TORCH, bc.REFERENCE),
                "family": (bc.ORT, bc.TORCH)}
PROCESS_PARTS = ("large", "cluster", "startup")


def parts(result: dict[str, Any]) -> list[dict]:
    """Every part of a result."""
    return [*result["conv"].values(), *result["pad"].values(),
            *result.get("family", {}).values(),
            *(result[k] for k in PROCESS_PARTS if k in result)]


def ratio(rows: dict[str, dict], peer: str, ours: str = bc.PADCONV,
          key: str = "median_s") -> float | None:
    """`key` (the median, or "p90_s") of `ours` / that of `peer` (below 1: ours is faster); inf
    when ours was wrong or failed; None when either has no time."""
    mine, theirs = rows.get(ours, {}), rows.get(peer, {})
    if mine.get("status") in FAILED:
        return math.inf
    both = mine.get(key) and theirs.get(key)
    return mine[key] / theirs[key] if both else None


def worst(values: Any, every: bool = False) -> float | None:
    """The largest value given; None if there is none (`every`: if any is None)."""
    values = list(values)
    known = [v for v in values if v is not None]
    return None if not known or (every and len(known) < len(values)) else max(known)


def compared_peers(rows: dict[str, dict]) -> list[str]:
    """onnxruntime and torch, but not a peer that ran another instruction set than padconv
    (--isa avx2)."""
    return [p for p in (bc.ORT, bc.TORCH) if rows.get(p, {}).get("compared", True)]


def vs_faster_peer(rows: dict[str, dict], key: str = "median_s") -> float | None:
    """padconv / the faster of the compared peers on this case, by median or by p90."""
    return worst(ratio(rows, p, key=key) for p in compared_peers(rows))


def share_of_limit(part: dict, limits: dict | None) -> tuple[float | None, str]:
    """(bound / padconv's median time, which bound): the roofline bound of a Conv case is
    max(FLOP / GEMM peak, bytes moved / copy bandwidth at the case's size); 1.0 would be the
    machine's limit reached."""
    median = part["rows"].get(bc.PADCONV, {}).get("median_s")
    if not limits or not median or "flop" not in part:
        return None, ""
    compute = part["flop"] / (limits["gemm_gflops"] * 1e9)
    memory = part["bytes"] / (part["copy_gbs_at_size"] * 1e9)
    return max(compute, memory) / median, "GEMM peak" if compute >= memory else "bandwidth"


COMPUTE_BOUND = ("conv/resnet3x3", "conv/pointwise", "conv/batch8")


def target(name: str, value: float | None, limit: float, detail: str = "") -> dict[str, str]:
    """MET when value <= limit, MISSED above it, NOT MEASURED when None."""
    status = "NOT MEASURED" if value is None else "MET" if value <= limit else "MISSED"
    shown = "not run" if value is None else f"{value:.3g}{detail}"
    return {"target": name, "status": status, "measured": shown}


def speed_targets(what: str, cases: dict[str, dict]) -> list[dict[str, str]]:
    """padconv / the faster peer: the geometric mean over `cases` <= 1.0, each case <= 1.25.
    A case where no peer gave a correct time (a peer's mismatch, say) has no ratio: the mean is
    over the others, which the verdict counts and names."""
    best = {case: vs_faster_peer(rows) for case, rows in cases.items()}
    slowest = max(best, key=lambda case: best[case] or 0, default="")
    known = [value for value in best.values() if value is not None]
    geo = math.exp(sum(map(math.log, known)) / len(known)) if known else None
    unpaired = [case for case, value in best.items() if value is None]
    left_out = f"; without a correct peer: {', '.join(unpaired)}" if unpaired else ""
    return [target(f"{what}: padconv / faster peer, geometric mean <= 1.0", geo, 1.0,
                   f" over {len(known)} cases{left_out}"),
            target(f"{what}: padconv / faster peer <= 1.25 on every case", best.get(slowest),
                   1.25, f" at worst ({slowest})")]


def family_targets(result: dict[str, Any]) -> list[dict[str, str]]:
    """The convolution family's speed targets, ConvTranspose within its error bound and the
    integer results exact (NOT MEASURED when no family case ran)."""
    family = {case: part["rows"] for case, part in result.get("family", {}).items()}
    if not family:
        return []

    def padconv_rows(kinds: tuple[str, ...]) -> list[dict]:
        return [part["rows"][bc.PADCONV] for part in result["family"].values()
                if part["kind"] in kinds]

    floats = [math.inf if row["status"] in FAILED else row["error_ratio"]
              for row in padconv_rows(("convtranspose",))]
    integers = [row["status"] for row in padconv_rows(("convinteger", "qlinearconv"))]
    wrong = sum(status != "ok" for status in integers)
    return speed_targets("Family", family) + [
        target("Family: every padconv ConvTranspose result within the error bound",
               worst(floats, every=True), 1.0, " of the bound at worst"),
        target("Family: every padconv integer result exact (ConvInteger, QLinearConv)",
               float(wrong) if integers else None, 0.0, f" wrong of {len(integers)}"),
    ]


def evaluate_targets(result: dict[str, Any]) -> list[dict[str, str]]:
    """Every target of docs/benchmarks.md, in its order."""
    conv = {case: part["rows"] for case, part in result["conv"].items()}
    depthwise = conv.get("conv/depthwise", {})
    errors = [math.inf if rows[bc.PADCONV]["status"] in FAILED else
              rows[bc.PADCONV]["error_ratio"] for rows in conv.values()]
    by_p90 = {case: vs_faster_peer(rows, "p90_s") for case, rows in conv.items()}
    either = {case: worst([vs_faster_peer(rows), by_p90[case]], every=True)
              for case, rows in conv.items()}
    behind = max(either, key=lambda case: either[case] or 0, default="")
    shares = {case: share_of_limit(part, result.get("limits"))[0]
              for case, part in result["conv"].items()}
    compute = [shares[c] for c in COMPUTE_BOUND if c in shares]
    targets = speed_targets("Conv", conv) + [
        target("Conv: padconv / faster peer <= 1.0 on every case, by median and by p90",
               either.get(behind), 1.0, f" at worst ({behind})"),
        target("Conv: ResNet 3x3, pointwise and batch 8 at >= 90% of the GEMM peak "
               "(shown: 1 / the lowest share)", 1 / min(compute) if compute and all(compute)
               else None, 1 / 0.9),
        target("Conv: depthwise at >= 80% of its bandwidth bound (shown: 1 / share)",
               1 / shares["conv/depthwise"] if shares.get("conv/depthwise") else None, 1 / 0.8),
        target("Conv: depthwise <= 1.0 against onnxruntime and against torch",
               worst([ratio(depthwise, p) for p in compared_peers(depthwise)], every=True), 1.0),
        target("Conv: every padconv result within the dot-product error bound",
               worst(errors, every=True), 1.0, " of the bound at worst"),
    ]
    for peer, limit in ((bc.COPY, 1.3), (bc.NUMPY_PAD, 1.0), (bc.ORT, 1.0)):
        found = [ratio(part["rows"], peer, ours) for part in result["pad"].values()
                 for ours in (bc.PADCONV, bc.PADCONV_OUT)]
        targets.append(target(f"Pad: every mode, new array or out=, / {peer} <= {limit}",
                              worst(found, every=True), limit, " at worst"))
    large, cluster, startup = (result.get(k, {}).get("rows") for k in PROCESS_PARTS)
    over, allowed = None, result.get("large", {}).get("tensor_bytes", 0) / MIB + 100
    if large:
        memory, base = large["padconv memory"], large[bc.INTERPRETER]
        over = math.inf if memory["note"] else (memory["peak_bytes"] - base["peak_bytes"]) / MIB
    starts = [ratio(startup, bc.INTERPRETER, label) for label in startup or ()
              if label != bc.INTERPRETER]
    return targets + family_targets(result) + [
        target("Large tensors: padconv --engine tiled / the onnxruntime script <= 1.0",
               ratio(large, bc.ORT_SCRIPT, "padconv tiled") if large else None, 1.0),
        target("Large tensors: padconv in memory, peak RSS over the interpreter's <= input + "
               "output + weights + 100 MiB", over, allowed, f" MiB (allowed {allowed:.0f})"),
        target("Cluster: padconv --engine dask, Zarr to Zarr / the dask script <= 1.0",
               ratio(cluster, bc.DASK_SCRIPT, "padconv zarr->zarr") if cluster else None, 1.0),
        target('Start-up: padconv pad and conv / python -c "import numpy" <= 1.3',
               worst(starts, every=True), 1.3, " at worst"),
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


def cell(table: Table, rows: dict[str, dict], who: str, vs: str | None = None) -> str:
    """'median (who / vs)' or 'median (padconv / who)', or the status with a footnote saying
    why."""
    row = rows.get(who)
    if row is None or row["status"] != "ok":
        return "n/a" if row is None else f"{row['status']} {table.note(who + ': ' + row['note'])}"
    shown = ratio(rows, vs, who) if vs else None if who == bc.PADCONV else ratio(rows, who)
    aside = "" if row.get("compared", True) else f" {table.note(who + ': ' + row['why'])}"
    return ms(row["median_s"]) + ("" if shown is None else f" ({times(shown)})") + aside


def kernel_table(cases: dict[str, dict], kind: str, limits: dict | None = None) -> Table | None:
    """One line per case: padconv, its rate, each peer; Conv and the family add padconv's 90th
    percentile, padconv / the faster peer by median and by p90, Conv the share of the
    machine's limit (the roofline bound / padconv's median), and both the worst error / bound
    of padconv, onnxruntime and torch (an integer result: 0 when exact)."""
    conv = kind in ("conv", "family")
    extra = ["p90", "vs faster peer: median, p90", *(["share of limit"] if kind == "conv" else []),
             "error / bound: padconv, ort, torch"] if conv else []
    title = ("Convolution family (ConvTranspose float32; ConvInteger, QLinearConv uint8: "
             "GOP/s)" if kind == "family" else f"{kind.capitalize()} (float32)")
    table = Table(title, [
        "Case", "Shapes", "padconv", "GFLOP/s" if conv else "GB/s", *PEER_COLUMNS[kind], *extra],
        "Peer cells: median time (padconv time / peer time: below 1, padconv is faster).")
    for part in cases.values():
        rows, rate = part["rows"], part["rows"][bc.PADCONV]["rate"]
        line = [part["label"], part["describe"], cell(table, rows, bc.PADCONV),
                f"{rate:.1f}" if rate else "-", *(cell(table, rows, p) for p in PEER_COLUMNS[kind])]
        errors = [rows.get(p, {}).get("error_ratio") for p in (bc.PADCONV, bc.ORT, bc.TORCH)]
        share, bound = share_of_limit(part, limits)
        table.rows.append(line + ([
            ms(rows[bc.PADCONV].get("p90_s")),
            f"{times(vs_faster_peer(rows))}, {times(vs_faster_peer(rows, 'p90_s'))}",
            *([] if kind != "conv" else ["-" if share is None else f"{share:.0%} of {bound}"]),
            ", ".join("-" if e is None else f"{e:.2g}" for e in errors)] if conv else []))
    return table if table.rows else None


def process_table(part: dict) -> Table:
    """Whole-process commands: median wall time (and time / that of the part's command "vs"),
    peak RSS, and the output's error / bound."""
    table = Table(part["title"], ["Command", f"Median (/ {part['vs']})", "Peak RSS", "Runs",
                                  "error / bound"], part["legend"])
    if "skipped" in part:
        table.rows.append([f"skipped {table.note(part['skipped'])}", *"----"])
    for label, row in part["rows"].items():
        peak, error = row["peak_bytes"], row["error_ratio"]
        table.rows.append([row["command"], cell(table, part["rows"], label, part["vs"]),
                           f"{peak / MIB:.0f} MiB" if peak else "-", str(row["runs"]),
                           "-" if error is None else f"{error:.2g}"])
    return table


def all_tables(result: dict[str, Any]) -> list[Table]:
    """Every table of a result, in display order."""
    kernels = [kernel_table(result[kind], kind, result.get("limits"))
               for kind in ("conv", "pad", "family") if kind in result]
    return [table for table in kernels if table] + [
        process_table(result[k]) for k in PROCESS_PARTS if k in result] + [
        Table("Targets", ["Target", "Verdict", "Measured"],
              rows=[[t["target"], t["status"], t["measured"]] for t in result["targets"]])]


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
