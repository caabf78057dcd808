"""Renderings of verification results: a table (rich or plain text), failure details, JSON lines
and JUnit XML. Nothing here runs a case."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from padconv_cli.verification.cases import Case
from padconv_cli.verification.compare import display_value, plain_value
from padconv_cli.verification.runner import (
    FAILED,
    PASSED,
    UNSUPPORTED,
    CaseResult,
    summary_counts,
)

COLUMNS = ("case", "operator", "attributes", "output", "max abs", "max rel", "result")
STATUS_WORDS = {PASSED: "PASS", FAILED: "FAIL", UNSUPPORTED: "UNSUPPORTED"}
STATUS_STYLES = {PASSED: "green", FAILED: "bold red", UNSUPPORTED: "yellow"}


# --- cells -------------------------------------------------------------------------------------


def format_error(value: float | None) -> str:
    """An error magnitude with 3 significant digits; ``-`` when not applicable."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return f"{value:.3g}"


def format_tolerance(value: float) -> str:
    """``value`` rounded *up* to 3 significant digits, so that the printed tolerance passes."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    step = 10.0 ** (math.floor(math.log10(value)) - 2)
    candidate = math.ceil(value / step) * step
    while float(f"{candidate:.3g}") < value:
        candidate += step
    return f"{candidate:.3g}"


def output_text(result: CaseResult) -> str:
    """``float32[1,1,5,5]`` or ``-`` when there is no output."""
    if result.output_shape is None:
        return "-"
    return f"{result.output_dtype}[{','.join(str(n) for n in result.output_shape)}]"


def row_cells(result: CaseResult) -> tuple[str, ...]:
    """The table cells of one result, in COLUMNS order."""
    comparison = result.comparison
    return (
        result.case.name,
        result.operator or result.case.op,
        result.attributes,
        output_text(result),
        format_error(comparison.max_abs if comparison else None),
        format_error(comparison.max_rel if comparison else None),
        STATUS_WORDS[result.status],
    )


# --- failure details ---------------------------------------------------------------------------


def failure_details(result: CaseResult) -> list[str]:
    """Lines explaining a failed or unsupported result: the reason, the first mismatching
    elements and the smallest tolerances that would have passed."""
    lines = [f"{STATUS_WORDS[result.status]} {result.case.name} ({result.case.location})"]
    lines.append(f"  {result.reason}")
    comparison = result.comparison
    if result.status != FAILED or comparison is None:
        return lines
    for index, expected, actual in comparison.mismatches:
        lines.append(
            f"  at {list(index)}: expected {display_value(expected)}, "
            f"actual {display_value(actual)}"
        )
    hidden = comparison.mismatch_count - len(comparison.mismatches)
    if hidden > 0:
        lines.append(f"  ... and {hidden} more")
    lines.append("  " + tolerance_hint(comparison))
    return lines


def tolerance_hint(comparison: Any) -> str:
    """Which --atol (rtol fixed) or --rtol (atol fixed) would have passed, if any."""
    if comparison.min_atol is None:
        return "no tolerance makes this pass (NaN, inf, shape, dtype or exact-type mismatch)"
    atol_part = f"--atol {format_tolerance(comparison.min_atol)} (with rtol={comparison.rtol:g})"
    if comparison.min_rtol is None or not math.isfinite(comparison.min_rtol):
        rtol_part = f"no rtol (with atol={comparison.atol:g}: expected is 0 where they differ)"
    else:
        rtol_part = (
            f"--rtol {format_tolerance(comparison.min_rtol)} (with atol={comparison.atol:g})"
        )
    return f"would pass with {atol_part} or {rtol_part}"


# --- plain text --------------------------------------------------------------------------------


def plain_table(results: list[CaseResult]) -> list[str]:
    """The results as space-aligned text columns (no colour, no box drawing)."""
    rows = [tuple(c.upper() for c in COLUMNS)] + [row_cells(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return [_plain_row(row, widths) for row in rows]


def _plain_row(cells: tuple[str, ...], widths: list[int]) -> str:
    return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()


def plain_case_list(cases: list[Case]) -> list[str]:
    """``--list`` output: one case per line with its operator and source."""
    width = max((len(case.name) for case in cases), default=0)
    lines = []
    for case in cases:
        note = f"  (unsupported: {case.unsupported})" if case.unsupported else ""
        lines.append(f"{case.name.ljust(width)}  {case.op:<5} {case.source}{note}")
    return lines


# --- rich --------------------------------------------------------------------------------------


def rich_table(results: list[CaseResult]) -> Any:
    """The results as a rich Table (imported lazily)."""
    from rich.table import Table

    table = Table(show_lines=False, header_style="bold")
    for column in COLUMNS:
        numeric = column in ("max abs", "max rel")
        table.add_column(column, justify="right" if numeric else "left", overflow="fold")
    for result in results:
        cells = list(row_cells(result))
        cells[-1] = f"[{STATUS_STYLES[result.status]}]{cells[-1]}[/]"
        table.add_row(*cells)
    return table


# --- JSON lines --------------------------------------------------------------------------------


def json_safe(value: Any) -> Any:
    """Values JSON can carry strictly: non-finite floats as "nan"/"inf"/"-inf", complex as
    [real, imag], tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, complex):
        return [json_safe(value.real), json_safe(value.imag)]
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def result_record(result: CaseResult) -> dict[str, Any]:
    """One result as a JSON-ready dict (``"type": "case"``)."""
    comparison = result.comparison
    record: dict[str, Any] = {
        "type": "case",
        "name": result.case.name,
        "source": result.case.source,
        "location": result.case.location,
        "operator": result.operator or result.case.op,
        "attributes": result.attributes,
        "status": result.status,
        "reason": result.reason,
        "output_shape": None if result.output_shape is None else list(result.output_shape),
        "output_dtype": result.output_dtype or None,
        "seconds": round(result.seconds, 6),
    }
    if comparison is not None:
        record.update(
            max_abs=comparison.max_abs,
            max_rel=comparison.max_rel,
            rtol=comparison.rtol,
            atol=comparison.atol,
            mismatch_count=comparison.mismatch_count,
            mismatches=[
                {"index": list(index), "expected": plain_value(e), "actual": plain_value(a)}
                for index, e, a in comparison.mismatches
            ],
            min_atol=comparison.min_atol,
            min_rtol=comparison.min_rtol,
        )
    return _json_safe_deep(record)


