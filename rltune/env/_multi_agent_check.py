"""The API checker of multi-agent envs: a few random steps, every rule of the dict API checked with one clear message.

It plays the part of gymnasium's env checker for a :class:`MultiAgentEnv`:
``build_env`` runs it once on each env it builds (unless env checking is
disabled). The rules are those of :mod:`rltune.env._multi_agent`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import gymnasium as gym
import numpy as np

from rltune.env._context import EnvContext
from rltune.env._multi_agent import ALL, AgentID, _agent_space, declares_spaces
from rltune.errors import EnvError

CHECK_STEPS = 20
# RLlib's key for infos shared by every agent: allowed beside the agent ids.
COMMON_INFOS = "__common__"
_SKIP_HINT = "(set 'disable_env_checking': True to skip this check)"


class _Broken(Exception):
    """A rule the env breaks (the message says which); turned into an EnvError naming the env."""


def check_multi_agent_env(env: gym.Env, name: str, ctx: EnvContext, *, steps: int = CHECK_STEPS) -> None:
    """Reset and step ``env`` with random actions for up to ``steps`` steps, checking the multi-agent API.

    ``env`` is a :class:`rltune.env.MultiAgentEnv`, possibly under gymnasium
    wrappers (its spaces and agent ids are read from the env itself, else
    from ``env.unwrapped``). It is reset again whenever ``"__all__"`` ends
    the episode. Actions are sampled from the acting agents' action spaces,
    within an ``"action_mask"`` when the observation (a dict) or the info
    carries one, as PettingZoo's classic games do.

    Raises :class:`EnvError` with one message naming the env (``name``), its
    place and the rule broken; an exception raised by the env's own
    ``reset`` or ``step`` is reported the same way, with its type.
    """
    checker = _Checker(env)
    try:
        checker.run(steps)
    except _Broken as exc:
        raise EnvError(f"env {name!r} ({_where(ctx)}) breaks the multi-agent env API: {exc} {_SKIP_HINT}") from None
    except _Raised as exc:
        cause = exc.__cause__
        raise EnvError(
            f"env {name!r} ({_where(ctx)}): {exc.method} raised {type(cause).__name__}: {cause} "
            f"while rltune checked its multi-agent API {_SKIP_HINT}"
        ) from cause


def _where(ctx: EnvContext) -> str:
    from rltune.env._build import where  # _build imports this module

    return where(ctx)


class _Raised(Exception):
    """The env's own reset or step raised (the cause); ``method`` says which."""

    def __init__(self, method: str) -> None:
        super().__init__(method)
        self.method = method


