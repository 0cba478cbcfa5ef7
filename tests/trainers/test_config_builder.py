"""The config builder API (RLlib's AlgorithmConfig): chains equal dicts, errors at the call that gave them, build()."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rltune import tune
from rltune.errors import ConfigError
from rltune.trainers import DQN, PPO, AlgorithmConfig, DQNConfig, PPOConfig, PolicySpec, Trainer

PPO_DICT = {
    "env": "CartPole-v1",
    "env_config": {"max_episode_steps": 100},
    "num_workers": 0,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 25,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 2,
    "lambda": 0.9,
    "lr": 1e-3,
    "gamma": 0.98,
    "model": {"fcnet_hiddens": [16], "vf_share_layers": True},
    "seed": 3,
    "log_level": "ERROR",
    "evaluation_interval": 2,
    "evaluation_duration": 3,
    "evaluation_config": {"explore": False},
    "metrics_num_episodes_for_smoothing": 20,
    "recreate_failed_workers": True,
}


def classic_ppo_chain() -> AlgorithmConfig:
    return (
        PPOConfig()
        .environment("CartPole-v1", env_config={"max_episode_steps": 100})
        .rollouts(num_rollout_workers=0, num_envs_per_worker=2, rollout_fragment_length=25)
        .training(train_batch_size=100, sgd_minibatch_size=50, num_sgd_iter=2, lambda_=0.9, lr=1e-3, gamma=0.98,
                  model={"fcnet_hiddens": [16]}, vf_share_layers=True)
        .framework("torch")
        .debugging(seed=3, log_level="ERROR")
        .evaluation(evaluation_interval=2, evaluation_duration=3, evaluation_config=PPOConfig.overrides(explore=False))
        .reporting(metrics_num_episodes_for_smoothing=20)
        .fault_tolerance(recreate_failed_workers=True)
    )


def new_stack_ppo_chain() -> AlgorithmConfig:
    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .environment(env="CartPole-v1", env_config={"max_episode_steps": 100})
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2, rollout_fragment_length=25)
        .training(train_batch_size=100, minibatch_size=50, num_epochs=2, lambda_=0.9, lr=1e-3, gamma=0.98)
        .rl_module(model_config={"fcnet_hiddens": [16], "vf_share_layers": True})
        .learners(num_learners=0, num_gpus_per_learner=0)
        .debugging(seed=3, log_level="ERROR")
        .evaluation(evaluation_interval=2, evaluation_duration=3, evaluation_config={"explore": False})
        .reporting(metrics_num_episodes_for_smoothing=20)
        .fault_tolerance(restart_failed_env_runners=True)
    )


# -- chains give the trainer the same config as the dict ---------------------------------------
@pytest.mark.parametrize("chain", [classic_ppo_chain, new_stack_ppo_chain], ids=["classic", "new-stack"])
def test_a_chain_validates_to_the_same_settings_as_the_dict(chain):
    assert PPO.validate(chain().to_dict()).model_dump() == PPO.validate(PPO_DICT).model_dump()
    assert chain().to_dict() == PPO.validate(PPO_DICT).model_dump(by_alias=True)


def test_dqn_chain_validates_to_the_same_settings_as_the_dict():
    config = (DQNConfig().environment("CartPole-v1")
              .training(lr=1e-3, target_network_update_freq=100, num_steps_sampled_before_learning_starts=50,
                        replay_buffer_config={"capacity": 500}, double_q=False, n_step=3)
              .exploration(exploration_config={"epsilon_timesteps": 300})
              .reporting(min_sample_timesteps_per_iteration=100))
    given = {"env": "CartPole-v1", "lr": 1e-3, "target_network_update_freq": 100, "learning_starts": 50,
             "replay_buffer_config": {"capacity": 500}, "double_q": False, "n_step": 3,
             "exploration_config": {"epsilon_timesteps": 300}, "min_sample_timesteps_per_iteration": 100}
    assert DQN.validate(config.to_dict()).model_dump() == DQN.validate(given).model_dump()


def test_trainers_built_from_a_chain_and_from_the_dict_train_identically():
    tiny = {**PPO_DICT, "evaluation_interval": None}
    a = classic_ppo_chain().evaluation(evaluation_interval=None).build()
    b = PPO(config=tiny)
    try:
        assert isinstance(a, PPO) and a.config == b.config
        ra, rb = a.train(), b.train()
        assert ra["timesteps_total"] == rb["timesteps_total"] == 100
        assert ra["episode_reward_mean"] == rb["episode_reward_mean"]
        assert ra["info"]["learner"]["default_policy"]["total_loss"] == rb["info"]["learner"]["default_policy"]["total_loss"]
        for name, weight in a.get_policy().get_weights().items():
            np.testing.assert_array_equal(weight, b.get_policy().get_weights()[name])
    finally:
        a.stop()
        b.stop()


def test_every_way_to_give_a_builder_to_a_trainer():
    config = PPOConfig().training(train_batch_size=64, sgd_minibatch_size=64, num_sgd_iter=1).debugging(seed=0)
    for trainer in (Trainer(config=config, env="CartPole-v1"), PPO(config=config, env="CartPole-v1"),
                    config.environment("CartPole-v1").build(), config.build_algo()):
        try:
            assert type(trainer) is PPO and trainer.config["train_batch_size"] == 64
            assert trainer.train()["timesteps_total"] >= 64
        finally:
            trainer.stop()
    with pytest.raises(ConfigError, match=r"DQN\(config=\.\.\.\): got a PPOConfig, which configures PPO, not DQN; use DQNConfig\(\)"):
        DQN(config=config)


def test_dqn_builder_builds_a_dqn_that_trains():
    trainer = (DQNConfig().environment("CartPole-v1")
               .training(train_batch_size=8, num_steps_sampled_before_learning_starts=0, replay_buffer_config={"capacity": 200})
               .reporting(min_sample_timesteps_per_iteration=50).debugging(seed=0).build())
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        assert type(trainer) is DQN and result["timesteps_total"] >= 50
        assert any(not np.array_equal(w, before[k]) for k, w in trainer.get_policy().get_weights().items())
    finally:
        trainer.stop()


# -- errors at the call that gave them -------------------------------------------------------------
@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda c: c.training(lr=-1.0), "invalid PPOConfig.training(): lr: Input should be greater than 0"),
        (lambda c: c.training(lrr=0.1), "invalid PPOConfig.training(): lrr: unknown keyword; did you mean 'lr'?"),
        (lambda c: c.env_runners(num_env_runners=-2), "invalid PPOConfig.env_runners(): num_env_runners: Input should be greater than or equal to 0"),
        (lambda c: c.training(num_epochs=0), "invalid PPOConfig.training(): num_epochs: Input should be greater than or equal to 1"),
        (lambda c: c.training(num_workers=2),
         "PPOConfig.training(): num_workers: not a keyword of training(); set it with .env_runners(num_env_runners=...) "
         "or .rollouts(num_rollout_workers=...)"),
        # RLlib settings rltune lacks: named as such at their call, with what to do instead where there is something
        (lambda c: c.rollouts(sample_async=True), ("invalid PPOConfig.rollouts(): sample_async: an RLlib ", "does not support yet")),
        (lambda c: c.rollouts(horizon=200), ("invalid PPOConfig.rollouts(): horizon: an RLlib ", "does not support yet", "TimeLimit")),
        (lambda c: c.offline_data(input_="/data/cartpole"), ("invalid PPOConfig.offline_data(): input_: an RLlib ", "does not support yet")),
        (lambda c: c.offline_data(output="/tmp/out"), ("invalid PPOConfig.offline_data(): output: an RLlib ", "does not support yet")),
        (lambda c: c.evaluation(evaluation_config={"gamma": 2.0}), "invalid PPOConfig.evaluation(): evaluation_config.gamma: Input should be less than or equal to 1"),
        (lambda c: c.exploration(explore="maybe"), "invalid PPOConfig.exploration(): explore: Input should be a valid boolean"),
        (lambda c: c.rollouts(explore=False), "explore: not a keyword of rollouts(); set it with .env_runners(explore=...) or .exploration(explore=...)"),
        (lambda c: c.training(model={"fcnet_hiddenz": [8]}), "PPOConfig.training(): model.fcnet_hiddenz: unknown key; did you mean 'fcnet_hiddens'?"),
        (lambda c: c.multi_agent(policies=5), "invalid PPOConfig.multi_agent(): policies"),
        (lambda c: c.callbacks({"on_episode_ends": print}), "invalid PPOConfig.callbacks(): callbacks.on_episode_ends: not a hook of old RLlib's callbacks dict"),
        (lambda c: c.callbacks(int), "invalid PPOConfig.callbacks(): callbacks: <class 'int'> is not a DefaultCallbacks subclass"),
        (lambda c: c.debugging(log_level="LOUD"), "invalid PPOConfig.debugging(): log_level: Input should be"),
        (lambda c: c.resources(num_gpus=-1), "invalid PPOConfig.resources(): num_gpus: Input should be greater than or equal to 0"),
        (lambda c: c.update_from_dict({"gama": 0.9}), "invalid PPOConfig.update_from_dict(): gama: unknown key; did you mean 'gamma'?"),
        (lambda c: c.training(lr=tune.grid_search([1e-3, -1.0])), "invalid PPOConfig.training(): lr: Input should be greater than 0 (got -1.0)"),
        (lambda c: c.training(gamma=tune.uniform(0.9, 1.5)), "invalid PPOConfig.training(): gamma: Input should be less than or equal to 1 (got 1.5)"),
        (lambda c: c.training(lr={"uniform": [1]}), "invalid PPOConfig.training(): lr: a malformed uniform entry"),
        # the kind of a value that names code or a space, checked at its call (which one it names: at build())
        (lambda c: c.multi_agent(policy_mapping_fn=5), "invalid PPOConfig.multi_agent(): policy_mapping_fn: must be a function"),
        (lambda c: c.environment(env=5), "invalid PPOConfig.environment(): env: must be a gymnasium id"),
        (lambda c: c.environment(env_task_fn=5), "invalid PPOConfig.environment(): env_task_fn: must be a function"),
        (lambda c: c.environment(action_space=5), "invalid PPOConfig.environment(): action_space: must be a gymnasium space"),
        (lambda c: c.multi_agent(policies={"p": PolicySpec(config=5)}), "multi_agent(): policies: p.config: must be a dict"),
        # calls that do not bind
        (lambda c: c.training(0.1), "invalid PPOConfig.training(): takes keywords only (e.g. .training(key=value)), but got"),
        (lambda c: c.environment("CartPole-v1", {"a": 1}),
         "invalid PPOConfig.environment(): takes at most 1 positional argument(s) (env), but got also {'a': 1}"),
        (lambda c: c.callbacks(callbacks=None), "invalid PPOConfig.callbacks(): got an unexpected keyword argument 'callbacks'"),
        (lambda c: c.copy(5), "invalid PPOConfig.copy(): takes no positional argument, but got 5"),
    ],
)
def test_a_bad_keyword_or_value_fails_at_its_call_naming_method_and_keyword(call, expected):
    config = PPOConfig().environment("CartPole-v1").training(lr=0.01)
    before = config.to_dict()
    with pytest.raises(ConfigError) as info:
        call(config)
    for text in (expected,) if isinstance(expected, str) else expected:
        assert text in str(info.value)
    assert len(info.value.problems) == 1
    assert config.to_dict() == before  # a failed call changes nothing


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda: PPOConfig.training(lr=0.1),
         "invalid AlgorithmConfig.training(): called on the class, not on a config: make one first, e.g. PPOConfig().training(...)"),
        (lambda: PPOConfig.environment("CartPole-v1"), "invalid AlgorithmConfig.environment(): called on the class"),
        (lambda: PPOConfig.build(), "invalid AlgorithmConfig.build(): called on the class"),
        (lambda: PPOConfig.from_dict(), "invalid PPOConfig.from_dict(): missing a required argument: 'config_dict'"),
        (lambda: PPOConfig(5), "invalid PPOConfig(): algo_class: must be a trainer class"),
        (lambda: AlgorithmConfig(algo_class="PPO"), "invalid AlgorithmConfig(): algo_class: must be a trainer class"),
        (lambda: setattr(PPOConfig(), "algo_class", int), "invalid PPOConfig.algo_class: algo_class: must be a trainer class"),
        (lambda: PPO(config=PPOConfig), "invalid PPO(config=...): got the class PPOConfig, not a config: use PPOConfig()"),
        (lambda: PPO(config=5), "invalid PPO(config=...): must be a dict of config keys or a PPOConfig(), but got int 5"),
        (lambda: PPOConfig().environment("CartPole-v1").build(results_dir=5), "invalid PPO(): results_dir: must be a path"),
    ],
)
def test_a_misused_call_is_a_config_error_naming_the_method_and_argument(call, expected):
    with pytest.raises(ConfigError) as info:
        call()
    assert expected in str(info.value)


def test_a_missing_setting_read_like_a_dict_names_the_builder():
    with pytest.raises(KeyError, match="PPOConfig has no setting 'gama'; did you mean 'gamma'"):
        PPOConfig()["gama"]


def test_dqn_keywords_are_checked_against_dqn():
    with pytest.raises(ConfigError, match=r"DQNConfig.training\(\): before_learn_on_batch: an RLlib .* does not support yet"):
        DQNConfig().training(before_learn_on_batch=print)
    with pytest.raises(ConfigError, match=r"PPOConfig.training\(\): target_network_update_freq: a training\(\) keyword of DQN, not of PPO"):
        PPOConfig().training(target_network_update_freq=10)  # DQN's keyword given to PPO
    with pytest.raises(ConfigError, match=r"clip_param: a training\(\) keyword of PPO only; use PPOConfig\(\)"):
        AlgorithmConfig().training(clip_param=0.2)  # the base builder has only the shared keys
    with pytest.raises(ConfigError, match=r"AlgorithmConfig\(\) has no algorithm"):
        AlgorithmConfig().build()


def test_checks_across_keys_wait_for_build_so_the_order_of_calls_does_not_matter():
    config = PPOConfig().environment("CartPole-v1").multi_agent(policy_mapping_fn=lambda agent_id, *a, **k: "p")
    with pytest.raises(ConfigError, match="policy_mapping_fn and policies_to_train need multiagent.policies"):
        config.validate()
    config.multi_agent(policies={"p": PolicySpec()})
    config.validate()
    with pytest.raises(ConfigError, match="train_batch_size"):
        PPOConfig().environment("CartPole-v1").training(train_batch_size=100, sgd_minibatch_size=500).build()


def test_api_stack_switches_are_accepted_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="rltune.trainers.rllib._config_builder"):
        config = PPOConfig().api_stack(enable_rl_module_and_learner=True).experimental(_enable_new_api_stack=False)
    assert config.overrides_dict() == {}
    assert "changes nothing" in caplog.text


# -- dicts -------------------------------------------------------------------------------------
def test_to_dict_from_dict_round_trip_and_copies_are_independent():
    config = classic_ppo_chain().training(lr=tune.loguniform(1e-4, 1e-2))
    again = PPOConfig.from_dict(config.to_dict())
    assert again.to_dict() == config.to_dict()
    copy = config.copy().training(model={"fcnet_hiddens": [8]})
    assert config.to_dict()["model"]["fcnet_hiddens"] == [16] and copy.to_dict()["model"]["fcnet_hiddens"] == [8]
    assert copy.to_dict()["model"]["vf_share_layers"] is True  # model is merged into, as RLlib does


def test_blocks_merge_as_in_rllib():
    config = (PPOConfig().environment(env_config={"a": 1, "sub": {"x": 1}}).environment(env_config={"sub": {"y": 2}})
              .training(model={"fcnet_hiddens": [8]}).training(model={"fcnet_activation": "relu"}))
    assert config.to_dict()["env_config"] == {"a": 1, "sub": {"x": 1, "y": 2}}
    assert config.to_dict()["model"]["fcnet_hiddens"] == [8] and config.to_dict()["model"]["fcnet_activation"] == "relu"
    dqn = DQNConfig().exploration(exploration_config={"epsilon_timesteps": 5}).exploration(exploration_config={"final_epsilon": 0.1})
    assert dqn.to_dict()["exploration_config"]["epsilon_timesteps"] == 5


def test_reading_a_builder_like_a_dict_and_setting_attributes_validates():
    config = PPOConfig().training(lambda_=0.8).env_runners(num_env_runners=0)
    assert config["lambda"] == config.lambda_ == config.get("lambda_") == 0.8
    assert config.num_env_runners == config.num_workers == 0 and "num_env_runners" in config
    assert dict(config) == config.to_dict()
    config.lr = 0.5
    assert config.to_dict()["lr"] == 0.5
    with pytest.raises(ConfigError, match="lr: Input should be greater than 0"):
        config.lr = -1
    with pytest.raises(AttributeError, match="no setting 'not_a_key'"):
        config.not_a_key


def test_overrides_is_a_validated_dict_for_evaluation_and_policy_configs():
    assert PPOConfig.overrides(lambda_=0.95, num_epochs=3) == {"lambda": 0.95, "num_sgd_iter": 3}
    with pytest.raises(ConfigError, match="clip_paramm"):
        PPOConfig.overrides(clip_paramm=0.1)
    builder_as_overrides = PPOConfig().evaluation(evaluation_config=PPOConfig().exploration(explore=False))
    assert builder_as_overrides.to_dict()["evaluation_config"] == {"explore": False}


# -- search spaces -----------------------------------------------------------------------------
def test_search_space_entries_survive_into_to_dict_and_build_refuses_them():
    config = (PPOConfig().environment("CartPole-v1")
              .training(lr=tune.grid_search([1e-3, 1e-4]), model={"fcnet_hiddens": tune.choice([[8], [16, 16]])}))
    config_dict = config.to_dict()
    assert config_dict["lr"] == {"grid_search": [1e-3, 1e-4]}
    assert config_dict["model"]["fcnet_hiddens"] == tune.choice([[8], [16, 16]])
    assert config_dict["model"]["fcnet_activation"] == "tanh"
    with pytest.raises(ConfigError, match=r"PPOConfig.build\(\): lr, model.fcnet_hiddens: search-space entries .* tune.run"):
        config.build()
    with pytest.raises(ConfigError, match="search-space entries"):
        PPO(config=config)


def test_multi_agent_calls_fill_the_multiagent_block():
    def mapping(agent_id, episode, worker, **kwargs):
        return "p0"

    config = PPOConfig().multi_agent(policies={"p0", "p1"}, policy_mapping_fn=mapping).multi_agent(policies_to_train=["p0"])
    block = config.to_dict()["multiagent"]
    assert block == {"policies": {"p0", "p1"}, "policy_mapping_fn": mapping, "policies_to_train": ["p0"], "observation_fn": None}
    config.validate()
    with pytest.raises(ConfigError, match=r"multiagent.policies_to_train: \['p9'\] are not policy ids"):
        config.multi_agent(policies_to_train=["p9"]).validate()
    with pytest.raises(ConfigError, match=r"multiagent: not a keyword of training\(\); set it with .multi_agent\("):
        PPOConfig().training(multiagent={})
