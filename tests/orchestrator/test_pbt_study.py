"""A PBT study end to end: trials exploit each other in their processes, and the explored values train.

The check of ray#62173 at the loop: in every result of every trial, the
learner's effective lr and clip_param are the config in force
(``result["config"]``), before and after each exploit.
"""

import json
from pathlib import Path

import pytest

from rltune import tune
from rltune.orchestrator._pbt import IN_FORCE, LINEAGE

CONFIG = {"env": "CartPole-v1", "num_workers": 0, "train_batch_size": 64, "rollout_fragment_length": 64,
          "sgd_minibatch_size": 32, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [16]},
          "callbacks": "orchestrator.pbt_callbacks:FailingMember"}


def _results(trial_dir):
    return [json.loads(line) for line in (Path(trial_dir) / "result.json").read_text().splitlines()]


def test_a_pbt_study_exploits_applies_the_explored_values_and_replaces_an_erroring_member(tmp_path):
    pbt = tune.PopulationBasedTraining(perturbation_interval=2, quantile_fraction=0.5, resample_probability=0.0,
                                       hyperparam_mutations={"lr": tune.loguniform(1e-4, 1e-2),
                                                             "clip_param": [0.1, 0.2, 0.3]})
    analysis = tune.run("PPO", config=CONFIG, stop={"training_iteration": 8}, num_samples=4, n_jobs=4,
                        max_concurrent=4, metric="episode_reward_mean", mode="max", scheduler=pbt, seed=0,
                        results_dir=str(tmp_path), name="pbt", tracking=False, verbose=0, raise_on_failed_trial=False)
    trials = analysis.study.trials
    states = sorted(t.state.name for t in trials)
    assert states == ["COMPLETE", "COMPLETE", "COMPLETE", "COMPLETE", "FAIL"]  # the errored member did not end the study
    assert trials[1].state.name == "FAIL" and trials[4].state.name == "COMPLETE"  # a new member took its place
    exploited = [t for t in trials if t.user_attrs.get(LINEAGE)]
    assert exploited, "no member exploited another"
    for t in trials:
        results = _results(t.user_attrs["trial_dir"])
        for r in results:
            stats = r["info"]["learner"]["default_policy"]
            assert stats["cur_lr"] == pytest.approx(r["config"]["lr"])
            assert stats["cur_clip_param"] == pytest.approx(r["config"]["clip_param"])
        for step in t.user_attrs.get(LINEAGE, []):
            source = trials[step["source"]]  # exploited from a checkpoint of its own, committed by then
            assert Path(step["checkpoint"]).parent == Path(source.user_attrs["trial_dir"])
            after = [r for r in results if r["config"]["lr"] == pytest.approx(step["changed"]["lr"])]
            assert after or t.state.name == "FAIL", f"trial {t.number} never trained with its explored lr"
        if t.user_attrs.get(IN_FORCE) and t.state.name == "COMPLETE":
            assert results[-1]["config"]["lr"] == pytest.approx(t.user_attrs[IN_FORCE]["values"]["lr"])
