"""``padconv audit``: every node padconv implements, run and judged (:mod:`.judge`, inputs from
:mod:`.inputs`) or dumped (:mod:`.dumped`), rendered (:mod:`.report`)."""

from __future__ import annotations

from padconv_cli.audit.judge import AuditReport, NodeAudit, audit_model

__all__ = ["AuditReport", "NodeAudit", "audit_model"]
