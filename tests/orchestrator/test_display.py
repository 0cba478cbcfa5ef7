"""What a study shows: the rich live view on a terminal, plain lines in a pipe; elapsed time, ETA, every param."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

import pytest
from rich.cells import cell_len
from rich.console import Console

from rltune import tune
from rltune.orchestrator._display import LiveDisplay, PlainDisplay
from rltune.orchestrator._progress import StudyProgress, fmt_duration
from rltune.orchestrator._spec import make_plan
from rltune.orchestrator._stop import StopCriteria

from .trainables import counter

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# six searched params, two of them nested (the live view used to cut the params column after 60 characters)
SIX = {"x": tune.grid_search([1, 2]), "steps": 3, "lr": tune.loguniform(1e-4, 3e-3), "lambda": tune.uniform(0.8, 1.0),
       "gamma": tune.choice([0.98, 0.99, 0.995]), "num_sgd_iter": tune.randint(5, 31),
       "model": {"fcnet_hiddens": tune.choice([[32, 32], [64, 64], [128, 128]])},
       "optimizer": {"clip_param": tune.uniform(0.1, 0.3)}}
SHORT = ["x", "lr", "lambda", "gamma", "num_sgd_iter", "fcnet_hiddens", "clip_param"]
LEGEND = "params: fcnet_hiddens = model.fcnet_hiddens, clip_param = optimizer.clip_param"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _plan(tmp_path, name, **fields):
    return make_plan({"run": counter, "config": {"x": tune.grid_search([1, 2]), "steps": 3}, "metric": "score",
                      "results_dir": str(tmp_path), "name": name, **fields})


def _last_frame(text: str) -> list[str]:
    """The live view's last frame (each frame is drawn over the last one from a carriage return), its plain lines."""
    frame = ESCAPES.sub("", [part for part in text.split("\r") if " trials, " in part][-1])
    lines = frame.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if " running" in line):]  # after the study's opening line
    return lines[: next((i for i, line in enumerate(lines) if line.startswith("study '")), len(lines))]


def test_live_view_on_a_terminal(tmp_path):
    out = FakeTerminal()
    analysis = tune.run_plan(_plan(tmp_path, "live"), stream=out)
    text = ESCAPES.sub("", out.getvalue())
    assert "2/2 trials" in text and "best score = 6 (trial 1)" in text
    assert re.search(r"trial\s+state\s+iter\s+score\s+x\n", text)
    assert re.search(r"1\s+COMPLETE\s+3\s+6\s+2", text)
    assert re.search(r"elapsed \d+s, all 2 trials done", text)
    assert "best trial 1: score = 6" in text
    assert analysis.best_value == 6


def test_plain_lines_in_a_pipe_and_with_quiet(tmp_path):
    out = FakeTerminal()
    tune.run_plan(_plan(tmp_path, "plain"), stream=out, quiet=True)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("study 'plain': counter, 2 trials, search tpe, pruner none, max score")
    assert "trial 0 started: x=1 (seed 0)" in lines
    ended = [line for line in lines if line.startswith("trial 1 COMPLETE")]
    assert len(ended) == 1 and re.fullmatch(
        r"trial 1 COMPLETE after 3 iterations score=6 \(returned\) \[\d/2 trials, elapsed \d+s, .*\]", ended[0])
    assert f"best config: {tmp_path / 'plain' / 'best_config.yaml'}" in lines


@pytest.mark.parametrize("columns", [120, 80])
def test_a_real_study_with_six_params_fits_the_terminal(tmp_path, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))  # what rich reads for the terminal's width
    out = FakeTerminal()
    tune.run_plan(_plan(tmp_path, "six", config=SIX, stop={"training_iteration": 3}, seed=0), stream=out)
    frame = _last_frame(out.getvalue())
    assert all(cell_len(line) <= columns for line in frame), "\n".join(frame)
    assert "six" in frame[0] and "2/2 trials, 0 running" in frame[0]  # the status line is one line
    assert re.match(r"elapsed \d+s, all 2 trials done +best score = ", frame[1])
    body = "\n".join(frame)
    for name in SHORT:
        assert name in body, name
    assert LEGEND in body.replace("\n", " ")
    if columns == 120:  # one column per param, the header on one line
        assert re.search(r"trial +state +iter +score +" + " +".join(SHORT), body), body


