"""Small gymnasium envs for the trainer tests.

They live in an importable module (not in the test files) so that rollout
worker processes, which get the parent's ``sys.path``, can unpickle them by
reference. Every env here passes gymnasium's env checker unless its name says
it breaks the API.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class ContextEnv(gym.Env):
    """Remembers the EnvContext it was built with; obs = [worker_index, vector_index, t].

    env_config keys it understands:
      - ``episode_len`` (default 8): the episode terminates after that many steps.
      - ``record_dir``: on construction, write a file named ``<pid>_<worker>_<vector>_<uuid>`` there.
    """

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.pid = os.getpid()
        self.episode_len = int(ctx.get("episode_len", 8))
        self.observation_space = spaces.Box(0.0, 1000.0, (3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0
        self.num_steps = 0
        record_dir = ctx.get("record_dir")
        if record_dir:
            name = f"{os.getpid()}_{getattr(ctx, 'worker_index', -1)}_{getattr(ctx, 'vector_index', -1)}_{uuid.uuid4().hex}"
            with open(os.path.join(record_dir, name), "w"):
                pass

    def _obs(self) -> np.ndarray:
        return np.array([self.ctx.worker_index, self.ctx.vector_index, self.t], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.num_steps += 1
        terminated = self.t >= self.episode_len
        return self._obs(), 1.0, terminated, False, {}

    def describe(self) -> dict[str, Any]:
        """What this env knows about where it runs."""
        return {
            "worker_index": self.ctx.worker_index,
            "vector_index": self.ctx.vector_index,
            "num_workers": self.ctx.num_workers,
            "recreated": self.ctx.recreated,
            "env_config": dict(self.ctx),
            "is_env_context": type(self.ctx).__name__ == "EnvContext" and isinstance(self.ctx, dict),
            "pid": self.pid,
        }


class FailingEnv(ContextEnv):
    """Raises RuntimeError in its ``fail_at``-th call of ``fail_in`` ("step", the default, or "reset").

    With ``fail_once`` (default True) only envs built for the first time
    fail; a rebuilt env (``ctx.recreated``) keeps running.
    """

    def __init__(self, ctx: Any) -> None:
        self.calls = {"step": 0, "reset": 0}
        super().__init__(ctx)

    def _maybe_fail(self, method: str) -> None:
        self.calls[method] += 1
        if method != self.ctx.get("fail_in", "step") or self.calls[method] != int(self.ctx["fail_at"]):
            return
        if self.ctx.get("fail_once", True) and self.ctx.recreated:
            return
        raise RuntimeError(f"boom in {method} {self.calls[method]}")

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._maybe_fail("reset")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self._maybe_fail("step")
        return super().step(action)


class CountingEnv(gym.Env):
    """obs = [t], reward 1 per step, terminates after ``episode_len`` steps (default 5).

    With ``truncate`` in env_config the episode is truncated instead of
    terminated. Episode return and length are both ``episode_len``.
    """

    def __init__(self, config: Any) -> None:
        self.episode_len = int(config.get("episode_len", 5))
        self.truncate = bool(config.get("truncate", False))
        self.observation_space = spaces.Box(0.0, 1000.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.t], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.episode_len
        obs = np.array([self.t], dtype=np.float32)
        return obs, 1.0, done and not self.truncate, done and self.truncate, {}


def make_space(name: str) -> gym.Space:
    """Observation spaces by name, for the parametrized space tests."""
    if name == "box":
        return spaces.Box(-1.0, 1.0, (4,), np.float32)
    if name == "box_2d":
        return spaces.Box(-1.0, 1.0, (2, 3), np.float32)
    if name == "discrete":
        return spaces.Discrete(5)
    if name == "discrete_start":
        return spaces.Discrete(4, start=2)
    if name == "multi_discrete":
        return spaces.MultiDiscrete([3, 4])
    if name == "multi_binary":
        return spaces.MultiBinary(3)
    if name == "tuple":
        return spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,), np.float32)))
    if name == "dict":
        return spaces.Dict(
            {
                "pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "kind": spaces.Discrete(3),
                "nested": spaces.Tuple((spaces.MultiBinary(2), spaces.Discrete(2))),
            }
        )
    if name == "text":
        return spaces.Text(5)
    if name == "sequence":
        return spaces.Sequence(spaces.Box(-1.0, 1.0, (2,), np.float32))
    if name == "graph":
        return spaces.Graph(node_space=spaces.Box(-1.0, 1.0, (2,), np.float32), edge_space=None)
    raise ValueError(name)


class SpaceEnv(gym.Env):
    """Observations sampled from ``make_space(env_config["space"])``; reward 1 for action 0; 6 steps.

    ``env_config["action_space"]`` names another action space (default Discrete(2)).
    """

    def __init__(self, config: Any) -> None:
        self.observation_space = make_space(config["space"])
        action = config.get("action_space")
        self.action_space = make_space(action) if action else spaces.Discrete(2)
        self.t = 0

    def _obs(self):
        return self.observation_space.sample()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        reward = float(isinstance(self.action_space, spaces.Discrete) and int(action) == 0)
        return self._obs(), reward, self.t >= 6, False, {}


class GridWorld(gym.Env):
    """A size x size grid; obs is the cell index as Discrete(size*size); reach the far corner.

    Reward 1 at the goal (terminated), -0.01 per step, truncated after ``max_steps`` (default 4*size).
    """

    MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))

    def __init__(self, config: Any) -> None:
        self.size = int(config.get("size", 4))
        self.max_steps = int(config.get("max_steps", 4 * self.size))
        self.observation_space = spaces.Discrete(self.size * self.size)
        self.action_space = spaces.Discrete(4)
        self.pos = (0, 0)
        self.t = 0

    def _obs(self) -> int:
        return int(self.pos[0] * self.size + self.pos[1])

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = (0, 0)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        dr, dc = self.MOVES[int(action)]
        r = min(max(self.pos[0] + dr, 0), self.size - 1)
        c = min(max(self.pos[1] + dc, 0), self.size - 1)
        self.pos = (r, c)
        self.t += 1
        at_goal = self.pos == (self.size - 1, self.size - 1)
        reward = 1.0 if at_goal else -0.01
        return self._obs(), reward, at_goal, (not at_goal) and self.t >= self.max_steps, {}


class BoxActionEnv(gym.Env):
    """Box(-0.5, 0.5, (2,)) actions; counts actions it received outside the action space."""

    def __init__(self, config: Any) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = spaces.Box(-0.5, 0.5, (2,), np.float32)
        self.t = 0
        self.num_actions = 0
        self.out_of_bounds = 0
        self.max_abs_action = 0.0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        action = np.asarray(action)
        self.num_actions += 1
        if action.shape != (2,) or not np.all(np.abs(action) <= 0.5):
            self.out_of_bounds += 1
        self.max_abs_action = max(self.max_abs_action, float(np.max(np.abs(action))))
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, -float(np.sum(np.square(action))), self.t >= 10, False, {}


# --- envs that break the gymnasium API ----------------------------------------------


class ResetReturnsObsOnlyEnv(CountingEnv):
    """reset() returns the observation alone (the old gym API)."""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, _ = super().reset(seed=seed)
        return obs


class ObsOutsideSpaceEnv(CountingEnv):
    """Declares Box(0, 1, (1,)) but observes values up to ``episode_len`` (always 7.0 at reset)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.observation_space = spaces.Box(0.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return np.array([7.0], dtype=np.float32), {}


class LoggingEnv(ContextEnv):
    """Logs one INFO and one WARNING line (naming its worker) on every reset."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        import logging

        log = logging.getLogger("tests.logging_env")
        log.info("info from env in worker %s", self.ctx.worker_index)
        log.warning("warning from env in worker %s", self.ctx.worker_index)
        return super().reset(seed=seed, options=options)


class IndexLengthEnv(CountingEnv):
    """A CountingEnv with episodes of ``2 + 18 * vector_index`` steps: envs of one vector end at different rates."""

    def __init__(self, ctx: Any) -> None:
        super().__init__({"episode_len": 2 + 18 * int(getattr(ctx, "vector_index", 0))})


class SeedLogEnv(CountingEnv):
    """A CountingEnv that logs ``(worker_index, vector_index, seed)`` of every seeded reset in :attr:`seeds`."""

    seeds: list[tuple[int, int, int]] = []

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.ctx = ctx

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            SeedLogEnv.seeds.append((self.ctx.worker_index, self.ctx.vector_index, seed))
        return super().reset(seed=seed, options=options)


def touch_marker(*args: Any, **kwargs: Any) -> None:
    """Not an env, callbacks class or task function: creates the file ``$RLTUNE_TEST_MARKER`` when called.

    Checkpoint tests name it in a crafted checkpoint to show that loading one never calls it.
    """
    with open(os.environ["RLTUNE_TEST_MARKER"], "w") as f:
        f.write("called")


class ScaledCartPole(gym.ObservationWrapper):
    """CartPole-v1 whose observations are multiplied by 1000 and shifted by 100000 (MeanStdFilter's test).

    The information is all there, but a tanh network fed such inputs saturates.
    Every observation it returns is appended to ``seen``, every action it
    gets to ``actions`` and the observation that action was chosen on to
    ``acted_on`` (the filter tests compare with them).
    """

    SCALE, OFFSET = 1000.0, 100_000.0
    built: list["ScaledCartPole"] = []  # every instance built in this process (tests find the evaluation env here)

    def __init__(self, ctx: Any = None) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.ctx = ctx
        self.actions: list[Any] = []
        self.acted_on: list[np.ndarray] = []
        ScaledCartPole.built.append(self)
        inner = self.env.observation_space
        self.observation_space = spaces.Box(
            (inner.low * self.SCALE + self.OFFSET).astype(np.float32),
            (inner.high * self.SCALE + self.OFFSET).astype(np.float32),
            dtype=np.float32,
        )
        self.seen: list[np.ndarray] = []

    def step(self, action: Any):
        self.actions.append(action)
        self.acted_on.append(self.seen[-1])
        return super().step(action)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        scaled = (observation * self.SCALE + self.OFFSET).astype(np.float32)
        self.seen.append(scaled)
        return scaled


class HangingEnv(ContextEnv):
    """Never returns from its ``hang_at``-th step (env_config, default 3): an env stuck in ``step()``.

    env_config keys besides ContextEnv's:
      - ``hang_workers``: the worker indices whose envs hang (default: every one).
      - ``marker_dir``: before hanging, the env writes ``hung_<worker>_<pid>`` there; an env of a worker
        that already left a marker (a replacement worker) keeps running.
      - ``native``: hang in C code that holds the GIL (no thread of the process runs meanwhile).
    """

    def step(self, action):
        config = self.ctx
        workers = config.get("hang_workers")
        if self.num_steps + 1 == int(config.get("hang_at", 3)) and (workers is None or self.ctx.worker_index in workers):
            marker_dir = config.get("marker_dir")
            if marker_dir:
                if any(name.startswith(f"hung_{self.ctx.worker_index}_") for name in os.listdir(marker_dir)):
                    return super().step(action)
                with open(os.path.join(marker_dir, f"hung_{self.ctx.worker_index}_{os.getpid()}"), "w"):
                    pass
            if config.get("native"):
                import ctypes

                ctypes.PyDLL(None).sleep(10**6)  # PyDLL: the GIL stays held
            time.sleep(10**6)
        return super().step(action)
