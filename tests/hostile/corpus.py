"""Running corpus cases: lay out a case, run its command, record the folder before and after.

Used by the tests (conftest.py) and by make_reliability_doc.py, which records what each case
printed in docs/reliability.md.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hostile.cases import CASES_BY_NAME, Case, prepare, work_dir
from hostile.runner import ChildRun, listing, run_padconv

PARALLEL_CHILDREN = 2
OBSERVED_LIMIT = 400
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DEFAULT_LIMIT = re.compile(r"over the limit of [0-9.]+ [KMGTPE]?i?B")
_DEFAULT_INPUT_LIMIT = re.compile(r"--max-input-bytes = [0-9.]+ [KMGTPE]?i?B")
_FREE_SPACE = re.compile(r"\b[0-9][0-9.]* ?(?:[KMGTPE]i?B|B|bytes) (are )?free")


@dataclass(frozen=True)
class CaseOutcome:
    """A case's folder before and after the run, and the run itself."""

    case: Case
    root: Path
    before: dict
    after: dict
    run: ChildRun

    @property
    def observed(self) -> str:
        """``exit N: stderr`` on one line, at most OBSERVED_LIMIT characters: control characters
        shown as ``\\xNN`` (a newline as ``\\x0a``), machine-specific parts replaced (see
        :func:`normalized_message`)."""
        text = _CONTROL.sub(_escaped, self.run.stderr_text.rstrip("\n"))
        text = normalized_message(text, self)
        if len(text) > OBSERVED_LIMIT:
            text = text[: OBSERVED_LIMIT - 1] + "…"
        return f"exit {self.run.returncode}: {text}"


def _escaped(match: re.Match) -> str:
    return f"\\x{ord(match.group()):02x}"


def normalized_message(line: str, outcome: CaseOutcome) -> str:
    """The message with the case folder shown as ROOT, object addresses elided, and the default
    output limit (half the available memory) and the free disk space, which differ per machine
    and run, shown as names."""
    for root in {str(outcome.root.resolve()), str(outcome.root)}:
        line = line.replace(root, "ROOT")
    line = _ADDRESS.sub(" at 0x…", line)
    if "--max-output-bytes" not in outcome.case.args:
        line = _DEFAULT_LIMIT.sub("over the limit of HALF_AVAILABLE_MEMORY", line)
    if "--max-input-bytes" not in outcome.case.args:
        line = _DEFAULT_INPUT_LIMIT.sub("--max-input-bytes = HALF_AVAILABLE_MEMORY", line)
    return _FREE_SPACE.sub(lambda match: f"FREE_SPACE {match[1] or ''}free", line)


def run_case(case: Case, root: Path) -> CaseOutcome:
    """Lay out ``case`` under ``root``, run its command in root/work, record both listings."""
    prepare(case, root)
    before = listing(root)
    stdin = case.stdin(root) if case.stdin is not None else None
    run = run_padconv(case.args, cwd=work_dir(root), stdin=stdin, measure_memory=True)
    return CaseOutcome(case, root, before, listing(root), run)


def run_cases(names: list[str], base: Path) -> dict[str, CaseOutcome]:
    """Run the named cases, two at a time, each in base/NAME."""
    with ThreadPoolExecutor(PARALLEL_CHILDREN) as pool:
        outcomes = pool.map(lambda name: run_case(CASES_BY_NAME[name], base / name), names)
        return dict(zip(names, outcomes, strict=True))