class _Checker:
    """The state of one check: the env, its spaces, and the agents done in the current episode."""

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        # Spaces and agent ids live on the MultiAgentEnv: gymnasium's wrappers do not forward them.
        self.spaces_env = env if hasattr(env, "get_agent_ids") else env.unwrapped
        get_ids = getattr(self.spaces_env, "get_agent_ids", None)
        self.agent_ids: set[AgentID] = set(get_ids() if get_ids else getattr(self.spaces_env, "possible_agents", ()) or ())
        self.done: dict[AgentID, int] = {}  # agents done in the current episode: the step they ended at
        # An env may declare no spaces of a kind (RLlib's envs whose PolicySpecs give them): those go unchecked.
        self.declares = {kind: declares_spaces(self.spaces_env, kind) for kind in ("observation", "action")}

    def run(self, steps: int) -> None:
        obs = self.reset()
        if not self.declares["action"]:
            return  # no space to draw actions from: the trainer takes the agents' spaces from their PolicySpecs
        for step in range(1, steps + 1):
            result = self.call("step", self.env.step, self.actions(obs))
            obs, ended = self.check_step(result, step)
            if ended:
                obs = self.reset()

    def call(self, method: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # the user's env code
            raise _Raised(method) from exc

    def reset(self) -> dict:
        self.done = {}
        obs, infos = _reset_shape(self.call("reset", self.env.reset, seed=None, options=None))
        if not obs:
            raise _Broken("reset returned no observation: no agent would act (give the agents that act first their observations)")
        self.check_observations("reset", obs)
        self.check_infos("reset", infos)
        return obs

    def check_step(self, result: Any, step: int) -> tuple[dict, bool]:
        """Check one step's result; the observations and whether the episode ended."""
        where = f"step {step}"
        obs, rewards, terminateds, truncateds, infos = _step_shape(result, where)
        for what, flags in (("terminateds", terminateds), ("truncateds", truncateds)):
            for agent, flag in flags.items():
                if not isinstance(flag, (bool, np.bool_)):
                    raise _Broken(f"{where}: {what}[{agent!r}] is {_describe(flag)}, not a bool")
            self.check_keys(where, what, [a for a in flags if a != ALL])
        self.check_observations(where, obs)
        for agent in obs:
            if agent in self.done:
                raise _Broken(f"{where}: {done_agent_observed(agent, self.done[agent])}")
        self.check_keys(where, "rewards", rewards)
        for agent, reward in rewards.items():
            if not _is_number(reward):
                raise _Broken(f"{where}: the reward of agent {agent!r} is {_describe(reward)}, not a number")
            if not math.isfinite(float(reward)):
                raise _Broken(f"{where}: the reward of agent {agent!r} is {float(reward)}, not a finite number")
        self.check_infos(where, infos)
        for agent in terminateds.keys() | truncateds.keys():
            if agent != ALL and (terminateds.get(agent) or truncateds.get(agent)):
                self.done.setdefault(agent, step)
        ended = bool(terminateds[ALL] or truncateds[ALL])
        if not ended and not [a for a in obs if a not in self.done]:
            raise _Broken(
                f"{where}: no agent is left to act (every observation is of a done agent, or there is none) "
                f"but {ALL!r} is False in terminateds and truncateds"
            )
        return obs, ended

    def check_keys(self, where: str, what: str, agents: Any) -> None:
        """Every key is a known agent id (when the env says which agents exist)."""
        if not self.agent_ids:
            return
        for agent in agents:
            if agent not in self.agent_ids:
                raise _Broken(
                    f"{where}: the {what} name agent {agent!r}, which is not one of the env's agents "
                    f"{_agents(self.agent_ids)} (set possible_agents, or key the Dict spaces by every agent id)"
                )

    def space_of(self, kind: str, agent: AgentID) -> gym.Space:
        """The agent's ``kind`` space as the sampler reads it: the env's ``get_<kind>_space`` (which it may override)."""
        method = getattr(self.spaces_env, f"get_{kind}_space", None)
        return method(agent) if method is not None else _agent_space(self.spaces_env, kind, agent)

    def check_observations(self, where: str, obs: dict) -> None:
        self.check_keys(where, "observations", obs)
        if not self.declares["observation"]:
            return
        for agent, ob in obs.items():
            try:
                space = self.space_of("observation", agent)
            except KeyError as exc:
                raise _Broken(f"{where}: agent {agent!r} has an observation but no observation space: {exc.args[0]}") from None
            if not _contains(space, ob):
                raise _Broken(f"{where}: the observation of agent {agent!r} is not within its observation space {space}: {_describe(ob)}")

    def check_infos(self, where: str, infos: dict) -> None:
        self.check_keys(where, "infos", [a for a in infos if a != COMMON_INFOS])
        for agent, info in infos.items():
            if not isinstance(info, dict):
                raise _Broken(f"{where}: the info of agent {agent!r} must be a dict, not {_describe(info)}")

    def actions(self, obs: dict) -> dict:
        """A random action for every agent that acts next (in ``obs`` and not done)."""
        actions = {}
        for agent, ob in obs.items():
            if agent in self.done:
                continue
            try:
                space = self.space_of("action", agent)
            except KeyError as exc:
                raise _Broken(f"agent {agent!r} must act but has no action space: {exc.args[0]}") from None
            actions[agent] = _sample(space, ob)
        return actions


def unpack_reset(result: Any, name: str, ctx: EnvContext) -> tuple[dict, dict]:
    """``(obs, infos)`` of a MultiAgentEnv's ``reset``, checked for its shape only: cheap enough for every reset.

    Raises :class:`EnvError` naming the env, its place and the rule broken
    (e.g. a bare array returned, as a single-agent env does).
    """
    try:
        return _reset_shape(result)
    except _Broken as exc:
        raise EnvError(f"env {name!r} ({_where(ctx)}) breaks the multi-agent env API: {exc}") from None


def unpack_step(result: Any, name: str, ctx: EnvContext) -> tuple[dict, dict, dict, dict, dict]:
    """``(obs, rewards, terminateds, truncateds, infos)`` of a MultiAgentEnv's ``step``, checked for its shape only.

    Five dicts, with ``"__all__"`` in ``terminateds`` and ``truncateds``;
    raises :class:`EnvError` as :func:`unpack_reset` does.
    """
    try:
        return _step_shape(result, "step")
    except _Broken as exc:
        raise EnvError(f"env {name!r} ({_where(ctx)}) breaks the multi-agent env API: {exc}") from None


def _reset_shape(result: Any) -> tuple[dict, dict]:
    if not (isinstance(result, tuple) and len(result) == 2):
        raise _Broken(
            f"reset must return a tuple (obs, infos) of two dicts keyed by agent id; it returned {_describe(result)}"
            + _single_agent_hint(result)
        )
    for what, value in zip(("observations", "infos"), result):
        _check_dict("reset", what, value)
    return result


def _step_shape(result: Any, where: str) -> tuple[dict, dict, dict, dict, dict]:
    if not (isinstance(result, tuple) and len(result) == 5):
        raise _Broken(
            "step must return a tuple (obs, rewards, terminateds, truncateds, infos) of five dicts keyed by agent id; "
            f"{where} returned {_describe(result)}" + _single_agent_hint(result)
        )
    for what, value in zip(("observations", "rewards", "terminateds", "truncateds", "infos"), result):
        _check_dict(where, what, value)
    for what, flags in (("terminateds", result[2]), ("truncateds", result[3])):
        if ALL not in flags:
            raise _Broken(f"{where}: {what} has no {ALL!r} key (it says whether the episode ended for every agent)")
    return result


def done_agent_observed(agent: AgentID, done_step: int) -> str:
    """The rule an env breaks when an agent that was done at step ``done_step`` of the episode observes again."""
    return (
        f"agent {agent!r} has an observation, but it was done (terminated or truncated) at step {done_step}: an "
        f"agent that is done may not act again in the same episode (give it a new agent id, or end the episode "
        f"with {ALL!r})"
    )


def _check_dict(where: str, what: str, value: Any) -> None:
    if not isinstance(value, dict):
        raise _Broken(f"{where}: the {what} must be a dict keyed by agent id, not {_describe(value)}")


def _sample(space: gym.Space, ob: Any) -> Any:
    """A random action of ``space``, within the ``"action_mask"`` of a dict observation if it has a usable one."""
    mask = ob.get("action_mask") if isinstance(ob, dict) else None
    if isinstance(space, gym.spaces.Discrete) and mask is not None:
        mask = np.asarray(mask).astype(np.int8)
        if mask.shape == (space.n,) and mask.any():
            return space.sample(mask=mask)
    return space.sample()


def _contains(space: gym.Space, value: Any) -> bool:
    try:
        return bool(space.contains(value))
    except Exception:  # e.g. a list where a Box expects an array of another shape
        return False


def _is_number(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.shape == () and np.issubdtype(value.dtype, np.number)
    return isinstance(value, (numbers.Real, np.number)) and not isinstance(value, np.complexfloating)


def _single_agent_hint(result: Any) -> str:
    """A hint when a MultiAgentEnv returns what a single-agent gymnasium env returns."""
    first = result[0] if isinstance(result, tuple) and result else result
    if isinstance(first, dict):
        return ""
    return " (this looks like the single-agent gymnasium API: a MultiAgentEnv returns dicts keyed by agent id)"


def _describe(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} ({', '.join(type(v).__name__ for v in value)})"
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"


def _agents(agents: set) -> str:
    return "[" + ", ".join(repr(a) for a in sorted(agents, key=str)) + "]"
