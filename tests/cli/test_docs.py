"""padconv's own documents: the README and the guide run in order, docs/cli.md is every
command's current help, and every link between the pages leads somewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# The README and the guide run in order: every command block of each, top to bottom, in one
# temporary folder per document that holds a copy of samples/ (as a fresh clone does). Shell
# blocks must exit 0; a ``$ command`` transcript must print exactly what the document shows. A
# block is left out only with a ``<!-- readme-test: skip (reason) -->`` line right above it.


REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
GUIDE = REPO / "docs" / "guide.md"
# each document with the fewest blocks it must run (a parser that finds none fails)
DOCUMENTS = {README: 6, GUIDE: 10}
SKIP = re.compile(r"<!-- readme-test: skip \((.+)\) -->")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass
class Block:
    line: int
    language: str
    text: str
    skip_reason: str | None


def readme_blocks(document: Path = README) -> list[Block]:
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        skip = SKIP.fullmatch(previous.strip())
        blocks.append(Block(index + 1, match.group(1), "\n".join(lines[index + 1 : end]) + "\n",
                            skip.group(1) if skip else None))
        index = end + 1
    return blocks


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    # Conv's working memory in --explain counts per-thread buffers, sized for the instruction
    # set: the documents show 2 threads on the portable one, which every CPU has
    env["PADCONV_NATIVE_THREADS"] = "2"
    env["PADCONV_NATIVE_ISA"] = "generic"
    return env


def _run(block: Block, folder: Path, document: Path) -> None:
    env = _environment()
    where = f"{document.relative_to(REPO)} line {block.line}"
    if block.language == "python":
        done = subprocess.run([sys.executable, "-c", block.text], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{where}: {done.stderr}"
    elif block.language == "sh":
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=folder,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{where}: {done.stderr}"
    elif block.text.startswith("$ "):
        command, _, shown = block.text.partition("\n")
        done = subprocess.run(["bash", "-c", command[2:]], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.stdout == shown, f"{where}: the document shows\n{shown}\nbut it printed\n" + (
            done.stdout + done.stderr
        )
    else:
        pytest.fail(f"{where}: a block that is neither sh, python nor a $ transcript")


@pytest.mark.parametrize("document", list(DOCUMENTS), ids=lambda path: path.name)
def test_every_block_runs_in_order(tmp_path, document):
    shutil.copytree(REPO / "samples", tmp_path / "samples")
    blocks = readme_blocks(document)
    ran = [block for block in blocks if block.skip_reason is None]
    assert len(ran) >= DOCUMENTS[document]
    for block in ran:
        _run(block, tmp_path, document)


def test_readme_starts_with_the_quick_start_commands():
    blocks = readme_blocks()
    assert blocks[0].text.strip() == "pip install . && padconv verify"
    assert blocks[1].text.strip() == "pip install -e '.[test]' && pytest"


# Every link between padconv's own pages leads somewhere: the file exists and, when the link
# names a section, the page has a heading with that anchor (GitHub's rule for anchors).


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


# docs/cli.md is every command's ``--help`` as it is now: regenerated and compared.




def test_cli_reference_matches_every_commands_help():
    done = subprocess.run([sys.executable, "scripts/make_cli_reference.py", "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + (
        "\nRegenerate it: python scripts/make_cli_reference.py")


def test_cli_reference_has_a_section_per_command():
    from padconv_cli.cli.main import COMMANDS

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"## padconv {name}\n" in text
        assert f"Usage: padconv {name} [OPTIONS]" in text
