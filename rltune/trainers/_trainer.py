"""Trainer: the base every algorithm shares (the training loop's frame, results, checkpoints).

Glossary: a *worker* owns envs and samples (worker 0 is local, in this
process; 1..num_workers are processes); a *fragment* is
``rollout_fragment_length`` steps of each env of one worker; a *round* is
one fragment from every sampling worker, in parallel; an *iteration* is one
``train()`` call: rounds of sampling and the algorithm's update, then one
result dict.
"""

from __future__ import annotations

import logging
import os
import time
import weakref
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

import gymnasium as gym
import numpy as np
import torch

from rltune.callbacks._callbacks import call_hook
from rltune._disk import check_writable_dir, ensure_dir
from rltune._imports import resolve_callable
from rltune._results_dir import default_results_dir
from rltune.env._context import EnvContext
from rltune.env._registry import resolve_env
from rltune.errors import ConfigError, RLTuneError
from rltune.trainers.algorithms._algorithm import Algorithm, StepOutcome
from rltune.trainers.algorithms._postprocess import Postprocessor
from rltune.trainers._trainer_parts import (
    TrainerParts,
    TrainingProgress,
    add_task_to_result,
    most_common,
    new_logdir,
    progress_attribute,
    select_device,
    trainer_callbacks,
    trainer_config_problems,
)
from rltune.trainers._config import TrainerSettings, describe_config, validate_config
from rltune.trainers.rllib._config_builder import AlgorithmConfig, builder_of, config_for_trainer
from rltune.trainers.learning._learner import Learner
from rltune.trainers.sampling._nonfinite import NonFiniteWarnings
from rltune.trainers.policies._policy import DEFAULT_POLICY_ID, Policy
from rltune.trainers.policies._policy_spec import PolicySpec
from rltune.trainers.sampling._remote import set_compute_threads, setup_logging
from rltune.trainers.rllib._old_trainer_names import OldOptimizerAttribute, default_resource_request
from rltune.trainers.rllib._rllib_names import add_result_spellings, copy_config, env_in_rltune_names, translate_config
from rltune.trainers.sampling._rollout_worker import RolloutWorker
from rltune.trainers.sampling._sample_source import SampleSource, checked_source
from rltune.trainers.checkpoints._trainer_checkpoints import TrainerCheckpoints, _state_dict_mismatch, trainer_from_checkpoint
from rltune.trainers._trainer_evaluation import TrainerEvaluation
from rltune.trainers._trainer_policies import TrainerPolicies
from rltune.trainers.sampling._worker_set import WorkerSet

logger = logging.getLogger(__name__)


