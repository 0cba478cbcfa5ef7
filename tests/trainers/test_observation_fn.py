"""``multiagent.observation_fn`` (RLlib's): the agents' observations of each env step rewritten before their policies see them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rltune.env import MultiAgentEnv
from rltune.errors import ConfigError, EnvError
from rltune.trainers import PPO, PolicySpec, PPOConfig, PPOPolicy

TARGETS, STEPS, PARTNER_WEIGHT = 4, 5, 3.0
OWN = TARGETS + 1  # an agent's own observation: its target one-hot, the time


class TwoTargets(MultiAgentEnv):
    """Agents "a" and "b" each see their own target (one of 4, drawn each step) and the time; reward: own hit + 3 x the partner's.

    The game of examples/centralized_critic.py: most of an agent's return
    is its partner's play, which only a critic seeing the partner can tell.
    """

    possible_agents = ["a", "b"]

    def __init__(self, env_config: Any = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (OWN,), np.float32)
        self.action_space = gym.spaces.Discrete(TARGETS)
        self.rng = np.random.default_rng()
        self.t, self.targets = 0, np.zeros(2, np.int64)

    def _next(self) -> dict[str, np.ndarray]:
        self.targets = self.rng.integers(TARGETS, size=2)
        rows = np.hstack([np.eye(TARGETS, dtype=np.float32)[self.targets], np.full((2, 1), self.t / STEPS, np.float32)])
        return dict(zip(self.possible_agents, rows))

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.rng = self.rng if seed is None else np.random.default_rng(seed)
        self.t = 0
        return self._next(), {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        hits = np.array([int(action_dict[a]) for a in self.possible_agents]) == self.targets
        rewards = dict(zip(self.possible_agents, (hits + PARTNER_WEIGHT * hits[::-1]).tolist()))
        self.t += 1
        return self._next(), rewards, {"__all__": self.t == STEPS}, {"__all__": False}, {}


def with_partner(agent_obs: dict[str, np.ndarray], worker: Any, base_env: Any, policies: Any, episode: Any, **kw: Any) -> dict:
    """Each agent's observation followed by its partner's: what a centralized critic values."""
    return {agent: np.concatenate([obs, agent_obs["b" if agent == "a" else "a"]]) for agent, obs in agent_obs.items()}


class CentralCriticModel(nn.Module):
    """Actor on the own observation (the first OWN inputs), critic on the whole ``[own, partner's]``."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(OWN, hidden), nn.Tanh(), nn.Linear(hidden, TARGETS))
        self.critic = nn.Sequential(nn.Linear(2 * OWN, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor(obs[:, :OWN]), self.critic(obs).squeeze(-1)


class CentralCriticPolicy(PPOPolicy):
    """PPO whose critic sees the partner's observation (from observation_fn) and whose actor does not."""

    def make_model(self) -> nn.Module:
        return CentralCriticModel(self.config.model.fcnet_hiddens[0])


CENTRAL = gym.spaces.Box(0.0, 1.0, (2 * OWN,), np.float32)
TINY = {"env": TwoTargets, "num_workers": 0, "seed": 0, "model": {"fcnet_hiddens": [32]},
        "train_batch_size": 200, "rollout_fragment_length": 25, "num_envs_per_worker": 8,
        "sgd_minibatch_size": 100, "num_sgd_iter": 6, "lr": 3e-3, "gamma": 0.9, "metrics_num_episodes_for_smoothing": 40}


def config(observation_fn: Any = with_partner, spec: PolicySpec | None = None, **extra: Any) -> dict[str, Any]:
    spec = spec or PolicySpec(CentralCriticPolicy, observation_space=CENTRAL)
    return {**TINY, "multiagent": {"policies": {"shared": spec}, "observation_fn": observation_fn}, **extra}


def test_a_centralized_critic_through_observation_fn_learns(tmp_path):
    with PPO(config=config(), results_dir=tmp_path) as trainer:
        batch = trainer.algorithm.postprocess(trainer.workers.local_worker.sample())["shared"]
        obs = batch["obs"]
        assert obs.shape[1] == 2 * OWN  # the batches hold what the function returned: own and partner's
        np.testing.assert_array_equal(obs[:, 2 * OWN - 1], obs[:, OWN - 1])  # the same step
        np.testing.assert_array_equal(obs[:, OWN:2 * OWN - 1].sum(1), 1.0)  # the partner's target, one-hot
        for _ in range(8):
            result = trainer.train()
    assert result["policy_reward_mean"]["shared"] / STEPS > 2.0  # random play scores 1.0 a step, the best 4.0


class Recorder:
    """An observation_fn that records its calls and returns the observations unchanged (or ``reply``)."""

    def __init__(self, reply: Any = None) -> None:
        self.calls: list[tuple[list[str], Any]] = []
        self.reply = reply

    def __call__(self, agent_obs: dict, worker: Any, base_env: Any, policies: Any, episode: Any, **kw: Any) -> Any:
        self.calls.append((sorted(agent_obs), (worker.worker_index, type(base_env).__name__, sorted(policies), episode.length)))
        return agent_obs if self.reply is None else self.reply(agent_obs)


def sample(tmp_path, fn: Any, steps: int = 7, spec: PolicySpec | None = None) -> None:
    tiny = {"num_envs_per_worker": 1, "rollout_fragment_length": steps, "train_batch_size": steps, "sgd_minibatch_size": steps}
    with PPO(config=config(fn, spec or PolicySpec(), **tiny), results_dir=tmp_path) as trainer:
        trainer.workers.local_worker.sample()


def test_it_is_called_once_per_env_step_and_at_each_reset_with_the_steps_agents(tmp_path):
    recorder = Recorder()
    sample(tmp_path, recorder, steps=7)  # resets at steps 0 and 5
    assert len(recorder.calls) == 7 + 2
    assert all(agents == ["a", "b"] for agents, _ in recorder.calls)
    assert recorder.calls[0][1] == (0, "TwoTargets", ["shared"], 0)  # worker, base_env, policies, the new episode


@pytest.mark.parametrize("reply, match", [
    (lambda obs: list(obs.values()), r"must return a dict of observations by agent id, but returned list"),
    (lambda obs: {**obs, "c": obs["a"]}, r"an observation for each agent of the step.*missing: \[\]; not in the step: \['c'\]"),
    (lambda obs: {"a": obs["a"]}, r"missing: \['b'\]"),
    (lambda obs: {a: np.zeros(3, np.float32) for a in obs},
     r"returned for agent 'a' an observation that does not fit the observation space Box\(0.0, 1.0, \(5,\), float32\) of its "
     r"policy 'shared' \(got ndarray of shape \(3,\)"),
])
def test_a_result_that_does_not_fit_is_an_env_error_naming_the_function_and_agent(tmp_path, reply, match):
    recorder = Recorder(reply)
    recorder.__qualname__ = "Recorder"
    with pytest.raises(EnvError, match=r"env 'TwoTargets' \(worker 0, env 0\).*multiagent\.observation_fn Recorder.*" + match):
        sample(tmp_path, recorder)


def test_a_function_that_raises_is_an_env_error_naming_it(tmp_path):
    def broken(agent_obs, **kw):
        raise KeyError("partner")

    with pytest.raises(EnvError, match=r"multiagent\.observation_fn .*broken raised: KeyError: 'partner'"):
        sample(tmp_path, broken)


def test_the_policy_declares_the_space_of_what_the_function_returns(tmp_path):
    # the env's agents observe Box(5,), the policy Box(10,): no space-fit error, as the function's results are checked
    sample(tmp_path, with_partner, spec=PolicySpec(observation_space=CENTRAL))
    with pytest.raises(ConfigError, match=r"agent 'a' of env 'TwoTargets' is mapped to it, but its observation space"):
        sample(tmp_path, None, spec=PolicySpec(observation_space=CENTRAL))


def test_config_validation_and_rllibs_names(tmp_path):
    with pytest.raises(ConfigError, match=r"multiagent\.observation_fn: must be a function fn\(agent_obs, worker, base_env"):
        PPO(config=config(5), results_dir=tmp_path)
    built = PPOConfig().multi_agent(policies={"shared"}, observation_fn=with_partner).to_dict()
    assert built["multiagent"]["observation_fn"] is with_partner
    cfg = PPO.validate({**TINY, "policies": {"shared"}, "observation_fn": with_partner})  # a 2.x to_dict()'s top level
    assert cfg.multiagent.observation_fn is with_partner
    with pytest.raises(ConfigError, match=r"multiagent\.observation_fn: rewrites the observations of a multi-agent env's "
                                          r"agents, but env 'CartPole-v1' is a single-agent"):
        PPO(config={"env": "CartPole-v1", "multiagent": {"observation_fn": with_partner}}, results_dir=tmp_path)


def test_a_checkpoint_does_not_run_its_saved_function_unless_given_again(tmp_path):
    from rltune.errors import CheckpointError
    from rltune.trainers import Trainer

    with PPO(config=config(), results_dir=tmp_path) as trainer:
        path = trainer.save(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=r"config key 'multiagent\.observation_fn'"):
        Trainer.from_checkpoint(path, {"env": TwoTargets}, results_dir=tmp_path)
    overrides = {"env": TwoTargets, "multiagent": {"observation_fn": with_partner,
                                                   "policies": {"shared": PolicySpec(CentralCriticPolicy, observation_space=CENTRAL)}}}
    with Trainer.from_checkpoint(path, overrides, results_dir=tmp_path) as restored:
        assert restored.cfg.multiagent.observation_fn is with_partner
        restored.train()
