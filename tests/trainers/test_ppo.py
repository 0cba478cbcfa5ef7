"""PPO end to end: results, learning on CartPole, determinism, inference and evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium import spaces

from rltune.errors import RLTuneError
from rltune.trainers import PPO

from .envs import ContextEnv, CountingEnv, IndexLengthEnv, SeedLogEnv

TINY = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 10,
    "train_batch_size": 40,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}

CARTPOLE_FAST = {
    "num_workers": 0,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 32,
    "train_batch_size": 256,
    "sgd_minibatch_size": 256,
    "num_sgd_iter": 20,
    "lambda": 0.8,
    "gamma": 0.98,
    "lr": 1e-3,
    "kl_coeff": 0.0,
    "vf_loss_coeff": 0.5,
    "vf_clip_param": None,
    "grad_clip": 0.5,
    "model": {"fcnet_hiddens": [64, 64]},
    "seed": 0,
}

RESULT_KEYS = [
    "episode_reward_mean",
    "episode_reward_min",
    "episode_reward_max",
    "episode_len_mean",
    "episodes_this_iter",
    "timesteps_total",
    "training_iteration",
    "time_this_iter_s",
    "time_total_s",
    "info",
    "custom_metrics",
    "policy_reward_mean",
]
LEARNER_STATS = ["total_loss", "policy_loss", "vf_loss", "entropy", "kl", "cur_lr"]


@pytest.fixture(scope="module")
def cartpole():
    trainer = PPO(config={**TINY, "evaluation_duration": 3}, env="CartPole-v1")
    yield trainer
    trainer.stop()


def test_result_has_the_documented_keys(cartpole):
    result = cartpole.train()
    missing = [k for k in RESULT_KEYS if k not in result]
    assert missing == []
    stats = result["info"]["learner"]["default_policy"]
    assert [s for s in LEARNER_STATS if s not in stats] == []
    assert all(np.isfinite(stats[s]) for s in LEARNER_STATS)
    assert stats["cur_lr"] == pytest.approx(5e-5)
    assert result["time_this_iter_s"] > 0 and result["time_total_s"] >= result["time_this_iter_s"]


def test_episode_stats_and_counters_on_a_known_env():
    # 2 envs x 10 steps per round; train_batch_size 50 needs 3 rounds = 60 steps an iteration.
    config = {**TINY, "train_batch_size": 50, "env_config": {"episode_len": 4}}
    with PPO(config=config, env=CountingEnv) as trainer:
        first = trainer.train()
        second = trainer.train()
    assert first["timesteps_total"] == 60 and second["timesteps_total"] == 120
    assert (first["training_iteration"], second["training_iteration"]) == (1, 2)
    # Each env ends an episode every 4 steps: 30 steps per env -> 7 episodes per env in iteration 1.
    assert first["episodes_this_iter"] == 2 * (30 // 4)
    for result in (first, second):
        assert result["episode_reward_mean"] == 4.0
        assert result["episode_reward_min"] == result["episode_reward_max"] == 4.0
        assert result["episode_len_mean"] == 4.0
    assert second["episodes_this_iter"] == 2 * (60 // 4) - 2 * (30 // 4)


def test_first_result_without_finished_episodes_is_nan_not_an_error():
    with PPO(config={**TINY, "env_config": {"episode_len": 1000}}, env=ContextEnv) as trainer:
        result = trainer.train()
    assert result["episodes_this_iter"] == 0
    assert math.isnan(result["episode_reward_mean"])


def test_ppo_learns_cartpole():
    returns = []
    with PPO(config=CARTPOLE_FAST, env="CartPole-v1") as trainer:
        for _ in range(160):  # at most ~41k env steps; seed 0 gets there in about 70 iterations
            result = trainer.train()
            returns.append(result["episode_reward_mean"])
            if result["episode_reward_mean"] >= 150:
                break
    first = float(np.mean(returns[:3]))
    assert first < 40  # a random policy
    assert max(returns) >= 150, f"PPO did not learn CartPole: {returns[::10]}"
    assert returns[-1] > 3 * first


def _run(config, iterations=2):
    with PPO(config=config, env="CartPole-v1") as trainer:
        results = [trainer.train() for _ in range(iterations)]
        weights = trainer.get_policy().get_weights()
    return results, weights


def _comparable(result):
    return (
        result["episode_reward_mean"],
        result["episodes_this_iter"],
        result["timesteps_total"],
        result["info"]["learner"]["default_policy"]["total_loss"],
        result["info"]["learner"]["default_policy"]["kl"],
    )


def test_same_seed_same_results():
    results_a, weights_a = _run(TINY)
    results_b, weights_b = _run(TINY)
    assert [_comparable(r) for r in results_a] == [_comparable(r) for r in results_b]
    for key in weights_a:
        np.testing.assert_array_equal(weights_a[key], weights_b[key])


def test_other_seed_other_results():
    _, weights_a = _run(TINY, iterations=1)
    _, weights_b = _run({**TINY, "seed": 1}, iterations=1)
    assert any(not np.array_equal(weights_a[k], weights_b[k]) for k in weights_a)


# --- inference and evaluation ----------------------------------------------------------------


def test_compute_single_action_returns_a_valid_action(cartpole):
    space = spaces.Discrete(2)
    obs_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
    obs_space.seed(0)
    for _ in range(10):
        obs = obs_space.sample()
        action = cartpole.compute_single_action(obs)
        assert space.contains(action)
        assert cartpole.compute_single_action(obs) == action  # deterministic by default
        assert space.contains(cartpole.compute_single_action(obs, explore=True))


def test_compute_single_action_is_the_argmax_of_the_policy(cartpole):
    import torch

    obs = np.array([0.01, -0.2, 0.03, 0.3], dtype=np.float32)
    policy = cartpole.get_policy()
    with torch.no_grad():
        logits, _ = policy.model(torch.from_numpy(obs)[None])
    assert cartpole.compute_single_action(obs) == int(logits.argmax())


def test_evaluate_returns_an_evaluation_dict_and_leaves_training_counters_alone(cartpole):
    cartpole.train()
    counters = (cartpole.iteration, cartpole.timesteps_total, cartpole.episodes_total)
    weights = cartpole.get_policy().get_weights()
    out = cartpole.evaluate(4)
    assert set(out) == {"evaluation"}
    evaluation = out["evaluation"]
    assert evaluation["episodes_this_iter"] == 4
    assert len(evaluation["hist_stats"]["episode_reward"]) == 4
    assert 1 <= evaluation["episode_reward_min"] <= evaluation["episode_reward_mean"] <= evaluation["episode_reward_max"] <= 500
    assert evaluation["episode_len_mean"] == pytest.approx(evaluation["episode_reward_mean"])  # CartPole: 1 per step
    assert (cartpole.iteration, cartpole.timesteps_total, cartpole.episodes_total) == counters
    for key, value in cartpole.get_policy().get_weights().items():
        np.testing.assert_array_equal(value, weights[key])
    assert cartpole.evaluate()["evaluation"]["episodes_this_iter"] == 3  # evaluation_duration
    result = cartpole.train()
    assert result["training_iteration"] == counters[0] + 1
    assert result["timesteps_total"] == counters[1] + 40


def test_evaluate_does_not_change_what_training_does():
    config = {**TINY, "env_config": {"episode_len": 6}}
    with PPO(config=config, env=CountingEnv) as plain, PPO(config=config, env=CountingEnv) as evaluated:
        plain.train()
        evaluated.train()
        evaluated.evaluate(2)
        a, b = plain.train(), evaluated.train()
        assert _comparable(a) == _comparable(b)


def test_evaluation_config_reaches_the_evaluation_env():
    config = {**TINY, "env_config": {"episode_len": 3}, "evaluation_config": {"env_config": {"episode_len": 9}}}
    with PPO(config=config, env=CountingEnv) as trainer:
        evaluation = trainer.evaluate(2)["evaluation"]
        assert evaluation["episode_len_mean"] == 9
        assert trainer.train()["episode_len_mean"] == 3


def test_evaluation_takes_each_envs_share_of_whole_episodes():
    # Env 0 ends an episode every 2 steps, env 1 every 20: the first 4 episodes to end would all
    # be env 0's 2-step ones. Each env contributes its share instead.
    config = {**TINY, "num_envs_per_worker": 2, "evaluation_duration": 4}
    with PPO(config=config, env=IndexLengthEnv) as trainer:
        evaluation = trainer.evaluate()["evaluation"]
        assert sorted(evaluation["hist_stats"]["episode_reward"]) == [2.0, 2.0, 20.0, 20.0]
        assert evaluation["episode_reward_mean"] == 11.0
        assert sorted(trainer.evaluate(3)["evaluation"]["hist_stats"]["episode_reward"]) == [2.0, 2.0, 20.0]


def test_evaluation_interval_puts_evaluation_stats_in_every_result():
    config = {**TINY, "env_config": {"episode_len": 6}, "evaluation_interval": 3, "evaluation_duration": 3,
              "evaluation_config": {"env_config": {"episode_len": 9}}}
    with PPO(config=config, env=CountingEnv) as trainer:
        results = [trainer.train() for _ in range(4)]
    # Iteration 1 evaluates (so that every result has a value), then every 3rd iteration.
    assert [r["evaluation"]["episodes_this_iter"] for r in results] == [3, 0, 3, 0]
    assert all(r["evaluation"]["episode_reward_mean"] == 9.0 for r in results)
    assert results[1]["evaluation"]["hist_stats"]["episode_reward"] == []  # carried over, not measured again
    assert results[0]["episode_reward_mean"] == 6.0  # training stats stay the training envs'


def test_evaluation_envs_get_seeds_and_a_worker_index_of_their_own():
    SeedLogEnv.seeds.clear()
    config = {**TINY, "num_workers": 1, "evaluation_duration": 2, "disable_env_checking": True}
    with PPO(config=config, env=SeedLogEnv) as trainer:
        trainer.train()  # the remote worker's seeds are logged in its own process
        trainer.evaluate()
    evaluation = [(w, v, seed) for w, v, seed in SeedLogEnv.seeds if w == 2]  # num_workers + 1
    assert sorted(v for w, v, seed in evaluation) == [0, 1]
    remote_seeds = {TINY["seed"] + 1000 + v for v in range(2)}
    assert not {seed for _, _, seed in evaluation} & remote_seeds


def test_a_callback_editing_the_evaluation_does_not_change_the_carried_one():
    config = {**TINY, "evaluation_interval": 5, "evaluation_duration": 2}
    with PPO(config=config, env=CountingEnv) as trainer:
        first = trainer.train()
        first["evaluation"]["hist_stats"]["episode_reward"].append(-1.0)
        first["evaluation"]["episode_reward_mean"] = -1.0
        second = trainer.train()
    assert second["evaluation"]["episode_reward_mean"] == 5.0


def test_no_evaluation_key_without_evaluation_interval(cartpole):
    assert "evaluation" not in cartpole.train()


def test_checkpoint_keeps_the_latest_evaluation(tmp_path):
    config = {**TINY, "env_config": {"episode_len": 4}, "evaluation_interval": 2, "evaluation_duration": 2}
    with PPO(config=config, env=CountingEnv) as trainer:
        trainer.train()
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
    with PPO(config=config, env=CountingEnv) as restored:
        restored.restore(path)
        result = restored.train()  # iteration 3: no evaluation runs, the restored one is carried
    assert result["evaluation"]["episode_reward_mean"] == 4.0
    assert result["evaluation"]["episodes_this_iter"] == 0


def test_stopped_trainer_refuses_to_train():
    trainer = PPO(config=TINY, env="CartPole-v1")
    trainer.stop()
    with pytest.raises(RLTuneError, match="stopped"):
        trainer.train()


def test_same_seed_same_results_with_a_remote_worker():
    config = {**TINY, "num_workers": 1}
    results_a, weights_a = _run(config)
    results_b, weights_b = _run(config)
    assert [_comparable(r) for r in results_a] == [_comparable(r) for r in results_b]
    for key in weights_a:
        np.testing.assert_array_equal(weights_a[key], weights_b[key])


def test_lr_schedule_is_followed_by_timestep():
    # 40 steps per iteration; lr goes linearly from 1e-3 at step 0 to 1e-4 at step 100, then stays.
    config = {**TINY, "lr_schedule": [[0, 1e-3], [100, 1e-4]]}
    with PPO(config=config, env=CountingEnv) as trainer:
        lrs = [trainer.train()["info"]["learner"]["default_policy"]["cur_lr"] for _ in range(4)]
        optimizer_lr = trainer.optimizer.param_groups[0]["lr"]
    # The lr of an iteration is the schedule at the timesteps sampled before it: 0, 40, 80, 120.
    np.testing.assert_allclose(lrs, [1e-3, 1e-3 - 0.4 * 9e-4, 1e-3 - 0.8 * 9e-4, 1e-4], rtol=1e-6)
    assert optimizer_lr == pytest.approx(1e-4)
