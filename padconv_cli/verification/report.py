"""Renderings of verification results: one line per case fitted to the terminal width, failure
details, a side-by-side view of one case, JSON lines and JUnit XML. Nothing here runs a case."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from padconv_cli.dtypes import dtype_name
from padconv_cli.json_output import dumps
from padconv_cli.verification.cases import Case
from padconv_cli.verification.compare import display_value, format_error
from padconv_cli.verification.runner import (
    FAILED,
    PASSED,
    UNSUPPORTED,
    CaseResult,
    summary_counts,
)

COLUMNS = ("case", "operator", "attributes", "output", "max abs", "max rel", "result")
HEADER = {name: name.upper() for name in COLUMNS}
STATUS_WORDS = {PASSED: "PASS", FAILED: "FAIL", UNSUPPORTED: "UNSUPPORTED"}


def format_tolerance(value: float) -> str:
    """``value`` rounded *up* to 3 significant digits, so that the printed tolerance passes."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    step = 10.0 ** (math.floor(math.log10(value)) - 2)
    candidate = math.ceil(value / step) * step
    while float(f"{candidate:.3g}") < value:
        candidate += step
    return f"{candidate:.3g}"


def line_cells(result: CaseResult) -> dict[str, str]:
    """Every cell one result can show, keyed by column name (output: ``float32[1,1,5,5]``)."""
    comparison, shape = result.comparison, result.output_shape
    return {
        "case": result.case.name,
        "operator": result.operator or result.case.op,
        "attributes": result.attributes,
        "output": "-" if shape is None else f"{result.output_dtype}[{','.join(map(str, shape))}]",
        "max abs": format_error(comparison.max_abs if comparison else None),
        "max rel": format_error(comparison.max_rel if comparison else None),
        "result": STATUS_WORDS[result.status],
    }


def failure_details(result: CaseResult, names: Mapping[str, str] | None = None) -> list[str]:
    """Lines explaining a failed or unsupported result: the reason, the first mismatching
    elements and the smallest tolerances that would have passed."""
    lines = [f"{STATUS_WORDS[result.status]} {result.case.name}"]
    if result.case.location:
        lines.append(f"  in {result.case.location}")
    lines.append(f"  {result.reason}")
    comparison = result.comparison
    if result.status != FAILED or comparison is None:
        return lines
    lines += [f"  at {list(index)}: expected {display_value(expected)}, actual "
              f"{display_value(actual)}" for index, expected, actual in comparison.mismatches]
    hidden = comparison.mismatch_count - len(comparison.mismatches)
    if hidden > 0:
        lines.append(f"  ... and {hidden} more")
    lines.append("  " + tolerance_hint(comparison, names))
    return lines


def tolerance_hint(comparison: Any, names: Mapping[str, str] | None = None) -> str:
    """Which atol (rtol fixed) or rtol (atol fixed) would have passed, if any; ``names`` says
    how the reader names the two parameters (the CLI: ``--atol``, ``--rtol``)."""
    names = names or {}
    atol, rtol = names.get("atol", "atol"), names.get("rtol", "rtol")
    if comparison.min_atol is None:
        return "no tolerance makes this pass (NaN, inf, shape, dtype or exact-type mismatch)"
    atol_part = f"{atol} {format_tolerance(comparison.min_atol)} (with rtol={comparison.rtol:g})"
    with_atol = f"with atol={comparison.atol:g}"
    rtol_part = f"no rtol ({with_atol}: expected is 0 where they differ)"
    if comparison.min_rtol is not None and math.isfinite(comparison.min_rtol):
        rtol_part = f"{rtol} {format_tolerance(comparison.min_rtol)} ({with_atol})"
    return f"would pass with {atol_part} or {rtol_part}"


NARROW_COLUMNS = ("result", "case", "operator", "output", "max abs")
WIDE_EXTRA_MIN = 24
DEFAULT_WIDTH = 80


