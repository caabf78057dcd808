"""The corpora's fixtures: each selected case is laid out in its own temporary folder and run
once as ``python -m padconv_cli`` forked from a server with the imports done
(hostile/fork_server.py), two at a time, before the tests inspect it."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:  # so that `hostile.*` imports however pytest is started
    sys.path.insert(0, str(TESTS_DIR))

from hostile.attack_corpus import run_all  # noqa: E402
from hostile.cases import CASES_BY_NAME, Case, prepare, work_dir  # noqa: E402
from hostile.fork_server import forked_padconv  # noqa: E402
from hostile.runner import ChildRun, listing  # noqa: E402


@dataclass(frozen=True)
class CaseOutcome:
    """A case's folder before and after the run, and the run itself."""

    case: Case
    root: Path
    before: dict
    after: dict
    run: ChildRun


def run_case(case: Case, root: Path, run_padconv) -> CaseOutcome:
    """Lay out ``case`` under ``root``, run its command in root/case, record both listings."""
    prepare(case, root)
    before = listing(root)
    stdin = case.stdin(root) if case.stdin is not None else None
    run = run_padconv(case.args, work_dir(root), stdin)
    return CaseOutcome(case, root, before, listing(root), run)


def _selected(session: pytest.Session, parameter: str, known) -> list[str]:
    """The names among ``known`` that this session's tests take as ``parameter``, in order."""
    names = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get(parameter) if callspec is not None else None
        if name in known and name not in names:
            names.append(name)
    return names


@pytest.fixture(scope="session")
def corpus_outcomes(request, tmp_path_factory) -> dict[str, CaseOutcome]:
    """Every case selected in this session, run once (two at a time), by name."""
    names = _selected(request.session, "case_name", CASES_BY_NAME)
    base = tmp_path_factory.mktemp("hostile")
    with forked_padconv(2) as run, ThreadPoolExecutor(2) as pool:
        outcomes = pool.map(lambda name: run_case(CASES_BY_NAME[name], base / name, run), names)
        return dict(zip(names, outcomes, strict=True))


@pytest.fixture(scope="session")
def forked_run():
    """``run(args, cwd, stdin=None)`` -> ChildRun: ``padconv ARGS`` forked from a server that
    has done the imports (hostile/fork_server.py), its peak memory measured."""
    with forked_padconv(1) as run:
        yield run


@pytest.fixture(scope="module")
def attack_outcomes(request, tmp_path_factory) -> dict:
    """The test module's CASES (hostile.attack_corpus.Case) that this session selected (as
    parameter ``attack``), run once (two at a time), by name."""
    by_name = {case.name: case for case in request.module.CASES}
    names = _selected(request.session, "attack", by_name)
    return run_all([by_name[name] for name in names], tmp_path_factory.mktemp("attack"))
