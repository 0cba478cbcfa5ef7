"""Studies of multi-agent trainers: search spaces in per-policy overrides, per-policy metrics, up-front checks."""

from __future__ import annotations

import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.orchestrator._env_check import env_candidates
from rltune.orchestrator._search_space import resolve_config
from rltune.orchestrator._spec import load_study_file, make_plan
from rltune.orchestrator.cli import main
from rltune.trainers import PolicySpec, RandomPolicy
from trainers.multi_agent_envs import TurnGame

TINY = {"train_batch_size": 8, "sgd_minibatch_size": 8, "num_sgd_iter": 1, "rollout_fragment_length": 4,
        "model": {"fcnet_hiddens": [8]}}
LR = "multiagent.policies.pol_x.config.lr"


def by_player(agent_id, episode=None, worker=None, **kwargs):
    return f"pol_{agent_id}"


def to_nobody(agent_id, episode=None, worker=None, **kwargs):
    return "nobody"


def turn_game_config(policies, mapping=by_player, **extra):
    return {"env": TurnGame, "multiagent": {"policies": policies, "policy_mapping_fn": mapping}, **TINY, **extra}


# -- search spaces inside per-policy overrides -----------------------------------------------------
@pytest.mark.parametrize("form", ["PolicySpec", "4-tuple", "dict"])
def test_a_search_space_in_a_policys_config_is_found_in_every_form_under_one_name(form):
    lr = tune.loguniform(1e-4, 1e-2)
    spec = {"PolicySpec": PolicySpec(config={"lr": lr, "gamma": 0.9}),
            "4-tuple": (None, None, None, {"lr": lr, "gamma": 0.9}),
            "dict": {"config": {"lr": {"loguniform": [1e-4, 1e-2]}, "gamma": 0.9}}}[form]
    plan = make_plan({"run": "PPO", "metric": "policy_reward_mean/pol_x",
                      "config": turn_game_config({"pol_x": spec, "pol_o": PolicySpec(policy_class=RandomPolicy)})})
    (param,) = plan.space.params
    assert (param.name, param.kind, param.low, param.high) == (LR, "loguniform", 1e-4, 1e-2)
    config = resolve_config(plan.config, plan.space, {LR: 3e-3})
    assert config["multiagent"]["policies"]["pol_x"] == {"config": {"lr": 3e-3, "gamma": 0.9}}
    assert config["multiagent"]["policies"]["pol_o"] == {"policy_class": RandomPolicy}


def test_each_value_of_a_policys_search_space_is_validated_before_the_study_starts():
    config = turn_game_config({"pol_x": PolicySpec(config={"gamma": tune.choice([0.9, 1.5])}), "pol_o": None})
    with pytest.raises(ConfigError) as info:
        make_plan({"run": "PPO", "config": config})
    (problem,) = info.value.problems
    assert problem.startswith("config.multiagent.policies.pol_x.config: gamma: Input should be less than or equal to 1")
    assert problem.endswith("(when multiagent.policies.pol_x.config.gamma = 1.5)")
    bad = turn_game_config({"pol_x": PolicySpec(config={"lr": tune.loguniform(1e-2, 1e-4)}), "pol_o": None})
    with pytest.raises(ConfigError, match=r"config.multiagent.policies.pol_x.config.lr.loguniform: needs \[low, high\]"):
        make_plan({"run": "PPO", "config": bad})


def test_an_entry_a_function_trainable_would_get_inside_a_policy_spec_is_refused():
    config = {"multiagent": {"policies": {"p": PolicySpec(config={"lr": tune.uniform(0.1, 0.2)})}}}
    with pytest.raises(ConfigError, match=r"config.multiagent.policies.p.config.lr: a search-space entry inside "
                                          r"a PolicySpec is not searched"):
        make_plan({"run": lambda config, reporter: None, "metric": "score", "config": config})
    with pytest.raises(ConfigError, match=r"config.layers.1: a search-space entry inside a list is not searched"):
        make_plan({"run": lambda config, reporter: None, "metric": "score",
                   "config": {"layers": [64, tune.choice([32, 64])]}})


