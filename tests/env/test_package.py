"""rltune.env: its public names, the same objects everywhere they are re-exported, and its cheap import."""

from __future__ import annotations

import subprocess
import sys
import uuid

import cloudpickle
import gymnasium as gym
import pytest

import rltune.callbacks
import rltune.env
import rltune.trainers
from rltune.env._build import build_env
from rltune.env._registry import resolve_env
from rltune.env._shipping import collect_env_registrations
from rltune.env._task import task_env

from trainers.envs import CountingEnv


@pytest.mark.parametrize("name", ["EnvContext", "register_env", "registered_envs"])
def test_trainers_re_exports_the_env_names(name):
    assert getattr(rltune.trainers, name) is getattr(rltune.env, name)
    assert name in rltune.trainers.__all__ and name in rltune.env.__all__


def test_callbacks_re_exports_task_settable_env():
    assert rltune.callbacks.TaskSettableEnv is rltune.env.TaskSettableEnv
    assert issubclass(rltune.env.TaskSettableEnv, gym.Env)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NoSuchEnv'"):
        rltune.env.NoSuchEnv  # noqa: B018


def test_every_public_name_loads():
    for name in rltune.env.__all__:
        assert getattr(rltune.env, name).__name__ == name


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}; import sys; print(sorted({{'gymnasium', 'torch', 'rltune.callbacks', 'rltune.trainers'}} & set(sys.modules)))"
    return eval(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)


def test_env_shipping_imports_neither_gymnasium_nor_the_layers_above():
    # The orchestrator imports rltune.env._shipping: it must stay cheap.
    assert _loaded_after("import rltune.env, rltune.env._shipping") == []


def test_env_names_load_gymnasium_but_no_layer_above():
    assert _loaded_after("from rltune.env import EnvContext, register_env, TaskSettableEnv") == ["gymnasium"]


def test_a_registered_creator_is_shipped_to_a_fresh_process_and_builds_there():
    name = f"shipped-{uuid.uuid4().hex[:8]}"
    episode_len = 3
    # A closure over a local: it only works if shipped by value.
    rltune.env.register_env(name, lambda ctx: gym.make("CartPole-v1", max_episode_steps=episode_len))
    payload = cloudpickle.dumps(collect_env_registrations(name, "CartPole-v1", CountingEnv))
    code = (
        "import sys, pickle; from rltune.env._shipping import install_env_registrations;"
        "from rltune.env._registry import resolve_env; from rltune.env._build import build_env;"
        "from rltune.env import EnvContext;"
        "regs = pickle.loads(sys.stdin.buffer.read()); print(sorted(regs)); install_env_registrations(regs);"
        f"env = build_env(resolve_env({name!r}), EnvContext(), check=True); print(env.spec.max_episode_steps)"
    )
    proc = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert out.split("\n")[:2] == [str(sorted(["CartPole-v1", name])), str(episode_len)]


@pytest.mark.parametrize("env", ["CartPole-v1", CountingEnv, "trainers.envs:CountingEnv"])
def test_an_env_spec_survives_cloudpickle_and_builds(env):
    spec = cloudpickle.loads(cloudpickle.dumps(resolve_env(env)))
    built = build_env(spec, rltune.env.EnvContext({}), check=True)
    assert isinstance(built, gym.Env)


class _Task(rltune.env.TaskSettableEnv):
    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(1)

    def get_task(self):
        return 0

    def set_task(self, task):
        pass


def test_task_env_finds_the_task_under_wrappers_and_none_without():
    env = _Task()
    assert task_env(env) is env
    assert task_env(gym.wrappers.TimeLimit(env, max_episode_steps=5)) is env
    assert task_env(gym.make("CartPole-v1")) is None
