"""What a study shows: the rich live view on a terminal, plain lines in a pipe."""

from __future__ import annotations

import io
import re

from rltune import tune
from rltune.orchestrator._spec import make_plan

from .trainables import counter


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _plan(tmp_path, name):
    return make_plan({"run": counter, "config": {"x": tune.grid_search([1, 2]), "steps": 3}, "metric": "score",
                      "results_dir": str(tmp_path), "name": name})


def test_live_view_on_a_terminal(tmp_path):
    out = FakeTerminal()
    analysis = tune.run_plan(_plan(tmp_path, "live"), stream=out)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())  # without the terminal's escape codes
    assert "2/2 trials" in text and "best score: 6" in text
    assert re.search(r"trial\s+state\s+iter\s+score\s+params", text)
    assert re.search(r"1\s+COMPLETE\s+3\s+6\s+x=2", text)
    assert "best trial 1: score = 6" in text
    assert analysis.best_value == 6


def test_plain_lines_in_a_pipe_and_with_quiet(tmp_path):
    out = FakeTerminal()
    tune.run_plan(_plan(tmp_path, "plain"), stream=out, quiet=True)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("study 'plain': counter, 2 trials, search tpe, pruner none, max score")
    assert "trial 0 started: x=1 (seed 0)" in lines
    assert "trial 1 COMPLETE after 3 iterations score=6 (returned)" in lines
    assert f"best config: {tmp_path / 'plain' / 'best_config.yaml'}" in lines