# -- per-policy metric and stop keys ----------------------------------------------------------------
@pytest.mark.parametrize("field, key, message", [
    ("metric", "policy_reward_mean/pol_z",
     "metric: 'policy_reward_mean/pol_z' names policy 'pol_z', which is not one of config.multiagent.policies "
     "['pol_o', 'pol_x']; did you mean 'pol_x'?"),
    ("metric", "info/learner/pol_q/entropy", "metric: 'info/learner/pol_q/entropy' names policy 'pol_q'"),
    ("stop", "evaluation/policy_reward_max/xx", "stop: 'evaluation/policy_reward_max/xx' names policy 'xx'"),
])
def test_a_per_policy_key_must_name_a_policy_of_the_config(field, key, message):
    fields = {"run": "PPO", "config": turn_game_config({"pol_x", "pol_o"})}
    fields.update({"metric": key} if field == "metric" else {"stop": {key: 1}})
    with pytest.raises(ConfigError) as info:
        make_plan(fields)
    assert any(p.startswith(message) for p in info.value.problems), info.value.problems
    fields.update({"metric": "info/learner/pol_x/entropy"} if field == "metric" else {"stop": {"policy_reward_min.pol_o": 1}})
    assert make_plan(fields).spec.name  # the policy's own keys are fine


def test_the_dict_of_every_policys_reward_is_no_metric():
    with pytest.raises(ConfigError) as info:
        make_plan({"run": "PPO", "metric": "policy_reward_mean", "config": turn_game_config({"pol_x", "pol_o"})})
    assert info.value.problems == ["metric: 'policy_reward_mean' holds one number per policy; name one policy's, "
                                   "policy_reward_mean/<policy id> (the policies: ['pol_o', 'pol_x'])"]


