"""Every Python and shell block of README.md and docs/ runs as written, or says why it is not run.

Each page's blocks run in order in a directory of their own (holding links to
the repository's studies/, examples/ and benchmarks/) with a fresh ``HOME``, so
``~/rltune_results`` starts empty and a block sees the files of the blocks
before it. A block fails when it exits with another status than expected
(0, or its ``<!-- exit status: N -->``) or prints a warning on stderr: the
docs' own commands must not trip rltune's warnings (a train batch that is not
a whole number of sampling rounds, a renamed key, ...).

Budgets: shell blocks get a ``rltune`` before the .venv's on PATH that adds
``--stop '{"training_iteration": 1}'`` to ``rltune train`` (flags override
a file's fields) and ``--n-trials 1`` plus the same stop to ``rltune tune``,
so a study that takes a minute for a user takes seconds here; Python
blocks are written cheap. MLflow tracking is off unless a block says
``<!-- tracking: on -->``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .snippets import REPO, RUN_LANGUAGES, Block, pages, read_blocks

BLOCK_TIMEOUT_S = 600
LINKED = ("studies", "examples", "benchmarks")
WARNING = re.compile(r"\bWARN(ING)?\b|[A-Za-z]*Warning\b")  # logging's and gymnasium's levels, Python's warnings
TINY_STOP = '{"training_iteration": 1}'

SHIM = f"""#!{sys.executable}
# rltune on a tiny budget (tests/docs/test_snippets.py): the docs' commands, with flags that override their budget.
import sys

from rltune.orchestrator.cli import main

argv = sys.argv[1:]
if argv[:1] == ["train"] and "--show-config" not in argv:
    argv += ["--stop", {TINY_STOP!r}]
elif argv[:1] == ["tune"]:
    argv += ["--n-trials", "1", "--stop", {TINY_STOP!r}]
sys.exit(main(argv))
"""


def _pages_with_code() -> list[Path]:
    return [page for page in pages() if any(block.runner for block in read_blocks(page))]


def _rel(page: Path) -> str:
    return str(page.relative_to(REPO))


def test_every_code_block_has_a_language_and_every_skipped_one_a_reason():
    problems = []
    for page in pages():
        for block in read_blocks(page):
            if not block.language:
                problems.append(f"{block.where}: a code block without a language (```text for output)")
            if "not run" in block.directives and not block.directives["not run"].strip():
                problems.append(f"{block.where}: '<!-- not run: -->' needs a reason")
            if block.language in RUN_LANGUAGES and block.runner is None and not block.directives:
                problems.append(f"{block.where}: neither run nor marked")
    assert not problems, "\n".join(problems)


def test_ci_runs_the_readme_test_command_word_for_word():
    readme = [b for b in read_blocks(REPO / "README.md") if ".venv/bin/pytest" in b.code]
    assert len(readme) == 1, "README.md: one block with the test command"
    command = readme[0].code.strip()
    ci_lines = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci_lines[-1] == command
    assert "mkdocs build --strict" in command
    development = [b for b in read_blocks(REPO / "docs" / "development.md") if ".venv/bin/pytest" in b.code]
    assert [b.code.strip() for b in development] == [command]


@pytest.fixture
def page_env(tmp_path):
    """A working directory with the repository's studies/, examples/, benchmarks/; a fresh HOME; rltune on a budget."""
    work, home, shim = tmp_path / "work", tmp_path / "home", tmp_path / "bin"
    for path in (work, home, shim):
        path.mkdir()
    for name in LINKED:
        (work / name).symlink_to(REPO / name)
    (shim / "rltune").write_text(SHIM)
    (shim / "rltune").chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "RLTUNE_RESULTS_DIR", "MLFLOW_TRACKING_URI", "RLTUNE_TRUST",
                        "RLTUNE_CHECKPOINT_KEY", "VIRTUAL_ENV")}
    env.update(HOME=str(home), RLTUNE_TRACKING="0", COLUMNS="120",
               PATH=os.pathsep.join([str(shim), str(Path(sys.executable).parent), env.get("PATH", "")]))
    return work, env


def _run(block: Block, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(env)
    if block.directives.get("tracking") == "on":
        env.pop("RLTUNE_TRACKING")
    if block.runner == "python":
        script = work / f"snippet_{block.source.stem}_{block.line}.py"
        script.write_text(block.code)
        argv = [sys.executable, script.name]
    else:
        argv = ["bash", "-c", "set -eo pipefail\n" + block.code]
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("page", _pages_with_code(), ids=_rel)
def test_the_code_blocks_of_a_page_run_without_warnings(page, page_env):
    work, env = page_env
    for block in read_blocks(page):
        if "file" in block.directives:
            (work / block.directives["file"]).write_text(block.code)
            continue
        if block.runner is None:
            continue
        start = time.perf_counter()
        done = _run(block, work, env)
        print(f"{block.where}: {time.perf_counter() - start:.1f} s")  # per-block times, shown with pytest -s
        expected = int(block.directives.get("exit status", "0"))
        context = f"{block.where} ({block.runner}):\n{block.code}\n--- stdout:\n{done.stdout[-3000:]}\n--- stderr:\n{done.stderr[-3000:]}"
        assert done.returncode == expected, f"exit status {done.returncode}, expected {expected}: {context}"
        warnings = [line for line in done.stderr.splitlines() if WARNING.search(line)]
        assert not warnings, f"warnings on stderr: {warnings[:5]}: {context}"
