"""A centralized critic: PPO whose value function also sees the other agent's observation and action.

Two agents play a cooperative game (:class:`TwoTargets`): each step, each
agent sees its own target, one of four drawn anew, and the step's fraction
of the episode; it scores 1 for hitting its own target, and its reward is
its own score plus 3 times its partner's. So most of what an agent's return
depends on is its partner's play, which its own observation says nothing
about. A value function of the agent's own observation can only average
over it; one that also sees the partner's observation and action (the
"centralized critic" of MADDPG, COMA or MAPPO) can tell it apart.

The hook: a policy whose ``postprocess_trajectory`` takes
``other_agent_batches`` gets, for each trajectory of one agent, the other
agents' batches of the same episode (``{agent_id: (policy_id, batch)}``).
:class:`CentralCriticPolicy` (a :class:`~rltune.trainers.PPOPolicy`) writes
``[own obs, partner's obs, partner's action one-hot]`` into the batch's
observations there and computes its value predictions from them; its model
(:class:`CentralCriticModel`) acts from the first part only (rollouts give
it the own observation padded with zeros) and values the whole. PPO's loss
is unchanged: it reads both heads from the batch's observations.

Both agents share one such policy. The script trains it, then, with the
same settings, a plain PPO policy, and prints each one's reward and how
much of the return variance its value function explains
(``vf_explained_var``): both learn to hit their targets, and the
centralized critic explains much more of the returns (here about 0.7
against 0.4 after 12 iterations; the figures vary with the seed). Run it
(about 20 s)::

    python examples/centralized_critic.py
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rltune.env import MultiAgentEnv
from rltune.trainers import PPO, PolicySpec, PPOPolicy

TARGETS = 4  # targets (and actions) per agent
STEPS = 5  # steps of an episode
AGENTS = ("a", "b")
PARTNER_WEIGHT = 3.0  # an agent's reward: its own hit + 3 x its partner's


class TwoTargets(MultiAgentEnv):
    """Each step both agents see their own target (one-hot of 4) and both get the number of agents that hit theirs."""

    possible_agents = list(AGENTS)

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (TARGETS + 1,), np.float32)  # target one-hot, time
        self.action_space = gym.spaces.Discrete(TARGETS)
        self.rng = np.random.default_rng()
        self.t = 0
        self.targets: dict[str, int] = {}

    def _observe(self) -> dict[str, np.ndarray]:
        self.targets = {agent: int(self.rng.integers(TARGETS)) for agent in AGENTS}
        return {agent: np.append(np.eye(TARGETS, dtype=np.float32)[target], np.float32(self.t / STEPS))
                for agent, target in self.targets.items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        hit = {agent: float(int(action_dict[agent]) == self.targets[agent]) for agent in AGENTS}
        a, b = AGENTS
        rewards = {a: hit[a] + PARTNER_WEIGHT * hit[b], b: hit[b] + PARTNER_WEIGHT * hit[a]}
        self.t += 1
        done = self.t == STEPS
        return self._observe(), rewards, {"__all__": done}, {"__all__": False}, {}


class CentralCriticModel(nn.Module):
    """Actor on the own observation (the first ``own_size`` inputs); critic on all of ``[own, partner obs, partner action]``."""

    def __init__(self, own_size: int, central_size: int, num_actions: int, hiddens: list[int]) -> None:
        super().__init__()
        self.own_size = own_size
        self.actor = _mlp(own_size, hiddens, num_actions, last_gain=0.01)
        self.critic = _mlp(central_size, hiddens, 1, last_gain=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Action logits from the own observation, and the central value."""
        return self.actor(obs[:, : self.own_size]), self.critic(obs).squeeze(-1)


