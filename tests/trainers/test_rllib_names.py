"""RLlib's config names, old and new, as rltune reads them: aliases, conflicts, notes, suggestions, result spellings."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from rltune._metrics import lookup
from rltune.errors import ConfigError
from rltune.orchestrator._stop import StopCriteria
from rltune.tracking import flatten_metrics
from rltune.trainers.rllib import _rllib_names
from rltune.trainers import get_trainer_class
from rltune.trainers.rllib._rllib_names import gymnasium_id

PPO = get_trainer_class("PPO")
DQN = get_trainer_class("DQN")
NOTES = "rltune.trainers.rllib._rllib_names"


@pytest.fixture(autouse=True)
def _fresh_notes(monkeypatch, caplog):
    """Every test sees the notes of its own configs (they are logged once per process)."""
    monkeypatch.setattr(_rllib_names, "_said", set())
    caplog.set_level(logging.INFO, logger="rltune")


def notes(caplog, level=None):
    return [r.getMessage() for r in caplog.records if r.name == NOTES and (level is None or r.levelno == level)]


@pytest.mark.parametrize(
    "cls, given, path, value",
    [
        (PPO, "num_env_runners", "num_workers", 3),
        (PPO, "num_rollout_workers", "num_workers", 2),
        (PPO, "num_envs_per_env_runner", "num_envs_per_worker", 4),
        (PPO, "num_epochs", "num_sgd_iter", 7),
        (PPO, "minibatch_size", "sgd_minibatch_size", 64),
        (PPO, "mini_batch_size_per_learner", "sgd_minibatch_size", 32),
        (PPO, "shuffle_batch_per_epoch", "shuffle_sequences", False),
        (PPO, "train_batch_size_per_learner", "train_batch_size", 1000),
        (PPO, "recreate_failed_env_runners", "recreate_failed_workers", True),
        (PPO, "max_num_env_runner_restarts", "max_num_worker_restarts", 5),
        (PPO, "num_cpus_per_env_runner", "num_cpus_per_worker", 0.5),
        (PPO, "num_cpus_for_main_process", "num_cpus_for_driver", 2),
        (PPO, "num_cpus_for_local_worker", "num_cpus_for_driver", 2),
        (PPO, "sample_batch_size", "rollout_fragment_length", 50),
        (PPO, "metrics_smoothing_episodes", "metrics_num_episodes_for_smoothing", 20),
        (PPO, "evaluation_num_episodes", "evaluation_duration", 3),
        (PPO, "vf_share_layers", "model.vf_share_layers", True),
        (DQN, "num_steps_sampled_before_learning_starts", "learning_starts", 123),
        (DQN, "timesteps_per_iteration", "min_sample_timesteps_per_iteration", 300),
        (DQN, "min_sample_timesteps_per_reporting", "min_sample_timesteps_per_iteration", 300),
        (DQN, "grad_norm_clipping", "grad_clip", 10.0),
        (DQN, "buffer_size", "replay_buffer_config.capacity", 777),
    ],
)
def test_rllib_names_are_aliases_of_rltune_keys(caplog, cls, given, path, value):
    config = cls.validate({given: value})
    node = config
    for part in path.split("."):
        node = getattr(node, part)
    assert node == value
    assert f"RLlib's {given} is {path} in rltune" in notes(caplog, logging.INFO)


def test_old_and_new_blocks_translate_inside_them():
    policies = {"a": None, "b": None}
    mapping = "trainers.test_rllib_names:first"
    config = PPO.validate({"multiagent": {"policy_graphs": policies, "policy_mapping_fn": mapping, "count_steps_by": "env_steps"}})
    assert set(config.multiagent.policies) == {"a", "b"}
    config = PPO.validate({"policies": policies, "policy_mapping_fn": mapping})
    assert set(config.multiagent.policies) == {"a", "b"}
    assert config.multiagent.policy_mapping_fn == mapping
    evaluation = PPO.validate({"evaluation_config": {"num_envs_per_env_runner": 2, "explore": False}})
    assert evaluation.evaluation_config == {"num_envs_per_worker": 2, "explore": False}


def first(agent_id, *args, **kwargs):
    return "a"


@pytest.mark.parametrize(
    "config, names",
    [
        ({"num_epochs": 6, "num_sgd_iter": 10}, ["num_epochs=6", "num_sgd_iter=10"]),
        ({"num_env_runners": 1, "num_workers": 2}, ["num_env_runners=1", "num_workers=2"]),
        ({"num_env_runners": 1, "num_rollout_workers": 2}, ["num_rollout_workers=2", "num_env_runners=1"]),
        ({"vf_share_layers": True, "model": {"vf_share_layers": False}}, ["vf_share_layers=True", "model.vf_share_layers=False"]),
    ],
)
def test_an_alias_and_its_key_with_different_values_is_an_error_naming_both(config, names):
    with pytest.raises(ConfigError) as info:
        PPO.validate(config)
    message = str(info.value)
    assert "the same setting as" in message
    for name in names:
        assert name in message


def test_an_alias_and_its_key_with_the_same_value_is_fine():
    assert PPO.validate({"num_epochs": 6, "num_sgd_iter": 6}).num_sgd_iter == 6


def test_a_bad_value_is_named_by_the_key_as_written():
    with pytest.raises(ConfigError) as info:
        PPO.validate({"num_epochs": 0, "minibatch_size": "big"})
    message = str(info.value)
    assert "num_epochs (num_sgd_iter in rltune): Input should be greater than or equal to 1" in message
    assert "minibatch_size (sgd_minibatch_size in rltune): " in message


@pytest.mark.parametrize("config", [{"framework": "tf"}, {"framework": "tf2"}, {"use_pytorch": False}])
def test_tensorflow_configs_run_on_torch_with_one_warning(caplog, config):
    for _ in range(3):
        assert PPO.validate(config).framework == "torch"
    warnings = notes(caplog, logging.WARNING)
    assert len(warnings) == 1
    assert "running on PyTorch" in warnings[0] and "framework-neutral" in warnings[0]


def test_torch_and_use_pytorch_true_need_no_warning(caplog):
    PPO.validate({"framework": "torch", "use_pytorch": True})
    assert notes(caplog, logging.WARNING) == []


def test_api_stack_and_tensorflow_switches_are_accepted_with_a_note(caplog):
    switches = {
        "enable_connectors": True, "_enable_rl_module_api": True, "_enable_learner_api": False,
        "enable_rl_module_and_learner": True, "enable_env_runner_and_connector_v2": True, "eager_tracing": False,
        "evaluation_num_env_runners": 1, "evaluation_parallel_to_training": True,
    }
    config = PPO.validate({**switches, "model": {"uses_new_env_runners": True}})
    assert config.model.fcnet_hiddens == [256, 256]  # nothing else changed
    said = " ".join(notes(caplog, logging.WARNING))
    for key in switches:
        assert key in said
    assert "change nothing here" in said and "model.uses_new_env_runners" in said


@pytest.mark.parametrize(
    "switch, given, fragment",
    [
        ({"enable_rl_module_and_learner": True}, {}, 4000 // (2 * 4)),  # auto: one round fills the train batch
        ({"enable_env_runner_and_connector_v2": True}, {}, 4000 // (2 * 4)),
        ({"enable_rl_module_and_learner": True}, {"rollout_fragment_length": 50}, 50),  # set: kept
        ({"enable_rl_module_and_learner": False}, {}, 200),  # the classic stack: rltune's classic default
        ({}, {}, 200),
    ],
)
def test_a_new_stack_config_gets_the_new_stacks_ppo_fragment_default(switch, given, fragment, caplog):
    config = PPO.validate({**switch, **given, "num_env_runners": 2, "num_envs_per_env_runner": 4})
    assert config.rollout_fragment_length == fragment
    if fragment == 500:
        assert any("rollout_fragment_length: auto: the new API stack's default" in n for n in notes(caplog, logging.INFO))


def test_auto_fragment_waits_for_each_trials_values_when_the_batch_size_is_searched():
    searched = {"enable_rl_module_and_learner": True, "train_batch_size": {"grid_search": [1000, 2000]}}
    plan = _rllib_names.translate_config(searched, PPO.config_class).config
    assert plan["rollout_fragment_length"] == "auto"  # not computed from the search entry
    for size in (1000, 2000):  # a trial's config, the entry replaced by its value
        assert PPO.validate({**plan, "train_batch_size": size}).rollout_fragment_length == size


def test_a_new_stack_switch_leaves_dqn_defaults_alone():
    assert DQN.validate({"enable_rl_module_and_learner": True}).rollout_fragment_length == 4


@pytest.mark.parametrize(
    "config, message",
    [
        ({"count_steps_by": "agent_steps"}, "count_steps_by: 'agent_steps' is not supported yet: rltune counts env steps"),
        ({"num_learners": 2}, "num_learners: 2 is not supported yet: one learner, in the trainer process"),
        ({"framework": "jax"}, "framework: 'jax' is not supported yet"),
        ({"grad_clip_by": "value"}, "grad_clip_by: 'value' is not supported yet"),
        ({"normalize_actions": True}, "normalize_actions: True is not supported yet: rltune sends the env the actions as sampled "
                                      r"\(clip_actions clips them"),
    ],
)
def test_a_switch_set_to_what_rltune_lacks_is_an_error(config, message):
    with pytest.raises(ConfigError, match=message):
        PPO.validate(config)


@pytest.mark.skipif(torch.cuda.is_available(), reason="_fake_gpus runs on the GPU where there is one")
def test_fake_gpus_runs_num_gpus_on_the_cpu(caplog):
    assert PPO.validate({"num_gpus": 2, "_fake_gpus": True}).num_gpus == 0
    assert any("runs on the CPU" in n for n in notes(caplog, logging.WARNING))
    assert PPO.validate({"num_gpus": 0.5}).num_gpus == 0.5  # without it, asking for a GPU stays asking


def test_use_kl_loss_false_turns_the_kl_penalty_off():
    assert PPO.validate({"use_kl_loss": False, "kl_coeff": 0.3}).kl_coeff == 0.0
    assert PPO.validate({"use_kl_loss": True, "kl_coeff": 0.3}).kl_coeff == 0.3


def test_auto_values_get_rltunes_numbers():
    config = PPO.validate({"rollout_fragment_length": "auto", "train_batch_size": 1000, "num_env_runners": 2,
                           "num_envs_per_env_runner": 5})
    assert config.rollout_fragment_length == 100
    assert PPO.validate({"evaluation_duration": "auto"}).evaluation_duration == 10


def test_replay_buffer_names_of_rllib():
    config = DQN.validate({"replay_buffer_config": {"type": "MultiAgentReplayBuffer", "capacity": 500, "learning_starts": 50}})
    assert (config.replay_buffer_config.type, config.replay_buffer_config.capacity, config.learning_starts) == (
        "ReplayBuffer", 500, 50)
    with pytest.raises(ConfigError, match="'MultiAgentPrioritizedReplayBuffer' is not supported yet"):
        DQN.validate({"replay_buffer_config": {"type": "MultiAgentPrioritizedReplayBuffer"}})


@pytest.mark.parametrize(
    "old, new",
    [("Pendulum-v0", "Pendulum-v1"), ("FrozenLake-v0", "FrozenLake-v1"), ("LunarLander-v2", "LunarLander-v3"),
     ("CartPole-v0", None), ("CartPole-v1", None), ("NoSuchEnv-v0", None), ("pkg.module:Pendulum-v0", None)],
)
def test_only_ids_gymnasium_renamed_get_its_version(old, new):
    assert gymnasium_id(old) == new


def test_a_renamed_gym_id_runs_gymnasiums_version_with_a_warning(caplog):
    assert PPO.validate({"env": "Pendulum-v0"}).env == "Pendulum-v1"
    assert PPO.validate({"env": "CartPole-v0"}).env == "CartPole-v0"
    assert notes(caplog, logging.WARNING) == [
        "env 'Pendulum-v0' is not in gymnasium; running 'Pendulum-v1', gymnasium's version of it"]


@pytest.mark.parametrize(
    "cls, config, message",
    [
        (PPO, {"sample_async": True}, "sample_async: an RLlib key rltune does not support yet"),
        (PPO, {"model": {"use_lstm": True}}, "model.use_lstm: an RLlib key rltune does not support yet"),
        (PPO, {"horizon": 200}, "horizon: an RLlib key rltune does not support yet: the nearest here is the env's own time limit"),
        (DQN, {"num_epochs": 3}, "num_epochs: an RLlib key rltune does not support yet: DQN has no num_sgd_iter (RLlib's num_epochs)"),
        (DQN, {"prioritized_replay": True}, "prioritized_replay: an RLlib key rltune does not support yet: the nearest here is replay_buffer_config"),
        (PPO, {"exploration_fraction": 0.1}, "exploration_fraction: an RLlib key rltune does not support yet: the nearest here is DQN's exploration_config"),
    ],
)
def test_rllib_keys_rltune_lacks_say_so(cls, config, message):
    with pytest.raises(ConfigError) as info:
        cls.validate(config)
    assert message in str(info.value)
    assert "did you mean" not in str(info.value)


@pytest.mark.parametrize("key, value", [("hiddens", [64]), ("noisy", True), ("num_atoms", 1), ("dueling", False)])
def test_a_key_of_another_algorithm_names_that_algorithm(key, value):
    with pytest.raises(ConfigError, match=f"{key}: a key of DQN, which PPO does not have \\(run: DQN to use it\\)"):
        PPO.validate({key: value})
    DQN.validate({key: value})


@pytest.mark.parametrize(
    "config",
    # Each of these got a wrong "did you mean" before (num_gpus, train_batch_size, num_envs_per_worker, policy_mapping_fn).
    [{"num_epochs": 2}, {"batch_mode": "complete_episodes"}, {"num_cpus_per_worker": 2},
     {"multiagent": {"policy_graphs": {"a": None}}}, {"normalize_actions": False}],
)
def test_keys_that_got_wrong_suggestions_are_accepted(config):
    PPO.validate(config)


def test_other_unknown_keys_still_get_the_closest_key():
    with pytest.raises(ConfigError, match="lr_: unknown key; did you mean 'lr'"):
        PPO.validate({"lr_": 0.1})


# -- results ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results():
    config = {"env": "CartPole-v1", "train_batch_size": 200, "rollout_fragment_length": 100, "num_envs_per_worker": 2,
              "sgd_minibatch_size": 100, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}, "seed": 0,
              "evaluation_interval": 3, "evaluation_duration": 2}
    with PPO(config=config) as trainer:
        return [trainer.train() for _ in range(2)]


def test_results_carry_both_spellings_of_the_episode_stats(results):
    for result in results:
        for stat in ("mean", "min", "max"):
            value = result[f"episode_reward_{stat}"]
            assert result[f"episode_return_{stat}"] == value
            assert result["env_runners"][f"episode_return_{stat}"] == value
            assert result["env_runners"][f"episode_reward_{stat}"] == value
            assert result["sampler_results"][f"episode_reward_{stat}"] == value
        assert result["env_runners"]["num_episodes"] == result["episodes_this_iter"]
        assert result["env_runners"]["num_env_steps_sampled"] == result["timesteps_this_iter"] == 200
        assert result["num_env_steps_sampled_lifetime"] == result["timesteps_total"]
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] == result["timesteps_total"]
        evaluation = result["evaluation"]
        assert evaluation["env_runners"]["episode_return_mean"] == evaluation["episode_reward_mean"]
        assert evaluation["sampler_results"]["episode_reward_mean"] == evaluation["episode_reward_mean"]
    carried = results[1]["evaluation"]  # iteration 2 carries iteration 1's evaluation, with no new episodes
    assert carried["env_runners"]["num_episodes"] == carried["episodes_this_iter"] == 0


@pytest.mark.parametrize(
    "key",
    ["episode_reward_mean", "episode_return_mean", "env_runners/episode_return_mean", "env_runners/episode_reward_mean",
     "sampler_results/episode_reward_mean", "env_runner_results/episode_return_mean"],
)
def test_any_spelling_is_a_stop_key(results, key):
    last = results[-1]
    threshold = last["episode_reward_mean"]
    assert StopCriteria({key: threshold}).check(last).value == threshold
    assert StopCriteria({key: threshold + 1}).check(last) is None


@pytest.mark.parametrize(
    "key",
    ["evaluation/episode_reward_mean", "evaluation/env_runners/episode_return_mean",
     "evaluation/sampler_results/episode_reward_mean", "evaluation_results/env_runner_results/episode_return_mean"],
)
def test_any_spelling_reads_the_evaluation(results, key):
    assert lookup(results[-1], key) == results[-1]["evaluation"]["episode_reward_mean"]
    assert math.isfinite(lookup(results[-1], key))


def test_mlflow_gets_each_value_once_under_the_classic_name(results):
    metrics = flatten_metrics(results[-1])
    assert metrics["episode_reward_mean"] == results[-1]["episode_reward_mean"]
    assert "evaluation/episode_reward_mean" in metrics and "timesteps_total" in metrics
    copies = [k for k in metrics if "env_runners" in k or "sampler_results" in k or "episode_return" in k
              or k.endswith("num_env_steps_sampled_lifetime")]
    assert copies == []
    # A function trainable that reports RLlib's new names only keeps them.
    assert flatten_metrics({"env_runners": {"episode_return_mean": 3.0}}) == {"env_runners/episode_return_mean": 3.0}