def test_a_per_policy_metric_of_a_single_agent_study_says_so(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("run: PPO\nmetric: policy_reward_mean/main\nconfig:\n  env: CartPole-v1\n")
    with pytest.raises(ConfigError) as info:
        load_study_file(path)
    assert info.value.problems == [
        "line 2: metric: 'policy_reward_mean/main' is a per-policy result of multi-agent training, but "
        "config.multiagent.policies is not set (a single-agent trainer reports episode_reward_mean and "
        "info/learner/default_policy/...; a MultiAgentEnv without a multiagent block, 'default_policy' alone)"]


# -- the env, mapped to the policies before any trial ---------------------------------------------------
MAPPING_STUDY = """\
name: mapped
run: PPO
metric: policy_reward_mean/pol_x
stop: {{training_iteration: 1}}
config:
  env: trainers.multi_agent_envs:TurnGame
  train_batch_size: 8
  sgd_minibatch_size: 8
  rollout_fragment_length: 8
  multiagent:
    policies:
      pol_x: {{config: {{lr: {{loguniform: [1.0e-4, 1.0e-2]}}}}}}
      pol_o: {{}}
    policy_mapping_fn: {mapping}
"""


@pytest.mark.parametrize("mapping, message", [
    ("orchestrator.test_multi_agent_study:to_nobody",
     "rltune tune: error: invalid config: multiagent.policy_mapping_fn returned 'nobody' for agent 'o', which is "
     "not a policy id (the policies are ['pol_o', 'pol_x'])"),
    ("orchestrator.test_multi_agent_study:no_such_fn",
     "config.multiagent.policy_mapping_fn: cannot import 'orchestrator.test_multi_agent_study:no_such_fn'"),
])
def test_a_mapping_that_cannot_work_exits_2_before_any_trial(tmp_path, capsys, mapping, message):
    path = tmp_path / "study.yaml"
    path.write_text(MAPPING_STUDY.format(mapping=mapping))
    code = main(["tune", str(path), "--results-dir", str(tmp_path / "r"), "--quiet", "--no-tracking"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not list((tmp_path / "r").glob("mapped/trial_*"))


def test_a_multi_agent_env_of_unlike_agents_without_policies_is_refused_before_any_trial(tmp_path):
    from trainers.multi_agent_envs import UnlikeAgents

    with pytest.raises(ConfigError, match="env 'UnlikeAgents' is a MultiAgentEnv and the config has no 'multiagent' block"):
        tune.run("PPO", config={"env": UnlikeAgents, **TINY}, results_dir=str(tmp_path), name="no-policies", verbose=0)
    assert not list((tmp_path / "no-policies").glob("trial_*"))


def test_a_policy_whose_actions_its_agents_lack_is_refused_before_any_trial(tmp_path):
    import gymnasium as gym

    config = turn_game_config({"pol_x": PolicySpec(action_space=gym.spaces.Discrete(5)), "pol_o": None})
    with pytest.raises(ConfigError, match=r"multiagent.policies.pol_x: agent 'x' of env 'TurnGame' is mapped to it, but "
                                          r"the policy's action space Discrete\(5\) does not fit the agent's Discrete\(2\)"):
        tune.run("PPO", config=config, metric="policy_reward_mean/pol_x", results_dir=str(tmp_path), name="wide", verbose=0)
    assert not list((tmp_path / "wide").glob("trial_*"))


def test_each_mapping_of_the_search_space_is_its_own_env_check():
    config = turn_game_config({"pol_x", "pol_o"}, mapping=tune.grid_search([by_player, to_nobody]))
    plan = make_plan({"run": "PPO", "metric": "policy_reward_mean/pol_x", "config": config})
    candidates = env_candidates(plan)
    assert [c["multiagent"]["policy_mapping_fn"] for c in candidates] == [by_player, to_nobody]
    assert candidates[1]["when"] == f"config.multiagent.policy_mapping_fn = {to_nobody!r}"


# -- a whole study on a per-policy metric ----------------------------------------------------------
def test_a_study_tunes_one_policys_lr_on_its_own_reward_reported_once_its_episodes_end(tmp_path):
    # TurnGame's episodes take 8 env steps and an iteration 4: the first result has no reward of pol_x yet.
    config = turn_game_config({"pol_x": PolicySpec(config={"lr": tune.grid_search([1e-3, 1e-2])}), "pol_o": None},
                              train_batch_size=4, sgd_minibatch_size=4)
    analysis = tune.run("PPO", name="per-policy", config=config, metric="policy_reward_mean/pol_x", mode="max",
                        stop={"training_iteration": 3}, n_jobs=2, results_dir=str(tmp_path), verbose=0)
    assert [t.state for t in analysis.trials] == ["COMPLETE", "COMPLETE"]
    assert sorted(t.config["multiagent"]["policies"]["pol_x"]["config"]["lr"] for t in analysis.trials) == [1e-3, 1e-2]
    for trial in analysis.trials:
        assert trial.last_result["policy_reward_mean"] == {"pol_x": 16.0, "pol_o": -4.0}
        values = analysis.study.trials[trial.number].intermediate_values
        assert values == {2: 16.0, 3: 16.0}  # iteration 1 had no episode of pol_x: nothing reported, no error
    assert analysis.best_result["policy_reward_mean"]["pol_x"] == 16.0
    assert set(analysis.best_config["multiagent"]["policies"]) == {"pol_x", "pol_o"}


def test_a_study_of_a_multi_agent_env_without_policies_tunes_the_shared_default_policy(tmp_path):
    """No multiagent block: every agent acts with default_policy (as in RLlib), a metric a study can name."""
    analysis = tune.run("PPO", name="shared", config={"env": TurnGame, **TINY, "train_batch_size": 4,
                                                      "sgd_minibatch_size": 4, "lr": tune.grid_search([1e-3, 1e-2])},
                        metric="policy_reward_mean/default_policy", mode="max", stop={"training_iteration": 2},
                        results_dir=str(tmp_path), verbose=0)
    assert [t.state for t in analysis.trials] == ["COMPLETE", "COMPLETE"]
    for trial in analysis.trials:  # both players' returns (16 and -4) are the one policy's episodes: their mean
        assert trial.last_result["policy_reward_mean"] == {"default_policy": 6.0}
    assert analysis.best_value == 6.0
