"""PPO end to end: results, learning on CartPole, determinism, inference and evaluation.

The tests of what every trainer does (episode stats, determinism, evaluation, stop) take
``trainer_cls`` and run on DQN too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium import spaces

from rltune.errors import RLTuneError
from rltune.trainers import PPO
from trainer_params import iteration_config

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



def tiny(trainer_cls, steps: int = 40, **config) -> dict:
    """TINY for ``trainer_cls`` (``steps`` env steps per iteration), ``config`` on top."""
    if trainer_cls is PPO:
        return {**TINY, "train_batch_size": steps, **config}
    shared = {k: v for k, v in TINY.items() if k not in ("train_batch_size", "sgd_minibatch_size", "num_sgd_iter")}
    return {**shared, **iteration_config(trainer_cls, steps), **config}


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


def test_episode_stats_and_counters_on_a_known_env(trainer_cls):
    # 2 envs x 10 steps per round; 50 steps need 3 rounds = 60 steps an iteration.
    config = tiny(trainer_cls, 50, env_config={"episode_len": 4})
    with trainer_cls(config=config, env=CountingEnv) as trainer:
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


def test_first_result_without_finished_episodes_is_nan_not_an_error(trainer_cls):
    with trainer_cls(config=tiny(trainer_cls, env_config={"episode_len": 1000}), env=ContextEnv) as trainer:
        result = trainer.train()
    assert result["episodes_this_iter"] == 0
    assert math.isnan(result["episode_reward_mean"])


def test_ppo_learns_cartpole():
    returns = []
    # Eager throughout: with torch_compile_learner auto this run would compile when this machine's
    # inductor cache has the step, and the test would then depend on the cache.
    with PPO(config={**CARTPOLE_FAST, "torch_compile_learner": False}, env="CartPole-v1") as trainer:
        for _ in range(160):  # at most ~41k env steps; seed 0 gets there in about 70 iterations
            result = trainer.train()
            returns.append(result["episode_reward_mean"])
            if result["episode_reward_mean"] >= 150:
                break
    first = float(np.mean(returns[:3]))
    assert first < 40  # a random policy
    assert max(returns) >= 150, f"PPO did not learn CartPole: {returns[::10]}"
    assert returns[-1] > 3 * first


def _run(config, iterations=2, trainer_cls=PPO):
    with trainer_cls(config=config, env="CartPole-v1") as trainer:
        results = [trainer.train() for _ in range(iterations)]
        weights = trainer.get_policy().get_weights()
    return results, weights


def _comparable(result):
    stats = result["info"]["learner"]["default_policy"]
    return (
        result["episode_reward_mean"],
        result["episodes_this_iter"],
        result["timesteps_total"],
        stats["total_loss"],
        stats.get("kl"),  # PPO's
        stats.get("mean_q"),  # DQN's
    )


def test_same_seed_same_results(trainer_cls):
    results_a, weights_a = _run(tiny(trainer_cls), trainer_cls=trainer_cls)
    results_b, weights_b = _run(tiny(trainer_cls), trainer_cls=trainer_cls)
    assert [_comparable(r) for r in results_a] == [_comparable(r) for r in results_b]
    for key in weights_a:
        np.testing.assert_array_equal(weights_a[key], weights_b[key])


def test_other_seed_other_results(trainer_cls):
    _, weights_a = _run(tiny(trainer_cls), iterations=1, trainer_cls=trainer_cls)
    _, weights_b = _run(tiny(trainer_cls, seed=1), iterations=1, trainer_cls=trainer_cls)
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


def test_evaluate_does_not_change_what_training_does(trainer_cls):
    config = tiny(trainer_cls, env_config={"episode_len": 6})
    with trainer_cls(config=config, env=CountingEnv) as plain, trainer_cls(config=config, env=CountingEnv) as evaluated:
        plain.train()
        evaluated.train()
        evaluated.evaluate(2)
        a, b = plain.train(), evaluated.train()
        assert _comparable(a) == _comparable(b)


def test_evaluation_config_reaches_the_evaluation_env(trainer_cls):
    config = tiny(trainer_cls, env_config={"episode_len": 3}, evaluation_config={"env_config": {"episode_len": 9}})
    with trainer_cls(config=config, env=CountingEnv) as trainer:
        evaluation = trainer.evaluate(2)["evaluation"]
        assert evaluation["episode_len_mean"] == 9
        assert trainer.train()["episode_len_mean"] == 3


def test_evaluation_takes_each_envs_share_of_whole_episodes(trainer_cls):
    # Env 0 ends an episode every 2 steps, env 1 every 20: the first 4 episodes to end would all
    # be env 0's 2-step ones. Each env contributes its share instead.
    config = tiny(trainer_cls, num_envs_per_worker=2, evaluation_duration=4)
    with trainer_cls(config=config, env=IndexLengthEnv) as trainer:
        evaluation = trainer.evaluate()["evaluation"]
        assert sorted(evaluation["hist_stats"]["episode_reward"]) == [2.0, 2.0, 20.0, 20.0]
        assert evaluation["episode_reward_mean"] == 11.0
        assert sorted(trainer.evaluate(3)["evaluation"]["hist_stats"]["episode_reward"]) == [2.0, 2.0, 20.0]


def test_evaluation_interval_puts_evaluation_stats_in_every_result(trainer_cls):
    config = tiny(trainer_cls, env_config={"episode_len": 6}, evaluation_interval=3, evaluation_duration=3,
                  evaluation_config={"env_config": {"episode_len": 9}})
    with trainer_cls(config=config, env=CountingEnv) as trainer:
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


def test_a_callback_editing_the_evaluation_does_not_change_the_carried_one(trainer_cls):
    config = tiny(trainer_cls, evaluation_interval=5, evaluation_duration=2)
    with trainer_cls(config=config, env=CountingEnv) as trainer:
        first = trainer.train()
        first["evaluation"]["hist_stats"]["episode_reward"].append(-1.0)
        first["evaluation"]["episode_reward_mean"] = -1.0
        second = trainer.train()
    assert second["evaluation"]["episode_reward_mean"] == 5.0


def test_no_evaluation_key_without_evaluation_interval(cartpole):
    assert "evaluation" not in cartpole.train()


def test_checkpoint_keeps_the_latest_evaluation(trainer_cls, tmp_path):
    config = tiny(trainer_cls, env_config={"episode_len": 4}, evaluation_interval=2, evaluation_duration=2)
    with trainer_cls(config=config, env=CountingEnv) as trainer:
        trainer.train()
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
    with trainer_cls(config=config, env=CountingEnv) as restored:
        restored.restore(path)
        result = restored.train()  # iteration 3: no evaluation runs, the restored one is carried
    assert result["evaluation"]["episode_reward_mean"] == 4.0
    assert result["evaluation"]["episodes_this_iter"] == 0


def test_stopped_trainer_refuses_to_train(trainer_cls):
    trainer = trainer_cls(config=tiny(trainer_cls), env="CartPole-v1")
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
        optimizer_lr = trainer.get_learner().optimizer.param_groups[0]["lr"]
    # The lr of an iteration is the schedule at the timesteps sampled before it: 0, 40, 80, 120.
    np.testing.assert_allclose(lrs, [1e-3, 1e-3 - 0.4 * 9e-4, 1e-3 - 0.8 * 9e-4, 1e-4], rtol=1e-6)
    assert optimizer_lr == pytest.approx(1e-4)


# --- PPO options: vf_share_layers, clip/entropy schedules, vf_clip_param, adaptive kl_coeff --------


def _stats(result):
    return result["info"]["learner"]["default_policy"]


def _assert_total_loss_is_the_sum_of_its_terms(stats, *, vf_loss_coeff=1.0, entropy_coeff=0.0, kl_coeff=0.0):
    """total_loss = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * entropy + kl_coeff * kl.

    Every stat is a mean over the same minibatches, so the loss's coefficients can be read back from it:
    this shows which coefficients the iteration's loss really used, not only which ones it reported.
    """
    expected = (
        stats["policy_loss"]
        + vf_loss_coeff * stats["vf_loss"]
        - entropy_coeff * stats["entropy"]
        + kl_coeff * stats["kl"]
    )
    assert stats["total_loss"] == pytest.approx(expected, rel=1e-5, abs=1e-6)


SHARED = {**TINY, "model": {"fcnet_hiddens": [16, 8], "vf_share_layers": True}}


def test_vf_share_layers_builds_one_body_for_both_heads():
    import torch

    with PPO(config=SHARED, env="CartPole-v1") as shared, PPO(config={**SHARED, "model": {"fcnet_hiddens": [16, 8]}}, env="CartPole-v1") as separate:
        model = shared.get_policy().model
        names = {name for name, _ in model.named_parameters()}
        assert names == {f"{m}.{p}" for m in ("pi_body.0", "pi_body.2", "pi_head", "vf_head") for p in ("weight", "bias")}
        assert model.vf_head.in_features == 8  # reads the last shared hidden layer
        body = (4 * 16 + 16) + (16 * 8 + 8)
        heads = (8 * 2 + 2) + (8 + 1)
        assert shared.get_learner().flat_params.param.numel() == body + heads  # the optimizer holds no value network
        assert separate.get_learner().flat_params.param.numel() == 2 * body + heads
        assert not any(k.startswith("vf_body") for k in shared.get_policy().get_weights())

        # The value head reads the shared features, in training, sampling and bootstrapping alike.
        policy = shared.get_policy()
        obs = np.random.default_rng(0).uniform(-1, 1, (5, 4)).astype(np.float32)
        with torch.no_grad():
            x = torch.from_numpy(obs)
            expected = model.vf_head(model.pi_body(x)).squeeze(-1).numpy()
            np.testing.assert_allclose(model(x)[1].numpy(), expected, rtol=1e-6)
        # The sampling path computes in numpy (float32, another summation order): equal up to rounding,
        # which near zero needs an absolute tolerance (unseeded weights put a value at -0.0136 once).
        np.testing.assert_allclose(policy.values(obs), expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(policy.compute_actions(obs)[1]["vf_preds"], expected, rtol=1e-6, atol=1e-6)


def test_value_gradient_reaches_the_shared_layers_only_when_shared():
    import torch

    obs = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (8, 4)).astype(np.float32))
    for share in (True, False):
        config = {**SHARED, "model": {"fcnet_hiddens": [16, 8], "vf_share_layers": share}}
        with PPO(config=config, env="CartPole-v1") as trainer:
            model = trainer.get_policy().model
            _, values = model(obs)
            body = list(model.pi_body.parameters())
            grads = torch.autograd.grad((values - 100.0).pow(2).mean(), body, allow_unused=True)
        if share:
            assert all(g is not None and g.abs().sum() > 0 for g in grads)
        else:
            assert all(g is None for g in grads)


def test_value_loss_trains_the_shared_body():
    # One iteration from the same seed samples the same batch; only vf_loss_coeff differs.
    def policy_weights(share, vf_loss_coeff):
        config = {**TINY, "lr": 1e-2, "kl_coeff": 0.0, "vf_loss_coeff": vf_loss_coeff,
                  "model": {"fcnet_hiddens": [16], "vf_share_layers": share}}
        _, weights = _run(config, iterations=1)
        return {k: v for k, v in weights.items() if k.startswith("pi_")}

    shared_without, shared_with = policy_weights(True, 0.0), policy_weights(True, 1.0)
    assert not np.array_equal(shared_without["pi_body.0.weight"], shared_with["pi_body.0.weight"])
    separate_without, separate_with = policy_weights(False, 0.0), policy_weights(False, 1.0)
    for key in separate_without:  # with separate networks the value loss cannot touch the policy
        np.testing.assert_array_equal(separate_without[key], separate_with[key])


def test_ppo_with_shared_layers_learns_cartpole():
    # A small vf_loss_coeff keeps the value loss from swamping the shared body (as RLlib advises).
    config = {**CARTPOLE_FAST, "vf_loss_coeff": 0.05, "model": {"fcnet_hiddens": [64, 64], "vf_share_layers": True}}
    returns = []
    with PPO(config=config, env="CartPole-v1") as trainer:
        for _ in range(120):  # seed 0 gets there in about 65 iterations (~3 s)
            returns.append(trainer.train()["episode_reward_mean"])
            if returns[-1] >= 100:
                break
    first = float(np.mean(returns[:3]))
    assert first < 40
    assert max(returns) >= 100, f"PPO with shared layers did not learn CartPole: {returns[::10]}"


def test_clip_and_entropy_schedules_follow_the_timesteps():
    # 40 steps per iteration: the schedules are read at timesteps 0, 40, 80, 120, 160; they override
    # clip_param and entropy_coeff.
    config = {**TINY, "kl_coeff": 0.0, "clip_param": 0.5, "entropy_coeff": 0.5,
              "clip_param_schedule": [[0, 0.3], [100, 0.1]],
              "entropy_coeff_schedule": [[0, 0.0], [40, 0.02], [120, 0.01]]}
    with PPO(config=config, env=CountingEnv) as trainer:
        stats = [_stats(trainer.train()) for _ in range(5)]
    np.testing.assert_allclose([s["cur_clip_param"] for s in stats], [0.3, 0.22, 0.14, 0.1, 0.1], rtol=1e-9)
    np.testing.assert_allclose([s["entropy_coeff"] for s in stats], [0.0, 0.02, 0.015, 0.01, 0.01], rtol=1e-9, atol=1e-12)
    for s in stats:  # the loss weights the entropy by the scheduled coefficient
        assert s["entropy"] > 0.5
        _assert_total_loss_is_the_sum_of_its_terms(s, entropy_coeff=s["entropy_coeff"])


def test_clip_param_schedule_sets_the_clip_of_the_surrogate():
    base = {**TINY, "lr": 1e-2, "num_sgd_iter": 4, "kl_coeff": 0.0}
    scheduled, scheduled_weights = _run({**base, "clip_param": 0.3, "clip_param_schedule": [[0, 0.05], [1000, 0.05]]})
    plain, plain_weights = _run({**base, "clip_param": 0.05})
    _, unclipped_weights = _run({**base, "clip_param": 0.3})
    assert [_comparable(r) for r in scheduled] == [_comparable(r) for r in plain]
    assert [_stats(r)["clip_fraction"] for r in scheduled] == [_stats(r)["clip_fraction"] for r in plain]
    for key in scheduled_weights:
        np.testing.assert_array_equal(scheduled_weights[key], plain_weights[key])
    # ... and the clip matters here: clip_param itself would have trained other weights.
    assert any(not np.array_equal(scheduled_weights[k], unclipped_weights[k]) for k in scheduled_weights)


class HugeRewardEnv(CountingEnv):
    """A CountingEnv paying 1e3 per step: value targets of thousands against initial values near 0."""

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, 1e3, terminated, truncated, info


def test_vf_clip_param_caps_the_squared_value_error():
    config = {**TINY, "kl_coeff": 0.0, "lr": 1e-3}

    def run(vf_clip_param):
        with PPO(config={**config, "vf_clip_param": vf_clip_param}, env=HugeRewardEnv) as trainer:
            before = trainer.get_policy().get_weights()
            stats = [_stats(trainer.train()) for _ in range(3)]
            after = trainer.get_policy().get_weights()
        value_changed = [not np.array_equal(before[k], after[k]) for k in before if k.startswith("vf_")]
        return stats, value_changed

    clipped, value_changed = run(10.0)
    for s in clipped:
        assert s["vf_loss"] == pytest.approx(10.0)  # every squared error (~1e6) clipped to 10
        _assert_total_loss_is_the_sum_of_its_terms(s)
    # min(error^2, 10) has no gradient where the clip binds: the value network does not move (as RLlib).
    assert not any(value_changed)

    unclipped, value_changed = run(None)
    for s in unclipped:
        assert s["vf_loss"] > 1e5
        _assert_total_loss_is_the_sum_of_its_terms(s)
    assert all(value_changed)


KL_FAST = {**TINY, "lr": 1e-2, "num_sgd_iter": 4}


def _kl_run(config, iterations):
    with PPO(config=config, env="CartPole-v1") as trainer:
        return [_stats(trainer.train()) for _ in range(iterations)]


def test_kl_coeff_grows_by_half_while_kl_exceeds_twice_the_target():
    stats = _kl_run({**KL_FAST, "kl_target": 1e-5}, 3)
    coeffs = [0.2] + [s["cur_kl_coeff"] for s in stats]
    for used, s, reported in zip(coeffs, stats, coeffs[1:]):
        assert s["kl"] > 2e-5
        assert reported == pytest.approx(used * 1.5, rel=1e-12)
        _assert_total_loss_is_the_sum_of_its_terms(s, kl_coeff=used)  # the loss used the coefficient before adapting
    assert coeffs[-1] == pytest.approx(0.2 * 1.5**3, rel=1e-12)


def test_kl_coeff_halves_while_kl_is_below_half_the_target():
    stats = _kl_run({**TINY, "lr": 1e-7, "kl_target": 0.01}, 3)
    coeffs = [0.2] + [s["cur_kl_coeff"] for s in stats]
    for used, s, reported in zip(coeffs, stats, coeffs[1:]):
        assert s["kl"] < 0.005
        assert reported == pytest.approx(used * 0.5, rel=1e-12)
        _assert_total_loss_is_the_sum_of_its_terms(s, kl_coeff=used)
    assert coeffs[-1] == pytest.approx(0.2 * 0.5**3, rel=1e-12)


def test_kl_coeff_adapts_to_the_kl_measured_in_the_iteration():
    # kl_target only matters after the iteration, so the first iteration's kl is the same for any target:
    # set the target relative to it. The band [kl_target / 2, 2 * kl_target] is closed (RLlib's > and <).
    kl = _kl_run(KL_FAST, 1)[0]["kl"]
    assert kl > 0
    for target_over_kl, factor in [(1 / 3, 1.5), (1 / 2, 1.0), (1.0, 1.0), (2.0, 1.0), (3.0, 0.5)]:
        (stats,) = _kl_run({**KL_FAST, "kl_target": kl * target_over_kl}, 1)
        assert stats["kl"] == kl
        assert stats["cur_kl_coeff"] == pytest.approx(0.2 * factor, rel=1e-12), target_over_kl


def test_kl_coeff_zero_stays_zero_and_kl_is_still_measured():
    stats = _kl_run({**KL_FAST, "kl_coeff": 0.0, "kl_target": 1e-5}, 3)
    for s in stats:
        assert s["cur_kl_coeff"] == 0.0
        assert s["kl"] > 2e-5  # would have grown a non-zero coefficient
        _assert_total_loss_is_the_sum_of_its_terms(s, kl_coeff=0.0)


def test_adapted_kl_coeff_survives_a_checkpoint(tmp_path):
    config = {**KL_FAST, "kl_target": 1e-5}
    with PPO(config=config, env="CartPole-v1") as trainer:
        trainer.train()
        assert _stats(trainer.train())["cur_kl_coeff"] == pytest.approx(0.45, rel=1e-12)
        path = trainer.save(tmp_path / "ckpt")
    with PPO(config=config, env="CartPole-v1") as restored:
        restored.restore(path)
        stats = _stats(restored.train())
    assert stats["kl"] > 2e-5
    assert stats["cur_kl_coeff"] == pytest.approx(0.45 * 1.5, rel=1e-12)
    _assert_total_loss_is_the_sum_of_its_terms(stats, kl_coeff=0.45)
