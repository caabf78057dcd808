"""The README runs in order: every command block, top to bottom, in one temporary folder that
holds a copy of samples/ (as a fresh clone does). Shell blocks must exit 0; a ``$ command``
transcript must print exactly what the README shows. A block is left out only with a
``<!-- readme-test: skip (reason) -->`` line right above it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SKIP = re.compile(r"<!-- readme-test: skip \((.+)\) -->")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass
class Block:
    line: int
    language: str
    text: str
    skip_reason: str | None


def readme_blocks() -> list[Block]:
    lines = README.read_text(encoding="utf-8").splitlines()
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
    # Conv's working memory in --explain counts per-thread buffers: the README shows 2 threads
    env["PADCONV_NATIVE_THREADS"] = "2"
    return env


def _run(block: Block, folder: Path) -> None:
    env = _environment()
    where = f"README.md line {block.line}"
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
        assert done.stdout == shown, f"{where}: README shows\n{shown}\nbut it printed\n" + (
            done.stdout + done.stderr
        )
    else:
        pytest.fail(f"{where}: a block that is neither sh, python nor a $ transcript")


def test_every_readme_block_runs_in_order(tmp_path):
    shutil.copytree(REPO / "samples", tmp_path / "samples")
    blocks = readme_blocks()
    ran = [block for block in blocks if block.skip_reason is None]
    assert len(ran) >= 10
    for block in ran:
        _run(block, tmp_path)


def test_readme_starts_with_the_quick_start_commands():
    blocks = readme_blocks()
    assert blocks[0].text.strip() == "pip install . && padconv verify"
    assert blocks[1].text.strip() == "pip install -e '.[test]' && pytest"
