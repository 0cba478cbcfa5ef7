"""The fenced code blocks of a Markdown page, with the comments that steer how tests/docs/test_snippets.py runs them.

A comment on the line right before a block (several may stack) steers it::

    <!-- not run: REASON -->     not run; the reason is required
    <!-- file: NAME -->          written to NAME (in the page's directory) for the blocks after it
    <!-- exit status: N -->      must exit with status N
    <!-- tracking: on -->        runs with MLflow tracking on

``--8<-- "path"`` lines (pymdownx.snippets, as docs/benchmarks.md includes
benchmarks/README.md) are read as the included file's blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN_LANGUAGES = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
DIRECTIVES = ("not run", "file", "exit status", "tracking")

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*(?P<name>[a-z ]+?)\s*:\s*(?P<value>.*?)\s*-->\s*$")
_INCLUDE = re.compile(r'^--8<--\s+"(?P<path>[^"]+)"\s*$')


@dataclass
class Block:
    """One fenced block: where it is, its language and code, and its directives (name -> value)."""

    source: Path
    line: int
    language: str
    code: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.source.relative_to(REPO)}:{self.line}"

    @property
    def runner(self) -> str | None:
        """``python`` or ``bash`` for a block to run; None for one that is not run (or not code)."""
        if "not run" in self.directives or "file" in self.directives:
            return None
        return RUN_LANGUAGES.get(self.language)


def read_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` (and of the files it includes), in order."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        include = _INCLUDE.match(lines[i])
        if include:
            blocks += read_blocks(REPO / include["path"])
            i += 1
            continue
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        end = i + 1
        while end < len(lines) and not lines[end].startswith(indent + fence):
            end += 1
        if end == len(lines):
            raise ValueError(f"{page}:{i + 1}: code block never closed")
        code = "\n".join(line[len(indent):] for line in lines[i + 1:end]) + "\n"
        blocks.append(Block(page, i + 1, opening["lang"], code, _directives_before(lines, i, page)))
        i = end + 1
    return blocks


def _directives_before(lines: list[str], index: int, page: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    j = index - 1
    while j >= 0 and (match := _DIRECTIVE.match(lines[j])):
        if match["name"] not in DIRECTIVES:
            raise ValueError(f"{page}:{j + 1}: unknown directive {match['name']!r} (known: {', '.join(DIRECTIVES)})")
        found[match["name"]] = match["value"]
        j -= 1
    return found


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
