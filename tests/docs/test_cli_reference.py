"""docs/cli.md, the command-line reference, shows every command and every flag of rltune's parser.

The page is written by the parser when the site is built (scripts/mkdocs_hooks.py
turns each ``<!-- rltune-help: COMMAND -->`` into ``rltune COMMAND --help``), so
a flag added to a command shows up by itself; what can still drift is the list
of commands on the page, and the hook's rendering.
"""

from __future__ import annotations

import argparse
import importlib.util
import re

from rltune.orchestrator.cli import build_parser

from .snippets import REPO


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", REPO / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand of ``rltune`` and its parser."""
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("rltune's parser has no subcommands")


def _shown_options(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string and positional a command's --help shows (not those hidden with SUPPRESS)."""
    shown = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            shown += action.option_strings
        else:
            shown.append(action.metavar or action.dest)
    return shown


def test_the_cli_page_has_a_section_for_every_command():
    markers = re.findall(r"^<!-- rltune-help:\s*([a-z-]*)\s*-->$", (REPO / "docs" / "cli.md").read_text(), re.M)
    assert sorted(markers) == sorted(["", *_commands()])


def test_the_rendered_reference_shows_every_flag_of_every_command():
    hooks = _hooks()
    page = hooks.on_page_markdown((REPO / "docs" / "cli.md").read_text(), page=None)
    assert "<!-- rltune-help" not in page
    missing = []
    for command, parser in _commands().items():
        section = page.split(f"## rltune {command}\n", 1)[1].split("\n## ", 1)[0]
        missing += [f"rltune {command} {option}" for option in _shown_options(parser)
                    if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", section)]
    assert not missing, f"not in the rendered docs/cli.md: {missing}"
    assert "--retry-failed" in page and "--trust" in page


def test_the_reference_is_at_a_fixed_width_whatever_the_terminal(monkeypatch):
    hooks = _hooks()
    monkeypatch.setenv("COLUMNS", "40")
    narrow = hooks.rltune_help("tune")
    monkeypatch.setenv("COLUMNS", "250")
    assert hooks.rltune_help("tune") == narrow
    assert max(len(line) for line in narrow.splitlines()) <= int(hooks.HELP_WIDTH)
