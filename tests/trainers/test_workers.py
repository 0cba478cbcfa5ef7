"""Rollout worker processes: env placement, running functions on them, dead workers, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gymnasium import spaces

from rltune.errors import ConfigError, WorkerError
from rltune.trainers import DQN, PPO, EnvContext
from processes import process_alive, wait_gone
from trainer_params import iteration_config

from .envs import ContextEnv, FailingEnv

TINY = {
    "rollout_fragment_length": 10,
    "sgd_minibatch_size": 10,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}  # PPO's


def tiny(trainer_cls, steps: int, **config) -> dict:
    """A tiny config of ``trainer_cls`` sampling ``steps`` env steps per iteration, ``config`` on top."""
    shared = {"rollout_fragment_length": 10, "model": {"fcnet_hiddens": [8]}}
    return {**shared, **iteration_config(trainer_cls, steps, minibatch=10 if trainer_cls is PPO else None), **config}
ENV_CONFIG = {"alpha": 1, "name": "grid", "nested": {"k": [1, 2]}}


def env_pid(env) -> int:
    """A function defined in the test module (shipped to workers by reference)."""
    return os.getpid()


def worker_summary(worker):
    return (worker.worker_index, os.getpid(), len(worker.envs))


@pytest.fixture(scope="module")
def trainer(trainer_cls):
    """2 rollout workers x 3 envs, shared by the read-only tests of this module."""
    t = trainer_cls(
        config=tiny(trainer_cls, 60, num_workers=2, num_envs_per_worker=3, env_config=ENV_CONFIG),
        env=ContextEnv,
    )
    yield t
    t.stop()


# --- where envs run and what they are told ------------------------------------------------

EXPECTED_PLACES = [(w, v, 2) for w in (1, 2) for v in (0, 1, 2)]


def test_env_contexts_through_foreach_env_with_context(trainer):
    seen = trainer.foreach_env_with_context(
        lambda env, ctx: (ctx.worker_index, ctx.vector_index, ctx.num_workers, dict(ctx), isinstance(ctx, EnvContext))
    )
    assert [s[:3] for s in seen] == EXPECTED_PLACES
    assert all(s[3] == ENV_CONFIG for s in seen)
    assert all(s[4] for s in seen)


def test_env_contexts_as_recorded_by_the_envs(trainer):
    described = trainer.foreach_env(lambda env: env.unwrapped.describe())
    assert [(d["worker_index"], d["vector_index"], d["num_workers"]) for d in described] == EXPECTED_PLACES
    assert all(d["env_config"] == ENV_CONFIG and d["is_env_context"] for d in described)
    assert not any(d["recreated"] for d in described)


def test_envs_run_in_the_worker_processes(trainer):
    test_pid = os.getpid()
    pids = trainer.foreach_env(lambda env: os.getpid())
    assert len(pids) == 6
    worker_pids = [w.pid for w in trainer.workers.remote_workers]
    assert pids == [worker_pids[0]] * 3 + [worker_pids[1]] * 3
    assert test_pid not in pids
    assert worker_pids[0] != worker_pids[1]
    # The env objects themselves were built there too.
    assert [d["pid"] for d in trainer.foreach_env(lambda env: env.describe())] == pids


def test_foreach_env_with_a_module_function(trainer):
    worker_pids = [w.pid for w in trainer.workers.remote_workers]
    assert trainer.foreach_env(env_pid) == [worker_pids[0]] * 3 + [worker_pids[1]] * 3


def test_foreach_env_results_come_back_in_order(trainer):
    # The obs of a reset env is [worker_index, vector_index, 0]: order of results = order of envs.
    firsts = trainer.foreach_env(lambda env: tuple(int(x) for x in env.reset()[0][:2]))
    assert firsts == [(w, v) for w, v, _ in EXPECTED_PLACES]


def test_foreach_worker_with_a_lambda_and_a_module_function(trainer):
    test_pid = os.getpid()
    worker_pids = [w.pid for w in trainer.workers.remote_workers]
    by_lambda = trainer.foreach_worker(lambda w: (w.worker_index, os.getpid(), len(w.envs)))
    assert by_lambda == [(0, test_pid, 0), (1, worker_pids[0], 3), (2, worker_pids[1], 3)]
    assert trainer.foreach_worker(worker_summary) == by_lambda


def test_function_raising_on_a_worker_gives_worker_error_and_the_trainer_goes_on(trainer):
    def explode(env):
        raise ZeroDivisionError("explode in env")

    with pytest.raises(WorkerError) as info:
        trainer.foreach_env(explode)
    message = str(info.value)
    assert "worker 1" in message and "ZeroDivisionError" in message and "explode in env" in message
    # Every worker still answers, in order.
    assert len(trainer.foreach_env(lambda env: 1)) == 6


def test_training_syncs_weights_to_every_worker(trainer):
    result = trainer.train()
    assert result["timesteps_this_iter"] == 60
    assert result["num_healthy_workers"] == 2
    local = trainer.get_policy().get_weights()
    remote = trainer.foreach_worker(lambda w: w.get_policy().get_weights())
    assert len(remote) == 3
    for weights in remote:
        assert weights.keys() == local.keys()
        for key in local:
            np.testing.assert_array_equal(weights[key], local[key])


def test_trainer_set_weights_reaches_every_worker_at_once(trainer):
    zeros = {pid: {k: np.zeros_like(v) for k, v in w.items()} for pid, w in trainer.get_weights().items()}
    trainer.set_weights(zeros)
    for weights in trainer.foreach_worker(lambda w: w.get_policy().get_weights()):
        assert all(not v.any() for v in weights.values())
    with pytest.raises(ConfigError, match="no policy \\['nope'\\]"):
        trainer.set_weights({"nope": {}})
    wrong = {pid: {k: np.zeros(v.shape + (1,), v.dtype) for k, v in w.items()} for pid, w in zeros.items()}
    with pytest.raises(ConfigError, match="do not fit its model: .* has shape"):
        trainer.set_weights(wrong)


# --- lazy spaces: the trainer process builds no env when it has workers ---------------------------


@pytest.mark.parametrize(
    "trainer_cls, spaces_in_config",
    [(PPO, False), (PPO, True), (DQN, False)],  # DQN's replay buffer and target network are built from the spaces too
    ids=["PPO-spaces-from-worker", "PPO-spaces-in-config", "DQN-spaces-from-worker"],
)
def test_trainer_process_builds_no_env_with_remote_workers(tmp_path, trainer_cls, spaces_in_config):
    config = tiny(trainer_cls, 20, num_workers=1, num_envs_per_worker=2, env_config={"record_dir": str(tmp_path)})
    obs_space = spaces.Box(0.0, 1000.0, (3,), np.float32)
    if spaces_in_config:
        config.update(observation_space=obs_space, action_space=spaces.Discrete(2))
    with trainer_cls(config=config, env=ContextEnv) as trainer:
        trainer.train()
        worker_pid = trainer.workers.remote_workers[0].pid
        policy = trainer.get_policy()
        assert policy.observation_space == obs_space and policy.action_space == spaces.Discrete(2)
    built = [name.split("_") for name in os.listdir(tmp_path)]
    assert built, "the env never recorded its construction"
    pids = {int(parts[0]) for parts in built}
    assert os.getpid() not in pids, f"the trainer process built an env: {sorted(os.listdir(tmp_path))}"
    assert pids == {worker_pid}
    assert sorted((int(p[1]), int(p[2])) for p in built) == [(1, 0), (1, 1)]


def test_spaces_in_config_with_a_local_worker(trainer_cls):
    obs_space = spaces.Box(0.0, 1000.0, (3,), np.float32)
    config = tiny(trainer_cls, 20, observation_space=obs_space, action_space=spaces.Discrete(2))
    with trainer_cls(config=config, env=ContextEnv) as trainer:
        assert trainer.get_policy().observation_space == obs_space
        assert trainer.train()["timesteps_total"] == 20


# --- dead workers -------------------------------------------------------------------------
# PPO only, like the process tests below (each starts worker processes: seconds): restarts and
# stop() belong to the worker set, which every algorithm samples through; DQN's sampling, weight
# syncs and env restarts on remote workers are tested above and in test_env_restarts_are_counted_in_results.


def _assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_recreate_failed_workers_restarts_a_killed_worker():
    config = {
        **TINY,
        "num_workers": 2,
        "num_envs_per_worker": 1,
        "train_batch_size": 20,
        "recreate_failed_workers": True,
    }
    trainer = PPO(config=config, env=ContextEnv)
    try:
        first = trainer.train()
        assert first["num_worker_restarts"] == 0
        old_pids = [w.pid for w in trainer.workers.remote_workers]
        os.kill(old_pids[0], signal.SIGKILL)
        assert wait_gone([old_pids[0]]) == []
        result = trainer.train()
        assert result["training_iteration"] == 2
        assert result["timesteps_total"] == 40
        assert result["num_worker_restarts"] >= 1
        assert result["num_healthy_workers"] == 2
        new_pids = [w.pid for w in trainer.workers.remote_workers]
        assert new_pids[0] != old_pids[0] and process_alive(new_pids[0])
        assert new_pids[1] == old_pids[1]  # the healthy worker was left alone
        # The new worker has the learner's weights and its envs their places.
        remote = trainer.foreach_worker(lambda w: w.get_policy().get_weights())
        for weights in remote[1:]:
            _assert_same_weights(weights, remote[0])
        contexts = trainer.foreach_env_with_context(lambda env, ctx: (ctx.worker_index, ctx.vector_index, os.getpid()))
        assert contexts == [(1, 0, new_pids[0]), (2, 0, new_pids[1])]
    finally:
        trainer.stop()
    assert wait_gone(old_pids + new_pids, timeout=5.0) == []


def test_killed_worker_without_recreate_gives_worker_error_naming_it():
    config = {**TINY, "num_workers": 1, "num_envs_per_worker": 1, "train_batch_size": 10}
    trainer = PPO(config=config, env=ContextEnv)
    try:
        trainer.train()
        pid = trainer.workers.remote_workers[0].pid
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerError) as info:
            trainer.train()
        message = str(info.value)
        assert "worker 1" in message and str(pid) in message
        assert "recreate_failed_workers" in message  # the way out is named
    finally:
        trainer.stop()
    assert not process_alive(pid)


# --- no orphan processes ---------------------------------------------------------------------


def test_stop_ends_every_worker_process():
    trainer = PPO(config={**TINY, "num_workers": 2, "train_batch_size": 20}, env=ContextEnv)
    pids = [w.pid for w in trainer.workers.remote_workers]
    assert all(process_alive(p) for p in pids)
    trainer.stop()
    # stop() waits for them: they are gone (and reaped) when it returns.
    assert [p for p in pids if os.path.exists(f"/proc/{p}")] == []
    trainer.stop()  # a second stop is harmless


SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    from rltune.trainers import PPO
    trainer = PPO(
        config={"num_workers": 2, "rollout_fragment_length": 10, "train_batch_size": 20,
                "sgd_minibatch_size": 20, "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]}},
        env="CartPole-v1",
    )
    trainer.train()
    print(json.dumps([w.pid for w in trainer.workers.remote_workers]), flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
    # "exit": the script ends without trainer.stop()
    """
)


