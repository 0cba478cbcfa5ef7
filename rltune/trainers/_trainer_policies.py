"""The trainer's policy set: adding and removing policies while training (self-play leagues), and saving the policy set in checkpoints."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from rltune._imports import current_import_string
from rltune.errors import CheckpointError, ConfigError
from rltune.trainers.policies._policy import DEFAULT_POLICY_ID, Policy
from rltune.trainers.policies._policy_spec import (
    PolicySpec,
    hosted_config_class,
    parse_policies,
    policy_config,
    policy_overrides_problems,
)
from rltune.trainers.policies._space_json import space_from_json, space_to_json

if TYPE_CHECKING:
    from rltune.trainers._trainer_parts import TrainerParts


class TrainerPolicies:
    """A trainer's policy set (multi-agent configs): add and remove policies, the learners follow, checkpoint form.

    Works on the trainer's ``parts``: its algorithm owns the policy set and
    the learners; a change goes to every rollout worker (the local one acts
    with the algorithm's set itself) and the learners follow.
    """

    def __init__(self, parts: "TrainerParts") -> None:
        self.parts = parts

    def add_policy(
        self,
        policy_id: str,
        wanted: PolicySpec,
        *,
        policy_state: dict[str, np.ndarray] | None = None,
        policy: Policy | None = None,
        policy_mapping_fn: Any = None,
        policies_to_train: Any = None,
    ) -> Policy:
        """Add a policy to the learner and every rollout worker and return it (``Trainer.add_policy``).

        ``wanted``: the class, spaces and config overrides given (None where
        left out); ``policy``: copy what ``wanted`` leaves out and the
        weights from this policy (a frozen snapshot for self-play). Spaces
        still missing are those every existing policy shares.
        """
        owned = self.parts.policy_set
        if not owned.multi_agent:
            raise ConfigError("add_policy: the trainer is single-agent (no 'multiagent.policies' in its config)")
        if policy_id in owned.policies:
            raise ConfigError(f"add_policy: a policy {policy_id!r} exists already (the policies are {sorted(owned.policies)})")
        policy_cls, observation_space, action_space = wanted.policy_class, wanted.observation_space, wanted.action_space
        overrides = dict(wanted.config or {})
        if policy is not None:
            source_pid = next((pid for pid, p in owned.policies.items() if p is policy), None)
            if source_pid is not None and not overrides:
                overrides = dict(owned.specs[source_pid].config)
            if policy_cls is None and type(policy) is not self.parts.policy_class:
                policy_cls = type(policy)
            observation_space = observation_space or policy.observation_space
            action_space = action_space or policy.action_space
            if policy_state is None:
                policy_state = policy.get_weights()
        spec = self._checked_spec(policy_id, PolicySpec(policy_cls, observation_space, action_space, overrides))
        spaces = (spec.observation_space, spec.action_space)
        if spaces[0] is None or spaces[1] is None:
            spaces = self._shared_spaces(policy_id, spaces)
        self.parts.workers.add_policy(policy_id, spec, spaces, policy_state, policy_mapping_fn, policies_to_train)
        self.sync_learners()
        return owned.policies[policy_id]

    def remove_policy(
        self, policy_id: str = DEFAULT_POLICY_ID, *, policy_mapping_fn: Any = None, policies_to_train: Any = None
    ) -> None:
        """Remove a policy (and its learner) from the trainer and every rollout worker.

        Give a ``policy_mapping_fn`` that no longer returns it; running
        episodes with an agent mapped to it are dropped.
        """
        owned = self.parts.policy_set
        if policy_id not in owned.policies:
            raise ConfigError(f"remove_policy: no policy {policy_id!r}; the policies are {sorted(owned.policies)}")
        if len(owned.policies) == 1:
            raise ConfigError(f"remove_policy: {policy_id!r} is the only policy")
        self.parts.workers.remove_policy(policy_id, policy_mapping_fn, policies_to_train)
        self.sync_learners()

    def set_policy_mapping_fn(self, policy_mapping_fn: Any) -> None:
        """Map agents with this function, on every worker, from their next episode on."""
        self.parts.workers.set_policy_mapping_fn(policy_mapping_fn)

    def set_policies_to_train(self, policies_to_train: Any) -> None:
        """Train these policies (ids, or ``fn(policy_id, batch) -> bool``) from the next iteration on."""
        self.parts.workers.set_policies_to_train(policies_to_train)
        self.sync_learners()

    def _checked_spec(self, policy_id: str, spec: PolicySpec) -> PolicySpec:
        try:
            spec = parse_policies({policy_id: spec})[policy_id]
        except ValueError as exc:
            raise ConfigError(f"add_policy: {exc}") from None
        hosted = hosted_config_class(self.parts.cfg, spec.policy_class)
        problems = policy_overrides_problems(hosted or type(self.parts.cfg), policy_id, spec.config)
        if not problems and (spec.config or hosted):
            try:
                policy_config(self.parts.cfg, spec.config, spec.policy_class)
            except ConfigError as exc:
                problems = [f"add_policy config: {p}" for p in exc.problems]
        if problems:
            raise ConfigError(problems, where="add_policy")
        return spec

    def _shared_spaces(self, policy_id: str, given: tuple[Any, Any]) -> tuple[gym.Space, gym.Space]:
        spaces = list(self.parts.policy_set.policy_spaces().values())
        if not all(s == spaces[0] for s in spaces):
            raise ConfigError(
                f"add_policy({policy_id!r}): the policies' spaces differ, so give observation_space and action_space"
            )
        return (given[0] or spaces[0][0], given[1] or spaces[0][1])

    def sync_learners(self) -> None:
        """A learner for every policy that may be trained now, none for a removed one."""
        self.parts.algorithm.sync_learners()

    # -- checkpoints -----------------------------------------------------------------------
    def specs_state(self) -> dict[str, Any]:
        """The policy set as JSON values (classes as import strings, spaces as data), for checkpoints."""
        owned = self.parts.policy_set
        if not owned.multi_agent:
            return {}
        state = {}
        for pid, spec in owned.specs.items():
            policy = owned.policies[pid]
            cls = spec.policy_class
            state[pid] = {
                "policy_class": None if cls is None else f"{cls.__module__}:{cls.__qualname__}",
                "observation_space": space_to_json(policy.observation_space),
                "action_space": space_to_json(policy.action_space),
                "config": spec.config,
            }
        return state

    def add_saved(self, path: str | os.PathLike[str], saved: Any) -> list[str]:
        """Add the policies a checkpoint holds that this trainer lacks (a league's snapshots); return their ids.

        A saved policy class is used only if this trainer's config names the
        same class (or it is the algorithm's): a checkpoint never makes
        rltune import or build code of its choosing.
        """
        if not isinstance(saved, dict) or not saved:
            return []
        owned = self.parts.policy_set
        if not owned.multi_agent and any(pid not in owned.policies for pid in saved):
            raise CheckpointError(
                f"checkpoint {str(path)!r} holds the policies {sorted(saved)} of a multi-agent config; this "
                f"{self.parts.name} is single-agent (its only policy is {sorted(owned.policies)[0]!r}): build it with the "
                "checkpoint's multiagent config (Trainer.from_checkpoint does)"
            )
        known = {f"{c.__module__}:{c.__qualname__}": c for c in self._known_policy_classes()}
        prepared = []
        for pid, entry in saved.items():
            if pid in owned.policies:
                continue
            field = f"policy_specs.{pid}"
            try:
                cls_name = entry.get("policy_class")
                cls_name = current_import_string(cls_name) if isinstance(cls_name, str) else cls_name
                if cls_name is not None and cls_name not in known:
                    raise ValueError(f"names the policy class {cls_name!r}, which this trainer's config does not use")
                spec = PolicySpec(
                    None if cls_name is None or known[cls_name] is self.parts.policy_class else known[cls_name],
                    space_from_json(entry["observation_space"]),
                    space_from_json(entry["action_space"]),
                    dict(entry.get("config") or {}),
                )
                spec = self._checked_spec(pid, spec)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise CheckpointError(f"checkpoint {str(path)!r}: metadata field {field!r} {exc}") from None
            prepared.append((pid, spec))
        for pid, spec in prepared:
            self.parts.workers.add_policy(pid, spec, (spec.observation_space, spec.action_space), None, None, None)
        self.sync_learners()
        return [pid for pid, _ in prepared]

    def _known_policy_classes(self) -> list[type]:
        classes = [self.parts.policy_class]
        for spec in self.parts.cfg.multiagent.policies.values():
            if spec.policy_class is not None:
                classes.append(spec.policy_class)
        return classes

    def remove_saved(self, policy_ids: list[str]) -> None:
        """Remove policies added by :meth:`add_saved` (a restore that failed after)."""
        for pid in policy_ids:
            self.parts.workers.remove_policy(pid, None, None)
        self.sync_learners()
