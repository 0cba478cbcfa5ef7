"""The bad-input corpus: every case is refused with one clear message, and nothing recorded before changes.

The tables are in ``tests/bad_input/`` (study and train files, CLI flags,
Python API, checkpoints). One recorded results dir (a finished study and a
trained PPO checkpoint) is built once per session; each case runs in this
process against its own copy, and every file of the copy must be
byte-identical afterwards. ``benchmarks/bad_input_census.py`` counts the
outcomes of the same tables.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bad_input import checkpoints, cli_flags, python_api, study_files
from bad_input.harness import Case, build_recorded, changed, copy_context, digest, run_case

ALL: list[Case] = [*study_files.CASES, *cli_flags.CASES, *python_api.CASES, *checkpoints.CASES]
REPO = Path(__file__).resolve().parents[1]


def test_the_corpus_is_large_and_its_ids_unique():
    assert len(ALL) >= 120
    assert len({c.id for c in ALL}) == len(ALL)


@pytest.fixture(autouse=True)
def _no_mlflow(monkeypatch):
    monkeypatch.setenv("RLTUNE_TRACKING", "0")


@pytest.fixture(scope="session")
def recorded(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:  # for this build only: later tests may record in MLflow
        patch.setenv("RLTUNE_TRACKING", "0")
        return build_recorded(tmp_path_factory.mktemp("bad_input"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_bad_input_is_refused_clearly_and_changes_nothing(case, recorded, tmp_path):
    ctx = copy_context(recorded, tmp_path)
    before = digest(ctx.results)
    outcome = run_case(case, ctx)
    assert outcome.kind == "clear", f"{outcome.kind}: {outcome.detail}\nexpected: {ctx.fill(case.expect)!r}"
    assert changed(before, ctx.results) == []


END_TO_END = ["duplicate top-level key", "alias bomb", "num_samples bool", "name NUL", "train name escapes",
              "train config Infinity", "tune timeout nan", "checkpoint corrupt json"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case_id", END_TO_END)
def test_in_a_real_process_there_is_no_traceback(case_id, recorded, tmp_path):
    case = next(c for c in ALL if c.id == case_id)
    ctx = copy_context(recorded, tmp_path)
    for name, text in case.files.items():
        (ctx.tmp / name).write_text(ctx.fill(text))
    if case.setup is not None:
        case.setup(ctx)
    argv = [ctx.fill(a) for a in case.argv]
    if any("\x00" in a for a in argv):
        pytest.skip("a NUL byte cannot be passed in a real argv")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")]), "RLTUNE_TRACKING": "0"}
    proc = subprocess.run([sys.executable, "-m", "rltune.orchestrator.cli", *argv], capture_output=True, text=True,
                          timeout=100, env=env, cwd=ctx.tmp)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("error:") == 1
    assert ctx.fill(case.expect) in proc.stderr