def case_table(results: list[CaseResult], width: int = DEFAULT_WIDTH,
               style: Any = None) -> list[str]:
    """A header line, then one line per result, of the columns that fit ``width``: result and
    case always, the name whole (``verify -k`` takes it back); output, operator and max abs
    while they fit (dropped in that order); ``max rel`` then ``attributes`` when
    :data:`WIDE_EXTRA_MIN` columns remain.  ``style(text, status)`` may colour the status."""
    rows = [line_cells(result) for result in results]
    widths = {name: max(len(row[name]) for row in [HEADER, *rows]) for name in COLUMNS}
    columns = list(NARROW_COLUMNS)

    def used() -> int:
        return sum(widths[name] for name in columns) + 2 * (len(columns) - 1)

    for optional in ("output", "operator", "max abs"):
        if used() > width:
            columns.remove(optional)
    if "max abs" in columns and used() + 2 + widths["max rel"] <= width:
        columns.append("max rel")
        room = width - used() - 2
        if room >= WIDE_EXTRA_MIN and "output" in columns:
            columns.insert(3, "attributes")
            widths["attributes"] = min(widths["attributes"], room)
    lines = [_table_line(HEADER, columns, widths)]
    for result, cells in zip(results, rows, strict=True):
        line = _table_line(cells, columns, widths)
        word = cells["result"]
        lines.append(line if style is None else style(word, result.status) + line[len(word):])
    return lines


def _table_line(cells: dict[str, str], columns: list[str], widths: dict[str, int]) -> str:
    parts = []
    for name in columns:
        text = cells[name]
        if name == "attributes" and len(text) > widths[name]:  # cut at the end, "..." marks it
            text = text[: max(widths[name] - 3, 0)] + "..."
        numeric = name in ("max abs", "max rel")
        parts.append(text.rjust(widths[name]) if numeric else text.ljust(widths[name]))
    return "  ".join(parts).rstrip()


def wrap_lines(lines: list[str], width: int) -> list[str]:
    """Each line wrapped to ``width`` columns, continuation lines indented by 4 spaces more than
    the line's own indent; a line that is a status word and a case name (``verify -k`` takes
    the name back) stays whole."""
    import textwrap

    wrapped = []
    for line in lines:
        words = line.split(" ")
        if len(line) <= width or (len(words) == 2 and words[0] in STATUS_WORDS.values()):
            wrapped.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        wrapped += textwrap.wrap(
            line.strip(), width, initial_indent=indent, subsequent_indent=indent + "    ",
            break_on_hyphens=False,
        )
    return wrapped


def verbose_details(result: CaseResult) -> list[str]:
    """``-v``: where the case comes from, its attributes, tolerances, errors and time."""
    lines = [f"  {result.case.name} ({result.case.location or result.case.source})"]
    if result.attributes:
        lines.append(f"    attributes: {result.attributes}")
    comparison = result.comparison
    if comparison is not None:
        lines.append(f"    max abs {format_error(comparison.max_abs)}, max rel "
                     f"{format_error(comparison.max_rel)} (rtol={comparison.rtol:g}, "
                     f"atol={comparison.atol:g})")
    if result.reason:
        lines.append(f"    {result.reason}")
    lines.append(f"    {result.seconds * 1000:.1f} ms")
    return lines


def plain_case_list(cases: list[Case]) -> list[str]:
    """``--list`` output: one case per line with its operator and source."""
    width = max((len(case.name) for case in cases), default=0)
    return [f"{case.name.ljust(width)}  {case.op:<5} {case.source}"
            + (f"  (unsupported: {case.unsupported})" if case.unsupported else "")
            for case in cases]


def result_record(result: CaseResult) -> dict[str, Any]:
    """One result as a dict for :func:`padconv_cli.json_output.dumps` (``"type": "case"``)."""
    case, comparison, shape = result.case, result.comparison, result.output_shape
    record: dict[str, Any] = {
        "type": "case", "name": case.name, "source": case.source, "location": case.location,
        "operator": result.operator or case.op, "attributes": result.attributes,
        "status": result.status, "reason": result.reason,
        "output_shape": None if shape is None else list(shape),
        "output_dtype": result.output_dtype or None, "seconds": round(result.seconds, 6),
    }
    if comparison is not None:
        record.update(max_abs=comparison.max_abs, max_rel=comparison.max_rel,
                      rtol=comparison.rtol, atol=comparison.atol,
                      mismatch_count=comparison.mismatch_count,
                      mismatches=comparison.mismatch_records(),
                      min_atol=comparison.min_atol, min_rtol=comparison.min_rtol)
    return record


