"""The fixture shared by the attack-corpus test files: the cases a session selected, run once."""

from __future__ import annotations

import pytest
from hostile.attack_corpus import Case, Outcome, run_all


def selected_outcomes(request: pytest.FixtureRequest, cases: list[Case],
                      tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Run the cases of ``cases`` that this session selected (parameter ``attack``)."""
    by_name = {case.name: case for case in cases}
    wanted = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("attack") if callspec is not None else None
        if name in by_name and by_name[name] not in wanted:
            wanted.append(by_name[name])
    return run_all(wanted, tmp_path_factory.mktemp("attack"))


@pytest.fixture(scope="module")
def attack_outcomes(request, tmp_path_factory) -> dict[str, Outcome]:
    """The module's CASES (a list of attack_corpus.Case), run once per module."""
    return selected_outcomes(request, request.module.CASES, tmp_path_factory)
