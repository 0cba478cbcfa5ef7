"""WorkerSet: the local worker and the rollout worker processes of one trainer (a :class:`SampleSource`)."""

from __future__ import annotations

import logging
from typing import Any, Callable

import gymnasium as gym

from rltune.env._context import EnvContext
from rltune.env._registry import EnvSpec
from rltune.errors import WorkerError
from rltune.trainers._config import TrainerSettings
from rltune.trainers.policies._filters import filter_stats, merge_deltas
from rltune.trainers.policies._policy import DEFAULT_POLICY_ID, Policy
from rltune.trainers.sampling._remote import RemoteWorker, WorkerDiedError
from rltune.trainers.sampling._rollout_worker import RolloutWorker
from rltune.trainers.sampling._sample_batch import SampleResult
from rltune.trainers.sampling._worker_messages import (AddPolicy, Apply, ApplyEnvTaskFn, ForeachEnv, ForeachEnvWithContext,
                                              GetPolicySpaces, IsMultiAgent, NumEnvs, RemovePolicy, Sample, SetEnvTasks,
                                              SetPoliciesToTrain, SetPolicyMappingFn, SetPolicySet, SetTask, SetWeights,
                                              WorkerRequest)

logger = logging.getLogger(__name__)


class WorkerSet:
    """Starts the workers, samples from them in parallel, syncs weights, restarts dead ones.

    It is the :class:`~rltune.trainers.sampling._sample_source.SampleSource` of a
    trainer unless the trainer is given another.

    With ``num_workers == 0`` the local worker owns the envs and samples; else
    the local worker holds only the policies (for learning and inference) and
    the trainer process builds no env: spaces come from the config or from
    worker 1.
    """

    def __init__(self, env_spec: EnvSpec, config: TrainerSettings, policy_class: type[Policy], device: str) -> None:
        self.config = config
        num_workers = config.num_workers
        self.remote_workers: list[RemoteWorker] = []
        self._on_recreate: list[Callable[[int], None]] = []
        try:
            for index in range(1, num_workers + 1):
                init = dict(
                    env_spec=env_spec,
                    config=config,
                    policy_class=policy_class,
                    worker_index=index,
                    num_workers=num_workers,
                    num_envs=config.num_envs_per_worker,
                )
                self.remote_workers.append(
                    RemoteWorker(index, init, env_name=env_spec.name, timeout_s=config.sample_timeout_s)
                )
            for worker in self.remote_workers:  # they start in parallel; wait for each
                self._wait_started(worker)
            spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None
            # The local worker has no envs when remote ones sample: they say whether the env is multi-agent.
            multi_agent = self.remote_workers[0].call(IsMultiAgent()) if self.remote_workers else None
            # Envs per remote worker, as built (a vector env's sub-envs count); every worker builds the same.
            self._remote_num_envs = self.remote_workers[0].call(NumEnvs()) if self.remote_workers else 0
            if config.observation_space is not None and config.action_space is not None and not (multi_agent or config.multiagent.policies):
                spaces = {DEFAULT_POLICY_ID: (config.observation_space, config.action_space)}
            elif self.remote_workers:
                spaces = self.remote_workers[0].call(GetPolicySpaces())
            self.local_worker = RolloutWorker(
                env_spec=env_spec,
                config=config,
                policy_class=policy_class,
                worker_index=0,
                num_workers=num_workers,
                num_envs=0 if num_workers else config.num_envs_per_worker,
                spaces=spaces,
                device=device,
                multi_agent=multi_agent,
            )
        except BaseException:
            self.stop()
            raise
        self._global_vars: dict[str, Any] = {"timestep": 0}
        self.num_env_restarts = 0  # envs rebuilt after raising, on every worker, as their samples report
        self.num_dropped_episodes = 0  # episodes dropped for a non-finite reward or observation (nan_policy), likewise
        # Last known task of every task-settable env, by (worker_index, vector_index).
        self.env_tasks: dict[tuple[int, int], Any] = {}

    # -- calls on every remote worker, with restarts ------------------------------------
    def _call_remote(self, request: WorkerRequest) -> list[Any]:
        for worker in self.remote_workers:
            try:
                worker.wait_ready()
                worker.send(request)
            except WorkerDiedError:
                pass  # seen again in receive()
        # Read every reply before raising, so that no pipe is left holding an unread one.
        results = []
        error: BaseException | None = None
        for worker in self.remote_workers:
            try:
                try:
                    results.append(worker.receive())
                except WorkerDiedError as exc:
                    if error is not None:
                        raise
                    results.append(self._call_restarted(worker, exc, request))
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error
        return results

    def _call_restarted(self, worker: RemoteWorker, exc: WorkerDiedError, request: WorkerRequest) -> Any:
        """Restart the dead ``worker`` and send it ``request`` again; if it dies again meanwhile, again (or raise)."""
        if not self.config.recreate_failed_workers:
            raise exc
        while True:
            try:
                self._recreate_or_raise(worker, exc)
                return worker.call(request)
            except WorkerDiedError as again:  # killed or crashed again while restarting or answering
                exc = again

    def _wait_started(self, worker: RemoteWorker) -> None:
        """Wait for ``worker``'s start; with recreate_failed_workers, one that died meanwhile starts again."""
        while True:
            try:
                worker.wait_ready()
                return
            except WorkerDiedError as exc:  # killed or crashed while starting (an env that raises is no death)
                if not self.config.recreate_failed_workers:
                    raise
                if worker.restarts >= self.config.max_num_worker_restarts:
                    raise WorkerError(f"{exc.what} while starting; gave up after {worker.restarts} "
                                      "restarts (max_num_worker_restarts)") from exc
                logger.warning("%s while starting; restarting it", exc.what)
                worker.restart()

    def _recreate_or_raise(self, worker: RemoteWorker, exc: WorkerDiedError) -> None:
        if not self.config.recreate_failed_workers:
            raise exc
        if worker.restarts >= self.config.max_num_worker_restarts:
            raise WorkerError(f"{exc.what}; gave up after {worker.restarts} restarts (max_num_worker_restarts)") from exc
        logger.warning("%s; restarting it", exc.what)
        worker.restart()
        self._wait_started(worker)
        if self.local_worker.multi_agent:  # policies added or removed since the worker first started
            worker.call(SetPolicySet(self.local_worker.policy_set_state()))
        worker.call(self._weights_message())
        tasks = {v: task for (w, v), task in self.env_tasks.items() if w == worker.worker_index}
        if tasks:
            worker.call(SetEnvTasks(tasks))
        for callback in self._on_recreate:
            callback(worker.worker_index)

    def on_worker_recreated(self, callback: Callable[[int], None]) -> None:
        """Register ``callback(worker_index)``, run after a dead worker was restarted and got the weights."""
        self._on_recreate.append(callback)

    # -- sampling and weights ----------------------------------------------------------
    def steps_per_round(self) -> int:
        """Env steps one parallel ``sample()`` round collects (a vector env's sub-envs count)."""
        per_worker = self._remote_num_envs or self.local_worker.num_envs() or self.config.num_envs_per_worker
        return max(1, self.config.num_workers) * per_worker * self.config.rollout_fragment_length

    def sample(self, min_steps: int) -> SampleResult:
        """Sample rounds (all workers in parallel) until at least ``min_steps`` env steps are collected."""
        results: list[SampleResult] = []
        steps = 0
        while steps < min_steps:
            if self.remote_workers:
                round_results = self._call_remote(Sample())
                for result in round_results:  # the local worker's filters are the master: they take every delta
                    if result.filter_deltas:
                        merge_deltas(self.local_worker.filters, result.filter_deltas)
            else:
                round_results = [self.local_worker.sample()]
            results.extend(round_results)
            steps += sum(r.env_steps for r in round_results)
        merged = SampleResult.merge(results)
        self.num_env_restarts += merged.num_env_restarts
        self.num_dropped_episodes += merged.num_dropped_episodes
        return merged

    def sync_weights(self, global_vars: dict[str, Any] | None = None) -> None:
        """Send the local policies' weights, the global vars and the master observation filters to every remote worker."""
        if global_vars:
            self._global_vars.update(global_vars)
            self.local_worker.set_weights({}, self._global_vars)
        if self.remote_workers:
            self._call_remote(self._weights_message())

    def _weights_message(self) -> SetWeights:
        """The local policies' weights, the global vars and the master filters' statistics (None for NoFilter)."""
        filters = self.local_worker.filters
        return SetWeights(self.local_worker.get_weights(), self._global_vars, filter_stats(filters) if filters else None)

    def metrics(self) -> dict[str, int]:
        """Healthy rollout worker processes, their restarts, env restarts and episodes dropped so far (for the result dict)."""
        return {
            "num_healthy_workers": sum(w.is_alive() for w in self.remote_workers),
            "num_worker_restarts": sum(w.restarts for w in self.remote_workers),
            "num_env_restarts": self.num_env_restarts,
            "num_dropped_episodes_nonfinite": self.num_dropped_episodes,
        }

    # -- policies (multi-agent) ---------------------------------------------------------------
    def add_policy(self, policy_id: str, spec: Any, spaces: tuple[gym.Space, gym.Space], weights: Any, mapping_fn: Any, to_train: Any) -> None:
        """Add a policy to the local worker and every remote one (remote ones get the local weights)."""
        self.local_worker.add_policy(policy_id, spec, spaces, weights, mapping_fn, to_train)
        weights = self.local_worker.policy_map[policy_id].get_weights()
        self._call_remote(AddPolicy(policy_id, spec, spaces, weights, mapping_fn, to_train))

    def remove_policy(self, policy_id: str, mapping_fn: Any, to_train: Any) -> None:
        """Remove a policy from every worker."""
        self.local_worker.remove_policy(policy_id, mapping_fn, to_train)
        self._call_remote(RemovePolicy(policy_id, mapping_fn, to_train))

    def set_policy_mapping_fn(self, mapping_fn: Any) -> None:
        """A new policy mapping function on every worker (agents are mapped with it from their next episode)."""
        self.local_worker.set_policy_mapping_fn(mapping_fn)
        self._call_remote(SetPolicyMappingFn(mapping_fn))

    def set_policies_to_train(self, to_train: Any) -> None:
        """A new set of trained policies on every worker."""
        self.local_worker.set_policies_to_train(to_train)
        self._call_remote(SetPoliciesToTrain(to_train))

    # -- running user functions -----------------------------------------------------------
    def foreach_worker(self, fn: Callable[[RolloutWorker], Any], local: bool = True) -> list[Any]:
        """``fn(worker)`` on the local worker (first, if ``local``) and every remote worker."""
        results = [fn(self.local_worker)] if local else []
        return results + self._call_remote(Apply(fn))

    def _record(self, per_worker: list[tuple[list[Any], dict[int, Any]]]) -> list[Any]:
        """Flatten per-worker ``(results, tasks)`` replies (local first) and remember the tasks."""
        indices = [0] + [w.worker_index for w in self.remote_workers]
        flat = []
        for worker_index, (results, tasks) in zip(indices, per_worker):
            flat.extend(results)
            for vector_index, task in tasks.items():
                self.env_tasks[(worker_index, vector_index)] = task
        return flat

    def foreach_env(self, fn: Callable[[gym.Env], Any]) -> list[Any]:
        """``fn(env)`` on every env of every worker; one flat list ordered by (worker, vector) index."""
        return self._record([self.local_worker.foreach_env_tracked(fn)] + self._call_remote(ForeachEnv(fn)))

    def foreach_env_with_context(self, fn: Callable[[gym.Env, EnvContext], Any]) -> list[Any]:
        """``fn(env, env_context)`` on every env of every worker, flat, ordered like :meth:`foreach_env`."""
        return self._record(
            [self.local_worker.foreach_env_with_context_tracked(fn)]
            + self._call_remote(ForeachEnvWithContext(fn))
        )

    def set_task(self, task: Any) -> None:
        """Set ``task`` on every task-settable env of every worker (only where it differs)."""
        self._record([([], self.local_worker.set_task_all(task))] + [([], t) for t in self._call_remote(SetTask(task))])

    def set_env_tasks(self, tasks: dict[tuple[int, int], Any]) -> None:
        """Set tasks by (worker_index, vector_index), e.g. from a checkpoint."""
        by_worker: dict[int, dict[int, Any]] = {}
        for (w, v), task in tasks.items():
            by_worker.setdefault(w, {})[v] = task
        replies = [([], self.local_worker.set_env_tasks(by_worker.get(0, {})))]
        for worker in self.remote_workers:
            replies.append(([], worker.call(SetEnvTasks(by_worker.get(worker.worker_index, {})))))
        self._record(replies)

    def apply_env_task_fn(self, env_task_fn: Callable[..., Any], result: dict[str, Any]) -> None:
        """Run ``env_task_fn(result, env, env_context)`` for every env of every worker."""
        # The result travels to every worker: keep it to plain values (no histories).
        slim = {k: v for k, v in result.items() if k not in ("hist_stats",)}
        replies = [self.local_worker.apply_env_task_fn(env_task_fn, slim)] + self._call_remote(ApplyEnvTaskFn(env_task_fn, slim))
        self._record([([], tasks) for tasks in replies])

    def stop(self) -> None:
        """Stop every remote worker process and close the local envs."""
        for worker in getattr(self, "remote_workers", []):
            worker.stop()
        local = getattr(self, "local_worker", None)
        if local is not None:
            local.stop()
