"""Bounded sampling: a rollout worker stuck in an env's step() is killed after sample_timeout_s, and no worker
outlives its trainer (SIGKILL of the trainer included, even while a worker is stuck)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from rltune.errors import ConfigError, WorkerError
from rltune.trainers import PPO, PPOConfig

from processes import kill_left, process_alive, survivors_of_sigkill, wait_gone

from .envs import HangingEnv

TESTS = Path(__file__).resolve().parents[1]
TINY = {
    "rollout_fragment_length": 10,
    "train_batch_size": 20,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
    "disable_env_checking": True,  # gymnasium's checker steps the env: it would hang at construction
}


def hanging(**config) -> dict:
    return {**TINY, "num_workers": 2, "sample_timeout_s": 2, **config}


@pytest.mark.timeout(120)  # today's code hangs here forever
def test_a_worker_stuck_in_step_ends_train_with_a_worker_error_naming_it():
    trainer = PPO(config=hanging(env_config={"hang_workers": [2]}), env=HangingEnv)
    try:
        stuck = trainer.workers.remote_workers[1].pid
        start = time.monotonic()
        with pytest.raises(WorkerError) as info:
            trainer.train()
        assert time.monotonic() - start < 30  # 2 s, and SIGTERM's grace, on a loaded machine
        message = str(info.value)
        for part in ("rollout worker 2", f"pid {stuck}", "env 'HangingEnv'", "sample()", "within 2 s",
                     "sample_timeout_s", "recreate_failed_workers"):
            assert part in message, message
        assert wait_gone([stuck]) == []  # killed, not left hanging
    finally:
        trainer.stop()


@pytest.mark.timeout(180)
def test_with_recreate_failed_workers_a_stuck_worker_is_replaced_and_training_goes_on(tmp_path):
    # Worker 1's first process hangs; its replacement finds the marker and runs.
    config = hanging(recreate_failed_workers=True, observation_filter="MeanStdFilter",
                     env_config={"hang_workers": [1], "marker_dir": str(tmp_path)})
    trainer = PPO(config=config, env=HangingEnv)
    try:
        first_pids = [w.pid for w in trainer.workers.remote_workers]
        result = trainer.train()
        assert [p.name.split("_")[1] for p in tmp_path.iterdir()] == ["1"]
        assert result["num_worker_restarts"] == 1 and result["num_healthy_workers"] == 2
        assert result["timesteps_this_iter"] == 20
        result = trainer.train()
        assert result["training_iteration"] == 2 and result["timesteps_total"] == 40
        pids = [w.pid for w in trainer.workers.remote_workers]
        assert pids[0] != first_pids[0] and pids[1] == first_pids[1]
        assert wait_gone([first_pids[0]]) == []
        # The replacement has worker 1's place, the learner's weights and the master filter.
        seen = trainer.foreach_worker(lambda w: (w.worker_index, w.get_weights(), w.get_filters()))
        assert [s[0] for s in seen] == [0, 1, 2]
        local_weights, local_filter = seen[0][1]["default_policy"], seen[0][2]["default_policy"]
        for _, weights, filters in seen[1:]:
            for key, value in local_weights.items():
                np.testing.assert_array_equal(weights["default_policy"][key], value)
            assert filters["default_policy"].count == local_filter.count
            np.testing.assert_array_equal(filters["default_policy"].mean, local_filter.mean)
    finally:
        trainer.stop()


@pytest.mark.parametrize("value", [-1, 0, "soon", float("inf"), float("nan"), True, None])
def test_sample_timeout_s_must_be_a_positive_number(value):
    with pytest.raises(ConfigError, match="sample_timeout_s"):
        PPO.validate({"sample_timeout_s": value})


def test_sample_timeout_s_by_every_spelling():
    assert PPO.get_default_config()["sample_timeout_s"] == 60.0  # RLlib's default
    assert PPOConfig().env_runners(sample_timeout_s=5).to_dict()["sample_timeout_s"] == 5
    assert PPOConfig().rollouts(sample_timeout_s=7.5).to_dict()["sample_timeout_s"] == 7.5
    assert PPO.validate({"sample_timeout_s": 3}).sample_timeout_s == 3.0
    with pytest.raises(ConfigError, match="evaluation_sample_timeout_s: .* the nearest here is sample_timeout_s"):
        PPO.validate({"evaluation_sample_timeout_s": 3})


# --- no worker outlives its trainer ----------------------------------------------------------------

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, threading
    sys.path.insert(0, sys.argv[1])
    from rltune.trainers import PPO
    from trainers.envs import HangingEnv

    config = json.loads(sys.argv[2])
    built = []
    if sys.argv[3] == "thread":  # built in a thread that ends before the trainer does
        thread = threading.Thread(target=lambda: built.append(PPO(config=config, env=HangingEnv)))
        thread.start()
        thread.join()
    else:
        built.append(PPO(config=config, env=HangingEnv))
    trainer = built[0]
    print(json.dumps(trainer.foreach_worker(lambda w: os.getpid())[1:]), flush=True)
    trainer.train()  # every worker hangs in its env's step
    """
)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "built_in, native",
    [("main", False), ("main", True), ("thread", False)],
    ids=["main-thread", "main-thread-stuck-holding-the-GIL", "other-thread"],
)
def test_a_sigkilled_trainer_leaves_no_worker_even_one_stuck_in_step(tmp_path, built_in, native):
    config = {**TINY, "num_workers": 2,
              "env_config": {"marker_dir": str(tmp_path), "native": native}}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(TESTS), json.dumps(config), built_in],
                            stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        line = proc.stdout.readline()
        assert line, f"the script printed nothing (exit code {proc.wait()})"
        pids = json.loads(line)
        assert len(pids) == 2 and all(process_alive(p) for p in pids)  # a thread's end did not kill them
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(list(tmp_path.iterdir())) == 2, "the workers never reached their hanging step"
        assert survivors_of_sigkill(proc, pids) == [], "worker processes outlived their SIGKILLed trainer"
    finally:
        proc.kill()
        kill_left(pids)