def _run_script(mode: str) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line, f"the script printed nothing (exit code {proc.wait()})"
    pids = json.loads(line)
    assert len(pids) == 2
    return proc, pids


def test_script_exiting_without_stop_leaves_no_worker_process():
    proc, pids = _run_script("exit")
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert wait_gone(pids) == [], "worker processes outlived the script that started them"


def test_trainer_process_killed_leaves_no_worker_process():
    proc, pids = _run_script("hang")
    try:
        assert all(process_alive(p) for p in pids)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert wait_gone(pids) == [], "worker processes outlived their SIGKILLed trainer"


def test_torch_num_threads_caps_torch_and_numpy_blas_in_every_process():
    # Rollout inference runs in numpy: its BLAS must not start a thread per core in each worker.
    def threads(_worker=None):
        import torch
        from threadpoolctl import threadpool_info

        return torch.get_num_threads(), sorted({pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"})

    trainer = PPO(config={"num_workers": 2, "num_envs_per_worker": 1, "torch_num_threads": 1}, env="CartPole-v1")
    try:
        assert threads() == (1, [1])
        assert trainer.foreach_worker(threads) == [(1, [1])] * 3  # the local worker and the 2 remote ones
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    "trainer_cls, num_workers", [(PPO, 0), (DQN, 0), (PPO, 2)], ids=["PPO-local", "DQN-local", "PPO-remote"]
)  # the count comes from the worker set, whichever algorithm samples: DQN's remote workers cost seconds for nothing new
def test_env_restarts_are_counted_in_results(trainer_cls, num_workers):
    config = tiny(
        trainer_cls,
        40,
        num_workers=num_workers,
        num_envs_per_worker=2,
        disable_env_checking=True,
        restart_failed_sub_environments=True,
        env_config={"fail_in": "step", "fail_at": 4, "fail_once": True, "episode_len": 100},
    )
    with trainer_cls(config=config, env=FailingEnv) as trainer:
        first = trainer.train()
        # every env of every worker fails once: 2 (local) or 2 x 2 (remote), summed over workers
        assert first["num_env_restarts"] == 2 * max(1, num_workers)
        assert first["num_worker_restarts"] == 0
        assert trainer.train()["num_env_restarts"] == 2 * max(1, num_workers)
