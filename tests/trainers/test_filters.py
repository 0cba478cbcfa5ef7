"""Observation filters (MeanStdFilter): statistics by hand, merged across workers, synced, saved, applied frozen, learning."""

from __future__ import annotations

import logging
import os
import signal

import numpy as np
import pytest

from rltune.errors import CheckpointError, ConfigError
from rltune.trainers import DQN, PPO, register_env
from rltune.trainers.policies._filters import CLIP, EPSILON, MeanStdFilter, RunningStats
from rltune.trainers.sampling._sample_batch import NEW_OBS, OBS, TERMINATEDS
from processes import wait_gone
from trainer_params import iteration_config
from trainers.multi_agent_envs import TurnGame

from .envs import FailingEnv, ScaledCartPole

TINY = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 16,
    "train_batch_size": 64,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
    "observation_filter": "MeanStdFilter",
    "disable_env_checking": True,  # the checker would step the env: observations no filter saw
}

DQN_TINY = {
    **{k: v for k, v in TINY.items() if k not in ("train_batch_size", "sgd_minibatch_size", "num_sgd_iter")},
    **iteration_config(DQN, 32),
}


def by_hand(obs: np.ndarray, stats: RunningStats) -> np.ndarray:
    return np.clip((obs - stats.mean) / (stats.std + EPSILON), -CLIP, CLIP)


# -- the statistics ------------------------------------------------------------------------------
def test_mean_std_and_clip_of_a_known_sequence():
    f = MeanStdFilter(2, track_delta=False)
    np.testing.assert_array_equal(f(np.zeros((0, 2), np.float32)), np.zeros((0, 2)))
    first = f(np.array([[1.0, 10.0], [3.0, 10.0]], np.float32))
    # columns 1, 3 and 10, 10: mean (2, 10), sample std (sqrt(2), 0); each row is filtered with its own batch in
    r2 = 1 / (np.sqrt(2) + EPSILON)
    np.testing.assert_allclose(first, [[-r2, 0.0], [r2, 0.0]], rtol=1e-6)
    second = f(np.array([[5.0, 40.0]], np.float32))
    # columns 1, 3, 5 and 10, 10, 40: mean (3, 20); sample variance (4 + 0 + 4) / 2 = 4 and (100 + 100 + 400) / 2 = 300
    assert f.stats.count == 3
    np.testing.assert_allclose(f.stats.mean, [3.0, 20.0], rtol=1e-15)
    np.testing.assert_allclose(f.stats.std, [2.0, np.sqrt(300.0)], rtol=1e-15)
    np.testing.assert_allclose(second, [[2 / (2 + EPSILON), 20 / (np.sqrt(300) + EPSILON)]], rtol=1e-6)
    frozen = f.normalize(np.array([[1000.0, 20.0], [-1000.0, 20.0 - 3 * np.sqrt(300.0)]], np.float32))
    np.testing.assert_allclose(frozen, [[CLIP, 0.0], [-CLIP, -3.0]], rtol=1e-5)  # 500 and -500 std: clipped
    assert frozen.dtype == np.float32 and f.stats.count == 3  # normalize() never updates


def test_before_two_observations_the_filter_passes_through_or_only_centres():
    f = MeanStdFilter(2)
    x = np.array([[4.0, -2.0]], np.float32)
    np.testing.assert_array_equal(f.normalize(x), x)  # no statistics yet
    np.testing.assert_allclose(f(x), [[0.0, 0.0]])
    np.testing.assert_allclose(f.normalize(np.array([[5.0, 0.0]], np.float32)), [[1.0, 2.0]], rtol=1e-5)  # std of one: 1