# -- the view in the middle of a study, at a given width (no processes) ------------------------------
def _runner(tmp_path, metric="evaluation/episode_reward_mean", **fields):
    plan = make_plan({"run": counter, "config": SIX, "metric": metric, "results_dir": str(tmp_path), "name": "ppo-six",
                      "stop": {"training_iteration": 10}, "n_trials": 8, **fields})
    return SimpleNamespace(plan=plan, spec=plan.spec, active=[], study_dir=tmp_path, _resumable=[], shared=False,
                           study=None)


def _trial(number, iteration, reward, stop=None):
    values = {"x": 1, "lr": 0.0006042851578845063, "lambda": 0.9136089122187865, "gamma": 0.98, "num_sgd_iter": 25,
              "model.fcnet_hiddens": [128, 128], "optimizer.clip_param": 0.10404367948806514}
    return SimpleNamespace(number=number, values=values, iteration=iteration, seed=number, failures=0, checkpoint=None,
                           last_result={"training_iteration": iteration, "evaluation": {"episode_reward_mean": reward}},
                           stop=StopCriteria(stop or {"training_iteration": 10}), reason=None, outcome=None,
                           trial_dir=None)


def _mid_study(display, runner):
    """Trial 0 complete after its 10 iterations, trials 1 and 2 half-way, 60 s in: 2 of 8 trials' work in 60 s."""
    display.elapsed = lambda: 60.0
    first = _trial(0, 10, 500.0)
    display.trial_started(first)
    display.trial_result(first)
    display.trial_ended(first, "COMPLETE", 500.0)
    for number in (1, 2):
        a = _trial(number, 5, 187.25)
        runner.active.append(a)
        display.trial_started(a)
        display.trial_result(a)


def _render(display, runner, width):
    out = io.StringIO()
    Console(file=out, width=width).print(display._render(runner))
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [120, 80])
def test_the_live_view_mid_study_shows_elapsed_eta_and_every_param(tmp_path, width):
    runner = _runner(tmp_path)
    display = LiveDisplay(runner, io.StringIO(), width=width)
    _mid_study(display, runner)
    lines = _render(display, runner, width)
    assert all(cell_len(line) <= width for line in lines), "\n".join(lines)
    assert re.fullmatch(r"ppo-six [━╸╺ ]+ 1/8 trials, 2 running *", lines[0]), lines[0]
    # remaining: 5 trials not started + 2 x 0.5; done here: 1 + 2 x 0.5 in 60 s -> 60 x 6 / 2 = 180 s
    assert lines[1].startswith("elapsed 1m00s, ETA 3m00s")
    assert "best evaluation/episode_reward_mean = 500 (trial 0)" in " ".join(lines[1:3])
    text = "\n".join(lines)
    for shown in ("lr=0.0006043", "lambda=0.9136", "fcnet_hiddens=[128,128]", "clip_param=0.104", "num_sgd_iter=25",
                  "gamma=0.98") if width == 80 else ("0.0006043", "0.9136", "[128,128]", "0.104", "25", "0.98"):
        assert text.count(shown) == 3, (shown, text)  # all three trials, every value, rounded to 4 digits
    assert LEGEND in text.replace("\n", " ")
    if width == 120:
        header = next(line for line in lines if line.startswith("trial"))
        assert re.fullmatch(r"trial +state +iter +evaluation/episode_reward_mean +" + " +".join(SHORT) + " *", header)
    else:  # one wrapping params column, and a long metric name told in a legend
        header = next(line for line in lines if line.startswith("trial"))
        assert re.fullmatch(r"trial +state +iter +value +params *", header)
        assert "value = evaluation/episode_reward_mean" in text


def test_a_status_note_is_one_more_line_under_the_timing(tmp_path):
    runner = _runner(tmp_path)
    display = LiveDisplay(runner, io.StringIO(), width=120)
    _mid_study(display, runner)
    display.note("tracking", "MLflow: 12 s behind (40 results queued)")
    lines = _render(display, runner, 120)
    assert lines[2] == "MLflow: 12 s behind (40 results queued)"
    display.note("tracking", None)
    assert "MLflow" not in "\n".join(_render(display, runner, 120))


