"""Building envs: EnvContext, gymnasium's API check, and envs that raise while sampling."""

from __future__ import annotations

import copy
import pickle
import uuid

import cloudpickle
import gymnasium as gym
import pytest

from rltune.env import EnvContext, register_env
from rltune.errors import EnvError
from rltune.trainers import DQN, PPO
from trainer_params import iteration_config

from trainers.envs import CountingEnv, FailingEnv, ObsOutsideSpaceEnv, ResetReturnsObsOnlyEnv

def tiny(trainer_cls, **config) -> dict:
    """A tiny config of ``trainer_cls``: 20 env steps (2 fragments of 10) per iteration, ``config`` on top."""
    minibatch = 10 if trainer_cls is PPO else None
    return {"rollout_fragment_length": 10, "model": {"fcnet_hiddens": [8]}, **iteration_config(trainer_cls, 20, minibatch=minibatch), **config}


# Tests on remote workers run on PPO only (worker processes cost seconds): the env checks and
# restarts are the rollout workers', the same for every algorithm; their local twins run on both.
LOCAL_BOTH_REMOTE_PPO = pytest.mark.parametrize(
    "trainer_cls, num_workers", [(PPO, 0), (DQN, 0), (PPO, 1)], ids=["PPO-local", "DQN-local", "PPO-remote"]
)


# --- EnvContext ---------------------------------------------------------------------


def test_env_context_is_the_env_config_dict_plus_attributes():
    ctx = EnvContext({"a": 1, "b": [2]}, worker_index=2, vector_index=1, num_workers=3)
    assert isinstance(ctx, dict)
    assert dict(ctx) == {"a": 1, "b": [2]}
    assert ctx["a"] == 1 and ctx.get("missing", 5) == 5
    assert (ctx.worker_index, ctx.vector_index, ctx.num_workers, ctx.recreated) == (2, 1, 3, False)
    defaults = EnvContext()
    assert dict(defaults) == {} and (defaults.worker_index, defaults.vector_index, defaults.num_workers) == (0, 0, 0)


def test_env_context_copy_with_overrides_keeps_keys_and_attributes():
    ctx = EnvContext({"a": 1}, worker_index=2, vector_index=1, num_workers=3)
    other = ctx.copy_with_overrides(vector_index=4, recreated=True)
    assert dict(other) == {"a": 1}
    assert (other.worker_index, other.vector_index, other.num_workers, other.recreated) == (2, 4, 3, True)
    assert (ctx.vector_index, ctx.recreated) == (1, False)  # the original is untouched


@pytest.mark.parametrize("roundtrip", [pickle, cloudpickle, "deepcopy"], ids=["pickle", "cloudpickle", "deepcopy"])
def test_env_context_survives_pickling(roundtrip):
    ctx = EnvContext({"a": 1}, worker_index=2, vector_index=1, num_workers=3, recreated=True)
    other = copy.deepcopy(ctx) if roundtrip == "deepcopy" else pickle.loads(roundtrip.dumps(ctx))
    assert isinstance(other, EnvContext)
    assert dict(other) == {"a": 1}
    assert (other.worker_index, other.vector_index, other.num_workers, other.recreated) == (2, 1, 3, True)


# --- gymnasium's env checker -------------------------------------------------------------


@pytest.mark.parametrize(
    "env_cls, rule",
    [
        (ResetReturnsObsOnlyEnv, "reset()"),
        (ObsOutsideSpaceEnv, "not within the observation space"),
    ],
)
def test_env_breaking_the_gym_api_is_named_with_the_rule(trainer_cls, env_cls, rule):
    with pytest.raises(EnvError) as info:
        trainer_cls(config=tiny(trainer_cls), env=env_cls)
    message = str(info.value)
    assert env_cls.__name__ in message
    assert "worker 0" in message
    assert rule in message
    assert "disable_env_checking" in message  # the way out is named


def test_env_checker_error_from_a_remote_worker_names_that_worker():
    with pytest.raises(EnvError) as info:
        PPO(config=tiny(PPO, num_workers=1), env=ObsOutsideSpaceEnv)
    message = str(info.value)
    assert "ObsOutsideSpaceEnv" in message and "worker 1" in message
    assert "not within the observation space" in message


