"""Non-finite data never trains silently: screened samples (nan_policy), skipped learner steps, refused checkpoints.

The envs (``nonfinite_envs.py``) emit NaN or inf at a chosen step of chosen
episodes; with ``nan_policy: raise`` training stops with an EnvError that
names where, with ``drop_episode`` it goes on without the episode (and
counts it), and nothing non-finite reaches a batch, a filter, a replay
buffer or the weights.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from rltune.errors import CheckpointError, ConfigError, EnvError
from rltune.trainers import DQN, PPO
from rltune.trainers.checkpoints import _checkpoint as ckpt
from rltune.trainers.algorithms._dqn import DISCOUNTS
from rltune.trainers.sampling._sample_batch import (
    ACTION_LOGP, ACTIONS, ADVANTAGES, NEW_OBS, OBS, REWARDS, TERMINATEDS, VALUE_TARGETS, VF_PREDS,
)

from .nonfinite_envs import NonFiniteAgents, NonFiniteEnv, to_policy_p

PPO_TINY = {"train_batch_size": 64, "rollout_fragment_length": 32, "sgd_minibatch_size": 32, "num_sgd_iter": 1,
            "model": {"fcnet_hiddens": [8]}, "disable_env_checking": True, "torch_compile_learner": False}
DQN_TINY = {"train_batch_size": 16, "rollout_fragment_length": 8, "learning_starts": 16, "min_sample_timesteps_per_iteration": 64,
            "model": {"fcnet_hiddens": [8]}, "hiddens": [8], "disable_env_checking": True, "torch_compile_learner": False}
TINY = {PPO: PPO_TINY, DQN: DQN_TINY}
MULTI = {"multiagent": {"policies": {"p"}, "policy_mapping_fn": to_policy_p}}
WHAT = {"reward": "reward nan", "obs": "observation (flattened) entries [1] = nan",
        "final_obs": "observation (flattened) entries [1] = nan", "reset_obs": "observation (flattened) entries [1] = nan"}
WHEN = {"reward": "step 3 of the episode", "obs": "step 3 of the episode", "final_obs": "step 8 of the episode", "reset_obs": "reset()"}


def _trainer(algo, env, *, multi=False, **config):
    return algo(config={**TINY[algo], **(MULTI if multi else {}), **config}, env=env)


def _weights_finite(trainer) -> bool:
    return all(bool(torch.isfinite(v).all()) for p in trainer.workers.local_worker.policy_map.values()
               for v in p.model.state_dict().values() if v.is_floating_point())


# -- nan_policy: raise ------------------------------------------------------------------------
@pytest.mark.parametrize("algo", [PPO, DQN])
@pytest.mark.parametrize("obs_filter", ["NoFilter", "MeanStdFilter"])
@pytest.mark.parametrize("bad", ["reward", "obs", "final_obs", "reset_obs"])
@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_raise_names_the_env_worker_env_index_agent_step_and_value(algo, obs_filter, bad, multi):
    env = NonFiniteAgents if multi else NonFiniteEnv
    trainer = _trainer(algo, env, multi=multi, observation_filter=obs_filter, num_envs_per_worker=2,
                       env_config={"bad": bad, "every": 2, "vector_index": 1})
    try:
        with pytest.raises(EnvError) as info:
            for _ in range(3):
                trainer.train()
        message = str(info.value)
        assert f"env '{env.__name__}' (worker 0, env 1)" in message and WHEN[bad] in message and WHAT[bad] in message
        assert "nan_policy" in message
        assert ("agent 'b'" in message) == multi
        assert _weights_finite(trainer)
        for obs_filter_ in trainer.workers.local_worker.filters.values():
            assert np.isfinite(obs_filter_.stats.mean).all() and np.isfinite(obs_filter_.stats.m2).all()
    finally:
        trainer.stop()


@pytest.mark.parametrize("value, single_shown, multi_shown", [
    # A single-agent sampler screens the fragment's rewards as float32 holds them; a multi-agent one each as it comes.
    ("inf", "reward inf (in float32: the env's may be larger", "reward inf (nan_policy"),
    ("-inf", "reward -inf (in float32: the env's may be larger", "reward -inf (nan_policy"),
    ("1e39", "reward inf (in float32: the env's may be larger than float32's range)", "reward 1e+39 (beyond float32's range)"),
])
@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_raise_names_infinite_and_float32_overflowing_rewards(value, single_shown, multi_shown, multi):
    trainer = _trainer(PPO, NonFiniteAgents if multi else NonFiniteEnv, multi=multi, env_config={"value": value})
    try:
        with pytest.raises(EnvError) as info:
            trainer.train()
        assert f"step 3 of the episode: non-finite {multi_shown if multi else single_shown}" in str(info.value)
    finally:
        trainer.stop()


def test_raise_in_a_rollout_worker_process_names_that_worker():
    trainer = _trainer(PPO, NonFiniteAgents, multi=True, num_workers=1, env_config={"bad": "obs", "value": "-inf"})
    try:
        with pytest.raises(EnvError, match=r"\(worker 1, env 0\), agent 'b', step 3 of the episode: non-finite observation"):
            trainer.train()
    finally:
        trainer.stop()


def test_nan_policy_is_validated_and_documented():
    with pytest.raises(ConfigError, match=r"nan_policy: Input should be 'raise' or 'drop_episode' \(got 'ignore'\)"):
        PPO(config={"nan_policy": "ignore"}, env="CartPole-v1")
    assert PPO.get_default_config()["nan_policy"] == DQN.get_default_config()["nan_policy"] == "raise"
    assert "nan_policy: 'raise'  # A NaN or infinite reward or observation" in PPO.describe_config()


# -- nan_policy: drop_episode ---------------------------------------------------------------------
# Observations a filter sees: the first, one per step but the dropped steps', one per reset but the bad ones.
@pytest.mark.parametrize("bad, rows, lengths, dropped, filtered", [
    # 40 steps of episodes of 8, every second one bad at its step 3. A bad observation ends its episode there:
    # 8 kept, 3 dropped, 8, 3, 8, 3, then 7 kept (cut). A bad reward (screened once per fragment) drops the
    # episode whole, which ran on to its end: 8 kept, 8 dropped, 8, 8, 8.
    ("reward", 8 + 8 + 8, [8, 8, 8], 2, 1 + 40 + 5),
    ("obs", 8 + 8 + 8 + 7, [8, 8, 8], 3, 1 + 37 + 6),
    # bad at the last step: 8 kept, 8 dropped, 8, 8, 8
    ("final_obs", 8 + 8 + 8, [8, 8, 8], 2, 1 + 38 + 5),
    # every second reset is bad: dropped before a step is taken, the env is reset again
    ("reset_obs", 40, [8, 8, 8, 8, 8], 5, 1 + 40 + 5),
])
@pytest.mark.parametrize("obs_filter", ["NoFilter", "MeanStdFilter"])
def test_drop_episode_leaves_the_episode_out_of_the_batch(bad, rows, lengths, dropped, filtered, obs_filter):
    trainer = _trainer(PPO, NonFiniteEnv, nan_policy="drop_episode", observation_filter=obs_filter, rollout_fragment_length=40,
                       train_batch_size=40, env_config={"bad": bad, "every": 2})
    try:
        result = trainer.workers.local_worker.sample()
        batch = trainer.algorithm.postprocess(result)["default_policy"]
        assert len(batch[REWARDS]) == rows and (batch[REWARDS] == 1.0).all()
        assert all(np.isfinite(column).all() for column in batch.values() if column.dtype.kind == "f")
        assert [e.episode_length for e in result.episodes] == lengths and {e.episode_reward for e in result.episodes} == {8.0}
        assert result.num_dropped_episodes == dropped == sum(trainer.foreach_env(lambda env: env.num_bad))
        for obs_filter_ in trainer.workers.local_worker.filters.values():
            assert obs_filter_.stats.count == filtered
    finally:
        trainer.stop()


@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_drop_episode_with_complete_episodes_drops_the_pieces_of_earlier_fragments(multi):
    # Fragments of 5 steps: episode 2 (steps 9-11 of the env, bad at its step 3) spans two of them.
    trainer = _trainer(PPO, NonFiniteAgents if multi else NonFiniteEnv, multi=multi, nan_policy="drop_episode",
                       batch_mode="complete_episodes", rollout_fragment_length=5, train_batch_size=40,
                       env_config={"bad": "reward", "every": 2})
    try:
        worker = trainer.workers.local_worker
        sampler = worker.sampler
        for _ in range(3):
            result = worker.sample(40)
            batch = trainer.algorithm.postprocess(result)["p" if multi else "default_policy"]
            assert len(batch[REWARDS]) % 8 == 0 and (batch[REWARDS] == 1.0).all()
            assert batch[TERMINATEDS].sum() == len(batch[REWARDS]) // 8 and result.num_dropped_episodes >= 2
            running = sampler.layout.episode_numbers[0]
            assert {key[1] for key in sampler.episode_buffer._pending} <= {running}  # pieces of the running episode only
    finally:
        trainer.stop()


@pytest.mark.parametrize("algo", [PPO, DQN])
@pytest.mark.parametrize("obs_filter", ["NoFilter", "MeanStdFilter"])
@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_drop_episode_trains_on_with_finite_weights_and_counts(algo, obs_filter, multi, caplog):
    env = NonFiniteAgents if multi else NonFiniteEnv
    trainer = _trainer(algo, env, multi=multi, nan_policy="drop_episode", observation_filter=obs_filter, num_envs_per_worker=2,
                       env_config={"bad": "obs", "every": 3})
    try:
        with caplog.at_level(logging.WARNING, logger="rltune.trainers.sampling._nonfinite"):
            results = [trainer.train() for _ in range(2)]
        last = results[-1]
        assert last["num_dropped_episodes_nonfinite"] == sum(trainer.foreach_env(lambda e: e.num_bad)) > 0
        warnings = [r.getMessage() for r in caplog.records if "episodes dropped for a non-finite" in r.getMessage()]
        assert len(warnings) == 2 and "iteration 1" in warnings[0] and "iteration 2" in warnings[1]
        assert last["episode_reward_mean"] == (16.0 if multi else 8.0)  # the kept episodes only
        assert _weights_finite(trainer)
        assert last["num_nonfinite_updates"] == 0
        pid = "p" if multi else "default_policy"
        assert last["info"]["learner"][pid]["num_nonfinite_updates"] == 0 and np.isfinite(last["info"]["learner"][pid]["total_loss"])
        for obs_filter_ in trainer.workers.local_worker.filters.values():
            assert np.isfinite(obs_filter_.stats.mean).all() and np.isfinite(obs_filter_.stats.m2).all()
        if algo is DQN:
            stored = trainer.algorithm.buffers[pid].get_state()
            assert len(stored[REWARDS]) and all(np.isfinite(stored[k]).all() for k in (OBS, NEW_OBS, REWARDS))
    finally:
        trainer.stop()


def test_drop_episode_in_rollout_worker_processes_is_counted():
    trainer = _trainer(PPO, NonFiniteEnv, nan_policy="drop_episode", num_workers=2, env_config={"bad": "reward", "every": 2})
    try:
        result = trainer.train()
        assert result["num_dropped_episodes_nonfinite"] == sum(trainer.foreach_env(lambda e: e.num_bad)) > 0
        assert _weights_finite(trainer)
    finally:
        trainer.stop()


# -- learner steps with a non-finite loss ----------------------------------------------------
def _ppo_batch(n: int, advantage: float = 0.0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    batch = {OBS: rng.normal(size=(n, 4)).astype(np.float32), ACTIONS: rng.integers(0, 2, n),
             ACTION_LOGP: np.full(n, -0.69, np.float32), ADVANTAGES: rng.normal(size=n).astype(np.float32),
             VALUE_TARGETS: rng.normal(size=n).astype(np.float32), VF_PREDS: np.zeros(n, np.float32)}
    batch[ADVANTAGES][3] += advantage
    return batch


def _state(trainer):
    weights = {k: v.clone() for k, v in trainer.get_policy().model.state_dict().items()}
    adam = {k: v.clone() for k, v in trainer.get_learner().optimizer.state_dict()["state"][0].items()}
    return weights, adam


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_ppo_step_with_a_non_finite_loss_is_skipped_and_counted(compiled):
    trainer = PPO(config={**PPO_TINY, "train_batch_size": 64, "sgd_minibatch_size": 64, "normalize_advantages": False,
                          "torch_compile_learner": compiled}, env="CartPole-v1")
    try:
        learner = trainer.get_learner()
        learner.update(_ppo_batch(64))  # a finite step first: Adam's state exists
        before = _state(trainer)
        stats = learner.update(_ppo_batch(64, advantage=float("inf")))
        assert stats["num_nonfinite_updates"] == 1 and not np.isfinite(stats["total_loss"])
        weights, adam = _state(trainer)
        assert _same(weights, before[0]) and _same(adam, before[1])  # weights, moments and step count untouched
        learner.update(_ppo_batch(64))
        assert learner.optimizer.state_dict()["state"][0]["step"].item() == 2
        result = trainer.train()
        assert result["num_nonfinite_updates"] == result["info"]["learner"]["default_policy"]["num_nonfinite_updates"] == 1
    finally:
        trainer.stop()


def test_a_dqn_step_on_a_replayed_nan_reward_is_skipped_and_counted():
    trainer = DQN(config={**DQN_TINY, "learning_starts": 0, "double_q": True}, env="CartPole-v1")
    try:
        rng = np.random.default_rng(0)
        rows = {OBS: rng.normal(size=(16, 4)).astype(np.float32), ACTIONS: rng.integers(0, 2, 16),
                REWARDS: np.ones(16, np.float32), NEW_OBS: rng.normal(size=(16, 4)).astype(np.float32),
                TERMINATEDS: np.zeros(16, bool), DISCOUNTS: np.full(16, 0.9, np.float32)}
        buffer = trainer.algorithm.buffers["default_policy"]
        buffer.set_state(rows)
        trainer.algorithm._updates(1)
        before = _state(trainer)
        buffer.set_state({**rows, REWARDS: np.full(16, np.nan, np.float32)})
        stats = trainer.algorithm._updates(1)
        assert stats["num_nonfinite_updates"] == 1
        weights, adam = _state(trainer)
        assert _same(weights, before[0]) and _same(adam, before[1])
    finally:
        trainer.stop()


# -- checkpoints ------------------------------------------------------------------------------------
def _poison(trainer, pid: str = "default_policy") -> str:
    """Put a NaN into one weight tensor of policy ``pid``; its name."""
    weights = trainer.get_policy(pid).get_weights()
    name = sorted(weights)[0]
    weights[name].flat[0] = np.nan
    trainer.get_policy(pid).set_weights(weights)
    return name


@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_save_refuses_non_finite_weights(multi, tmp_path):
    trainer = _trainer(PPO, NonFiniteAgents if multi else NonFiniteEnv, multi=multi, env_config={"every": 1000})
    try:
        pid = "p" if multi else "default_policy"
        name = _poison(trainer, pid)
        with pytest.raises(CheckpointError, match=f"cannot save checkpoint .*: policy '{pid}', weight tensor '{name}' holds NaN or inf"):
            trainer.save(tmp_path / "ckpt")
        assert not (tmp_path / "ckpt").exists()
    finally:
        trainer.stop()


def _resealed_with_nan_weights(checkpoint: Path) -> str:
    """Put a NaN into a saved weight tensor and recompute the checksums, as someone editing the files would; its name."""
    state = torch.load(checkpoint / ckpt.TENSORS_FILE, weights_only=True)
    name = sorted(state["policies"]["default_policy"])[0]
    state["policies"]["default_policy"][name].view(-1)[0] = float("nan")
    torch.save(state, checkpoint / ckpt.TENSORS_FILE)
    meta_file = checkpoint / ckpt.METADATA_FILE
    meta = json.loads(meta_file.read_text())
    meta[ckpt.CHECKSUMS][ckpt.TENSORS_FILE] = ckpt._sha256(checkpoint / ckpt.TENSORS_FILE)
    meta[ckpt.METADATA_CHECKSUM] = ckpt.metadata_checksum(meta)
    meta_file.write_text(json.dumps(meta))
    return name


def test_restore_refuses_a_checkpoint_edited_to_hold_nan_weights(tmp_path):
    trainer = PPO(config={**PPO_TINY}, env="CartPole-v1")
    try:
        path = Path(trainer.save(tmp_path / "ckpt"))
        name = _resealed_with_nan_weights(path)
        before = trainer.get_policy().get_weights()
        with pytest.raises(CheckpointError, match=f"checkpoint .*: policy 'default_policy', weight tensor '{name}' holds NaN or inf"):
            trainer.restore(path)
        assert all(np.array_equal(before[k], v) for k, v in trainer.get_policy().get_weights().items())
        with pytest.raises(CheckpointError, match="holds NaN or inf"):
            PPO.from_checkpoint(path)
    finally:
        trainer.stop()


def test_a_study_trial_whose_env_emits_nan_fails_with_the_message(tmp_path):
    from rltune import tune

    analysis = tune.run(
        "PPO",
        config={**PPO_TINY, "env": "trainers.nonfinite_envs:NonFiniteEnv",
                "env_config": {"every": tune.grid_search([1, 1000])}},
        stop={"training_iteration": 2}, metric="episode_reward_mean", mode="max",
        results_dir=str(tmp_path), name="nan", verbose=0, tracking=False,
    )
    failed, completed = sorted(analysis.trials, key=lambda t: t.config["env_config"]["every"])
    assert completed.state == "COMPLETE" and failed.state == "FAIL"
    expected = "(worker 0, env 0), step 3 of the episode: non-finite reward nan"
    assert expected in failed.error and expected in (Path(failed.trial_dir) / "error.txt").read_text()
