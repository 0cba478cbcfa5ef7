"""Hierarchical RL: a top-level agent picks a landmark to walk to; a low-level agent, new for each pick, walks there.

The world (:class:`TwoRooms`, 7 x 5 cells) is split by a wall at x = 3 with
a door at its top::

    y=4  L . . D . . R        S start, E exit, D door
    y=3  . . . # . . .        L, R: the top corners
    y=2  . . . # . . .
    y=1  . . . # . . .
    y=0  S . . # . . E

An episode starts at S and ends at E (reward 1) or after 60 steps. The
agents:

- ``top_level`` (one per episode) observes its cell and picks one of four
  landmarks (the door, the exit, the two top corners); it gets the env's
  reward (1 at the exit, -0.01 a step), also while the low level walks.
- ``low_level_<n>``, a new agent created for the n-th pick (it enters the
  episode then, and is mapped to the ``low_level`` policy then), observes
  its cell and where the landmark lies from it, walks (up, down, left,
  right) and is rewarded for each step that brings it closer (1), away
  (-1) or nowhere (-0.2, a wall); it leaves the episode when it gets there
  or after 6 steps, and the top level picks again.

Walking straight to the exit from S runs into the wall: the top level must
learn to pick the door first, then the exit (or the top-right corner, then
the exit: as short). Training goes in two stages,
each with ``policies_to_train`` a subset: first ``["low_level"]`` (the
top level, untrained, picks landmarks about at random: varied goals to learn
to walk to), then ``["top_level"]`` (``trainer.set_policies_to_train``; the
low level now frozen, so the top level learns over a fixed skill). Run it
(about 30 s)::

    python examples/hierarchical.py
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np

from rltune.env import MultiAgentEnv
from rltune.trainers import PPO, PolicySpec

WIDTH, HEIGHT = 7, 5
WALL = {(3, y) for y in range(HEIGHT - 1)}
START, EXIT = (0, 0), (6, 0)
LANDMARKS = {"door": (3, 4), "exit": EXIT, "top left": (0, 4), "top right": (6, 4)}
MOVES = [(0, 1), (0, -1), (-1, 0), (1, 0)]  # up, down, left, right
LOW_STEPS = 6  # steps of a low-level agent at most
MAX_STEPS = 60  # env steps of an episode at most
STEP_COST = 0.02
SOLVED_RETURN = 0.5  # the top level's mean return (the best path: 13 steps, 1 - 13 x STEP_COST = 0.74)


def _cell(x: int, y: int) -> np.ndarray:
    return np.array([x / (WIDTH - 1), y / (HEIGHT - 1)], np.float32)


def _one_hot_cell(x: int, y: int) -> np.ndarray:
    return np.eye(WIDTH * HEIGHT, dtype=np.float32)[y * WIDTH + x]


class TwoRooms(MultiAgentEnv):
    """The two rooms as a MultiAgentEnv whose low-level agents are created on the fly (see the module docstring)."""

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        # Every agent that may appear: the top level and one low-level agent per pick (a pick lasts a step at least).
        lows = [f"low_level_{n}" for n in range(1, MAX_STEPS + 1)]
        self.possible_agents = ["top_level", *lows]
        top_obs = gym.spaces.Box(0.0, 1.0, (WIDTH * HEIGHT,), np.float32)  # its cell, one-hot
        low_obs = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.observation_spaces = {"top_level": top_obs, **{low: low_obs for low in lows}}  # low: cell, landmark - cell
        self.action_spaces = {"top_level": gym.spaces.Discrete(len(LANDMARKS)),
                              **{low: gym.spaces.Discrete(len(MOVES)) for low in lows}}
        self.observation_space = gym.spaces.Dict(self.observation_spaces)
        self.action_space = gym.spaces.Dict(self.action_spaces)
        self.pos, self.t, self.picks = START, 0, 0
        self.low: str | None = None  # the walking low-level agent
        self.goal, self.low_steps = START, 0

    def _low_obs(self) -> np.ndarray:
        dx, dy = self.goal[0] - self.pos[0], self.goal[1] - self.pos[1]
        return np.concatenate([_cell(*self.pos), [dx / (WIDTH - 1), dy / (HEIGHT - 1)]]).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.pos, self.t, self.picks, self.low = START, 0, 0, None
        return {"top_level": _one_hot_cell(*self.pos)}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        if "top_level" in action_dict:  # a new landmark: a new low-level agent enters
            self.picks += 1
            self.low, self.low_steps = f"low_level_{self.picks}", 0
            self.goal = list(LANDMARKS.values())[int(action_dict["top_level"])]
            return {self.low: self._low_obs()}, {"top_level": 0.0}, {"__all__": False}, {"__all__": False}, {}
        low = self.low
        before = abs(self.goal[0] - self.pos[0]) + abs(self.goal[1] - self.pos[1])
        dx, dy = MOVES[int(action_dict[low])]
        nxt = (self.pos[0] + dx, self.pos[1] + dy)
        if 0 <= nxt[0] < WIDTH and 0 <= nxt[1] < HEIGHT and nxt not in WALL:
            self.pos = nxt
        after = abs(self.goal[0] - self.pos[0]) + abs(self.goal[1] - self.pos[1])
        self.t += 1
        self.low_steps += 1
        at_exit = self.pos == EXIT
        rewards = {low: 1.0 if after < before else -1.0 if after > before else -0.2,
                   "top_level": (1.0 if at_exit else 0.0) - STEP_COST}
        low_done = at_exit or after == 0 or self.low_steps == LOW_STEPS
        obs = {low: self._low_obs()}
        terminateds = {low: low_done, "__all__": at_exit}
        truncateds = {"__all__": not at_exit and self.t >= MAX_STEPS}
        if low_done and not (at_exit or truncateds["__all__"]):
            obs["top_level"] = _one_hot_cell(*self.pos)  # the top level picks again
        if at_exit or truncateds["__all__"]:
            obs["top_level"] = _one_hot_cell(*self.pos)  # its final observation
            terminateds["top_level"] = at_exit
        return obs, rewards, terminateds, truncateds, {}


def map_level(agent_id: Any, episode: Any = None, worker: Any = None, **kwargs: Any) -> str:
    """``low_level_<n>`` agents play the low-level policy, the top-level agent the top-level one."""
    return "low_level" if str(agent_id).startswith("low_level") else "top_level"


CONFIG = {
    "env": TwoRooms,
    "multiagent": {
        "policies": {
            "top_level": PolicySpec(config={"gamma": 0.99, "entropy_coeff": 0.01}),
            "low_level": PolicySpec(config={"gamma": 0.5}),  # short-sighted: each step's progress
        },
        "policy_mapping_fn": map_level,
        "policies_to_train": ["low_level"],  # stage 1; train() switches to ["top_level"] for stage 2
    },
    "num_workers": 0,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 60,
    "train_batch_size": 480,
    "sgd_minibatch_size": 120,
    "num_sgd_iter": 8,
    "lr": 3e-3,
    "model": {"fcnet_hiddens": [64]},
    "metrics_num_episodes_for_smoothing": 40,
}


def greedy_picks(trainer: PPO) -> tuple[list[str], bool]:
    """One greedy episode: the landmarks the top level picks, and whether it reached the exit."""
    env, names = TwoRooms(), list(LANDMARKS)
    obs, _ = env.reset()
    picks: list[str] = []
    for _ in range(2 * MAX_STEPS):
        actions = {agent: trainer.compute_single_action(o, policy_id=map_level(agent)) for agent, o in obs.items()
                   if agent == "top_level" or agent == env.low}
        if "top_level" in actions:
            picks.append(names[int(actions.pop("top_level"))])
            actions = {"top_level": names.index(picks[-1])}
        obs, _, terminateds, truncateds, _ = env.step(actions)
        if terminateds["__all__"] or truncateds["__all__"]:
            return picks, terminateds["__all__"]
    return picks, False


def train(seed: int = 0, low_iterations: int = 15, top_iterations: int = 40, *, verbose: bool = True,
          results_dir: str | None = None) -> dict[str, Any]:
    """Stage 1: the low level only; stage 2: the top level only, until it is solved.

    Solved: the top level's mean return is SOLVED_RETURN or more, and its
    greedy picks reach the exit in 3 picks at most.
    """
    start = time.perf_counter()
    with PPO(config={**CONFIG, "seed": seed}, results_dir=results_dir or "/tmp/rltune_examples") as trainer:
        for _ in range(low_iterations):
            result = trainer.train()
        low_reward = result["policy_reward_mean"]["low_level"]
        if verbose:
            print(f"stage 1 (policies_to_train ['low_level']): low-level return {low_reward:+.2f} a walk after "
                  f"{result['timesteps_total']:,} env steps")
        trainer.set_policies_to_train(["top_level"])
        for _ in range(top_iterations):
            result = trainer.train()
            if verbose:
                print(f"stage 2 (policies_to_train ['top_level']): iteration {result['training_iteration']}, "
                      f"top-level return {result['policy_reward_mean']['top_level']:+.2f}, "
                      f"episode length {result['episode_len_mean']:.1f}")
            picks, reached = greedy_picks(trainer)
            if result["policy_reward_mean"]["top_level"] >= SOLVED_RETURN and reached and len(picks) <= 3:
                break
    return {"result": result, "low_reward": low_reward, "picks": picks, "reached": reached,
            "seconds": time.perf_counter() - start}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run = train(args.seed)
    print(f"greedy top level picks: {' -> '.join(run['picks'])}; "
          f"{'reaches' if run['reached'] else 'does not reach'} the exit ({run['seconds']:.1f} s)")