def test_disable_env_checking_skips_the_check(trainer_cls):
    # The obs is out of its Box bounds, which the checker rejects but training tolerates.
    with trainer_cls(config=tiny(trainer_cls, disable_env_checking=True), env=ObsOutsideSpaceEnv) as trainer:
        result = trainer.train()
    assert result["timesteps_total"] == 20


def test_reset_returning_obs_only_still_fails_clearly_without_the_checker(trainer_cls):
    with trainer_cls(config=tiny(trainer_cls, disable_env_checking=True), env=ResetReturnsObsOnlyEnv) as trainer:
        with pytest.raises(EnvError) as info:
            trainer.train()
    message = str(info.value)
    assert "ResetReturnsObsOnlyEnv" in message and "reset()" in message and "(obs, info)" in message


def test_a_valid_env_passes_the_checker(trainer_cls):
    with trainer_cls(config=tiny(trainer_cls), env=CountingEnv) as trainer:
        assert trainer.train()["episode_len_mean"] == 5


# --- envs that raise while stepping ----------------------------------------------------


def _failing_config(trainer_cls, num_workers: int, restart: bool) -> dict:
    return {
        **tiny(trainer_cls),
        "num_workers": num_workers,
        "num_envs_per_worker": 2,
        # The checker steps the env itself; keep it out so that the step count is exact.
        "disable_env_checking": True,
        "restart_failed_sub_environments": restart,
        "env_config": {"fail_in": "step", "fail_at": 4, "fail_once": True, "episode_len": 100},
    }


@LOCAL_BOTH_REMOTE_PPO
def test_restart_failed_sub_environments_rebuilds_the_env_and_goes_on(trainer_cls, num_workers):
    with trainer_cls(config=_failing_config(trainer_cls, num_workers, restart=True), env=FailingEnv) as trainer:
        worker = num_workers  # the worker that owns the envs: 0 (local) or 1
        first = trainer.train()
        assert first["timesteps_this_iter"] == 20
        assert first["num_env_restarts"] == 2  # counted in results, from a remote worker too
        contexts = trainer.foreach_env_with_context(lambda env, ctx: (ctx.worker_index, ctx.vector_index, ctx.recreated))
        assert contexts == [(worker, 0, True), (worker, 1, True)]
        # The new env instances were built with the recreated context and keep the env_config.
        described = trainer.foreach_env(lambda env: env.describe())
        assert [d["recreated"] for d in described] == [True, True]
        assert all(d["env_config"]["fail_at"] == 4 for d in described)
        assert sum(r for r in trainer.foreach_worker(lambda w: w.num_env_restarts())) == 2
        second = trainer.train()
        assert second["training_iteration"] == 2
        assert second["timesteps_total"] == 40
        assert second["num_env_restarts"] == 2  # a running total


@LOCAL_BOTH_REMOTE_PPO
def test_env_raising_in_step_without_restart_names_env_and_worker(trainer_cls, num_workers):
    with trainer_cls(config=_failing_config(trainer_cls, num_workers, restart=False), env=FailingEnv) as trainer:
        with pytest.raises(EnvError) as info:
            trainer.train()
    message = str(info.value)
    assert "FailingEnv" in message
    assert f"worker {num_workers}" in message
    assert "step()" in message and "boom in step 4" in message
    assert "restart_failed_sub_environments" in message  # the way out is named


def test_env_raising_in_reset_is_rebuilt_too(trainer_cls):
    config = _failing_config(trainer_cls, 0, restart=True)
    # reset 1 starts the first episode; reset 2 follows its end after 3 steps.
    config["env_config"] = {"fail_in": "reset", "fail_at": 2, "episode_len": 3}
    with trainer_cls(config=config, env=FailingEnv) as trainer:
        result = trainer.train()
        assert result["timesteps_this_iter"] == 20
        assert trainer.foreach_env_with_context(lambda env, ctx: ctx.recreated) == [True, True]
        assert result["episode_len_mean"] == 3