class Trainer:
    """Base class of PPO, DQN and later algorithms: ``Trainer(config=dict, env=...)``.

    ``config`` may also be a config builder (``rltune.trainers.<ALGO>Config()...``); given to
    ``Trainer`` itself, the builder's algorithm is built.

    Lifecycle: ``__init__`` validates the config, starts the rollout workers,
    builds the :class:`Algorithm` (its learners, one per policy id) over the
    :meth:`make_sample_source` and calls :meth:`setup`; each :meth:`train`
    runs one iteration (:meth:`training_step`, the algorithm's) and returns
    the result dict; :meth:`save` / :meth:`restore` checkpoint every policy
    and learner; :meth:`stop` ends the worker processes (also done at
    interpreter exit and by ``with Trainer(...) as t:``). Checkpoints,
    evaluation and the policy set are collaborators (``self.checkpoints``,
    ``self.evaluation``, ``self.policy_changes``) over the shared ``self.parts``.

    Subclasses set ``name``, ``config_class`` and ``algorithm_class`` (whose
    ``policy_class`` becomes theirs); the algorithm holds the loss, the
    update and the training step, the trainer the loop, results, evaluation
    and checkpoints.
    """

    name: ClassVar[str] = "Trainer"
    config_class: ClassVar[type[TrainerSettings]] = TrainerSettings
    policy_class: ClassVar[type[Policy]] = Policy
    algorithm_class: ClassVar[type[Algorithm]] = Algorithm
    iteration = progress_attribute("iteration", "Training iterations run.")
    timesteps_total = progress_attribute("timesteps_total", "Env steps sampled.")
    agent_timesteps_total = progress_attribute("agent_timesteps_total", "Agent steps sampled.")
    episodes_total = progress_attribute("episodes_total", "Episodes ended.")
    time_total_s = progress_attribute("time_total_s", "Seconds spent in train().")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "policy_class" not in cls.__dict__:
            cls.policy_class = cls.algorithm_class.policy_class

    # -- config ----------------------------------------------------------------------
    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        """This trainer's config builder (``PPOConfig`` for PPO), as RLlib 2.x's; it reads like the default config dict."""
        return builder_of(cls)

    default_resource_request = classmethod(default_resource_request)  # Ray Tune's: a bundle per process of a trial

    @classmethod
    def describe_config(cls) -> str:
        """Every config key with its default and what it is for."""
        return "\n".join(describe_config(cls.config_class))

    @classmethod
    def validate(cls, config: dict[str, Any] | None) -> TrainerSettings:
        """Validate a user config dict; raise one :class:`ConfigError` with every problem.

        RLlib's other names of its keys (``num_env_runners``, ``num_epochs``,
        ``framework: tf``...) are translated first (:mod:`._rllib_names`),
        once: a config translated already (a ``Translated`` one, such as
        :meth:`from_checkpoint`'s) is validated as it is, its problems named
        as the user wrote them.
        """
        where = f"{cls.name} config"
        translation = translate_config(config_for_trainer(config, cls) if isinstance(config, AlgorithmConfig) else config,
                                       cls.config_class)
        try:
            cfg = validate_config(cls.config_class, translation.config, where=where)
        except ConfigError as exc:
            raise ConfigError(translation.problems + translation.name_problems(exc.details), where=where) from None
        if translation.problems:
            raise ConfigError(translation.problems, where=where)
        problems = cls.check_config(cfg)
        if problems:
            raise ConfigError(problems, where=where)
        return cfg

    @classmethod
    def check_config(cls, cfg: TrainerSettings) -> list[str]:
        """Cross-field checks of a typed config; return the problems found (each with its arithmetic)."""
        return trainer_config_problems(cfg, cls.config_class, cls.policy_class)

    # -- construction -----------------------------------------------------------------
    def __new__(cls, config: Any = None, *args: Any, **kwargs: Any) -> "Trainer":
        # Trainer(config=<a PPO builder>) builds the builder's algorithm, as PPO(config=...) does.
        if cls is Trainer and isinstance(config, AlgorithmConfig) and config.algo_class is not None:
            cls = config.algo_class
        return super().__new__(cls)

    def __init__(
        self,
        config: dict[str, Any] | AlgorithmConfig | None = None,
        env: Any = None,
        *,
        results_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        config = copy_config(config_for_trainer(config, type(self)) or {})
        if results_dir is not None and not isinstance(results_dir, (str, os.PathLike)):
            raise ConfigError(f"results_dir: must be a path, but got {results_dir!r:.60}", where=f"{self.name}()")
        if env is not None:
            config["env"] = env_in_rltune_names(env)
        self.cfg = self.validate(config)
        self.config: dict[str, Any] = self.cfg.model_dump(by_alias=True)
        self.env_spec = resolve_env(self.cfg.env, auto_wrap_old_gym_envs=self.cfg.auto_wrap_old_gym_envs)
        # As in the worker processes, so that env code sampled here (num_workers: 0) logs the same way.
        setup_logging(self.cfg.log_level, in_users_process=True)
        self.device = select_device(self.cfg.num_gpus)
        set_compute_threads(self.cfg.torch_num_threads)
        if self.cfg.seed is not None:
            torch.manual_seed(self.cfg.seed)
        self.rng = np.random.default_rng(self.cfg.seed)

        self.progress = TrainingProgress(self.cfg.metrics_num_episodes_for_smoothing)
        self._results_root = Path(os.path.expanduser(results_dir)) if results_dir else default_results_dir()
        if results_dir:  # before any worker starts: a results dir given that cannot be written is refused now
            check_writable_dir(self._results_root, "results_dir")
        self._logdir: Path | None = None
        self._stopped = False
        self._nonfinite_warnings = NonFiniteWarnings(self.name)

        self.callbacks = trainer_callbacks(self.cfg)
        self.workers = WorkerSet(self.env_spec, self.cfg, self.policy_class, str(self.device))
        # Stop the worker processes at interpreter exit even if stop() is never called.
        self._finalizer = weakref.finalize(self, WorkerSet.stop, self.workers)
        try:
            self.workers.on_worker_recreated(self._worker_recreated)
            # The policy set the algorithm owns (the local worker acts with it); a user's sample source may read it at once.
            local = self.workers.local_worker
            self._policies = local.policy_set
            self.sample_source = checked_source(self.make_sample_source(), f"{type(self).__name__}.make_sample_source()")
            self.algorithm = self.algorithm_class(self.cfg, self._policies, self.sample_source, self.rng)
            self.algorithm.postprocessor = Postprocessor(local.callbacks, worker=local)
            self._make_collaborators()
            self.setup()
            self._sync_weights({"timestep": 0})
            self.workers.foreach_env(lambda env: None)  # learn the envs' initial tasks
            self._call("on_trainer_init", trainer=self)
        except BaseException:
            self.stop()
            raise

    def _make_collaborators(self) -> None:
        self.parts = TrainerParts(self.name, self.cfg, self.config, self.env_spec, self.policy_class, self.workers,
                                  self.algorithm, self.callbacks, self.rng, self.progress)
        self.policy_changes = TrainerPolicies(self.parts)
        self.evaluation = TrainerEvaluation(self.parts, self.validate, self.current_task)
        self.checkpoints = TrainerCheckpoints(self.parts, self, self.policy_changes, self.set_task, lambda: self.logdir)

    def _call(self, hook: str, **kwargs: Any) -> None:
        if self.callbacks.overrides(hook):
            call_hook(self.callbacks, hook, f"the trainer process (iteration {self.iteration})", **kwargs)

    def _worker_recreated(self, worker_index: int) -> None:
        self._call("on_worker_recreated", trainer=self, worker_index=worker_index)

    # -- to implement by algorithms ------------------------------------------------------
    def setup(self) -> None:
        """Anything beyond the algorithm and its learners (already built); e.g. config warnings."""

    def make_sample_source(self) -> SampleSource:
        """The algorithm's data source, built once in ``__init__`` (default: the rollout workers; docs/sample_sources.md)."""
        return self.workers

    def training_step(self) -> StepOutcome:
        """Sample and update once; return what was done (the algorithm's training step)."""
        return self.algorithm.training_step(self.timesteps_total)

    def get_algorithm_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The algorithm's and learners' state beyond the policy weights: (JSON-able values, tensors)."""
        return self.algorithm.get_state()

    def set_algorithm_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        """Restore what :meth:`get_algorithm_state` returned."""
        self.algorithm.set_state(values, tensors)

    def checkpoint_array_names(self) -> list[str]:
        """The file names :meth:`get_checkpoint_arrays` writes (without building the arrays)."""
        return self.algorithm.checkpoint_array_names()

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Extra numpy arrays to checkpoint (e.g. a replay buffer), by file name."""
        return self.algorithm.get_checkpoint_arrays()

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray] | None]) -> None:
        """Restore what :meth:`get_checkpoint_arrays` returned (None for a file the checkpoint lacks)."""
        self.algorithm.set_checkpoint_arrays(arrays)

    # -- training ----------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Run one training iteration and return its result dict (DESIGN's keys)."""
        if self._stopped:
            raise RLTuneError(f"{self.name} was stopped; create a new trainer")
        start = time.perf_counter()
        outcome = self.training_step()
        self.progress.record(outcome)
        nonfinite = sum(learner.num_nonfinite_updates for learner in self.algorithm.learners.values())
        result = self.progress.result(outcome, time.perf_counter() - start, nonfinite)
        result = add_result_spellings({**result, **self.sample_source.metrics()})
        self._nonfinite_warnings(result)
        if self.cfg.evaluation_interval is not None:
            result["evaluation"] = self.evaluation.periodic()
        if self.cfg.env_task_fn is not None:
            self.workers.apply_env_task_fn(resolve_callable(self.cfg.env_task_fn, "env_task_fn"), result)
        self._call("on_train_result", trainer=self, result=result)
        add_task_to_result(result, self.workers.env_tasks)
        elapsed = time.perf_counter() - start
        self.time_total_s += elapsed
        result["time_this_iter_s"] = elapsed
        result["time_total_s"] = self.time_total_s
        return result

    # -- tasks (curriculum) --------------------------------------------------------------
    def set_task(self, task: Any) -> None:
        """Give every task-settable env of every worker (and the evaluation env) ``task``."""
        self.workers.set_task(task)
        self.evaluation.set_task(task)

    def get_tasks(self) -> dict[tuple[int, int], Any]:
        """The last known task of every task-settable env, by (worker_index, vector_index)."""
        return dict(self.workers.env_tasks)

    def current_task(self) -> Any:
        """The task most envs have (None when no env is task-settable)."""
        return most_common(list(self.workers.env_tasks.values()))

    # -- policies and inference ---------------------------------------------------------
    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """The learner's policy with this id (``get_weights()`` / ``set_weights()``)."""
        try:
            return self._policies.policies[policy_id]
        except KeyError:
            known = sorted(self._policies.policies)
            raise ConfigError(f"no policy {policy_id!r}; the policies are {known}") from None

    def get_learner(self, policy_id: str = DEFAULT_POLICY_ID) -> Learner:
        """The learner (named optimizers and update step) of the policy with this id."""
        try:
            return self.algorithm.learners[policy_id]
        except KeyError:
            raise ConfigError(f"no policy {policy_id!r}; the policies are {sorted(self.algorithm.learners)}") from None

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """The weights of these policies (default: every one), by policy id (numpy arrays, as ``Policy.get_weights``)."""
        if policies is None:
            return self._policies.get_weights()
        if isinstance(policies, str):
            policies = [policies]
        return {pid: self.get_policy(pid).get_weights() for pid in policies}

    def set_weights(self, weights: dict[str, dict[str, np.ndarray]]) -> None:
        """Load weights by policy id into the learner's policies and every rollout worker's.

        ``get_policy(id).set_weights(w)`` changes the learner's policy only
        (as in RLlib), so remote workers sample with their old weights until
        the next sync at the end of an iteration; this method syncs at once.
        """
        policies = self._policies.policies
        unknown = set(weights) - set(policies)
        if unknown:
            raise ConfigError(f"set_weights: no policy {sorted(unknown)}; the policies are {sorted(policies)}")
        for pid, policy_weights in weights.items():  # all checked before any is loaded
            problem = _state_dict_mismatch(policies[pid].model.state_dict(), policy_weights, "the weights given")
            if problem:
                raise ConfigError(f"set_weights: the weights of policy {pid!r} do not fit its model: {problem}")
        self._policies.set_weights(weights)
        self._sync_weights()

    def _sync_weights(self, global_vars: dict[str, Any] | None = None) -> None:
        self.parts.sync_weights(global_vars)

    def compute_single_action(self, obs: Any, state: Any = None, *, explore: bool = False, policy_id: str = DEFAULT_POLICY_ID) -> Any:
        """The action for one raw observation; deterministic unless ``explore``.

        The policy's observation filter is applied frozen (its statistics do
        not change), as in RLlib; ``get_policy(id).compute_single_action``
        takes the observation as it is. With ``state`` (a recurrent policy's):
        ``(action, state_out, extras)``, see ``Policy.compute_single_action``.
        """
        policy = self.get_policy(policy_id)
        obs_filter = self._policies.filters.get(policy_id)
        row = policy.preprocessor(obs)[None]
        return policy.single_action_of_row(row if obs_filter is None else obs_filter.normalize(row), state, explore)

    def add_policy(
        self,
        policy_id: str,
        policy_cls: Any = None,
        *,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        config: dict[str, Any] | None = None,
        policy_state: dict[str, np.ndarray] | None = None,
        policy_mapping_fn: Any = None,
        policies_to_train: Any = None,
        policy: Policy | None = None,
    ) -> Policy:
        """Add a policy to the learner and every rollout worker and return it (RLlib's signature).

        ``policy``: copy this policy's class, spaces, config overrides and
        weights (a frozen snapshot for self-play). ``policy_state``: its
        weights (``get_weights()`` of a policy of the same model). Spaces
        left out are those every existing policy shares. A new mapping
        function applies to agents from their next episode on; a policy of
        the algorithm's class gets a learner, trained if ``policies_to_train``
        (the new list or function, or the current one) selects it.
        """
        wanted = PolicySpec(policy_cls, observation_space, action_space, dict(config or {}))
        return self.policy_changes.add_policy(policy_id, wanted, policy_state=policy_state, policy=policy,
                                          policy_mapping_fn=policy_mapping_fn, policies_to_train=policies_to_train)

    def remove_policy(
        self, policy_id: str = DEFAULT_POLICY_ID, *, policy_mapping_fn: Any = None, policies_to_train: Any = None
    ) -> None:
        """Remove a policy (and its learner) from the trainer and every rollout worker."""
        self.policy_changes.remove_policy(policy_id, policy_mapping_fn=policy_mapping_fn, policies_to_train=policies_to_train)

    def set_policy_mapping_fn(self, policy_mapping_fn: Any) -> None:
        """Map agents with this function, on every worker, from their next episode on."""
        self.policy_changes.set_policy_mapping_fn(policy_mapping_fn)

    def set_policies_to_train(self, policies_to_train: Any) -> None:
        """Train these policies (ids, or ``fn(policy_id, batch) -> bool``) from the next iteration on."""
        self.policy_changes.set_policies_to_train(policies_to_train)

    def policy_specs_state(self) -> dict[str, Any]:
        """The policy set as JSON values (classes as import strings, spaces as data), for checkpoints."""
        return self.policy_changes.specs_state()

    def add_saved_policies(self, path: str | os.PathLike[str], saved: Any) -> list[str]:
        """Add the policies a checkpoint's ``policy_specs`` hold that this trainer lacks; return their ids."""
        return self.policy_changes.add_saved(path, saved)

    def remove_policies(self, policy_ids: list[str]) -> None:
        """Remove policies added by :meth:`add_saved_policies` (a restore that failed after)."""
        self.policy_changes.remove_saved(policy_ids)

    # -- evaluation --------------------------------------------------------------------
    def evaluate(self, num_episodes: int | None = None, *, task: Any = None) -> dict[str, Any]:
        """Run deterministic episodes in a separate env (with ``evaluation_config``); training stats are untouched.

        Observations go through the trainer's filters, frozen; the env gets the training envs' task, or ``task``.
        """
        return self.evaluation.evaluate(num_episodes, task=task)

    # -- workers and envs --------------------------------------------------------------
    def foreach_worker(self, fn: Callable[[RolloutWorker], Any]) -> list[Any]:
        """``fn(worker)`` on the local worker and every rollout worker process; results in worker order."""
        return self.workers.foreach_worker(fn)

    optimizer = OldOptimizerAttribute()  # old RLlib's trainer.optimizer: foreach_evaluator and local_evaluator
    __name__ = property(lambda self: self.name, doc="The algorithm's name, as old RLlib's trainers had (``info['trainer'].__name__``).")

    def foreach_env(self, fn: Callable[[gym.Env], Any]) -> list[Any]:
        """``fn(env)`` on every env of every worker, local and remote; one flat list of results."""
        return self.workers.foreach_env(fn)

    def foreach_env_with_context(self, fn: Callable[[gym.Env, EnvContext], Any]) -> list[Any]:
        """``fn(env, env_context)`` on every env of every worker; one flat list of results."""
        return self.workers.foreach_env_with_context(fn)

    # -- checkpoints -------------------------------------------------------------------
    @property
    def logdir(self) -> Path:
        """This trainer's own results directory (created on first use)."""
        if self._logdir is None:
            self._logdir = new_logdir(self._results_root, self.name, self.env_spec.name)
        return self._logdir

    @logdir.setter
    def logdir(self, path: str | os.PathLike[str]) -> None:
        self._logdir = ensure_dir(path, "the trainer's results directory")

    @classmethod
    def saved_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """A checkpoint's saved config as this version reads it (default: as saved).

        A trainer whose defaults changed since a checkpoint was written puts
        the old values of the keys that checkpoint lacks here.
        """
        return config

    def save(self, checkpoint_dir: str | os.PathLike[str] | None = None) -> str:
        """Write a checkpoint directory atomically and return its path (default: ``<logdir>/checkpoint_<iteration>``)."""
        path = self.checkpoints.save(checkpoint_dir)
        self._call("on_checkpoint_saved", trainer=self, path=path)
        return path

    def save_checkpoint(self, checkpoint_dir: str | os.PathLike[str]) -> str:
        """RLlib's name for :meth:`save` into a given directory: the checkpoint is ``checkpoint_dir`` (new or empty)."""
        return self.save(checkpoint_dir)

    def restore(self, checkpoint_path: str | os.PathLike[str]) -> None:
        """Load a checkpoint of this algorithm; training goes on from its counts (docs/checkpoints.md).

        All or nothing: a checkpoint that does not fit raises :class:`~rltune.errors.CheckpointError`.
        """
        self.checkpoints.restore(checkpoint_path)
        self._call("on_checkpoint_loaded", trainer=self)

    def load_checkpoint(self, checkpoint_path: str | os.PathLike[str]) -> None:
        """RLlib's name for :meth:`restore`."""
        self.restore(checkpoint_path)

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint_path: str | os.PathLike[str],
        config_overrides: dict[str, Any] | None = None,
        *,
        trust: Iterable[str] | None = None,
        **kwargs: Any,
    ) -> "Trainer":
        """Build the trainer a checkpoint was written by (its saved config, updated by ``config_overrides``) and restore it.

        On :class:`Trainer` itself it picks the algorithm; it imports nothing the checkpoint names
        unless trusted (``trust``, ``$RLTUNE_TRUST``): :func:`trainer_from_checkpoint`, docs/checkpoints.md.
        """
        return trainer_from_checkpoint(cls, checkpoint_path, config_overrides, trust=trust, **kwargs)

    # -- shutdown ----------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the rollout worker processes and close every env; the trainer cannot train after this."""
        if self._stopped:
            return
        self._stopped = True
        if getattr(self, "evaluation", None) is not None:
            self.evaluation.stop()
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()
        elif getattr(self, "workers", None) is not None:
            self.workers.stop()

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"{self.name}(env={self.env_spec.name!r}, num_workers={self.cfg.num_workers}, iteration={self.iteration})"