def _json_safe_deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _json_safe_deep(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe_deep(item) for item in value]
    return json_safe(value)


def summary_record(results: list[CaseResult]) -> dict[str, Any]:
    """The summary object (``"type": "summary"``) with the counts per status."""
    counts = summary_counts(results)
    return {"type": "summary", **counts, "total": len(results)}


def json_lines(results: list[CaseResult]) -> Iterator[str]:
    """One compact JSON object per result, then the summary object."""
    for result in results:
        yield json.dumps(result_record(result), allow_nan=False)
    yield json.dumps(summary_record(results))


def case_record(case: Case) -> dict[str, Any]:
    """``--list --json``: one case without running it."""
    return {
        "type": "case",
        "name": case.name,
        "source": case.source,
        "operator": case.op,
        "location": case.location,
        "unsupported": case.unsupported or None,
    }


# --- JUnit XML ---------------------------------------------------------------------------------


def junit_xml(results: list[CaseResult]) -> bytes:
    """The results as a JUnit XML document: failures as <failure>, unsupported as <skipped>."""
    import xml.etree.ElementTree as ET

    counts = summary_counts(results)
    total_seconds = sum(result.seconds for result in results)
    suites = ET.Element("testsuites", name="padconv verify")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="padconv verify",
        tests=str(len(results)),
        failures=str(counts[FAILED]),
        errors="0",
        skipped=str(counts[UNSUPPORTED]),
        time=f"{total_seconds:.6f}",
    )
    for result in results:
        _add_testcase(suite, result)
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


def _add_testcase(suite: Any, result: CaseResult) -> None:
    import xml.etree.ElementTree as ET

    case = ET.SubElement(
        suite,
        "testcase",
        classname=f"padconv.verify.{result.case.source}",
        name=result.case.name,
        time=f"{result.seconds:.6f}",
    )
    if result.status == FAILED:
        failure = ET.SubElement(case, "failure", message=result.reason, type="mismatch")
        failure.text = "\n".join(failure_details(result))
    elif result.status == UNSUPPORTED:
        ET.SubElement(case, "skipped", message=result.reason)


def write_atomically(path: str, payload: bytes) -> None:
    """Write ``payload`` to ``path`` with padconv's atomic writer (temporary file + rename)."""
    from padconv_cli.tensorio.atomic import atomic_write

    atomic_write(path, lambda stream: stream.write(payload))
