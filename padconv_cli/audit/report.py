"""Rendering an :class:`~padconv_cli.audit.judge.AuditReport`: a table, JSON, JUnit XML.

Table: one row per node (label, operator, output shape, largest differences, result), then
indented lines: element type, input shapes, attributes and, for a node not ``ok``, why and
which side is right.  Labels too long for the NODE column are shortened, distinct, the whole
label on the next line; other long lines are wrapped.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from padconv_cli.audit.judge import NOT_REACHED, OK, AuditReport, NodeAudit
from padconv_cli.verification.compare import format_error

WIDTH = 80
NODE_MIN = 20
COLUMNS = (("NODE", NODE_MIN), ("OP", 8), ("OUTPUT", 18), ("MAX |D|", 7), ("MAX REL", 7),
           ("RESULT", 15))
OTHER_COLUMNS = sum(w for _, w in COLUMNS[1:]) + len(COLUMNS) - 1
NODE_FIELDS = ("label", "operator", "graph", "status", "failed", "input_shapes", "output_shape",
               "dtype", "attributes", "runtime", "max_abs", "max_rel", "bound_use",
               "mismatches", "right", "detail", "notes")


def _short(text: str, width: int) -> str:
    """``text`` cut in the middle with ``~`` to at most ``width`` characters."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep // 2] + "~" + text[len(text) - (keep - keep // 2):]


def _around_difference(label: str, group: list[str], width: int) -> str:
    """``label`` shortened to ``width`` around the part that tells it from the other labels
    of ``group`` (widened to whole ``/`` parts when they fit), ``~`` where text was cut, then
    as much of its end as fits."""
    start = len(os.path.commonprefix(group))
    same_end = len(os.path.commonprefix([g[::-1] for g in group]))
    end = len(label) - min(same_end, len(label) - start)
    whole_start = label.rfind("/", 0, start) + 1
    whole_end = label.find("/", end) if label.find("/", end) >= 0 else len(label)
    if whole_end - whole_start + 2 <= width:
        start, end = whole_start, whole_end
    head = "~" if start > 0 else ""
    window = label[start:end]
    room = width - len(head) - len(window)
    if end >= len(label):
        return _short(head + window, width)
    tail = label[end:]
    if len(tail) > room:
        tail = "~" + tail[len(tail) - room + 1:] if room > 1 else ""
    return _short(head + window + tail, width)


def distinct_labels(labels: list[str], width: int) -> list[str]:
    """Every label fitted to ``width`` columns, distinct where the labels are: shortened in
    the middle; labels that would then look alike are shortened around what tells them
    apart; any still alike get their position (``#3``) at the end."""
    short = [_short(label, width) for label in labels]
    by_text: dict[str, set[str]] = {}
    for label, text in zip(labels, short, strict=True):
        by_text.setdefault(text, set()).add(label)
    for index, label in enumerate(labels):
        group = sorted(by_text[short[index]])
        if len(group) > 1:
            short[index] = _around_difference(label, group, width)
    counts = Counter(short)
    for index, text in enumerate(short):
        if counts[text] > 1:
            tag = f"#{index + 1}"
            short[index] = _short(text, width - len(tag)) + tag
    return short


def _wrapped(text: str, indent: str = "  ", width: int = WIDTH) -> list[str]:
    """``text`` as lines of at most ``width`` columns, each starting with ``indent``."""
    import textwrap

    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=True, break_on_hyphens=False)


def _dims(shape: list[int] | None) -> str:
    return "?" if shape is None else "[" + ",".join(str(d) for d in shape) + "]"


def _cells(values: tuple[str, ...], node_width: int) -> str:
    widths = [node_width] + [w for _, w in COLUMNS[1:]]
    cells = [_short(v, w).ljust(w) for v, w in zip(values, widths, strict=True)]
    return " ".join(cells).rstrip()


def _row(node: NodeAudit, label: str, node_width: int) -> str:
    output = "-" if node.status == NOT_REACHED else _dims(node.output_shape)
    result = node.status.upper() if node.failed else node.status
    return _cells((label, node.operator, output, format_error(node.max_abs, 2),
                   format_error(node.max_rel, 2), result), node_width)


