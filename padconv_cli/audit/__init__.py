"""``padconv audit MODEL.onnx [INPUT...]``: every node of an operator padconv implements,
run once (:mod:`.capture`, inputs from :mod:`.inputs`), recomputed by padconv and judged
(:mod:`.judge`); :mod:`.dumped` judges another runtime's dumped tensors; :mod:`.report`
renders the table, JSON and JUnit XML."""

from __future__ import annotations

from padconv_cli.audit.judge import AuditReport, NodeAudit, audit_model

__all__ = ["AuditReport", "NodeAudit", "audit_model"]
