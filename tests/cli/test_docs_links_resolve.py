"""Every link between padconv's own pages leads somewhere: the file exists and, when the link
names a section, the page has a heading with that anchor (GitHub's rule for anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than - and _ removed,
    each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def local_links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [target for target in LINK.findall(text)
            if not target.startswith(("http://", "https://", "mailto:"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_local_link_leads_to_a_file_and_section(page):
    for target in local_links(page):
        path, _, section = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        assert destination.exists(), f"{page.name}: {target}: no such file"
        if section and destination.suffix == ".md":
            assert section in headings(destination), f"{page.name}: {target}: no such section"


def test_github_anchors_are_computed_as_github_does():
    assert anchor(" `--explain`: what a call will do") == "--explain-what-a-call-will-do"
    assert anchor(" `padconv show FILE...` (alias `inspect`)") == "padconv-show-file-alias-inspect"
