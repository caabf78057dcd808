"""docs/reliability.md stays current: it is what make_reliability_doc.py generates, every
fault and numeric test has its row (and every row its test), and the message recorded for
each hostile case is the one padconv prints now."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hostile.cases import CASES, FAULT_CHECKS, KNOWN_GAPS, NUMERIC_CHECKS
from hostile.make_reliability_doc import DOC_PATH, parse_observed, render

TESTS_DIR = Path(__file__).resolve().parents[1]
REGENERATE = "regenerate it: python tests/hostile/make_reliability_doc.py"


def _doc() -> str:
    assert DOC_PATH.exists(), f"{DOC_PATH} is missing; {REGENERATE}"
    return DOC_PATH.read_text(encoding="utf-8")


def _test_functions(file_name: str) -> set[str]:
    tree = ast.parse((TESTS_DIR / file_name).read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def test_doc_matches_its_generator():
    text = _doc()
    assert render(parse_observed(text)) == text, f"docs/reliability.md is out of date; {REGENERATE}"


def test_doc_has_an_observation_for_every_case():
    observed = parse_observed(_doc())
    missing = [
        case.name for case in CASES if observed.get(case.name, "not run yet") == "not run yet"
    ]
    assert not missing, f"no observation for {missing}; {REGENERATE}"


@pytest.mark.parametrize(
    ("file_name", "checks"),
    [("hostile/test_faults.py", FAULT_CHECKS),
     ("kernels/test_properties_numerics.py", NUMERIC_CHECKS)],
)
def test_every_check_has_a_test_and_every_test_a_row(file_name, checks):
    documented = {check.test for check in checks}
    functions = _test_functions(file_name)
    assert documented <= functions, f"rows without a test: {documented - functions}"
    undocumented = {f for f in functions if not any(f.startswith(d) for d in documented)}
    assert not undocumented, f"tests without a row in cases.py: {undocumented}"


def test_known_gaps_name_existing_things():
    names = {case.name for case in CASES} | {c.test for c in FAULT_CHECKS + NUMERIC_CHECKS}
    names |= _test_functions("io/test_properties_readers.py")
    names |= _test_functions("kernels/test_properties_kernels.py")
    regressions = {p.name for p in (Path(__file__).parent / "regressions").glob("*.bin")}
    assert set(KNOWN_GAPS) <= names | regressions


@pytest.mark.parametrize("case_name", [case.name for case in CASES])
def test_doc_records_what_padconv_prints_now(case_name, corpus_outcomes):
    recorded = parse_observed(_doc()).get(case_name, "")
    now = " ".join(corpus_outcomes[case_name].observed.split())
    if case_name in KNOWN_GAPS:  # a traceback names machine-specific paths: compare the code
        recorded, now = recorded.split(":", 1)[0], now.split(":", 1)[0]
    assert recorded == now, f"padconv now prints {now!r}; {REGENERATE}"


def _proven_by_an_existing_test(proof: str) -> bool:
    if proof.startswith("case:"):
        return proof[5:] in {case.name for case in CASES}
    file_name, _, function = proof.partition("::")
    return (TESTS_DIR / file_name).is_file() and function in _test_functions(file_name)


def test_every_rule_is_proven_by_tests_that_exist():
    from hostile.rules import RULES

    missing = [p for rule in RULES for p in rule.proofs if not _proven_by_an_existing_test(p)]
    assert not missing, f"rules name tests that do not exist: {missing}"
