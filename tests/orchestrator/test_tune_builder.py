"""tune.run takes what RLlib users pass: a config builder (or its dict, search space kept), local_dir, resources_per_trial."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.orchestrator._spec import make_plan

from .trainables import counter


def _builder():
    from rltune.trainers import PPOConfig

    return (PPOConfig().environment("CartPole-v1")
            .training(train_batch_size=64, minibatch_size=64, num_epochs=1, model={"fcnet_hiddens": [8]},
                      lr=tune.grid_search([1e-3, 1e-4]))
            .rollouts(rollout_fragment_length=32))


def test_tune_run_with_a_builders_dict_runs_each_grid_point(tmp_path):
    analysis = tune.run("PPO", config=_builder().to_dict(), stop={"training_iteration": 1}, n_jobs=2,
                        local_dir=str(tmp_path), name="builder", verbose=0)
    assert sorted(t.config["lr"] for t in analysis.trials) == [1e-4, 1e-3]
    assert {t.state for t in analysis.trials} == {"COMPLETE"}
    for trial in analysis.trials:
        assert trial.config["num_sgd_iter"] == 1 and trial.config["model"]["fcnet_hiddens"] == [8]
        assert trial.last_result["timesteps_total"] == 64
        assert Path(trial.trial_dir).is_relative_to(tmp_path / "builder")  # local_dir is results_dir


def test_tune_run_takes_the_builder_itself_and_its_algorithm():
    from rltune.trainers import PPOConfig

    no_env = PPOConfig().training(lr=tune.grid_search([1e-3, 1e-4]))
    with pytest.raises(ConfigError, match=r"config.env: PPO needs an env"):  # run defaulted to the builder's PPO
        tune.run(config=no_env, verbose=0)
    with pytest.raises(ConfigError, match="config is a PPOConfig, which configures PPO, but run is DQN; use DQNConfig()"):
        tune.run("DQN", config=_builder(), verbose=0)
    with pytest.raises(ConfigError, match=r"local_dir: the same field as results_dir \(local_dir is Tune's name of results_dir\); give one"):
        tune.run("PPO", config=_builder(), local_dir="a", results_dir="b", verbose=0)


def _plan(resources, **config):
    fields = {"run": "PPO", "config": {"env": "CartPole-v1", **config}}
    if resources is not None:
        fields["resources_per_trial"] = resources
    return make_plan(fields)


def test_resources_per_trial_sets_the_cpus_a_trial_holds_a_trainer_at_least_its_processes(caplog):
    assert _plan(None, num_workers=2).cpus_per_trial({"num_workers": 2}) == 3
    assert _plan({"cpu": 1}, num_workers=2).cpus_per_trial({"num_workers": 2}) == 3
    assert _plan({"cpu": 5}, num_workers=2).cpus_per_trial({"num_workers": 2}) == 5
    assert _plan({"cpu": 1, "extra_cpu": 3}).cpus_per_trial({}) == 4  # old Tune's extra_cpu
    assert _plan({"cpu": 0.5, "gpu": 0}).cpus_per_trial({}) == 1
    assert "reserves nothing" not in caplog.text
    _plan({"cpu": 1, "gpu": 1})
    assert "resources_per_trial: gpu=1 reserves nothing in rltune" in caplog.text
    with pytest.raises(ConfigError, match=r"resources_per_trial.cpus: unknown field; did you mean 'cpu'\?"):
        _plan({"cpus": 2})
    with pytest.raises(ConfigError, match="resources_per_trial.cpu: Input should be greater than or equal to 0"):
        _plan({"cpu": -1})


def test_resources_per_trial_of_every_cpu_runs_trials_one_at_a_time(tmp_path):
    analysis = tune.run(counter, config={"x": tune.grid_search([1, 2]), "steps": 2, "sleep": 0.3}, metric="score",
                        n_jobs=2, resources_per_trial={"cpu": os.cpu_count() or 1}, results_dir=str(tmp_path),
                        name="one-at-a-time", verbose=0)
    spans = []
    for trial in analysis.trials:
        lines = [json.loads(line) for line in (Path(trial.trial_dir) / "result.json").read_text().splitlines()]
        spans.append((lines[0]["timestamp"] - lines[0]["time_this_iter_s"], lines[-1]["timestamp"]))
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, f"trials overlapped: {spans}"


def test_resources_per_trial_may_be_a_function_of_the_trials_config_or_a_placement_group_factory():
    from rltune.trainers import PPO

    by_function = _plan(lambda config: {"cpu": 2 + config["num_workers"]}, num_workers=tune.grid_search([0, 1]))
    assert by_function.cpus_per_trial({"num_workers": 0}) == 2 and by_function.cpus_per_trial({"num_workers": 1}) == 3
    by_values = _plan({"cpu": lambda config: config["num_workers"] * 4}, num_workers=1)
    assert by_values.cpus_per_trial({"num_workers": 1}) == 4
    factory = _plan(PPO.default_resource_request({"num_workers": 3}))  # old Tune scripts: the trainer's own request
    assert factory.cpus_per_trial({}) == 4
    assert _plan(PPO.default_resource_request).cpus_per_trial({"env": "CartPole-v1", "num_workers": 2}) == 3
    assert by_function.cpus_per_trial(by_function.config) >= 1  # the runner's estimate, search entries unresolved
    with pytest.raises(ConfigError, match=r"resources_per_trial: the function raised KeyError: 'num_gpus'"):
        _plan(lambda config: {"cpu": config["num_gpus"]}).cpus_per_trial({})
    with pytest.raises(ConfigError, match=r"resources_per_trial \(as the function returned them\).*cpus: "):
        _plan(lambda config: {"cpus": 2}).cpus_per_trial({})
