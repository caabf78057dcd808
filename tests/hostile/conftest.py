"""Fixtures of the hostile corpus: each selected case is laid out in its own temporary folder
and run once through the installed ``padconv`` (two at a time) before the tests inspect it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:  # so that `hostile.*` imports however pytest is started
    sys.path.insert(0, str(TESTS_DIR))

from hostile.cases import CASES_BY_NAME  # noqa: E402
from hostile.corpus import CaseOutcome, run_cases  # noqa: E402


def _selected_case_names(session: pytest.Session) -> list[str]:
    names = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("case_name") if callspec is not None else None
        if name in CASES_BY_NAME and name not in names:
            names.append(name)
    return names


@pytest.fixture(scope="session")
def corpus_outcomes(request, tmp_path_factory) -> dict[str, CaseOutcome]:
    """Every case selected in this session, run once, by name."""
    names = _selected_case_names(request.session)
    return run_cases(names, tmp_path_factory.mktemp("hostile"))
