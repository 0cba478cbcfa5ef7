"""Every form of ``env`` a user can give: gymnasium id, class, register_env name, import string, creator."""

from __future__ import annotations

import sys
import uuid

import gymnasium as gym
import pytest

from rltune.env import register_env, registered_envs
from rltune.errors import ConfigError, EnvError
from rltune.trainers import PPO

from . import gym_plugin
from trainers.envs import ContextEnv, CountingEnv

TINY = {
    "rollout_fragment_length": 10,
    "train_batch_size": 10,
    "sgd_minibatch_size": 10,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_counting_env(ctx):
    """A creator function defined in a test module (shipped by reference)."""
    return CountingEnv(dict(ctx, episode_len=4))


def test_gym_id_gets_env_config_as_make_kwargs():
    with PPO(config={**TINY, "env_config": {"g": 3.5}}, env="Pendulum-v1") as trainer:
        assert trainer.foreach_env(lambda env: env.unwrapped.g) == [3.5]
        trainer.train()


def test_env_class_is_built_with_its_env_context():
    with PPO(config={**TINY, "num_envs_per_worker": 2, "env_config": {"k": 1}}, env=ContextEnv) as trainer:
        described = trainer.foreach_env(lambda env: env.describe())
    assert [(d["worker_index"], d["vector_index"], d["env_config"]) for d in described] == [(0, 0, {"k": 1}), (0, 1, {"k": 1})]
    assert all(d["is_env_context"] for d in described)


def test_register_env_name_with_a_lambda_creator():
    name = _unique("counting")
    register_env(name, lambda ctx: CountingEnv(dict(ctx, episode_len=3)))
    assert name in registered_envs()
    with PPO(config=TINY, env=name) as trainer:
        result = trainer.train()
    assert result["episode_len_mean"] == 3


def test_register_env_lambda_with_closure_reaches_remote_workers():
    name = _unique("tagged")
    tag = uuid.uuid4().hex

    def creator(ctx):  # a closure: only works if shipped by value
        env = ContextEnv(ctx)
        env.tag = tag
        return env

    register_env(name, creator)
    with PPO(config={**TINY, "num_workers": 1, "num_envs_per_worker": 2}, env=name) as trainer:
        assert trainer.foreach_env(lambda env: env.tag) == [tag, tag]
        assert [d["worker_index"] for d in trainer.foreach_env(lambda env: env.describe())] == [1, 1]


def test_import_string_env():
    path = f"{ContextEnv.__module__}:ContextEnv"
    with PPO(config=TINY, env=path) as trainer:
        assert trainer.foreach_env(lambda env: type(env).__name__) == ["ContextEnv"]
        trainer.train()


def test_import_string_to_a_creator_function():
    path = f"{__name__}:make_counting_env"
    with PPO(config=TINY, env=path) as trainer:
        assert trainer.foreach_env(lambda env: env.episode_len) == [4]


def test_creator_callable_as_env():
    with PPO(config=TINY, env=make_counting_env) as trainer:
        assert trainer.train()["episode_len_mean"] == 4


def test_env_in_config_instead_of_argument():
    with PPO(config={**TINY, "env": "CartPole-v1"}) as trainer:
        assert trainer.foreach_env(lambda env: env.spec.id) == ["CartPole-v1"]


def test_unknown_gym_id_suggests_the_closest():
    with pytest.raises(ConfigError) as info:
        PPO(config=TINY, env="CartPol-v1")
    message = str(info.value)
    assert "CartPol-v1" in message
    assert "did you mean 'CartPole-v1'" in message


def test_unimportable_import_string():
    with pytest.raises(ConfigError, match="no_such_module_xyz"):
        PPO(config=TINY, env="no_such_module_xyz.envs:Env")


def test_no_env_at_all():
    with pytest.raises(ConfigError, match="no env"):
        PPO(config=TINY)


@pytest.mark.parametrize("name, creator", [("", lambda ctx: None), (None, lambda ctx: None), ("ok-name", 42)])
def test_register_env_rejects_bad_arguments(name, creator):
    with pytest.raises(ConfigError, match="register_env"):
        register_env(name, creator)


def test_creator_that_raises_gives_env_error_naming_the_env():
    def broken_creator(ctx):
        raise ValueError("missing map file")

    name = _unique("broken")
    register_env(name, broken_creator)
    with pytest.raises(EnvError) as info:
        PPO(config=TINY, env=name)
    message = str(info.value)
    assert name in message and "worker 0" in message and "missing map file" in message


def test_creator_returning_a_non_env_gives_env_error():
    name = _unique("not-an-env")
    register_env(name, lambda ctx: object())
    with pytest.raises(EnvError, match="not a gymnasium.Env"):
        PPO(config=TINY, env=name)


def test_gym_registered_custom_id_with_kwargs():
    env_id = f"RltuneCounting{uuid.uuid4().hex[:6]}-v0"
    gym.register(env_id, entry_point=lambda **kw: CountingEnv(kw))
    try:
        with PPO(config={**TINY, "env_config": {"episode_len": 2}}, env=env_id) as trainer:
            assert trainer.train()["episode_len_mean"] == 2
    finally:
        gym.registry.pop(env_id, None)


@pytest.mark.parametrize("num_workers", [0, 1])
def test_gym_id_registered_by_the_users_script_builds_in_worker_processes(num_workers):
    # The registration runs in this process only; worker processes never run it.
    env_id = f"RltuneScriptCounting{uuid.uuid4().hex[:6]}-v0"
    gym.register(env_id, entry_point=f"{gym_plugin.__name__}:make_counting")
    try:
        config = {**TINY, "num_workers": num_workers, "env_config": {"episode_len": 2}}
        with PPO(config=config, env=env_id) as trainer:
            assert trainer.train()["episode_len_mean"] == 2
    finally:
        gym.registry.pop(env_id, None)


def test_gymnasium_module_colon_id_form_imports_the_registering_module():
    gym.registry.pop(gym_plugin.PLUGIN_ID, None)
    sys.modules.pop(gym_plugin.__name__, None)  # importing it again registers the id again
    env = f"{gym_plugin.__name__}:{gym_plugin.PLUGIN_ID}"
    with PPO(config={**TINY, "env_config": {"episode_len": 3}}, env=env) as trainer:
        assert trainer.train()["episode_len_mean"] == 3


@pytest.mark.parametrize(
    "env, cause",
    [
        ("trainers.broken_module:Env", "RuntimeError: this module fails on import"),
        (f"{CountingEnv.__module__}:NoSuchEnv", "AttributeError"),
    ],
)
def test_import_string_whose_module_or_name_fails_is_a_config_error(env, cause):
    with pytest.raises(ConfigError) as info:
        PPO(config=TINY, env=env)
    message = str(info.value)
    assert f"env {env!r}: cannot import" in message and cause in message
