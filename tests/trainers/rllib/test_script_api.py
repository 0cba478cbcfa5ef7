"""RLlib 2.x's script API (issue 26): get_trainable_cls, get_default_config() as a builder read like a dict,
default_resource_request, Algorithm/Policy.from_checkpoint, policy.config as a dict, the old trainer names."""

from __future__ import annotations

import copy
import logging
import os

import pytest

from rltune import tune
from rltune.env import register_env
from rltune.errors import CheckpointError, ConfigError
from rltune.trainers import DQN, PPO, DQNConfig, Policy, PPOConfig, get_trainable_cls

TINY = {"train_batch_size": 64, "sgd_minibatch_size": 64, "num_sgd_iter": 1, "rollout_fragment_length": 64,
        "model": {"fcnet_hiddens": [8]}, "seed": 0}


def test_get_trainable_cls_resolves_rllib_names():
    assert get_trainable_cls("PPO") is PPO and get_trainable_cls("dqn") is DQN
    with pytest.raises(ConfigError, match="unknown algorithm 'PPX'"):
        get_trainable_cls("PPX")


def test_default_config_is_the_algorithms_builder_and_reads_like_the_classic_dict():
    config = get_trainable_cls("PPO").get_default_config()
    assert isinstance(config, PPOConfig) and isinstance(DQN.get_default_config(), DQNConfig)
    assert config["lr"] == 5e-05 and config.get("gamma") == 0.99 and config.get("nope", 7) == 7
    assert "lr" in config and "lambda" in config and "nope" not in config
    as_dict = dict(config)
    assert as_dict == config.to_dict() and as_dict["num_sgd_iter"] == 30 and config == as_dict
    with pytest.raises(KeyError, match="did you mean 'gamma'"):
        config["gama"]


def test_default_config_written_like_the_classic_dict_changes_the_builder_it_is():
    config = PPO.get_default_config()
    config["lr"] = 1e-3
    config["model"]["fcnet_hiddens"] = [16]  # in place, as RLlib's dict (and its builder) take it
    config["env_config"]["size"] = 3
    config.model["fcnet_activation"] = "relu"  # RLlib 2.x's attribute, the same live block
    config.update({"train_batch_size": 64, "sgd_minibatch_size": 32})
    other = copy.deepcopy(config)
    other["lr"] = 0.5
    shallow = config.copy()
    shallow["model"]["fcnet_hiddens"] = [4]
    built = config.to_dict()
    assert built["lr"] == 1e-3 and built["model"]["fcnet_hiddens"] == [16] and built["env_config"] == {"size": 3}
    assert built["model"]["fcnet_activation"] == "relu"
    assert built["train_batch_size"] == 64 and other["lr"] == 0.5 and shallow.to_dict()["model"]["fcnet_hiddens"] == [4]
    assert config.pop("lr") == 1e-3 and config["lr"] == 5e-05  # back to the default
    assert PPO.get_default_config()["model"]["fcnet_hiddens"] == [256, 256]  # a fresh builder each call
    with pytest.raises(ConfigError, match="lr"):
        config["lr"] = "fast"


def test_default_config_builder_chains_and_builds_as_rllib_2x_scripts_do():
    config = (get_trainable_cls("PPO").get_default_config()
              .environment("CartPole-v1").framework("torch").rollouts(rollout_fragment_length=64)
              .training(train_batch_size=64, sgd_minibatch_size=64, num_sgd_iter=1, model={"fcnet_hiddens": [8]}))
    algo = config.build()
    try:
        assert algo.train()["timesteps_total"] == 64
    finally:
        algo.stop()


def test_default_resource_request_has_a_bundle_per_process():
    request = PPO.default_resource_request({"num_workers": 2, "num_gpus": 0})
    assert request.bundles == [{"CPU": 1.0, "GPU": 0.0}, {"CPU": 1.0}, {"CPU": 1.0}]
    assert request.required_resources == {"CPU": 3.0, "GPU": 0.0}
    builder = PPOConfig().env_runners(num_env_runners=1, num_cpus_per_env_runner=2)
    assert PPO.default_resource_request(builder).required_resources["CPU"] == 3.0
    with pytest.raises(ConfigError, match="num_workers"):
        PPO.default_resource_request({"num_workers": -1})
    # a function trainable's own keys beside the trainer's are not the resource request's business (RLlib's
    # custom_experiment.py: tune.with_resources(experiment, PPO.default_resource_request(config)))
    assert PPO.default_resource_request({"num_workers": 1, "train-iterations": 3}).required_resources["CPU"] == 2.0


def test_scripts_reading_the_new_stacks_switches_read_the_classic_stack():
    config = PPOConfig()
    assert config._enable_learner_api is False and config.enable_rl_module_and_learner is False


