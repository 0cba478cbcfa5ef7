"""MkDocs hooks (mkdocs.yml ``hooks:``): pages generated from the code, so they cannot drift from it.

- ``<!-- rltune-help: COMMAND -->`` in a page becomes the ``rltune COMMAND --help``
  text of rltune's own argparse parser (``<!-- rltune-help: -->``: ``rltune --help``),
  at a fixed width of 100 columns: docs/cli.md is written by the parser itself.
- A link from a page to ``../benchmarks/README.md`` (right on GitHub, outside the site)
  points at the benchmarks page, which includes that file.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from typing import Any

HELP_MARKER = re.compile(r"^<!-- rltune-help:\s*([a-z-]*)\s*-->$", re.MULTILINE)
HELP_WIDTH = "100"
BENCHMARKS_LINK = re.compile(r"\]\(\.\./benchmarks/README\.md(#[^)]*)?\)")


def rltune_help(command: str) -> str:
    """The text ``rltune COMMAND --help`` prints (``rltune --help`` for an empty command)."""
    from rltune.orchestrator.cli import build_parser

    argv = [command, "--help"] if command else ["--help"]
    out = io.StringIO()
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH  # argparse wraps to the terminal's width: fix it
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            build_parser().parse_args(argv)
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    text = out.getvalue().rstrip()
    if not text:
        raise ValueError(f"rltune {command} --help printed nothing: is {command!r} a command?")
    return text


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace each help marker with a text block of that command's help; point benchmark links at the page."""

    def block(match: re.Match) -> str:
        return "```text\n" + rltune_help(match.group(1)) + "\n```"

    markdown = BENCHMARKS_LINK.sub(lambda m: f"](benchmarks.md{m.group(1) or ''})", markdown)
    return HELP_MARKER.sub(block, markdown)
