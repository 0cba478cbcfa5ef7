"""``rltune train``'s trial runs a study trial's loop in-process: same results, checkpoints and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from rltune import tune
from rltune.orchestrator._stop import StopCriteria
from rltune.orchestrator._trial import make_trial_dir, run_local
from rltune.orchestrator.cli import main
from rltune.trainers import PPO

TINY = {
    "train_batch_size": 200,
    "rollout_fragment_length": 50,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


def read_results(trial_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]


def checkpoints(trial_dir: Path) -> list[str]:
    return sorted(p.name for p in trial_dir.glob("checkpoint_*"))


def test_rltune_train_and_a_study_trial_write_the_same_results_and_checkpoints(tmp_path, capsys):
    """checkpoint_freq 2 and checkpoint_at_end on a 3-iteration stop, both ways: one loop, one trial directory."""
    code = main(["train", "--run", "PPO", "--env", "CartPole-v1", "--config", json.dumps(TINY), "--name", "t",
                 "--results-dir", str(tmp_path / "train"), "--stop", '{"training_iteration": 3}',
                 "--checkpoint-freq", "2", "--checkpoint-at-end"])
    assert code == 0, capsys.readouterr().err
    analysis = tune.run("PPO", config={**TINY, "env": "CartPole-v1"}, stop={"training_iteration": 3},
                        checkpoint_freq=2, checkpoint_at_end=True, results_dir=str(tmp_path / "study"), name="s",
                        verbose=0)
    (trial,) = analysis.trials
    trained, studied = tmp_path / "train" / "t", Path(trial.trial_dir)
    assert checkpoints(trained) == checkpoints(studied) == ["checkpoint_000002", "checkpoint_000003"]
    ours, theirs = read_results(trained), read_results(studied)
    assert [r["training_iteration"] for r in ours] == [r["training_iteration"] for r in theirs] == [1, 2, 3]
    for mine, its in zip(ours, theirs):
        assert set(mine) == set(its) - {"trial_number"}  # a trial of no study has no number; all else alike
        assert "timestamp" in mine  # the Reporter's, which the old train loop did not write
        assert mine["timesteps_total"] == its["timesteps_total"]
        assert mine["episode_reward_mean"] == pytest.approx(its["episode_reward_mean"])  # same seed, same loop


def _trial(tmp_path: Path) -> tuple[PPO, Path]:
    return PPO(config=TINY, env="CartPole-v1", results_dir=str(tmp_path)), make_trial_dir(tmp_path, "t")


def test_ctrl_c_ends_the_current_iteration_checkpoints_it_and_stops(tmp_path):
    trainer, trial_dir = _trial(tmp_path)
    told = []

    def on_result(result):
        if result["training_iteration"] == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while iteration 2 is reported

    before = signal.getsignal(signal.SIGINT)
    outcome = run_local(trainer, trial_dir, stop=StopCriteria(None), on_result=on_result,
                        on_interrupt=lambda: told.append(True))
    assert outcome.interrupted and outcome.stop_reason is None and told == [True]
    assert outcome.last_result["training_iteration"] == 2
    assert outcome.checkpoint == str(trial_dir / "checkpoint_000002")  # that iteration, checkpointed
    assert [r["training_iteration"] for r in read_results(trial_dir)] == [1, 2]
    assert signal.getsignal(signal.SIGINT) is before
    assert trainer._stopped


def test_a_second_ctrl_c_stops_at_once_keeping_the_checkpoints_saved_so_far(tmp_path):
    trainer, trial_dir = _trial(tmp_path)

    def on_result(result):
        if result["training_iteration"] == 2:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)  # raises KeyboardInterrupt here, before any decision

    outcome = run_local(trainer, trial_dir, stop=StopCriteria(None), checkpoint_freq=1, on_result=on_result)
    assert outcome.interrupted
    assert outcome.checkpoint == str(trial_dir / "checkpoint_000001")
    assert checkpoints(trial_dir) == ["checkpoint_000001"]
    assert trainer._stopped
