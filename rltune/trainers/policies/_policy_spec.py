"""The ``multiagent`` block: PolicySpec, per-policy configs, the policy mapping and which policies train.

``multiagent.policies`` is a dict of policy id to :class:`PolicySpec` (or
RLlib's 4-tuple ``(policy_class, obs_space, act_space, config)``, or a dict
of the spec's fields, as a YAML file writes it, or None), or a set/list of
ids. A spec's ``config`` overrides the trainer's keys for that policy alone
(``lr``, ``gamma``, ``model``, the algorithm's own keys); run-level keys
(``env``, ``num_workers``, ``train_batch_size``...) cannot differ by policy.
A policy of another algorithm (a ``DQNPolicy`` in a PPO trainer) is hosted:
built from its own algorithm's defaults and its spec's ``config``
(:func:`policy_config`), it acts and takes weights, and never trains.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import gymnasium as gym

from rltune._imports import import_object
from rltune.errors import ConfigError

# Keys of the shared TrainerSettings that a policy may override (the algorithms' own keys may all be).
PER_POLICY_SHARED_KEYS = frozenset({"gamma", "lr", "lr_schedule", "grad_clip", "model", "clip_actions", "explore"})


@dataclass
class PolicySpec:
    """One policy of a multi-agent config: its class, spaces and config overrides (None: the defaults).

    ``policy_class`` None is the algorithm's own (trained) policy; another
    :class:`~rltune.trainers.Policy` subclass (a heuristic, a random policy)
    only acts. Spaces left None are read from the env: the spaces of an
    agent the mapping function maps to this policy.
    """

    policy_class: Any = None
    observation_space: Optional[gym.Space] = None
    action_space: Optional[gym.Space] = None
    config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON-able values (classes as import strings, spaces as their repr)."""
        cls = self.policy_class
        if isinstance(cls, type):
            cls = f"{cls.__module__}:{cls.__qualname__}"
        return {
            "policy_class": cls,
            "observation_space": None if self.observation_space is None else repr(self.observation_space),
            "action_space": None if self.action_space is None else repr(self.action_space),
            "config": dict(self.config),
        }


_SPEC_KEYS = ("policy_class", "observation_space", "action_space", "config")


def parse_policies(value: Any) -> dict[str, PolicySpec]:
    """``multiagent.policies`` in any accepted form, as specs by policy id; ValueError naming the entry.

    (Called by the config's validator, which prefixes the path ``multiagent.policies``.)
    """
    if value is None:
        return {}
    if isinstance(value, (set, frozenset, list, tuple)):
        value = {pid: None for pid in value}
    if not isinstance(value, dict):
        raise ValueError(f"must be a dict of policy id to PolicySpec, or a set of ids, but got {value!r:.100}")
    specs = {}
    for pid, spec in value.items():
        if not isinstance(pid, str) or not pid:
            raise ValueError(f"policy ids must be non-empty strings, but got {pid!r}")
        specs[pid] = _parse_spec(pid, spec)
    return specs


def plain_policies(value: Any) -> Any:
    """``multiagent.policies`` with every :class:`PolicySpec` and 4-tuple written as a dict, as YAML writes it.

    ``{"p0": PolicySpec(config={"lr": x})}`` becomes ``{"p0": {"config":
    {"lr": x}}}`` (fields left None or empty are left out), so that the
    values inside a spec's ``config`` sit in nested dicts like the rest of a
    config (a study's search space is found there, under
    ``multiagent.policies.p0.config.lr``). :func:`parse_policies` reads the
    dict form back. Nothing is validated here: a value that is not a dict of
    specs, or a spec of another shape, is kept as it is, for the config's
    validator to report.
    """
    if not isinstance(value, dict):
        return value
    plain = {}
    for pid, spec in value.items():
        if isinstance(spec, PolicySpec):
            fields = (spec.policy_class, spec.observation_space, spec.action_space, spec.config)
        elif isinstance(spec, (tuple, list)) and len(spec) == 4:
            fields = tuple(spec)
        else:
            plain[pid] = spec
            continue
        plain[pid] = {key: field for key, field in zip(_SPEC_KEYS, fields)
                      if field is not None and not (isinstance(field, dict) and not field)}
    return plain


