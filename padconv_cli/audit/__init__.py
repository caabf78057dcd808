"""``padconv audit MODEL.onnx [INPUT...]``: every Pad and Conv node of a model, checked.

The model runs once (onnxruntime when installed, else onnx.reference; ``runtime=`` picks);
every Pad and Conv node's inputs and output are captured (:mod:`.capture`), each node is
recomputed by padconv from the captured inputs and compared with the runtime's output: Pad
exactly, Conv by the dot-product error bound (:mod:`padconv_cli.verification.conv_bound`).
When they differ, a float64 recomputation decides which side is right (:mod:`.judge`).
Inputs come from files, by name or position, or are random from the declared types and shapes
(:mod:`.inputs`).  :mod:`.report` renders the table, JSON and JUnit XML.
"""

from __future__ import annotations

from padconv_cli.audit.judge import AuditReport, NodeAudit, audit_model

__all__ = ["AuditReport", "NodeAudit", "audit_model"]
