"""A trial's end as decided: a trial whose process dies after its stop was decided is not trained again.

Found by the study fault test (tests/orchestrator/test_faults.py): a trial
process killed while it saved its last checkpoint was restarted and trained
one iteration past its stop criterion (or, with ``max_failures: 0``, FAILed
although it had met it).
"""

from __future__ import annotations

import json
import os

import pytest

from rltune import tune
from rltune.orchestrator._reporter import TrialStopped


def dies_when_stopped(config, reporter):
    """Reports step 1, 2, ...; told to stop, it saves its checkpoint and dies without a word (its first attempt)."""
    start = 0
    if reporter.restored_checkpoint:
        with open(os.path.join(reporter.restored_checkpoint, "state.json")) as f:
            start = json.load(f)["step"]
    with open(reporter.trial_dir / "starts.txt", "a") as f:
        f.write(f"{start}\n")
    for step in range(start + 1, 100):
        stopped = None
        try:
            reporter(score=float(step) if config["end"] != "pruned" or step < 2 else -1.0)
        except TrialStopped as stop:
            stopped = stop
        if reporter.should_checkpoint:
            with reporter.checkpoint_dir() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"step": step}, f)
        if stopped is not None:
            if not (reporter.trial_dir / "died").exists():
                (reporter.trial_dir / "died").write_text("")
                os._exit(9)  # a kill -9 as it exits
            raise stopped


@pytest.mark.parametrize("max_failures", [0, 2])
def test_a_trial_whose_process_dies_after_meeting_its_stop_is_complete_at_it(tmp_path, max_failures):
    analysis = tune.run(dies_when_stopped, config={"end": "complete"}, stop={"training_iteration": 3},
                        metric="score", mode="max", checkpoint_freq=1, max_failures=max_failures,
                        results_dir=str(tmp_path), name="dies", verbose=0)
    (trial,) = analysis.study.get_trials()
    assert trial.state.name == "COMPLETE" and trial.value == 3.0
    assert trial.user_attrs["last_result"]["training_iteration"] == 3
    assert sorted(trial.intermediate_values) == [1, 2, 3]
    trial_dir = tmp_path / "dies" / "trial_00000"
    assert (trial_dir / "starts.txt").read_text() == "0\n"  # never started again
    assert [json.loads(line)["training_iteration"] for line in (trial_dir / "result.json").read_text().splitlines()] \
        == [1, 2, 3]
    assert trial.user_attrs["checkpoint"].endswith("checkpoint_000003")
    assert "killed by signal" in (trial_dir / "error.txt").read_text() or "exited with code 9" in \
        (trial_dir / "error.txt").read_text()


def test_a_pruned_trial_whose_process_dies_as_it_stops_is_pruned(tmp_path):
    analysis = tune.run(dies_when_stopped, config={"end": tune.grid_search(["complete", "pruned"])},
                        stop={"training_iteration": 3}, metric="score", mode="max", checkpoint_freq=1,
                        scheduler={"type": "median", "n_startup_trials": 1, "n_warmup_steps": 1},
                        results_dir=str(tmp_path), name="pruned", verbose=0, n_jobs=1)
    states = {t.params["end"]: t.state.name for t in analysis.study.get_trials()}
    assert states == {"complete": "COMPLETE", "pruned": "PRUNED"}
    assert (tmp_path / "pruned" / "trial_00001" / "starts.txt").read_text() == "0\n"
