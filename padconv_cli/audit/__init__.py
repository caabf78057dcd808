"""``padconv audit``: every node padconv implements, run (:mod:`.capture`, :mod:`.inputs`) or
dumped (:mod:`.dumped`), recomputed and judged (:mod:`.judge`), rendered (:mod:`.report`)."""

from __future__ import annotations

from padconv_cli.audit.judge import AuditReport, NodeAudit, audit_model

__all__ = ["AuditReport", "NodeAudit", "audit_model"]