def _mlp(in_size: int, hiddens: list[int], out_size: int, *, last_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for hidden in hiddens:
        layers += [nn.Linear(in_size, hidden), nn.Tanh()]
        in_size = hidden
    head = nn.Linear(in_size, out_size)
    nn.init.orthogonal_(head.weight, last_gain)
    nn.init.zeros_(head.bias)
    return nn.Sequential(*layers, head)


class CentralCriticPolicy(PPOPolicy):
    """PPO with a centralized critic: the partner's observation and action enter the value function in postprocessing."""

    def make_model(self) -> nn.Module:
        self.own_size = self.preprocessor.size
        self.num_actions = int(self.action_space.n)
        central = 2 * self.own_size + self.num_actions  # own obs, the partner's obs, its action one-hot
        return CentralCriticModel(self.own_size, central, self.num_actions, self.config.model.fcnet_hiddens)

    def _central(self, own: np.ndarray, other_obs: np.ndarray | None = None, other_actions: np.ndarray | None = None) -> np.ndarray:
        """``[own, other obs, other action one-hot]`` rows; zeros where the partner is unknown (rollouts)."""
        rows = np.zeros((len(own), 2 * self.own_size + self.num_actions), np.float32)
        rows[:, : self.own_size] = own
        if other_obs is not None:
            rows[:, self.own_size: 2 * self.own_size] = other_obs
            rows[np.arange(len(own)), 2 * self.own_size + other_actions.astype(np.int64)] = 1.0
        return rows

    def compute_actions(self, obs: np.ndarray, explore: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        # The actor reads the own part only; the value computed here is replaced in postprocessing.
        return super().compute_actions(self._central(obs), explore)

    def values(self, obs: np.ndarray) -> np.ndarray:
        return super().values(self._central(obs))  # bootstrap values (fragment ends), without the partner

    def postprocess_trajectory(self, batch: dict[str, np.ndarray], other_agent_batches: dict[Any, Any] | None = None,
                               episode: Any = None) -> dict[str, np.ndarray]:
        """The batch's observations made central (with the partner's), its value predictions recomputed, then GAE."""
        obs = batch["obs"][:, 0]  # a trajectory of one agent: [T, 1, obs_size]
        others = [other for _, other in (other_agent_batches or {}).values() if len(other["obs"]) == len(obs)]
        central = self._central(obs, others[0]["obs"], others[0]["actions"]) if others else self._central(obs)
        with torch.inference_mode():
            values = self.model(self.obs_tensor(central))[1].cpu().numpy()
        batch = dict(batch, obs=central[:, None], vf_preds=values[:, None])
        return super().postprocess_trajectory(batch)


def same_policy(agent_id: Any, episode: Any = None, worker: Any = None, **kwargs: Any) -> str:
    """Both agents play the one shared policy."""
    return "shared"


CONFIG = {
    "env": TwoTargets,
    "num_workers": 0,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 25,  # 5 episodes per env: 200 env steps, 400 agent steps per iteration
    "train_batch_size": 200,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 6,
    "lr": 3e-3,
    "gamma": 0.9,
    "model": {"fcnet_hiddens": [32]},
    "metrics_num_episodes_for_smoothing": 40,
}


def train(central: bool, iterations: int = 12, seed: int = 0, *, results_dir: str | None = None) -> dict[str, Any]:
    """Train the shared policy (central critic or plain PPO); its last result and the time."""
    spec = PolicySpec(policy_class=CentralCriticPolicy) if central else PolicySpec()
    config = {**CONFIG, "seed": seed, "multiagent": {"policies": {"shared": spec}, "policy_mapping_fn": same_policy}}
    start = time.perf_counter()
    with PPO(config=config, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        for _ in range(iterations):
            result = trainer.train()
    return {"result": result, "seconds": time.perf_counter() - start}


def describe(run: dict[str, Any]) -> str:
    """Mean reward per agent step and the value function's explained variance in the last update."""
    result = run["result"]
    per_step = result["policy_reward_mean"]["shared"] / STEPS
    stats = result["info"]["learner"]["shared"]
    return (f"reward {per_step:.2f} per step (best {1 + PARTNER_WEIGHT:g}), "
            f"vf_explained_var {stats['vf_explained_var']:.2f} "
            f"after {result['timesteps_total']:,} env steps ({run['seconds']:.1f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print("centralized critic:", describe(train(True, seed=args.seed)))
    print("own-observation critic:", describe(train(False, seed=args.seed)))
