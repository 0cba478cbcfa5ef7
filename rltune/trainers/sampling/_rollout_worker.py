"""RolloutWorker: the envs of one process and the policies acting in them.

The same class runs as the local worker (worker_index 0, in the trainer's
process) and inside every rollout worker process (worker_index 1..N); a
remote worker is this object driven through a pipe (see ``_remote.py``).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from rltune.callbacks._auto_curriculum import worker_callbacks
from rltune.callbacks._callbacks import DefaultCallbacks, call_hook, make_callbacks
from rltune.env._build import build_env
from rltune.env._context import EnvContext
from rltune.env._registry import EnvSpec
from rltune.env._task import task_env
from rltune.env._vector import is_vector_env, single_spaces, vector_env_contexts
from rltune.errors import ConfigError, EnvError
from rltune.trainers._config import TrainerSettings
from rltune.trainers.policies._default_policy import default_policy_specs, runs_multi_agent, shared_spaces_problem
from rltune.trainers.policies._filters import Filters, RunningStats, flush_deltas, set_filter_stats
from rltune.trainers.policies._policy_set import PolicySet
from rltune.trainers.sampling._agent_rows import AgentRows
from rltune.trainers.sampling._collector import EpisodeCollector
from rltune.trainers.sampling._observation_fn import KEY as OBSERVATION_FN, ObservationFn
from rltune.trainers.policies._policy import DEFAULT_POLICY_ID, Policy
from rltune.trainers.policies._policy_spec import (
    PolicyMapping,
    PolicySpec,
    TrainingSelection,
    env_kind_problem,
    policy_spaces_from_env,
)
from rltune.trainers.sampling._sample_batch import EpisodeMetrics, SampleResult
from rltune.trainers.sampling._env_rows import EnvRows
from rltune.trainers.sampling._vector_env_rows import VectorEnvRows

logger = logging.getLogger(__name__)


class RolloutWorker:
    """Builds ``num_envs`` envs and a policy map; samples, runs functions on envs, takes weights."""

    def __init__(
        self,
        *,
        env_spec: EnvSpec,
        config: TrainerSettings,
        policy_class: type[Policy],
        worker_index: int,
        num_workers: int,
        num_envs: int,
        spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None,
        device: str = "cpu",
        env_config: dict[str, Any] | None = None,
        multi_agent: bool | None = None,
        policy_set: PolicySet | None = None,
    ) -> None:
        self.env_spec = env_spec
        self.config = config
        self.worker_index = worker_index
        self.num_workers = num_workers
        self._env_config = config.env_config if env_config is None else env_config
        self.env_contexts = [
            EnvContext(self._env_config, worker_index=worker_index, vector_index=v, num_workers=num_workers)
            for v in range(num_envs)
        ]
        self.callbacks: DefaultCallbacks = worker_callbacks(config, make_callbacks(config.callbacks))  # + a TaskPicker
        # Last known task of each env (by vector index), re-applied to an env rebuilt after a failure.
        self.env_tasks: dict[int, Any] = {}
        self.envs: list[gym.Env] = []
        for ctx in self.env_contexts:
            check = ctx.vector_index == 0 and not config.disable_env_checking
            self.envs.append(self._build_env(ctx, check))
            if is_vector_env(self.envs[0]):  # the worker's vectorization: one env, its sub-envs' contexts
                self.env_contexts = vector_env_contexts(self.envs[0], ctx, config, env_spec.name)
                break

        self.policy_class = policy_class
        self.device = device
        # Multi-agent with a multiagent block, or (one shared default_policy) for a MultiAgentEnv without one;
        # ``multi_agent`` tells a worker without envs (the local worker of remote ones) which.
        configured = bool(config.multiagent.policies)
        if multi_agent is None:
            multi_agent = runs_multi_agent(self.envs[0] if self.envs else None, configured)
        self.multi_agent = multi_agent
        specs: dict[str, PolicySpec] = dict(config.multiagent.policies) or default_policy_specs()
        if self.envs:
            self._check_env_kind(self.envs[0])
        if policy_set is None:
            if spaces is None:
                spaces = self._policy_spaces(specs)
            policy_set = PolicySet(config, policy_class, specs, spaces, multi_agent=self.multi_agent,
                                   worker_index=worker_index, device=device)
        # The policies this worker acts with: the algorithm's own set on the trainer's local worker, a copy elsewhere.
        self.policy_set = policy_set
        spaces = policy_set.spaces
        self.observation_space, self.action_space = next(iter(spaces.values()))
        self.sampler: EpisodeCollector | None = None  # the worker's one collector (RLlib's name); None without envs
        self._env_restarts_reported = 0
        self._dropped_reported = 0  # episodes the sampler dropped (nan_policy), as reported so far
        if self.envs:
            self.sampler = EpisodeCollector(
                self._row_layout(), complete_episodes=self.config.batch_mode == "complete_episodes",
                per_trajectory=self.callbacks.overrides("on_postprocess_trajectory"),
            )

    # -- the policy set's parts, by RLlib's names ------------------------------------------
    @property
    def policy_map(self) -> dict[str, Policy]:
        """The policies this worker acts with, by policy id."""
        return self.policy_set.policies

    @property
    def filters(self) -> Filters:
        """The observation filters by policy id (none for NoFilter); the local worker's are the trainer's masters."""
        return self.policy_set.filters

    @property
    def policy_specs(self) -> dict[str, PolicySpec]:
        """The spec each policy was built from, by policy id."""
        return self.policy_set.specs

    @property
    def policy_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        """The spaces each policy was built with (a Policy subclass may act in another space internally)."""
        return self.policy_set.spaces

    @property
    def mapping(self) -> PolicyMapping | None:
        """Agent id to policy id (multi-agent only)."""
        return self.policy_set.mapping

    @property
    def training(self) -> TrainingSelection:
        """``policies_to_train``: which policies' batches go to a learner."""
        return self.policy_set.training

    def _row_layout(self) -> EnvRows | AgentRows:  # (a VectorEnvRows is an EnvRows)
        """How the envs' agents become rows under the collector (_collector.py): per agent, or one per env."""
        common = dict(
            env_name=self.env_spec.name,
            seed=self.config.seed,
            restart_failed=self.config.restart_failed_sub_environments,
            rebuild_env=self._rebuild_env,
            callbacks=self.callbacks,
            worker=self,
            nan_policy=self.config.nan_policy,
        )
        observation_fn = self.config.multiagent.observation_fn
        if self.multi_agent:
            return AgentRows(
                self.envs, self.env_contexts, self.policy_map, self.mapping, batched=self.training.candidates,
                filters=self.filters, policy_spaces=self.policy_spaces, **common,
                observation_fn=None if observation_fn is None else ObservationFn(observation_fn, self.policy_map, self),
            )
        self._check_spaces_match()
        if is_vector_env(self.envs[0]):
            return VectorEnvRows(
                self.envs[0], self.env_contexts, self.policy_map[DEFAULT_POLICY_ID], obs_filter=self.filters.get(DEFAULT_POLICY_ID), **common
            )
        return EnvRows(
            self.envs, self.env_contexts, self.policy_map[DEFAULT_POLICY_ID], obs_filter=self.filters.get(DEFAULT_POLICY_ID), **common
        )

    def _check_env_kind(self, env: gym.Env) -> None:
        problem = env_kind_problem(env, self.multi_agent, self.env_spec.name)
        if not problem and not self.multi_agent and self.config.multiagent.observation_fn is not None:
            problem = (f"{OBSERVATION_FN}: rewrites the observations of a multi-agent env's agents, but env "
                       f"{self.env_spec.name!r} is a single-agent gymnasium.Env (rewrite its observations with a wrapper)")
        if problem:
            raise ConfigError(problem)

    def _policy_spaces(self, specs: dict[str, PolicySpec]) -> dict[str, tuple[gym.Space, gym.Space]]:
        """Each policy's (observation, action) spaces: from its spec, the config, or the env's agents."""
        if not self.multi_agent:
            return {DEFAULT_POLICY_ID: self._spaces_from_config_or_env()}
        env, temporary = self._an_env()
        try:
            problem = None if self.config.multiagent.policies else shared_spaces_problem(env, self.env_spec.name)
            if problem:
                raise ConfigError(problem)
            mapping = PolicyMapping(self.config.multiagent.policy_mapping_fn, list(specs))
            return policy_spaces_from_env(env, specs, mapping, self, self.env_spec.name,
                                          observations=self.config.multiagent.observation_fn is None)
        finally:
            if temporary:
                env.close()

    def _an_env(self) -> tuple[gym.Env, bool]:
        """An env to read spaces from: the first of this worker's, else a temporary one (closed by the caller)."""
        if self.envs:
            return self.envs[0], False
        ctx = EnvContext(self._env_config, worker_index=self.worker_index, num_workers=self.num_workers)
        env = build_env(self.env_spec, ctx, check=not self.config.disable_env_checking)
        self._check_env_kind(env)
        return env, True

    def _spaces_from_config_or_env(self) -> tuple[gym.Space, gym.Space]:
        obs_space, act_space = self.config.observation_space, self.config.action_space
        if obs_space is not None and act_space is not None:
            return obs_space, act_space
        env, temporary = self._an_env()
        spaces = single_spaces(env)
        if temporary:
            env.close()
        return (obs_space or spaces[0], act_space or spaces[1])

    def _check_spaces_match(self) -> None:
        observation_space, action_space = single_spaces(self.envs[0])
        if observation_space != self.observation_space:
            raise EnvError(
                f"env {self.env_spec.name!r} (worker {self.worker_index}): its observation space "
                f"{observation_space} differs from the configured {self.observation_space}"
            )
        if action_space != self.action_space:
            raise EnvError(
                f"env {self.env_spec.name!r} (worker {self.worker_index}): its action space "
                f"{action_space} differs from the configured {self.action_space}"
            )

    def _build_env(self, ctx: EnvContext, check: bool) -> gym.Env:
        env = build_env(self.env_spec, ctx, check=check)
        if self.callbacks.overrides("on_environment_created"):
            call_hook(
                self.callbacks, "on_environment_created", f"worker {self.worker_index}, env {ctx.vector_index}",
                env=env, env_context=ctx, worker=self,
            )
        return env

    def _rebuild_env(self, vector_index: int) -> gym.Env:
        ctx = self.env_contexts[vector_index].copy_with_overrides(recreated=True)
        self.env_contexts[vector_index] = ctx
        env = self._build_env(ctx, check=False)
        target = task_env(env)
        if vector_index in self.env_tasks and target is not None:
            target.set_task(self.env_tasks[vector_index])
        self.envs[vector_index] = env
        return env

    # -- the worker's API (also called through the pipe of a remote worker) -------------
    def get_spaces(self) -> tuple[gym.Space, gym.Space]:
        """The observation and action spaces of this worker's first policy (the only one of a single-agent env)."""
        return self.observation_space, self.action_space

    def is_multi_agent(self) -> bool:
        """Whether this worker samples a multi-agent env (a ``multiagent`` block, or a MultiAgentEnv without one)."""
        return self.multi_agent

    def get_policy_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        """The (observation, action) spaces of every policy, by policy id."""
        return self.policy_set.policy_spaces()

    def add_policy(
        self,
        policy_id: str,
        spec: PolicySpec,
        spaces: tuple[gym.Space, gym.Space],
        weights: dict[str, np.ndarray] | None = None,
        policy_mapping_fn: Any = None,
        policies_to_train: Any = None,
    ) -> None:
        """Build a new policy (and optionally load its weights), and the mapping and training set that go with it."""
        self.policy_set.add(policy_id, spec, spaces, weights, policy_mapping_fn, policies_to_train)
        self.policy_set_changed()

    def remove_policy(self, policy_id: str, policy_mapping_fn: Any = None, policies_to_train: Any = None) -> None:
        """Drop a policy; running episodes with an agent mapped to it are dropped (their envs reset)."""
        self.policy_set.remove(policy_id, policy_mapping_fn, policies_to_train)
        self.policy_set_changed([policy_id])

    def policy_set_changed(self, removed: Sequence[str] = ()) -> None:
        """The sampler takes the policy set's new mapping and training set; episodes using a ``removed`` policy are dropped."""
        if self.sampler is not None:
            self.sampler.layout.remap(self.mapping, self.training.candidates)
            if any(self.sampler.uses_policy(pid) for pid in removed):
                self.sampler.reset_all()

    def policy_set_state(self) -> dict[str, Any]:
        """The policies (specs and spaces), mapping and training set, for another worker to match (:meth:`set_policy_set`)."""
        return self.policy_set.state()

    def set_policy_set(self, state: dict[str, Any]) -> None:
        """Add and remove policies to match another worker's (a restarted worker, an evaluation worker)."""
        if self.multi_agent:
            self.policy_set_changed(self.policy_set.match(state))

    def set_policy_mapping_fn(self, policy_mapping_fn: Any) -> None:
        """Map agents with this function from their next episode on."""
        self.policy_set.select(policy_mapping_fn, None)
        self.policy_set_changed()

    def set_policies_to_train(self, policies_to_train: Any) -> None:
        """Train these policies (a list of ids, or fn(policy_id, batch) -> bool) from now on."""
        self.policy_set.select(None, policies_to_train)
        self.policy_set_changed()

    def sample(self, num_steps: int | None = None, explore: bool | None = None) -> SampleResult:
        """One fragment of ``rollout_fragment_length`` steps from every env, raw (the algorithm postprocesses it)."""
        if self.sampler is None:
            raise EnvError(f"worker {self.worker_index} has no envs to sample from")
        steps = self.config.rollout_fragment_length if num_steps is None else num_steps
        result = self.sampler.sample(steps, explore=self.config.explore if explore is None else explore)
        if self.filters:
            result.filter_deltas = flush_deltas(self.filters)
        restarts = self.sampler.num_env_restarts  # since the last sample, reset_all's rebuilds included
        result.num_env_restarts, self._env_restarts_reported = restarts - self._env_restarts_reported, restarts
        dropped = self.sampler.nan.num_dropped
        result.num_dropped_episodes, self._dropped_reported = dropped - self._dropped_reported, dropped
        if self.callbacks.overrides("on_sample_end"):
            call_hook(self.callbacks, "on_sample_end", f"worker {self.worker_index}", samples=result, worker=self)
        return result

    def run_episodes(self, num_episodes: int, explore: bool = False, max_steps: int = 10_000_000) -> list[EpisodeMetrics]:
        """Reset the envs and run ``num_episodes`` whole episodes across them (used by evaluation).

        The observation filters are applied frozen (their statistics do not change).

        Env ``i`` of the vector contributes its first ``num_episodes // n``
        episodes (one more for the first ``num_episodes % n`` envs). Fixing
        each env's share up front keeps the sample unbiased: taking the first
        ``num_episodes`` to end would favour short episodes.
        """
        if self.sampler is None:
            raise EnvError(f"worker {self.worker_index} has no envs to run episodes in")
        n = self.sampler.num_envs
        quota = [num_episodes // n + (i < num_episodes % n) for i in range(n)]
        kept: list[list[EpisodeMetrics]] = [[] for _ in range(n)]
        self.sampler.reset_all(update_filter=False)
        steps = 0
        while any(len(k) < q for k, q in zip(kept, quota)) and steps < max_steps:
            result = self.sampler.sample(32, explore=explore, collect=False, update_filter=False)
            for episode in result.episodes:
                mine = kept[episode.vector_index]
                if len(mine) < quota[episode.vector_index]:
                    mine.append(episode)
            steps += result.env_steps
        self.sampler.reset_all(update_filter=False)
        return [episode for mine in kept for episode in mine]

    def set_weights(
        self,
        weights: dict[str, dict[str, np.ndarray]],
        global_vars: dict[str, Any] | None = None,
        filters: dict[str, RunningStats] | None = None,
    ) -> None:
        """Load policy weights (by policy id), the trainer's global vars (``timestep``) and its observation filters.

        ``filters``: the trainer's master statistics by policy id (they come
        with the weights, so that syncing them costs no message of its own).
        """
        self.policy_set.set_weights(weights, global_vars, filters)

    def get_filters(self, flush_after: bool = False) -> dict[str, RunningStats]:
        """The observation filters' statistics by policy id (copies); ``flush_after``: start the deltas afresh (RLlib's name)."""
        return self.policy_set.filter_stats(flush_after)

    def sync_filters(self, new_filters: dict[str, RunningStats]) -> None:
        """Filter with these statistics by policy id from now on (plus what is not reported yet; RLlib's name)."""
        set_filter_stats(self.filters, new_filters)

    def get_weights(self) -> dict[str, dict[str, np.ndarray]]:
        """Weights of every policy, by policy id."""
        return self.policy_set.get_weights()

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """The policy with this id."""
        return self.policy_map[policy_id]

    def foreach_env(self, fn: Callable[[gym.Env], Any]) -> list[Any]:
        """``fn(env)`` for every env of this worker, in vector order."""
        return [fn(env) for env in self.envs]

    def foreach_env_with_context(self, fn: Callable[[gym.Env, EnvContext], Any]) -> list[Any]:
        """``fn(env, env_context)`` for every env of this worker, in vector order."""
        return [fn(env, ctx) for env, ctx in zip(self.envs, self.env_contexts)]

    # -- tasks (curriculum) ------------------------------------------------------------
    def _record_tasks(self) -> dict[int, Any]:
        for i, env in enumerate(self.envs):
            target = task_env(env)
            if target is not None:
                self.env_tasks[i] = target.get_task()
        return dict(self.env_tasks)

    def foreach_env_tracked(self, fn: Callable[[gym.Env], Any]) -> tuple[list[Any], dict[int, Any]]:
        """``fn(env)`` for every env, plus the envs' tasks afterwards (for task-settable envs)."""
        results = self.foreach_env(fn)
        return results, self._record_tasks()

    def foreach_env_with_context_tracked(
        self, fn: Callable[[gym.Env, EnvContext], Any]
    ) -> tuple[list[Any], dict[int, Any]]:
        """``fn(env, env_context)`` for every env, plus the envs' tasks afterwards."""
        results = self.foreach_env_with_context(fn)
        return results, self._record_tasks()

    def set_env_tasks(self, tasks: dict[int, Any]) -> dict[int, Any]:
        """Set the task of the envs named by vector index, where it differs; return every env's task."""
        for i, task in tasks.items():
            target = task_env(self.envs[i]) if i < len(self.envs) else None
            if target is not None and target.get_task() != task:
                target.set_task(task)
        return self._record_tasks()

    def set_task_all(self, task: Any) -> dict[int, Any]:
        """Set ``task`` on every env of this worker (where it differs); return every env's task."""
        return self.set_env_tasks({i: task for i in range(len(self.envs))})

    def apply_env_task_fn(self, env_task_fn: Callable[..., Any], result: dict[str, Any]) -> dict[int, Any]:
        """``env_task_fn(result, env, env_context)`` per env; ``set_task`` only where the task changes."""
        tasks = {}
        for i, (env, ctx) in enumerate(zip(self.envs, self.env_contexts)):
            target = task_env(env)
            if target is not None:
                tasks[i] = env_task_fn(result, target, ctx)
        return self.set_env_tasks(tasks)

    def apply(self, fn: Callable[["RolloutWorker"], Any]) -> Any:
        """``fn(self)``; how ``foreach_worker`` reaches local and remote workers alike."""
        return fn(self)

    def num_envs(self) -> int:
        """How many envs this worker steps (a vector env's sub-envs; 0 for a local worker of remote ones)."""
        return 0 if self.sampler is None else self.sampler.num_envs

    def num_env_restarts(self) -> int:
        """How many envs of this worker were rebuilt after raising."""
        return 0 if self.sampler is None else self.sampler.num_env_restarts

    def stop(self) -> None:
        """Close every env."""
        for env in self.envs:
            try:
                env.close()
            except Exception as exc:  # closing must not hide the reason the worker stops
                logger.warning("closing env of worker %d failed: %s", self.worker_index, exc)
