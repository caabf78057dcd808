"""Turning measured rows into tables: rich or plain text on the terminal, Markdown for the docs."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from bench_peers import (
    ALLOCATING_COPY,
    NUMPY_PAD,
    ORT,
    PADCONV,
    REFERENCE,
    STRIDED_COPY,
    TORCH,
)

MIB = 1024 * 1024
PEER_COLUMNS = {
    "conv": (ORT, REFERENCE, TORCH),
    "pad": (NUMPY_PAD, STRIDED_COPY, ALLOCATING_COPY, ORT, REFERENCE, TORCH),
}
KIND_TITLES = {"conv": "Conv (float32)", "pad": "Pad (float32)"}
RATIO_LEGEND = (
    "Each peer cell: median time, then padconv time / peer time (below 1: padconv is faster)."
)


@dataclass
class Table:
    """A rendered-agnostic table: headers, string cells and numbered footnotes."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    footnotes: list[str] = field(default_factory=list)
    legend: str = ""

    def footnote(self, text: str) -> str:
        """The marker of `text`, adding it to the footnotes the first time it is seen."""
        if text not in self.footnotes:
            self.footnotes.append(text)
        return f"[{self.footnotes.index(text) + 1}]"


def format_ms(seconds: float | None) -> str:
    """Milliseconds with about three significant digits."""
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:.0f} ms"
    return f"{ms:.1f} ms" if ms >= 10 else f"{ms:.2f} ms"


def format_ratio(ratio: float | None, bound: str = "") -> str:
    """'0.83x', '<0.01x' for an upper bound."""
    if ratio is None:
        return "-"
    return f"{bound}{ratio:.3f}x" if ratio < 0.1 else f"{bound}{ratio:.2f}x"


def peer_cell(row: dict[str, Any] | None, table: Table) -> str:
    """Time and padconv/peer ratio, or the reason there is none (as a footnote)."""
    if row is None:
        return "n/a"
    status = row["status"]
    if status == "ok":
        cell = f"{format_ms(row['median_s'])} ({format_ratio(row['ratio'], row['ratio_bound'])})"
        if row["peer"] in (STRIDED_COPY, ALLOCATING_COPY):
            return cell
        return cell + (f" {table.footnote(row['note'])}" if row["note"] else "")
    if status == "timeout":
        ratio = format_ratio(row["ratio"], row["ratio_bound"])
        marker = table.footnote(row["note"] or "timed out")
        return f"> {row['timed_out_after_s']:g} s ({ratio}) {marker}"
    label = "MISMATCH" if status == "mismatch" else status
    return f"{label} {table.footnote(row['note'])}"


def padconv_cells(row: dict[str, Any] | None, table: Table) -> list[str]:
    """padconv's own time and throughput cells."""
    if row is None:
        return ["n/a", "-"]
    if row["status"] != "ok":
        label = "MISMATCH" if row["status"] == "mismatch" else row["status"]
        return [f"{label} {table.footnote(row['note'])}", "-"]
    throughput = row["throughput"]
    return [format_ms(row["median_s"]), f"{throughput:.1f}" if throughput else "-"]


def kernel_table(rows: list[dict[str, Any]], kind: str) -> Table | None:
    """One line per case of `kind`: padconv, its throughput, then each peer."""
    kind_rows = [row for row in rows if row["kind"] == kind]
    if not kind_rows:
        return None
    unit = kind_rows[0]["throughput_unit"]
    peers = PEER_COLUMNS[kind]
    table = Table(KIND_TITLES[kind], ["Case", "Shapes", "padconv", unit, *peers],
                  legend=RATIO_LEGEND)
    for case in dict.fromkeys(row["case"] for row in kind_rows):
        by_peer = {row["peer"]: row for row in kind_rows if row["case"] == case}
        first = next(iter(by_peer.values()))
        cells = [first["label"], first["describe"], *padconv_cells(by_peer.get(PADCONV), table)]
        cells += [peer_cell(by_peer.get(peer), table) for peer in peers]
        table.rows.append(cells)
    return table


def startup_table(startup_rows: list[dict[str, Any]]) -> Table | None:
    """Whole-process wall time of small CLI runs against the bare interpreter with numpy."""
    if not startup_rows:
        return None
    table = Table("Whole process (start-up)", ["Command", "Median", "Runs", "vs baseline"],
                  legend="Baseline: python -c \"import numpy\"; ratio = command / baseline.")
    for row in startup_rows:
        median = format_ms(row["median_s"]) if row["status"] == "ok" else (
            f"error {table.footnote(row['note'])}")
        table.rows.append([row["command"], median, str(row["runs"]), format_ratio(row["ratio"])])
    return table


def memory_table(rss_row: dict[str, Any] | None) -> Table | None:
    """Peak resident set of the big `padconv conv` run against the interpreter baseline."""
    if rss_row is None:
        return None
    table = Table("Peak memory (resident set)", ["Quantity", "Value"],
                  legend=f"Measured with {rss_row['method']}.")

    def mib(value: int | None) -> str:
        return "-" if value is None else f"{value / MIB:.0f} MiB"

    status = "ok" if rss_row["status"] == "ok" else f"error {table.footnote(rss_row['note'])}"
    table.rows += [
        ["Command", rss_row["command"]],
        ["Status", status],
        ['Baseline: python -c "import numpy"', mib(rss_row["baseline_rss_bytes"])],
        ["padconv conv peak", mib(rss_row["peak_rss_bytes"])],
        ["Peak over baseline", mib(rss_row["over_baseline_bytes"])],
        ["Input + output + weights", mib(rss_row["tensor_bytes"])],
        ["Allowed over baseline (+100 MiB)", mib(rss_row["allowed_over_baseline_bytes"])],
        ["Wall time", format_ms(rss_row["wall_s"])],
    ]
    return table