def json_lines(results: list[CaseResult]) -> Iterator[str]:
    """One compact JSON object per result, then the summary object (the counts per status)."""
    for result in results:
        yield dumps(result_record(result))
    yield dumps({"type": "summary", **summary_counts(results), "total": len(results)})


def case_record(case: Case) -> dict[str, Any]:
    """``--list --json``: one case without running it."""
    return {"type": "case", "name": case.name, "source": case.source, "operator": case.op,
            "location": case.location, "unsupported": case.unsupported or None}


def junit_xml(results: list[CaseResult], names: Mapping[str, str] | None = None) -> bytes:
    """The results as a JUnit XML document: failures as <failure>, unsupported as <skipped>;
    ``names`` as for :func:`tolerance_hint`."""
    cases = []
    for result in results:
        child = None
        if result.status == FAILED:
            child = ("failure", {"message": result.reason, "type": "mismatch"},
                     "\n".join(failure_details(result, names)))
        elif result.status == UNSUPPORTED:
            child = ("skipped", {"message": result.reason}, None)
        cases.append(({"classname": f"padconv.verify.{result.case.source}",
                       "name": result.case.name, "time": f"{result.seconds:.6f}"}, child))
    seconds = sum(result.seconds for result in results)
    return junit_document("padconv verify", "padconv verify", cases, time=f"{seconds:.6f}")


def junit_document(title: str, suite_name: str, cases: list[tuple], **extra: str) -> bytes:
    """``<testsuites name=title><testsuite name=suite_name tests failures errors skipped
    ...extra>`` with one <testcase> per (attributes, child); a child is (tag, attributes,
    text) or None; ``failures`` and ``skipped`` count the children of those tags."""
    import xml.etree.ElementTree as ET

    tags = [child[0] for _, child in cases if child is not None]
    suites = ET.Element("testsuites", name=title)
    suite = ET.SubElement(suites, "testsuite", name=suite_name, tests=str(len(cases)),
                          failures=str(tags.count("failure")), errors="0",
                          skipped=str(tags.count("skipped")), **extra)
    for attributes, child in cases:
        case = ET.SubElement(suite, "testcase", **attributes)
        if child is not None:
            tag, child_attributes, text = child
            ET.SubElement(case, tag, **child_attributes).text = text
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"


def write_atomically(path: str, payload: bytes) -> None:
    """Write ``payload`` to ``path`` with padconv's atomic writer (temporary file + rename)."""
    from padconv_cli.tensorio.files import atomic_write

    atomic_write(path, lambda stream: stream.write(payload))


SIDE_GAP = 4
PREVIEW_ELEMENTS = 100


def tensor_block(array: Any, width: int, precision: int | None = None) -> list[str]:
    """An array as numpy's text form within ``width`` columns (elided past 100 elements;
    ``precision`` digits after the point when given); types numpy prints poorly (bfloat16,
    float8, int4: ml_dtypes) as float32."""
    array = np.asarray(array)
    if array.dtype.kind not in "biufcUSO":
        with contextlib.suppress(TypeError, ValueError):
            array = array.astype(np.float32)
    return np.array2string(array, max_line_width=max(width, 20),
                           threshold=PREVIEW_ELEMENTS, edgeitems=3,
                           precision=precision).splitlines()


def difference(expected: Any, actual: Any) -> Any:
    """``|actual - expected|`` elementwise in float64, 0 where both are NaN or the same
    infinity; for non-numeric types a bool array that is True where they differ. None when the
    shapes differ."""
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.shape != actual.shape:
        return None
    if expected.dtype.kind in "biufc" and actual.dtype.kind in "biufc":
        e, a = expected.astype(np.complex128), actual.astype(np.complex128)
        same = (e == a) | (np.isnan(e) & np.isnan(a))
        with np.errstate(invalid="ignore"):
            return np.where(same, 0.0, np.abs(a - e))
    try:
        return np.asarray(expected != actual)
    except (TypeError, ValueError):
        return None