def test_algorithm_and_policy_from_checkpoint_and_policy_config_reads_like_a_dict(tmp_path):
    trainer = PPO(config={**TINY, "gamma": 0.95, "lambda": 0.9}, env="CartPole-v1", results_dir=str(tmp_path))
    try:
        trainer.train()
        path = trainer.save(str(tmp_path / "ckpt"))
        weights = trainer.get_policy().get_weights()
    finally:
        trainer.stop()
    restored = PPO.from_checkpoint(path)
    try:
        policy = restored.get_policy()
        assert policy.config["gamma"] == 0.95 and policy.config.get("lambda") == 0.9 and "lr" in policy.config
        with pytest.raises(KeyError, match="did you mean 'gamma'"):
            policy.config["gama"]
    finally:
        restored.stop()
    policies = Policy.from_checkpoint(path)
    assert list(policies) == ["default_policy"]
    loaded = policies["default_policy"]
    assert loaded.config["gamma"] == 0.95
    assert all((loaded.get_weights()[k] == v).all() for k, v in weights.items())
    assert Policy.from_checkpoint(path, policy_ids=["default_policy"]).keys() == {"default_policy"}
    with pytest.raises(CheckpointError, match="no trained policy 'other'"):
        Policy.from_checkpoint(path, policy_ids="other")
    with pytest.raises(CheckpointError, match="does not exist"):
        Policy.from_checkpoint(tmp_path / "missing")
    # RLlib 2.x's path of one policy in a checkpoint (restore_1_of_n_agents_from_checkpoint.py)
    one = Policy.from_checkpoint(os.path.join(path, "policies", "default_policy"))
    assert all((one.get_weights()[k] == v).all() for k, v in weights.items())
    with pytest.raises(CheckpointError, match="no trained policy 'other'"):
        Policy.from_checkpoint(os.path.join(path, "policies", "other"))


def test_builder_settings_that_change_nothing_are_accepted_with_a_note(caplog):
    with caplog.at_level(logging.WARNING):
        config = (PPOConfig().environment("CartPole-v1", render_env=False)
                  .rollouts(create_env_on_local_worker=True)
                  .rl_module(_enable_rl_module_api=False)
                  .evaluation(evaluation_config=PPOConfig.overrides(framework_str="torch", explore=False)))
    text = caplog.text
    assert "render_env: ignored" in text and "create_env_on_local_worker: ignored" in text
    assert "_enable_rl_module_api: ignored" in text
    assert config.to_dict()["evaluation_config"] == {"framework": "torch", "explore": False}
    assert config.framework_str == "torch"
    with pytest.raises(ConfigError, match="render_env: True is not supported yet.*algorithms issue"):
        PPOConfig().environment("CartPole-v1", render_env=True)


def test_tune_register_env_and_tune_function_are_ray_tunes_names():
    assert tune.register_env is register_env
    fn = lambda agent_id, *args, **kwargs: "default_policy"  # noqa: E731
    assert tune.function(fn) is fn
    with pytest.raises(ConfigError, match="tune.function"):
        tune.function(3)


def test_old_callbacks_info_trainer_has_a_name_and_old_optimizer_names_reach_the_workers():
    seen = []
    config = {**TINY, "callbacks": {"on_train_result": lambda info: seen.append(info["trainer"].__name__)}}
    trainer = PPO(config=config, env="CartPole-v1")
    try:
        trainer.train()
        assert seen == ["PPO"] and PPO.__name__ == "PPO"
        assert trainer.optimizer.foreach_evaluator(lambda worker: worker.worker_index) == [0]
        assert trainer.optimizer.local_evaluator is trainer.workers.local_worker
        with pytest.raises(AttributeError, match="foreach_worker"):
            trainer.optimizer.remote_evaluators
        with pytest.raises(AttributeError, match="workers.local_worker"):
            trainer.optimizer.step()
    finally:
        trainer.stop()


def test_a_trainer_subclass_may_still_have_an_optimizer_of_its_own():
    class Own(PPO):
        def setup(self) -> None:
            self.optimizer = "mine"

    trainer = Own(config=TINY, env="CartPole-v1")
    try:
        assert trainer.optimizer == "mine"
    finally:
        trainer.stop()


def test_the_ported_rllib_2x_example_script_runs(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "examples" / "rllib2_script.py"
    run = subprocess.run([sys.executable, str(script), "--no-tune", "--stop-iters", "1"], cwd=tmp_path,
                         env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "episode_reward_mean" in run.stdout and "old gym API" in run.stderr


def test_a_policy_spec_config_may_be_an_algorithm_config_builder():
    """RLlib 2.x's multi_agent_two_trainers.py: a policy's config is its algorithm's builder; the keys set on it
    that a policy can have override, its run-level ones (env, filters, resources) and no-op switches are left out."""
    from rltune.env import make_multi_agent
    from rltune.trainers import PolicySpec

    own = (PPOConfig().environment("CartPole-v1").rollouts(observation_filter="MeanStdFilter")
           .training(gamma=0.9, num_sgd_iter=2, _enable_learner_api=False).resources(num_gpus=0))
    config = (PPOConfig().environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
              .rollouts(num_rollout_workers=0, rollout_fragment_length=32)
              .training(train_batch_size=64, sgd_minibatch_size=32, num_sgd_iter=1, model={"fcnet_hiddens": [8]})
              .multi_agent(policies={"a": PolicySpec(config=own), "b": PolicySpec()},
                           policy_mapping_fn=lambda agent, *args, **kwargs: "a" if agent == 0 else "b"))
    algo = config.build()
    try:
        assert algo.get_policy("a").config["gamma"] == 0.9 and algo.get_policy("b").config["gamma"] == 0.99
        assert algo.train()["timesteps_total"] == 64
    finally:
        algo.stop()
