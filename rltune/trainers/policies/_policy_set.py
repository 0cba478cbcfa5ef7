"""PolicySet: the policies of one process by id, with their specs, spaces, observation filters, mapping and training set.

The trainer's algorithm owns the learner-side set (the policies it trains
and hosts, the master copies of the observation filters,
``policies_to_train``); the trainer's local rollout worker acts with that
very set, and every remote or evaluation worker builds an acting copy of
its own, kept in step by the worker messages (weights, added and removed
policies, a new mapping or training set).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rltune.errors import ConfigError
from rltune.trainers._config import TrainerSettings
from rltune.trainers.policies._filters import Filters, RunningStats, filter_stats, flush_deltas, make_filter, set_filter_stats
from rltune.trainers.policies._policy import Policy
from rltune.trainers.policies._policy_spec import PolicyMapping, PolicySpec, TrainingSelection, policy_config

Spaces = tuple[gym.Space, gym.Space]


class PolicySet:
    """Policies by id (RLlib's ``policy_map``) with what belongs to each: spec, spaces, observation filter.

    ``mapping`` (agent id to policy id) exists for multi-agent sets only;
    ``training`` selects the policies a learner trains among those of the
    algorithm's own class (``policy_class``; a hosted policy of another
    algorithm acts only). Filters of a set with ``worker_index`` 0 are
    masters (they take the other workers' deltas); the others keep deltas.
    """

    def __init__(
        self,
        config: TrainerSettings,
        policy_class: type[Policy],
        specs: dict[str, PolicySpec],
        spaces: dict[str, Spaces],
        *,
        multi_agent: bool,
        worker_index: int = 0,
        device: str = "cpu",
    ) -> None:
        self.config = config
        self.policy_class = policy_class
        self.multi_agent = multi_agent
        self.worker_index = worker_index
        self.device = device
        self.specs: dict[str, PolicySpec] = {}
        self.policies: dict[str, Policy] = {}
        self.spaces: dict[str, Spaces] = {}
        self.filters: Filters = {}
        for pid, spec in specs.items():
            self._build(pid, spec, spaces[pid])
        self.mapping: PolicyMapping | None = PolicyMapping(config.multiagent.policy_mapping_fn, list(self.specs)) if multi_agent else None
        self.training = TrainingSelection(config.multiagent.policies_to_train, self.trainable_ids())

    # -- building --------------------------------------------------------------------------
    def _build(self, pid: str, spec: PolicySpec, spaces: Spaces) -> Policy:
        cls = spec.policy_class or self.policy_class
        seed = None if self.config.seed is None else self.config.seed + 7919 * self.worker_index + 104729 * len(self.policies)
        policy = cls(*spaces, policy_config(self.config, spec.config, cls), device=self.device, seed=seed)
        self.specs[pid], self.policies[pid], self.spaces[pid] = spec, policy, spaces
        obs_filter = make_filter(self.config.observation_filter, policy.preprocessor.size, track_delta=self.worker_index != 0)
        if obs_filter is not None:
            self.filters[pid] = obs_filter
        return policy

    def trainable_ids(self) -> set[str]:
        """Policies of the algorithm's own class (or a subclass): those a learner can train."""
        return {
            pid for pid, spec in self.specs.items()
            if spec.policy_class is None or issubclass(spec.policy_class, self.policy_class)
        }

    def trained(self) -> dict[str, Policy]:
        """The policies that may be trained now (``policies_to_train`` among the trainable ones), by id."""
        candidates = self.training.candidates()
        return {pid: policy for pid, policy in self.policies.items() if pid in candidates}

    # -- changing the set ---------------------------------------------------------------------
    def add(
        self,
        policy_id: str,
        spec: PolicySpec,
        spaces: Spaces,
        weights: dict[str, np.ndarray] | None = None,
        policy_mapping_fn: Any = None,
        policies_to_train: Any = None,
    ) -> Policy:
        """Build a new policy (loading ``weights`` if given), and the mapping and training set that go with it."""
        if policy_id in self.policies:
            raise ConfigError(f"add_policy: a policy {policy_id!r} exists already")
        policy = self._build(policy_id, spec, spaces)
        if weights is not None:
            policy.set_weights(weights)
        self.select(policy_mapping_fn, policies_to_train)
        return policy

    def remove(self, policy_id: str, policy_mapping_fn: Any = None, policies_to_train: Any = None) -> None:
        """Drop a policy with its spec, spaces and filter; then the mapping and training set given (or the current ones)."""
        self.policies.pop(policy_id)
        self.specs.pop(policy_id)
        self.spaces.pop(policy_id)
        self.filters.pop(policy_id, None)
        self.select(policy_mapping_fn, policies_to_train)

    def select(self, policy_mapping_fn: Any = None, policies_to_train: Any = None) -> None:
        """A new mapping function and training set (None keeps the current one); a listed id no longer here is left out."""
        if self.mapping is not None or policy_mapping_fn is not None:
            fn = self.mapping.fn if policy_mapping_fn is None and self.mapping is not None else policy_mapping_fn
            self.mapping = PolicyMapping(fn, list(self.specs))
        to_train = self.training.value if policies_to_train is None else policies_to_train
        if isinstance(to_train, list):
            to_train = [pid for pid in to_train if pid in self.policies]
        self.training = TrainingSelection(to_train, self.trainable_ids())

    def state(self) -> dict[str, Any]:
        """The policies (specs and spaces), mapping and training set, for another set to match (:meth:`match`)."""
        return {
            "specs": {pid: (self.specs[pid], (p.observation_space, p.action_space)) for pid, p in self.policies.items()},
            "mapping_fn": self.mapping.fn if self.mapping is not None else None,
            "policies_to_train": self.training.value,
        }

    def match(self, state: dict[str, Any]) -> list[str]:
        """Add and remove policies to match another set's :meth:`state`; return the removed ids."""
        removed = [pid for pid in self.policies if pid not in state["specs"]]
        for pid in removed:
            self.remove(pid, state["mapping_fn"], state["policies_to_train"])
        for pid, (spec, spaces) in state["specs"].items():
            if pid not in self.policies:
                self.add(pid, spec, spaces, None, state["mapping_fn"], state["policies_to_train"])
        self.select(state["mapping_fn"], state["policies_to_train"])
        return removed

    # -- weights and filters -----------------------------------------------------------------
    def get_weights(self) -> dict[str, dict[str, np.ndarray]]:
        """Weights of every policy, by policy id."""
        return {pid: p.get_weights() for pid, p in self.policies.items()}

    def set_weights(
        self, weights: dict[str, dict[str, np.ndarray]], global_vars: dict[str, Any] | None = None,
        filters: dict[str, RunningStats] | None = None,
    ) -> None:
        """Load weights by policy id (a policy removed meanwhile is skipped), the global vars (``timestep``) and filter statistics."""
        for policy_id, policy_weights in weights.items():
            if policy_id in self.policies:
                self.policies[policy_id].set_weights(policy_weights)
        if global_vars:
            for policy in self.policies.values():
                policy.set_global_timestep(global_vars.get("timestep", 0))
        if filters:
            set_filter_stats(self.filters, filters)

    def filter_stats(self, flush_after: bool = False) -> dict[str, RunningStats]:
        """The observation filters' statistics by policy id (copies); ``flush_after``: start the deltas afresh."""
        stats = filter_stats(self.filters)
        if flush_after:
            flush_deltas(self.filters)
        return stats

    def policy_spaces(self) -> dict[str, Spaces]:
        """The (observation, action) spaces of every policy, by policy id."""
        return {pid: (p.observation_space, p.action_space) for pid, p in self.policies.items()}