def columns_side_by_side(blocks: list[tuple[str, list[str]]], width: int) -> list[str]:
    """Titled text blocks next to each other when they fit ``width``, else one below the other."""
    widths = [max([len(title), *(len(line) for line in lines)]) for title, lines in blocks]
    if sum(widths) + SIDE_GAP * (len(blocks) - 1) + 2 > width:
        stacked = []
        for title, lines in blocks:
            stacked += [f"  {title}", *(f"    {line}".rstrip() for line in lines)]
        return stacked
    height = max(len(lines) for _, lines in blocks)
    rows = [[title for title, _ in blocks],
            *([lines[i] if i < len(lines) else "" for _, lines in blocks] for i in range(height))]
    return [("  " + (" " * SIDE_GAP).join(cell.ljust(w) for cell, w in zip(row, widths,
                                                                          strict=True))).rstrip()
            for row in rows]


def _shape_text(array: Any) -> str:
    return f"{dtype_name(array.dtype)}[{', '.join(str(d) for d in array.shape)}]"


def side_by_side(case: Case, result: CaseResult, width: int = DEFAULT_WIDTH,
                 command: str | None = None) -> list[str]:
    """One case in full, for ``padconv verify -k NAME``: the command that reproduces it (when
    given), each input, the attributes, then expected, actual and ``|actual - expected|`` next
    to each other (one below the other when they do not fit ``width``)."""
    lines = [f"  operator: {result.operator or case.op}"]
    if result.attributes:
        lines.append(f"  attributes: {result.attributes}")
    for position, array in enumerate(case.inputs):
        if array is None:
            continue
        lines.append(f"  input {position}: {_shape_text(array)}")
        lines += [f"    {line}".rstrip() for line in tensor_block(array, width - 4)]
    expected = case.expected[0] if case.expected else None
    blocks = [(f"{title} {_shape_text(array)}", tensor_block(array, width - 4))
              for title, array in (("expected", expected), ("actual", result.actual))
              if array is not None]
    if expected is not None and result.actual is not None:
        diff = difference(expected, result.actual)
        if diff is not None:
            blocks.append(("|actual - expected|", tensor_block(diff, width - 4, 3)))
    if blocks:
        lines += columns_side_by_side(blocks, width)
    if result.reason:
        lines.append(f"  {result.reason}")
    heading = f"{case.name} ({case.location or case.source})"
    shown_command = shell_lines(command, width, "  command: ") if command else []
    return wrap_lines([heading], width) + shown_command + wrap_lines(lines, width)


def shell_lines(command: str, width: int, prefix: str) -> list[str]:
    """``command`` laid out to paste into a shell: whole words per line, each line but the
    last ending in `` \\``; a quoted literal too long for a line is broken after its commas
    (a newline inside the quotes, which the literal's brackets allow), never inside a number."""
    import shlex

    indent = " " * 6
    lines: list[str] = []
    current = prefix.rstrip(" ")
    for word in (shlex.quote(w) for w in shlex.split(command)):
        if len(current) + 1 + len(word) + 2 <= width or current == prefix.rstrip(" "):
            pieces = _literal_pieces(word, width - len(current) - 1, width - len(indent))
            current = f"{current} {pieces[0]}"
        else:
            lines.append(current + " \\")
            pieces = _literal_pieces(word, width - len(indent), width - len(indent))
            current = indent + pieces[0]
        for piece in pieces[1:]:
            lines.append(current)
            current = indent + piece
    return [*lines, current]


def _literal_pieces(word: str, first: int, rest: int) -> list[str]:
    """``word`` as one piece, or a quoted literal (``'[...]'``) cut after ``", "`` into
    pieces of at most ``first`` then ``rest`` columns (room kept for a closing `` \\``)."""
    if len(word) + 2 <= first or not word.startswith("'["):
        return [word]
    pieces: list[str] = []
    current = ""
    for part in word.split(" "):
        limit = (first if not pieces else rest) - 2
        if current and len(current) + 1 + len(part) > limit:
            pieces.append(current)
            current = part
        else:
            current = f"{current} {part}" if current else part
    return [*pieces, current]
