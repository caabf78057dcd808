"""Rendering an :class:`~padconv_cli.audit.judge.AuditReport`: a table that fits 80 columns,
one JSON object, JUnit XML.

Table: one row per node (label, operator, output shape, largest absolute and relative
difference from the runtime, result), then indented lines with the element type, the input
shapes and key attributes and, for a node that is not ``ok``, why and which side is right.
Long labels are shortened in the middle; other long lines are wrapped.
"""

from __future__ import annotations

import math
from typing import Any

from padconv_cli.audit.judge import NOT_REACHED, OK, AuditReport, NodeAudit

WIDTH = 80
COLUMNS = (("NODE", 20), ("OP", 8), ("OUTPUT", 18), ("MAX |D|", 7), ("MAX REL", 7),
           ("RESULT", 15))


def _short(text: str, width: int) -> str:
    """``text`` cut in the middle with ``~`` to at most ``width`` characters."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep // 2] + "~" + text[len(text) - (keep - keep // 2):]


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    """``text`` as lines of at most WIDTH columns, each starting with ``indent``."""
    import textwrap

    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=True, break_on_hyphens=False)


def _dims(shape: list[int] | None) -> str:
    return "?" if shape is None else "[" + ",".join(str(d) for d in shape) + "]"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if math.isinf(value):
        return "inf"
    return f"{value:.2g}"


def _cells(values: tuple[str, ...]) -> str:
    cells = [_short(v, w).ljust(w) for v, (_, w) in zip(values, COLUMNS, strict=True)]
    return " ".join(cells).rstrip()


def _row(node: NodeAudit) -> str:
    output = "-" if node.status == NOT_REACHED else _dims(node.output_shape)
    result = node.status.upper() if node.failed else node.status
    return _cells((node.label, node.operator, output, _number(node.max_abs),
                   _number(node.max_rel), result))


def _detail_lines(node: NodeAudit) -> list[str]:
    lines = []
    words = []
    if node.input_shapes:
        inputs = " ".join(_dims(shape) for shape in node.input_shapes)
        words.append(f"{node.dtype or 'inputs'} {inputs}".strip())
    if node.attributes:
        words.append(node.attributes)
    if words:
        lines.extend(_wrapped("  ".join(words)))
    if node.status != OK and node.status != NOT_REACHED:
        why = node.detail or node.status
        right = f"; right: {node.right}" if node.right else ""
        lines.extend(_wrapped(f"{why}{right}"))
    if node.graph and node.graph != "main":
        lines.extend(_wrapped(f"in {node.graph}"))
    for note in node.notes:
        lines.extend(_wrapped(f"note: {note}"))
    return lines


def summary_line(report: AuditReport) -> str:
    """``12 nodes: 11 ok, 1 not reached (onnxruntime)``."""
    counts = report.counts()
    parts = [f"{count} {status}" for status, count in counts.items()]
    total = len(report.nodes)
    plural = "" if total == 1 else "s"
    return f"{total} Pad/Conv node{plural}: {', '.join(parts) or 'none'} ({report.runtime})"


def table_lines(report: AuditReport) -> list[str]:
    """The audit as text lines of at most 80 columns."""
    lines = _wrapped(f"audit {report.model} (opset {report.opset}, runtime {report.runtime})",
                     "")
    for name, origin in report.inputs.items():
        lines.extend(_wrapped(f"input {name}: {origin}"))
    for note in report.notes:
        lines.extend(_wrapped(f"note: {note}"))
    lines.append(_cells(tuple(name for name, _ in COLUMNS)))
    for node in report.nodes:
        lines.append(_row(node))
        lines.extend(_detail_lines(node))
    lines.extend(_wrapped(summary_line(report), ""))
    return lines


def report_record(report: AuditReport) -> dict[str, Any]:
    """The audit as one strict-JSON object."""
    return {
        "model": report.model,
        "runtime": report.runtime,
        "opset": report.opset,
        "inputs": report.inputs,
        "notes": report.notes,
        "passed": report.passed,
        "counts": report.counts(),
        "nodes": [
            {
                "label": node.label,
                "operator": node.operator,
                "graph": node.graph,
                "status": node.status,
                "failed": node.failed,
                "input_shapes": node.input_shapes,
                "output_shape": node.output_shape,
                "dtype": node.dtype,
                "attributes": node.attributes,
                "runtime": node.runtime,
                "max_abs": node.max_abs,
                "max_rel": node.max_rel,
                "bound_use": node.bound_use,
                "mismatches": node.mismatches,
                "right": node.right or None,
                "detail": node.detail,
                "notes": node.notes,
            }
            for node in report.nodes
        ],
    }


def junit_xml(report: AuditReport) -> bytes:
    """One testcase per node: ``outside``/``padconv refused`` as <failure>, ``not reached``
    as <skipped>, a runtime refusal as a passing case with the message in <system-out>."""
    import xml.etree.ElementTree as ET

    counts = report.counts()
    failures = sum(1 for node in report.nodes if node.failed)
    suites = ET.Element("testsuites", name="padconv audit")
    suite = ET.SubElement(
        suites, "testsuite", name=f"padconv audit {report.model}",
        tests=str(len(report.nodes)), failures=str(failures), errors="0",
        skipped=str(counts.get(NOT_REACHED, 0)),
    )
    for node in report.nodes:
        case = ET.SubElement(suite, "testcase", classname=f"padconv.audit.{node.operator}",
                             name=node.label)
        if node.failed:
            failure = ET.SubElement(case, "failure", message=node.detail or node.status,
                                    type=node.status)
            failure.text = "\n".join(_detail_lines(node))
        elif node.status == NOT_REACHED:
            ET.SubElement(case, "skipped", message="not reached")
        elif node.status != OK:
            ET.SubElement(case, "system-out").text = "\n".join(_detail_lines(node))
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"