def _parse_spec(pid: str, spec: Any) -> PolicySpec:
    where = pid
    if spec is None:
        return PolicySpec()
    if isinstance(spec, PolicySpec):
        parsed = PolicySpec(spec.policy_class, spec.observation_space, spec.action_space, _overrides(where, spec.config))
    elif isinstance(spec, (tuple, list)):
        if len(spec) != 4:
            raise ValueError(f"{where}: a tuple spec is (policy_class, observation_space, action_space, config), but has {len(spec)} items")
        parsed = PolicySpec(spec[0], spec[1], spec[2], _overrides(where, spec[3]))
    elif isinstance(spec, dict):
        unknown = sorted(set(spec) - set(_SPEC_KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown} (a PolicySpec has {list(_SPEC_KEYS)})")
        parsed = PolicySpec(**{k: spec[k] for k in _SPEC_KEYS if k in spec})
        parsed.config = _overrides(where, parsed.config)
    else:
        raise ValueError(f"{where}: must be a PolicySpec, a 4-tuple, a dict or None, but got {spec!r:.100}")
    for key in ("observation_space", "action_space"):
        space = getattr(parsed, key)
        if space is not None and not isinstance(space, gym.Space):
            raise ValueError(f"{where}.{key}: must be a gymnasium space or None, but got {space!r:.100}")
    if parsed.policy_class is not None:
        try:
            parsed.policy_class = resolve_policy_class(parsed.policy_class, f"{where}.policy_class")
        except ConfigError as exc:
            raise ValueError(exc.problems[0]) from None
    return parsed


def _overrides(where: str, config: Any) -> dict[str, Any]:
    """A spec's ``config`` (None: no overrides) as a new dict; ValueError unless it is a mapping."""
    if config is None:
        return {}
    if hasattr(config, "overrides_dict") and not isinstance(config, dict):
        # RLlib 2.x: a policy's config may be its own algorithm's config builder (two trainers sharing an env).
        # The keys set on it that a policy can have override; its run-level ones (env, resources, rollouts)
        # are that other trainer's business, as in RLlib, where a policy never reads them.
        from rltune.trainers._config import TrainerSettings
        from rltune.trainers.rllib._rllib_keys import NO_EFFECT

        left_out = set(TrainerSettings.model_fields) - PER_POLICY_SHARED_KEYS | set(NO_EFFECT)
        return {key: value for key, value in config.overrides_dict().items() if key not in left_out}
    if not isinstance(config, dict):
        raise ValueError(f"{where}.config: must be a dict of the policy's config overrides, but got {config!r:.100}")
    return dict(config)


def resolve_policy_class(cls: Any, where: str) -> type:
    """A policy class given as a class or an import string; ConfigError unless it is a Policy subclass."""
    from rltune.trainers.policies._policy import Policy

    if isinstance(cls, str):
        cls = import_object(cls, where)
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise ConfigError(f"{where}: must be a rltune.trainers.Policy subclass (or its import string), but got {cls!r:.100}")
    return cls


def policy_overrides_problems(config_class: type, pid: str, overrides: dict[str, Any]) -> list[str]:
    """Keys of a policy's config overrides that may not differ by policy (run-level keys)."""
    from rltune.trainers._config import TrainerSettings

    shared = set(TrainerSettings.model_fields) | {"lambda"}
    own = set(config_class.model_fields) - set(TrainerSettings.model_fields) | {"lambda"} if config_class is not TrainerSettings else set()
    problems = []
    for key in overrides:
        if key in shared and key not in PER_POLICY_SHARED_KEYS and key not in own:
            problems.append(
                f"multiagent.policies.{pid}.config.{key}: a run-level key, the same for every policy "
                f"(per-policy keys: {sorted(PER_POLICY_SHARED_KEYS)} and the algorithm's own)"
            )
    return problems


def merge_overrides(config: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A config dict with one policy's overrides: ``model`` key by key, ``exploration_config`` too when of the same type.

    An ``exploration_config`` of another type replaces the trainer's whole
    (its other keys take that type's defaults), as RLlib merges it.
    """
    merged = dict(config)
    for key, value in (overrides or {}).items():
        base = merged.get(key)
        if key == "model" and isinstance(value, dict):
            merged["model"] = {**(base or {}), **value}
        elif key == "exploration_config" and isinstance(value, dict) and isinstance(base, dict) \
                and value.get("type", base.get("type")) == base.get("type"):
            merged[key] = {**base, **value}
        else:
            merged[key] = value
    return merged


def hosted_config_class(cfg: Any, policy_class: Any) -> Any:
    """The config class of ``policy_class`` when it is a policy of another algorithm than ``cfg``'s; else None.

    A policy's ``config_class`` is its algorithm's settings (``DQNSettings``
    for a ``DQNPolicy``); a trainer config that is not one of those (a PPO
    trainer's) cannot build it, so the policy gets a config of its own class.
    """
    own = getattr(policy_class, "config_class", None)
    return None if own is None or isinstance(cfg, own) else own


def policy_config(cfg: Any, overrides: dict[str, Any], policy_class: Any = None) -> Any:
    """The config one policy is built with, validated.

    The trainer config ``cfg`` with the policy's overrides
    (:func:`merge_overrides`); for a policy of another algorithm
    (:func:`hosted_config_class`), that algorithm's defaults with the
    overrides, so that a PPO trainer can host (act with, never train) a
    ``DQNPolicy`` whose weights come from a DQN trainer.
    """
    from rltune.trainers._config import validate_config

    own = hosted_config_class(cfg, policy_class)
    if own is not None:
        return validate_config(own, merge_overrides({}, overrides), where="policy config")
    if not overrides:
        return cfg
    merged = merge_overrides(cfg.model_dump(by_alias=True), overrides)
    merged["multiagent"] = {}
    return validate_config(type(cfg), merged, where="policy config")


class PolicyMapping:
    """``policy_mapping_fn`` of a config, checked: ``map(agent_id, episode, worker) -> policy id``.

    Without a function, every agent maps to the only policy or to
    ``default_policy``. The function may take ``(agent_id)`` alone (old
    RLlib) or ``(agent_id, episode, worker, **kwargs)``.
    """

    def __init__(self, fn: Any, policy_ids: list[str]) -> None:
        from rltune.trainers.policies._policy import DEFAULT_POLICY_ID

        self.policy_ids = set(policy_ids)
        if isinstance(fn, str):
            fn = import_object(fn, "multiagent.policy_mapping_fn")
        if fn is None:
            only = policy_ids[0] if len(policy_ids) == 1 else DEFAULT_POLICY_ID if DEFAULT_POLICY_ID in policy_ids else None
            if only is None:
                raise ConfigError(
                    f"multiagent.policy_mapping_fn: needed to choose among the policies {sorted(policy_ids)} "
                    "(fn(agent_id, episode, worker, **kwargs) -> policy id)"
                )
            fn = lambda agent_id, *args, **kwargs: only  # noqa: E731
        if not callable(fn):
            raise ConfigError(f"multiagent.policy_mapping_fn: must be a function or an import string, but got {fn!r:.100}")
        self.fn: Callable[..., Any] = fn
        self._agent_only = _takes_agent_only(fn)

    def __call__(self, agent_id: Any, episode: Any, worker: Any) -> str:
        """The policy id of ``agent_id``; ConfigError when the function returns an unknown one."""
        pid = self.fn(agent_id) if self._agent_only else self.fn(agent_id, episode, worker)
        if pid not in self.policy_ids:
            raise ConfigError(
                f"multiagent.policy_mapping_fn returned {pid!r} for agent {agent_id!r}, "
                f"which is not a policy id (the policies are {sorted(self.policy_ids)})"
            )
        return pid


def _takes_agent_only(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind in (p.VAR_POSITIONAL,) for p in params):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 1


class TrainingSelection:
    """``policies_to_train``: a list of ids, a function ``(policy_id, batch) -> bool``, or None (every trainable policy)."""

    def __init__(self, value: Any, trainable: set[str]) -> None:
        if isinstance(value, str) and ":" in value:
            value = import_object(value, "multiagent.policies_to_train")
        self.value = value
        self.fn: Optional[Callable[..., Any]] = value if callable(value) else None
        self.ids: Optional[set[str]] = None if value is None or self.fn is not None else set(value)
        self.trainable = trainable

    def candidates(self) -> set[str]:
        """Policies that may be trained (those that get a learner and whose batches are built)."""
        return set(self.trainable) if self.ids is None else self.ids & self.trainable

    def trains(self, policy_id: str, batch: Any = None) -> bool:
        """Whether this batch of ``policy_id`` goes to its learner."""
        if policy_id not in self.candidates():
            return False
        return True if self.fn is None else bool(self.fn(policy_id, batch))


def env_kind_problem(env: Any, multi_agent: bool, env_name: str) -> str | None:
    """Why ``env`` does not fit a config with (``multi_agent``) or without a ``multiagent`` block; None if it fits.

    A MultiAgentEnv fits a config without one: its agents share ``default_policy`` (see ``_default_policy.py``).
    """
    from rltune.env._multi_agent import is_multi_agent

    if multi_agent and not is_multi_agent(env):
        return (
            f"multiagent.policies is set, but env {env_name!r} is a single-agent gymnasium.Env "
            "(a multi-agent env subclasses rltune.env.MultiAgentEnv; or remove 'multiagent')"
        )
    return None


def policy_spaces_from_env(
    env: Any, specs: dict[str, PolicySpec], mapping: PolicyMapping, worker: Any, env_name: str, *, observations: bool = True
) -> dict[str, tuple[gym.Space, gym.Space]]:
    """Each policy's (observation, action) spaces: its spec's, else those of an agent mapped to it.

    Agents are mapped as if in a new episode. A policy no agent maps to so
    (e.g. a self-play opponent chosen per episode) takes the spaces all the
    env's agents share; if they differ, its spec must give them. Every agent
    mapped here must fit its policy's spaces (:mod:`rltune.trainers.policies._space_fit`),
    else :class:`ConfigError` naming both; agents mapped only once an episode
    runs are checked by the sampler when they first appear. ``observations``
    False: a ``multiagent.observation_fn`` rewrites the agents' observations,
    so only the action spaces must fit (its results are checked instead).
    """
    from rltune.callbacks._episode import MultiAgentEpisode
    from rltune.trainers.policies._space_fit import agent_spaces, fit_problem

    ma_env = env if hasattr(env, "get_agent_ids") else env.unwrapped
    probe = MultiAgentEpisode(env_index=0, worker_index=getattr(worker, "worker_index", 0), observation={}, info={})
    agents = sorted(ma_env.get_agent_ids(), key=str)
    mapped: dict[Any, str] = {}
    for agent in agents:
        try:
            mapped[agent] = mapping(agent, probe, worker)
        except ConfigError:
            raise
        except Exception:  # a mapping that needs a running episode: the agent is mapped when it appears
            continue
    first_agent: dict[str, Any] = {}
    for agent, pid in mapped.items():
        first_agent.setdefault(pid, agent)

    shared: Optional[tuple[Any, Any]] = None
    if agents:
        all_spaces = [agent_spaces(ma_env, a, env_name) for a in agents]
        if all(s == all_spaces[0] for s in all_spaces):
            shared = all_spaces[0]
    else:
        shared = (getattr(ma_env, "observation_space", None), getattr(ma_env, "action_space", None))
    out = {}
    for pid, spec in specs.items():
        found = agent_spaces(ma_env, first_agent[pid], env_name) if pid in first_agent else shared
        if found is None and (spec.observation_space is None or spec.action_space is None):
            raise ConfigError(
                f"multiagent.policies.{pid}: no agent of env {env_name!r} maps to it when an episode starts and "
                "the agents' spaces differ: give its observation_space and action_space in its PolicySpec"
            )
        out[pid] = (spec.observation_space or found[0], spec.action_space or found[1])
        missing = [kind for kind, space in zip(("observation", "action"), out[pid]) if space is None]
        if missing:
            raise ConfigError(_undeclared_spaces(pid, missing, env_name))
    problems = [fit_problem(pid, agent, out[pid], agent_spaces(ma_env, agent, env_name), env_name, observations=observations)
                for agent, pid in mapped.items() if pid in out]
    if any(problems):
        raise ConfigError([p for p in problems if p])
    return out


def _undeclared_spaces(pid: str, kinds: list[str], env_name: str) -> str:
    """The error of a policy whose ``kinds`` of space neither its PolicySpec nor the env declares."""
    keys = " and ".join(f"{kind}_space" for kind in kinds)
    given = ", ".join(f"{kind}_space=..." for kind in kinds)
    return (
        f"multiagent.policies.{pid}: env {env_name!r} declares no {' or '.join(kinds)} space for its agents, and "
        f"the policy's PolicySpec gives none: give its {keys} (PolicySpec({given})), or set the env's {keys}"
    )


def multi_agent_problems(cfg: Any, algorithm_policy_class: type) -> list[str]:
    """What is wrong with a typed config's ``multiagent`` block (policies, overrides, mapping, training set)."""
    ma = cfg.multiagent
    if not ma.policies:
        if ma.policies_to_train is not None or ma.policy_mapping_fn is not None:
            return ["multiagent: policy_mapping_fn and policies_to_train need multiagent.policies"]
        return []
    problems = []
    for pid, spec in ma.policies.items():
        hosted = hosted_config_class(cfg, spec.policy_class)
        problems.extend(policy_overrides_problems(hosted or type(cfg), pid, spec.config))
        if (spec.config or hosted) and not problems:
            try:
                policy_config(cfg, spec.config, spec.policy_class)
            except ConfigError as exc:
                problems.extend(f"multiagent.policies.{pid}.config: {p}" for p in exc.problems)
    try:
        PolicyMapping(ma.policy_mapping_fn, list(ma.policies))
    except ConfigError as exc:
        problems.extend(exc.problems)
    trainable = {
        pid for pid, spec in ma.policies.items()
        if spec.policy_class is None or issubclass(spec.policy_class, algorithm_policy_class)
    }
    try:
        selection = TrainingSelection(ma.policies_to_train, trainable)
    except ConfigError as exc:
        return problems + exc.problems
    if selection.ids is not None:
        unknown = sorted(selection.ids - set(ma.policies))
        if unknown:
            problems.append(f"multiagent.policies_to_train: {unknown} are not policy ids (the policies are {sorted(ma.policies)})")
        untrainable = sorted((selection.ids & set(ma.policies)) - trainable)
        hosted = [pid for pid in untrainable if hosted_config_class(cfg, ma.policies[pid].policy_class)]
        if hosted:
            problems.append(
                f"multiagent.policies_to_train: {hosted} are policies of another algorithm "
                f"({', '.join(sorted({ma.policies[p].policy_class.__name__ for p in hosted}))}): this trainer acts with "
                f"them but only trains {algorithm_policy_class.__name__} policies; train them in a trainer of their "
                "algorithm and copy their weights over (set_weights), as in examples/multi_agent_two_trainers.py"
            )
        untrainable = [pid for pid in untrainable if pid not in hosted]
        if untrainable:
            problems.append(
                f"multiagent.policies_to_train: {untrainable} have a policy_class that is not "
                f"{algorithm_policy_class.__name__} (or a subclass): no learner can train them"
            )
    return problems
