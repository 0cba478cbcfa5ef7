"""The env of the multi-agent sampling benchmark, written once for rltune and RLlib.

Each agent balances its own cart-pole (gymnasium's CartPole-v1 physics, one
Discrete(2) push per step, 4 floats of state). All agents act at every step
(simultaneous moves). An agent whose pole falls or whose cart leaves the track
gets reward -1 and its cart-pole starts over where it stands (it does not leave
the episode); every other step it gets +1. The episode is truncated for all
after ``HORIZON`` steps. So every env step is exactly ``num_agents`` agent
steps, in both libraries, whatever the policy does.

The per-agent work is the same Python arithmetic in the multi-agent env
(one call per agent per step) and in the single-agent env (one call per
step): an agent step costs the env the same in both, so a difference in the
cost per agent step between them is the sampler's.

This module imports neither rltune nor ray: :func:`multi_agent_env_class`
builds the env class on the ``MultiAgentEnv`` base of whichever library the
process runs (rltune's, or ``ray.rllib.env.multi_agent_env.MultiAgentEnv``).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

HORIZON = 200  # env steps per episode (truncated)

# gymnasium's CartPole-v1 constants
GRAVITY, MASS_CART, MASS_POLE, HALF_LENGTH, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASS_CART + MASS_POLE
POLE_MASS_LENGTH = MASS_POLE * HALF_LENGTH
THETA_LIMIT = 12 * 2 * math.pi / 360
X_LIMIT = 2.4
OBS_HIGH = np.array([X_LIMIT * 2, np.finfo(np.float32).max, THETA_LIMIT * 2, np.finfo(np.float32).max], dtype=np.float32)


def cartpole_step(state: list[float], action: int) -> bool:
    """Advance one cart-pole ``state`` ``[x, x_dot, theta, theta_dot]`` in place by one push; whether it fell."""
    x, x_dot, theta, theta_dot = state
    force = FORCE if action == 1 else -FORCE
    cos, sin = math.cos(theta), math.sin(theta)
    temp = (force + POLE_MASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS
    theta_acc = (GRAVITY * sin - cos * temp) / (HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos * cos / TOTAL_MASS))
    x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS
    x, x_dot = x + TAU * x_dot, x_dot + TAU * x_acc
    theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
    state[:] = (x, x_dot, theta, theta_dot)
    return x < -X_LIMIT or x > X_LIMIT or theta < -THETA_LIMIT or theta > THETA_LIMIT


def _start(rng: np.random.Generator) -> list[float]:
    return rng.uniform(-0.05, 0.05, 4).tolist()


def _obs(state: list[float]) -> np.ndarray:
    return np.array(state, dtype=np.float32)


def _agent_step(state: list[float], action: Any, rng: np.random.Generator) -> float:
    """One agent's step: +1 while balanced; -1 and a fresh start in place when it fell."""
    if cartpole_step(state, int(action)):
        state[:] = _start(rng)
        return -1.0
    return 1.0


def observation_space() -> gym.spaces.Box:
    """One agent's observation space (CartPole-v1's)."""
    return gym.spaces.Box(-OBS_HIGH, OBS_HIGH, dtype=np.float32)


def multi_agent_env_class(base: type) -> type:
    """The multi-agent env as a subclass of ``base`` (a library's ``MultiAgentEnv``).

    ``env_config["num_agents"]`` agents, ids ``a0 .. a{N-1}``, per-agent spaces.
    """

    class MultiCartPoles(base):  # type: ignore[misc, valid-type]
        """``num_agents`` cart-poles stepped together; see the module docstring."""

        def __init__(self, config: Any = None) -> None:
            super().__init__()
            num = int((config or {}).get("num_agents", 2))
            self.agents = self.possible_agents = [f"a{k}" for k in range(num)]
            self.observation_spaces = {a: observation_space() for a in self.agents}
            self.action_spaces = {a: gym.spaces.Discrete(2) for a in self.agents}
            self._rng = np.random.default_rng()
            self._states: dict[str, list[float]] = {}
            self._t = 0

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
            if seed is not None:
                self._rng = np.random.default_rng(seed)
            self._t = 0
            self._states = {a: _start(self._rng) for a in self.agents}
            return {a: _obs(s) for a, s in self._states.items()}, {}

        def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
            self._t += 1
            rng, states = self._rng, self._states
            rewards = {a: _agent_step(states[a], action, rng) for a, action in action_dict.items()}
            obs = {a: _obs(states[a]) for a in action_dict}
            return obs, rewards, {"__all__": False}, {"__all__": self._t >= HORIZON}, {}

    return MultiCartPoles


class SingleCartPole(gym.Env):
    """One agent of :func:`multi_agent_env_class`'s env as a gymnasium env (the same step, reward and horizon)."""

    def __init__(self, config: Any = None) -> None:
        self.observation_space = observation_space()
        self.action_space = gym.spaces.Discrete(2)
        self._rng = np.random.default_rng()
        self._state: list[float] = []
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self._state = _start(self._rng)
        return _obs(self._state), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        reward = _agent_step(self._state, action, self._rng)
        return _obs(self._state), reward, False, self._t >= HORIZON, {}


def shared_policy(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    """Every agent maps to one policy (the benchmark's main configuration)."""
    return "shared"


def group_policy(agent_id: Any, *args: Any, **kwargs: Any) -> str:
    """Two policies: agents ``a0, a2, ...`` map to ``even``, ``a1, a3, ...`` to ``odd``."""
    return "even" if int(str(agent_id)[1:]) % 2 == 0 else "odd"


POLICIES = {"shared": ({"shared"}, shared_policy), "groups": ({"even", "odd"}, group_policy)}

_BASES = {  # module attribute -> (module of the library's MultiAgentEnv, class name)
    "RltuneMultiCartPoles": ("rltune.env", "MultiAgentEnv"),
    "RllibMultiCartPoles": ("ray.rllib.env.multi_agent_env", "MultiAgentEnv"),
}


def __getattr__(name: str) -> type:
    """``RltuneMultiCartPoles`` / ``RllibMultiCartPoles``: the env on that library's base, built on first use.

    Module attributes (not classes made inside a function) so that pickle
    finds them by name, e.g. in rltune's remote worker processes.
    """
    if name not in _BASES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, base = _BASES[name]
    cls = multi_agent_env_class(getattr(importlib.import_module(module), base))
    cls.__name__ = cls.__qualname__ = name
    cls.__module__ = __name__
    globals()[name] = cls
    return cls