def test_env_raising_in_reset_without_restart_names_the_method(trainer_cls):
    config = _failing_config(trainer_cls, 0, restart=False)
    config["env_config"] = {"fail_in": "reset", "fail_at": 2, "episode_len": 3}
    with trainer_cls(config=config, env=FailingEnv) as trainer:
        with pytest.raises(EnvError) as info:
            trainer.train()
    message = str(info.value)
    assert "FailingEnv" in message and "worker 0" in message and "reset()" in message and "boom in reset 2" in message


def test_registered_gym_id_breaking_the_api_is_named_with_the_rule(trainer_cls):
    env_id = f"RltuneOldApi{uuid.uuid4().hex[:6]}-v0"
    gym.register(env_id, entry_point=f"{__package__}.gym_plugin:make_old_api")
    try:
        with pytest.raises(EnvError) as info:
            trainer_cls(config=tiny(trainer_cls), env=env_id)
    finally:
        gym.registry.pop(env_id, None)
    message = str(info.value)
    assert env_id in message and "reset()" in message and "disable_env_checking" in message


class ObsOnlyResetFixed(gym.Wrapper):
    """A wrapper that makes an old-API env (reset returns the obs alone) follow gymnasium's API."""

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=options), {}


def test_a_wrapper_that_fixes_the_api_passes_the_checker(trainer_cls):
    # The checker looks at the env as the sampler will step it: with its wrappers.
    name = f"fixed-{uuid.uuid4().hex[:6]}"
    register_env(name, lambda ctx: ObsOnlyResetFixed(ResetReturnsObsOnlyEnv(ctx)))
    with trainer_cls(config=tiny(trainer_cls), env=name) as trainer:
        assert trainer.train()["episode_len_mean"] == 5


def test_disable_env_checking_leaves_out_gymnasiums_passive_checker_too(trainer_cls):
    def wrappers(env):
        names = []
        while isinstance(env, gym.Wrapper):
            names.append(type(env).__name__)
            env = env.env
        return names

    with trainer_cls(config=tiny(trainer_cls, disable_env_checking=True), env="CartPole-v1") as trainer:
        (names,) = trainer.workers.foreach_env(wrappers)
    assert "PassiveEnvChecker" not in names and "TimeLimit" in names


# --- the env patterns of RLlib's docs -----------------------------------------------------


class MultiEnv(gym.Env):
    """RLlib's env docs: an env wrapping another by composition, forwarding reset(seed=...)."""

    def __init__(self, env_config):
        self.env = gym.make("CartPole-v1")
        self.action_space = self.env.action_space
        self.observation_space = self.env.observation_space

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        return self.env.step(action)


class NoDefaultsResetEnv(CountingEnv):
    """reset(self, seed, options) without defaults, as RLlib's docs write it."""

    def reset(self, seed, options):
        return super().reset(seed=seed, options=options)


@LOCAL_BOTH_REMOTE_PPO
def test_an_env_wrapping_another_by_composition_trains(trainer_cls, num_workers, caplog):
    # It has no np_random of its own: gymnasium's seeding checks fail; that is a warning, not an error.
    with caplog.at_level("WARNING", logger="rltune.env._build"):
        with trainer_cls(config=tiny(trainer_cls, num_workers=num_workers), env=MultiEnv) as trainer:
            result = trainer.train()
    assert result["timesteps_this_iter"] == 20
    if num_workers == 0:
        assert any("seeding is not reproducible" in r.getMessage() and "MultiEnv" in r.getMessage()
                   for r in caplog.records)


def test_an_env_whose_reset_has_no_defaults_trains_and_evaluates(trainer_cls):
    config = tiny(trainer_cls, evaluation_duration=2, seed=3)
    with trainer_cls(config=config, env=NoDefaultsResetEnv) as trainer:
        assert trainer.train()["episode_len_mean"] == 5
        assert trainer.evaluate()["evaluation"]["episode_len_mean"] == 5



class BadObsAfterSeededResetEnv(CountingEnv):
    """reset() is fine; reset(seed=...) returns an observation outside the space: an API break."""

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return (obs - 100.0 if seed is not None else obs), info


def test_api_breaks_found_by_the_seeding_check_stay_errors(trainer_cls):
    with pytest.raises(EnvError, match="not within the observation space"):
        trainer_cls(config=tiny(trainer_cls), env=BadObsAfterSeededResetEnv)