def roofline_table(roofline: dict[str, Any] | None) -> Table | None:
    """Per Conv case: the time it takes at the machine's GEMM peak, the share of that peak
    padconv and onnxruntime reach, and their speed-ups over onnx.reference beside the most a
    direct convolution could reach ('>' marks lower bounds, from a reference that timed out)."""
    if not roofline or not roofline["rows"]:
        return None
    table = Table(
        "Roofline (Conv)",
        ["Case", "GFLOP", "At the GEMM peak", "padconv (share of peak)",
         "onnxruntime (share of peak)", "onnx.reference",
         "x faster than onnx.reference: padconv / onnxruntime / at the peak"],
        legend=(f"GEMM peak measured in this run: {roofline['gflops']:.0f} GFLOP/s (best float32 "
                f"{roofline['size']}x{roofline['size']} product of {roofline['runs']}). "
                "Share of peak = time at the peak / time taken (above 100%: fewer operations "
                "than the direct count, or a peak measured low); at the peak = onnx.reference "
                "time / time at the peak, the most a convolution doing the direct count of "
                "operations could reach here."),
    )
    for row in roofline["rows"]:
        bound = ">" if row["reference_bound"] else ""
        table.rows.append([
            row["label"], f"{row['gflop']:.3f}", format_ms(row["time_at_peak_s"]),
            _percent(row["padconv_share"]), _percent(row["ort_share"]),
            bound + format_ms(row["reference_s"]),
            " / ".join(_times(row[key], bound) for key in ("padconv_speedup", "ort_speedup",
                                                            "most_speedup")),
        ])
    return table


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def _times(factor: float | None, bound: str = "") -> str:
    return "-" if factor is None else f"{bound}{factor:.1f}x"


def targets_table(targets: list[dict[str, str]]) -> Table:
    """Each target with its verdict and the measured value behind it."""
    table = Table("Targets", ["Target", "Verdict", "Measured"])
    table.rows = [[t["target"], t["status"], t["measured"]] for t in targets]
    return table


def all_tables(result: dict[str, Any]) -> list[Table]:
    """Every table of a benchmark result, in display order."""
    tables = [
        kernel_table(result["kernels"], "conv"),
        roofline_table(result.get("roofline")),
        kernel_table(result["kernels"], "pad"),
        startup_table(result["startup"]),
        memory_table(result["peak_rss"]),
        targets_table(result["targets"]),
    ]
    return [table for table in tables if table is not None]


def markdown(table: Table, level: int = 2) -> str:
    """The table as a Markdown section."""
    escape = _markdown_escape
    lines = [f"{'#' * level} {table.title}", ""]
    if table.legend:
        lines += [table.legend, ""]
    lines.append("| " + " | ".join(escape(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in table.rows]
    if table.footnotes:
        lines.append("")
        lines += [f"{index}. {escape(text)}" for index, text in enumerate(table.footnotes, 1)]
    return "\n".join(lines) + "\n"


def _markdown_escape(text: str) -> str:
    return text.replace("|", "\\|")


def plain_text(table: Table) -> str:
    """The table as aligned plain text."""
    columns = zip(table.headers, *table.rows, strict=True)
    widths = [max(len(cell) for cell in column) for column in columns]
    lines = [table.title, "-" * len(table.title)]
    if table.legend:
        lines.append(table.legend)
    for cells in (table.headers, *table.rows):
        padded = (cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        lines.append("  ".join(padded).rstrip())
    lines += [f"[{index}] {text}" for index, text in enumerate(table.footnotes, 1)]
    return "\n".join(lines) + "\n"


def print_tables(tables: list[Table], header_lines: list[str]) -> None:
    """Print with rich when it is installed, else as plain text."""
    try:
        from rich.console import Console
        from rich.table import Table as RichTable
    except ImportError:
        print("\n".join(header_lines) + "\n")
        for table in tables:
            print(plain_text(table))
        return
    # Off a terminal rich would wrap at 80 columns; the tables are wider than that.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    for line in header_lines:
        console.print(line, highlight=False, markup=False)
    for table in tables:
        rich_table = RichTable(title=table.title, caption=table.legend or None)
        for header in table.headers:
            rich_table.add_column(header, overflow="fold")
        for row in table.rows:
            rich_table.add_row(*(_verdict_style(cell) for cell in row))
        console.print()
        console.print(rich_table)
        for index, text in enumerate(table.footnotes, 1):
            console.print(f"[{index}] {text}", highlight=False, markup=False)


def _verdict_style(cell: str) -> Any:
    """Colour verdicts and mismatches; every other cell is literal text."""
    from rich.text import Text

    styles = {"MET": "green", "MISSED": "bold red", "NOT MEASURED": "yellow"}
    if cell in styles:
        return Text(cell, style=styles[cell])
    return Text(cell, style="bold red" if cell.startswith("MISMATCH") else "")