def test_merging_the_stats_of_two_sequences_is_the_stats_of_their_concatenation():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(7, 3)) + 1e6  # a large offset: sums of squares would lose the variance
    b = rng.normal(size=(12, 3)) * 3 + 1e6
    merged = RunningStats.of(a)
    merged.merge(RunningStats.of(b))
    both = np.concatenate([a, b])
    assert merged.count == 19
    np.testing.assert_allclose(merged.mean, both.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(merged.std, both.std(axis=0, ddof=1), rtol=1e-9)


def test_the_master_merging_two_workers_deltas_has_the_stats_of_everything_they_saw():
    rng = np.random.default_rng(1)
    master = MeanStdFilter(3, track_delta=False)
    workers = [MeanStdFilter(3), MeanStdFilter(3)]
    seen: list[list[np.ndarray]] = [[], []]
    synced: list[np.ndarray] = []  # what every worker had reported at the last sync
    for step in range(23):
        for w, worker in enumerate(workers):
            rows = (rng.normal(size=(1 + step % 4, 3)) * [1.0, 10.0, 0.1] + [5e4, -5.0, 3.0 * w]).astype(np.float32)
            worker(rows)
            seen[w].append(rows)
        if step % 5 == 4:  # an iteration: each worker's delta goes to the master, whose stats come back
            for worker in workers:
                master.merge_delta(worker.flush_delta())
            for worker in workers:
                worker.set_stats(master.stats)
            synced = [np.concatenate(s) for s in seen]
    everything = np.concatenate(synced).astype(np.float64)
    assert master.stats.count == len(everything)
    np.testing.assert_allclose(master.stats.mean, everything.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(master.stats.std, everything.std(axis=0, ddof=1), rtol=1e-9)
    # Between syncs a worker filters with the master's stats plus its own unreported observations.
    own = np.concatenate(seen[0][20:])  # worker 0's steps since the last sync (after step 19)
    mine = np.concatenate([everything, own.astype(np.float64)])
    np.testing.assert_allclose(workers[0].stats.mean, mine.mean(axis=0), rtol=1e-12)
    assert workers[0].stats.count == len(mine)


# -- in the sampler and the trainer ----------------------------------------------------------
def test_the_batch_holds_filtered_observations_and_new_obs_is_the_next_obs():
    with DQN(config=DQN_TINY, env=ScaledCartPole) as trainer:  # DQN: its batches keep new_obs (PPO's drop it)
        worker = trainer.workers.local_worker
        batch = trainer.algorithm.postprocess(worker.sample())["default_policy"]
        stats = worker.filters["default_policy"].stats
        raw = np.concatenate([env.seen for env in worker.envs])
        assert stats.count == len(raw)  # every observation the envs returned, resets included, once
        np.testing.assert_allclose(stats.mean, raw.astype(np.float64).mean(axis=0), rtol=1e-9)
        assert np.abs(batch[OBS]).max() <= CLIP and np.abs(raw).min() > 1000  # raw ones are ~1e5
        n = TINY["num_envs_per_worker"]
        going_on = ~batch[TERMINATEDS][:-n]
        assert going_on.sum() > 20
        np.testing.assert_array_equal(batch[NEW_OBS][:-n][going_on], batch[OBS][n:][going_on])
        # The last step's observations were filtered with the final stats.
        last = np.stack([env.seen[-1] for env in worker.envs])
        if not batch[TERMINATEDS][-n:].any():
            np.testing.assert_allclose(batch[NEW_OBS][-n:], by_hand(last, stats), rtol=1e-5, atol=1e-5)


def test_an_env_that_fails_mid_step_repeats_its_filtered_obs_and_its_new_episode_is_filtered():
    config = {
        **DQN_TINY, "rollout_fragment_length": 8, "restart_failed_sub_environments": True,
        "env_config": {"fail_in": "step", "fail_at": 4, "episode_len": 100},
    }
    with DQN(config=config, env=FailingEnv) as trainer:
        worker = trainer.workers.local_worker
        batch = trainer.algorithm.postprocess(worker.sample())["default_policy"]
        # Each env: its first reset, 3 steps, the 4th raises (no obs), the rebuilt env's reset, 4 more steps.
        raw = np.array([[0.0, v, t] for v in (0, 1) for t in (0, 1, 2, 3, 0, 1, 2, 3, 4)])
        stats = worker.filters["default_policy"].stats
        assert stats.count == len(raw)
        np.testing.assert_allclose(stats.mean, raw.mean(axis=0), rtol=1e-12)
        failed = slice(3 * 2, 4 * 2)  # the 4th step's rows (env-major inside a step)
        np.testing.assert_array_equal(batch[NEW_OBS][failed], batch[OBS][failed])
        # The new episodes' first obs were filtered as one batch, with the stats of the 10 obs seen by then.
        then = RunningStats.of(np.array([[0.0, v, t] for v in (0, 1) for t in (0, 1, 2, 3, 0)]))
        np.testing.assert_allclose(batch[OBS][4 * 2 + 1], by_hand(np.array([0.0, 1.0, 0.0]), then), rtol=1e-5, atol=1e-6)


def test_across_two_remote_workers_the_trainer_has_the_stats_of_every_observation_and_restarts_get_them(tmp_path):
    config = {**TINY, "num_workers": 2, "recreate_failed_workers": True}
    trainer = PPO(config=config, env=ScaledCartPole)
    try:
        for _ in range(2):
            trainer.train()
        master = trainer.workers.local_worker.filters["default_policy"].stats
        raw = np.concatenate(trainer.foreach_env(lambda env: np.array(env.seen))).astype(np.float64)
        assert master.count == len(raw) > 128
        np.testing.assert_allclose(master.mean, raw.mean(axis=0), rtol=1e-9)
        np.testing.assert_allclose(master.std, raw.std(axis=0, ddof=1), rtol=1e-7)
        # Every worker got the master's stats with the weights.
        counts = trainer.foreach_worker(lambda w: w.get_filters()["default_policy"].count)
        assert counts == [master.count] * 3
        # A restarted worker gets the current filter before anything else.
        pid = trainer.workers.remote_workers[0].pid
        os.kill(pid, signal.SIGKILL)
        assert wait_gone([pid]) == []
        remote = trainer.foreach_worker(lambda w: w.get_filters()["default_policy"])
        assert trainer.workers.remote_workers[0].restarts == 1
        for stats in remote[1:]:
            assert stats.count == master.count
            np.testing.assert_array_equal(stats.mean, master.mean)
        saved = master.copy()
        path = trainer.save(tmp_path / "ckpt")
    finally:
        trainer.stop()
    with PPO(config=TINY, env=ScaledCartPole) as local:  # restored with another num_workers (0)
        local.restore(path)
        restored = local.workers.local_worker.filters["default_policy"].stats
        assert restored.count == saved.count
        np.testing.assert_array_equal(restored.mean, saved.mean)
        np.testing.assert_array_equal(restored.m2, saved.m2)


def test_checkpoints_restore_the_filter_and_refuse_another_filter(tmp_path):
    with PPO(config=TINY, env=ScaledCartPole) as trainer:
        trainer.train()
        master = trainer.workers.local_worker.filters["default_policy"]
        saved = master.stats.copy()
        path = trainer.save(tmp_path / "ckpt")
        trainer.train()  # the filter moves on; restoring goes back
        trainer.restore(path)
        np.testing.assert_array_equal(master.stats.m2, saved.m2)
        assert master.stats.count == saved.count
        with PPO(config={**TINY, "observation_filter": "NoFilter"}, env=ScaledCartPole) as unfiltered:
            with pytest.raises(
                CheckpointError, match="was trained with a MeanStdFilter, but this PPO has observation_filter 'NoFilter'"
            ):
                unfiltered.restore(path)
            plain = unfiltered.save(tmp_path / "plain")
        with pytest.raises(CheckpointError, match=r"trained with no observation filter \(NoFilter\).*set observation_filter to NoFilter"):
            trainer.restore(plain)
        np.testing.assert_array_equal(master.stats.m2, saved.m2)  # a failed restore changes nothing


def lean_controller(trainer) -> None:
    """Give the policy hand-set weights: push right (1) when the filtered pole angle is positive, else left."""
    weights = {k: np.zeros_like(v) for k, v in trainer.get_policy().get_weights().items()}
    weights["pi_body.0.weight"][0, 2] = 1.0  # hidden unit 0: tanh of the pole angle (as filtered)
    weights["pi_head.weight"][1, 0] = 5.0
    trainer.set_weights({"default_policy": weights})


def test_evaluation_and_compute_single_action_apply_the_filter_frozen():
    ScaledCartPole.built.clear()
    with PPO(config={**TINY, "num_envs_per_worker": 1}, env=ScaledCartPole) as trainer:
        trainer.train()
        lean_controller(trainer)
        policy = trainer.get_policy()
        stats = trainer.workers.local_worker.filters["default_policy"].stats
        count = stats.count
        trainer.evaluate(2)
        (eval_env,) = [env for env in ScaledCartPole.built if env.ctx.worker_index == 1]  # num_workers + 1
        observations = eval_env.acted_on
        filtered = [policy.compute_actions(by_hand(o, stats)[None].astype(np.float32), explore=False)[0][0] for o in observations]
        assert eval_env.actions == filtered and set(filtered) == {0, 1}
        assert [trainer.compute_single_action(o) for o in observations] == filtered
        assert stats.count == count  # neither changed the statistics
        # Unfiltered, the saturated angle unit always pushes right: the test tells the two apart.
        assert {policy.compute_single_action(o) for o in observations} == {1}


def test_rltune_rollout_applies_the_checkpoints_filter_frozen(tmp_path, capsys):
    from rltune.orchestrator.cli import main

    register_env("rltune-test-scaled-cartpole", ScaledCartPole)
    with PPO(config={**TINY, "env": "rltune-test-scaled-cartpole"}) as trainer:
        trainer.train()
        lean_controller(trainer)
        stats = trainer.workers.local_worker.filters["default_policy"].stats.copy()
        policy = trainer.get_policy()
        path = trainer.save(tmp_path / "ckpt")
        ScaledCartPole.built.clear()
        root_level = logging.getLogger().level
        try:
            assert main(["rollout", path, "--episodes", "1"]) == 0, capsys.readouterr().err
        finally:
            logging.getLogger().setLevel(root_level)  # the CLI configures logging, as a CLI does
        (env,) = [e for e in ScaledCartPole.built if e.ctx.worker_index == 1]  # the rollout's evaluation env
        expected = [policy.compute_actions(by_hand(o, stats)[None].astype(np.float32), explore=False)[0][0] for o in env.acted_on]
        assert env.actions == expected and set(expected) == {0, 1}


def test_the_exported_mlflow_model_applies_the_saved_filter(tmp_path):
    import mlflow.pyfunc

    from rltune.tracking._mlflow_model import load_observation_filter, save_policy_model, write_policy_dir

    register_env("rltune-test-scaled-cartpole", ScaledCartPole)
    ScaledCartPole.built.clear()
    with PPO(config={**TINY, "env": "rltune-test-scaled-cartpole"}) as trainer:
        trainer.train()
        lean_controller(trainer)
        observations = np.stack(ScaledCartPole.built[0].seen[:40])
        expected = [trainer.compute_single_action(o) for o in observations]
        saved = trainer.workers.local_worker.filters["default_policy"].stats.copy()
        save_policy_model(trainer, tmp_path / "model")
        checkpoint = trainer.save(tmp_path / "ckpt")
        trainer.train()  # the trainer's filter moves on; the model's stays as saved
    model = mlflow.pyfunc.load_model(str(tmp_path / "model"))
    assert model.predict(observations).tolist() == expected and set(expected) == {0, 1}
    from_checkpoint = load_observation_filter(write_policy_dir(checkpoint, tmp_path / "policy"))  # the other export route
    assert from_checkpoint.stats.count == saved.count
    np.testing.assert_array_equal(from_checkpoint.stats.m2, saved.m2)


def test_multi_agent_policies_have_their_own_filters_shared_by_their_agents():
    config = {
        **DQN_TINY,
        "env": TurnGame,
        "rollout_fragment_length": 8,
        "multiagent": {"policies": {"pol_x", "pol_o"}, "policy_mapping_fn": lambda agent, *a, **k: f"pol_{agent}"},
    }
    with DQN(config=config) as trainer:  # DQN: its batches keep new_obs
        worker = trainer.workers.local_worker
        batches = trainer.algorithm.postprocess(worker.sample())
        # One episode of 8 moves per env; x observes at t = 0, 2, 4, 6, its final obs at 8 and the next reset (t = 0);
        # o at 1, 3, 5, 7 and its final obs at 8. Two envs: each observation twice.
        x = np.array([[t / 8, 0.0] for t in (0, 2, 4, 6, 8, 0)] * 2)
        o = np.array([[t / 8, 1.0] for t in (1, 3, 5, 7, 8)] * 2)
        for pid, seen in (("pol_x", x), ("pol_o", o)):
            stats = worker.filters[pid].stats
            assert stats.count == len(seen)
            np.testing.assert_allclose(stats.mean, seen.mean(axis=0), rtol=1e-6)
            np.testing.assert_allclose(stats.std[0], seen[:, 0].std(ddof=1), rtol=1e-6)
        # Both envs' final observations came in one step, filtered as one batch with the final stats.
        done = batches["pol_o"][TERMINATEDS]
        final = by_hand(np.array([1.0, 1.0]), worker.filters["pol_o"].stats)
        np.testing.assert_allclose(batches["pol_o"][NEW_OBS][done], [final, final], rtol=1e-5, atol=1e-6)
        trainer.add_policy("pol_new", policy=trainer.get_policy("pol_x"))
        assert worker.filters["pol_new"].stats.count == 0


# -- config ----------------------------------------------------------------------------------------
def test_an_unknown_filter_name_lists_the_accepted_ones():
    with pytest.raises(ConfigError) as info:
        PPO.validate({"observation_filter": "MeanStd"})
    assert str(info.value) == (
        "invalid PPO config: observation_filter: 'MeanStd' is not an observation filter; "
        "use one of 'NoFilter', 'MeanStdFilter', 'ConcurrentMeanStdFilter' (got 'MeanStd')"
    )
    assert PPO.validate({"observation_filter": "ConcurrentMeanStdFilter"}).observation_filter == "ConcurrentMeanStdFilter"
    with pytest.raises(ConfigError, match="evaluation_config.observation_filter: 'NoFilter' differs"):
        PPO.validate({"observation_filter": "MeanStdFilter", "evaluation_config": {"observation_filter": "NoFilter"}})


# -- learning ----------------------------------------------------------------------------------------
LEARN = {
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
    "metrics_num_episodes_for_smoothing": 20,
    "torch_compile_learner": False,
    "seed": 1,
}


def _best_return(observation_filter: str, iterations: int, target: float) -> float:
    best = 0.0
    with PPO(config={**LEARN, "observation_filter": observation_filter}, env=ScaledCartPole) as trainer:
        for _ in range(iterations):
            best = max(best, trainer.train()["episode_reward_mean"])
            if best >= target:
                break
    return best


def test_ppo_learns_scaled_cartpole_with_mean_std_filter_and_not_without():
    # Observations x1000 + 1e5: unfiltered, the tanh layers saturate and the policy stays random (~22).
    assert _best_return("MeanStdFilter", 20, target=80) >= 80
    assert _best_return("NoFilter", 20, target=80) < 40