def _detail_lines(node: NodeAudit, width: int = WIDTH, shortened: bool = False) -> list[str]:
    words = [node.attributes] if node.attributes else []
    if node.input_shapes:
        inputs = " ".join(_dims(shape) for shape in node.input_shapes)
        words.insert(0, f"{node.dtype or 'inputs'} {inputs}".strip())
    texts = ["  ".join(words)] if words else []
    if node.status != OK and node.status != NOT_REACHED:
        texts.append((node.detail or node.status) + (f"; right: {node.right}" if node.right
                                                     else ""))
    if node.graph and node.graph != "main":
        texts.append(f"in {node.graph}")
    texts += [f"note: {note}" for note in node.notes]
    return ([f"  node {node.label}"] if shortened else []) + [
        line for text in texts for line in _wrapped(text, width=width)]


def summary_line(report: AuditReport) -> str:
    """``12 nodes: 11 ok, 1 not reached (onnxruntime)``; a run that checked no node says so
    and names the operators audit checks."""
    counts = report.counts()
    parts = [f"{count} {status}" for status, count in counts.items()]
    total = len(report.nodes)
    plural = "" if total == 1 else "s"
    line = f"{total} node{plural} padconv implements: {', '.join(parts) or 'none'} " \
        f"({report.runtime})"
    if report.checked == 0:
        from padconv_cli.ops import OPERATORS

        line += f"; no node was checked (audit checks {', '.join(OPERATORS)} nodes)"
    return line


def table_lines(report: AuditReport, width: int = WIDTH) -> list[str]:
    """The audit as text lines of at most ``width`` columns (80 at least): the NODE column
    takes what the other columns leave, labels distinct (:func:`distinct_labels`), the whole
    label on the next line when it was shortened."""
    width = max(width, WIDTH)
    longest = max((len(node.label) for node in report.nodes), default=0)
    node_width = max(NODE_MIN, min(longest, width - OTHER_COLUMNS))
    labels = distinct_labels([node.label for node in report.nodes], node_width)
    lines = _wrapped(f"audit {report.model} (opset {report.opset}, runtime {report.runtime})",
                     "", width)
    texts = [f"input {name}: {origin}" for name, origin in report.inputs.items()]
    lines += [line for text in texts + [f"note: {note}" for note in report.notes]
              for line in _wrapped(text, width=width)]
    lines.append(_cells(tuple(name for name, _ in COLUMNS), node_width))
    for node, label in zip(report.nodes, labels, strict=True):
        lines.append(_row(node, label, node_width))
        lines.extend(_detail_lines(node, width, shortened=label != node.label))
    lines.extend(_wrapped(summary_line(report), "", width))
    return lines


def report_record(report: AuditReport) -> dict[str, Any]:
    """The audit as one strict-JSON object (a node's ``right`` None when no side is named)."""
    nodes = [{name: getattr(node, name) for name in NODE_FIELDS} for node in report.nodes]
    for record in nodes:
        record["right"] = record["right"] or None
    return {"model": report.model, "runtime": report.runtime, "opset": report.opset,
            "inputs": report.inputs, "notes": report.notes, "passed": report.passed,
            "checked": report.checked, "counts": report.counts(), "nodes": nodes}


def junit_xml(report: AuditReport) -> bytes:
    """One testcase per node: ``outside``/``padconv refused`` as <failure>, ``not reached``
    as <skipped>, a runtime refusal as a passing case with the message in <system-out>."""
    from padconv_cli.verification.report import junit_document

    cases = []
    for node in report.nodes:
        child = None
        if node.failed:
            child = ("failure", {"message": node.detail or node.status, "type": node.status},
                     "\n".join(_detail_lines(node)))
        elif node.status == NOT_REACHED:
            child = ("skipped", {"message": "not reached"}, None)
        elif node.status != OK:
            child = ("system-out", {}, "\n".join(_detail_lines(node)))
        cases.append(({"classname": f"padconv.audit.{node.operator}", "name": node.label}, child))
    return junit_document("padconv audit", f"padconv audit {report.model}", cases)