def test_plain_lines_carry_the_progress(tmp_path):
    runner = _runner(tmp_path)
    out = io.StringIO()
    display = PlainDisplay(runner, out)
    _mid_study(display, runner)
    assert "trial 0 COMPLETE after 10 iterations evaluation/episode_reward_mean=500 [1/8 trials, elapsed 1m00s, " \
           "ETA 7m00s]" in out.getvalue()  # one trial's work in 60 s, 7 to go


def test_eta_rules():
    progress = StudyProgress(4)
    assert progress.text(5.0, 0) == "elapsed 5s, ETA unknown"  # nothing done yet: no estimate
    criteria = {"timesteps_total": 1000, "episode_reward_mean": 475}  # the counter bounds the trial
    progress.update(0, criteria, {"timesteps_total": 250, "episode_reward_mean": 20}, 1)
    # no trial finished: each is expected to run to its bound, an upper bound
    assert progress.eta(10.0) == (pytest.approx(10.0 * (3 + 0.75) / 0.25), True)
    assert progress.text(10.0, 1) == "elapsed 10s, ETA ≤ 2m30s"
    # solved at 40% of its bound: the 3 trials to come are expected to take as long
    progress.update(0, criteria, {"timesteps_total": 400, "episode_reward_mean": 480}, 2, finished=True)
    assert progress.done == 1 and progress.eta(16.0) == (pytest.approx(16.0 * 3 * 0.4 / 0.4), False)
    progress.update(1, criteria, {"timesteps_total": 100, "episode_reward_mean": 20}, 1)
    assert progress.eta(20.0) == (pytest.approx(20.0 * (2 * 0.4 + 0.3) / 0.5), False)
    # a trial resumed from its checkpoint at iteration 4 of 10: those 4 iterations are not work done here
    resumed = StudyProgress(2, finished_before=1)
    resumed.started(1, from_iteration=4)
    resumed.update(1, {"training_iteration": 10}, {"training_iteration": 5}, 5)
    assert resumed.eta(10.0) == (pytest.approx(10.0 * 0.5 / 0.1), True)
    # without a counter bound, trials count whole when they end
    unbounded = StudyProgress(3)
    unbounded.update(0, {"episode_reward_mean": 475}, {"episode_reward_mean": 10}, 1)
    assert unbounded.eta(10.0) is None
    unbounded.update(0, {"episode_reward_mean": 475}, {"episode_reward_mean": 480}, 9, finished=True)
    assert unbounded.eta(10.0) == (pytest.approx(20.0), False)
    # the study's timeout caps it; past it, the running trials finish
    timed = StudyProgress(100, timeout_s=60.0)
    timed.update(0, {}, {}, 3, finished=True)
    assert timed.text(10.0, 1) == "elapsed 10s, ETA 50s (timeout_s)"
    assert timed.text(61.0, 2) == "elapsed 1m01s, timeout_s reached: 2 running trial(s) finish"
    shared = StudyProgress(4, shared=True)
    assert shared.text(5.0, 1) == "elapsed 5s, ETA unknown (shared study: other workers run trials too)"
    assert [fmt_duration(s) for s in (0.4, 59, 65, 3600 + 125, 2 * 86400 + 3 * 3600)] == ["0s", "59s", "1m05s", "1h02m",
                                                                                            "2d03h"]


def test_a_tie_for_best_names_the_first_trial_as_the_study_summary_does(tmp_path):
    runner = _runner(tmp_path)
    display = LiveDisplay(runner, io.StringIO(), width=120)
    display.elapsed = lambda: 30.0
    for number in (1, 0):  # trial 1 ends first; trial 0 reaches the same value later
        a = _trial(number, 10, 500.0)
        display.trial_started(a)
        display.trial_result(a)
        display.trial_ended(a, "COMPLETE", 500.0)
    assert "best evaluation/episode_reward_mean = 500 (trial 0)" in _render(display, runner, 120)[1]
