"""Trainer: the base every algorithm shares (the training loop's frame, results, checkpoints).

Glossary: a *worker* owns envs and samples (worker 0 is local, in this
process; 1..num_workers are processes); a *fragment* is
``rollout_fragment_length`` steps of each env of one worker; a *round* is
one fragment from every sampling worker, in parallel; an *iteration* is one
``train()`` call: rounds of sampling and the algorithm's update, then one
result dict.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import tempfile
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, ClassVar

import gymnasium as gym
import numpy as np
import torch

from rltune import __version__
from rltune.callbacks._callbacks import DefaultCallbacks, MultiCallbacks, call_hook, make_callbacks
from rltune.callbacks._curriculum import CurriculumCallback, parse_curriculum
from rltune.callbacks._metrics import merge_hist_data, summarize_custom_metrics
from rltune._imports import import_object
from rltune.env._context import EnvContext
from rltune.env._registry import resolve_env
from rltune.errors import CheckpointError, ConfigError, RLTuneError
from rltune.trainers import _checkpoint as ckpt
from rltune.trainers._config import TrainerConfig, default_config, describe_config, validate_config
from rltune.trainers._policy import DEFAULT_POLICY_ID, Policy
from rltune.trainers._remote import set_compute_threads, setup_logging
from rltune.trainers._rollout_worker import RolloutWorker
from rltune.trainers._sample_batch import EpisodeMetrics
from rltune.trainers._worker_set import WorkerSet

logger = logging.getLogger(__name__)

DEFAULT_RESULTS_DIR = "~/rltune_results"


@dataclass
class StepOutcome:
    """What one algorithm ``training_step`` did: env steps sampled, episodes ended, learner stats by policy id."""

    env_steps: int = 0
    episodes: list[EpisodeMetrics] = field(default_factory=list)
    learner_info: dict[str, dict[str, float]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def resolve_callable(spec: Any, key: str) -> Callable[..., Any]:
    """A config value that names a function: the function itself or an import string 'pkg.module:fn'."""
    if isinstance(spec, str) and ":" in spec:
        spec = import_object(spec, key)
    if not callable(spec):
        raise ConfigError(f"{key}: must be a function or an import string 'pkg.module:fn', but got {spec!r}")
    return spec


def _state_dict_mismatch(expected: dict[str, Any], saved: Any, source: str = "the checkpoint") -> str | None:
    """Why ``saved`` (from ``source``) cannot load into a model whose state dict is ``expected`` (None if it can)."""
    if not isinstance(saved, dict):
        return "no weights"
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(set(saved) - set(expected))
    if missing or unexpected:
        return f"missing {missing}, unexpected {unexpected}"
    for key, tensor in expected.items():
        shape = getattr(saved[key], "shape", None)
        if shape is None or tuple(shape) != tuple(tensor.shape):
            return f"{key} has shape {None if shape is None else tuple(shape)} in {source}, {tuple(tensor.shape)} here"
    return None


def _mean_or_nan(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


class Trainer:
    """Base class of PPO, DQN and later algorithms: ``Trainer(config=dict, env=...)``.

    Lifecycle: ``__init__`` validates the config, starts the rollout workers
    and calls :meth:`setup`; each :meth:`train` runs one iteration
    (:meth:`training_step`) and returns the result dict; :meth:`save` /
    :meth:`restore` checkpoint it; :meth:`stop` ends the worker processes
    (also done at interpreter exit and by ``with Trainer(...) as t:``).

    Subclasses set ``config_class`` and ``policy_class`` and implement
    :meth:`setup`, :meth:`training_step` and, when they hold more state than
    the policies' weights, :meth:`get_algorithm_state`/:meth:`set_algorithm_state`.
    """

    name: ClassVar[str] = "Trainer"
    config_class: ClassVar[type[TrainerConfig]] = TrainerConfig
    policy_class: ClassVar[type[Policy]] = Policy

    # -- config ----------------------------------------------------------------------
    @classmethod
    def get_default_config(cls) -> dict[str, Any]:
        """The full default config of this trainer (RLlib's key names)."""
        return default_config(cls.config_class)

    @classmethod
    def describe_config(cls) -> str:
        """Every config key with its default and what it is for."""
        return "\n".join(describe_config(cls.config_class))

    @classmethod
    def validate(cls, config: dict[str, Any] | None) -> TrainerConfig:
        """Validate a user config dict; raise one :class:`ConfigError` with every problem."""
        cfg = validate_config(cls.config_class, config, where=f"{cls.name} config")
        problems = cls.check_config(cfg)
        if problems:
            raise ConfigError(problems, where=f"{cls.name} config")
        return cfg

    @classmethod
    def check_config(cls, cfg: TrainerConfig) -> list[str]:
        """Cross-field checks of a typed config; return the problems found (each with its arithmetic)."""
        problems = []
        if cfg.multiagent.policies:
            problems.append("multiagent.policies: multi-agent training is not available yet (single-agent envs only)")
        if cfg.curriculum is not None:
            try:
                parse_curriculum(cfg.curriculum)
            except ConfigError as exc:
                problems.extend(exc.problems)
        if cfg.env_task_fn is not None:
            try:
                resolve_callable(cfg.env_task_fn, "env_task_fn")
            except ConfigError as exc:
                problems.extend(exc.problems)
        try:
            make_callbacks(cfg.callbacks)
        except ConfigError as exc:
            problems.extend(exc.problems)
        if cfg.evaluation_config:
            extra = set(cfg.evaluation_config) - set(cls.config_class.model_fields) - {"lambda"}
            if extra:
                problems.append(f"evaluation_config: unknown keys {sorted(extra)}")
        return problems

    # -- construction -----------------------------------------------------------------
    def __init__(
        self,
        config: dict[str, Any] | None = None,
        env: Any = None,
        *,
        results_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        config = dict(config or {})
        if env is not None:
            config["env"] = env
        self.cfg = self.validate(config)
        self.config: dict[str, Any] = self.cfg.model_dump(by_alias=True)
        self.env_spec = resolve_env(self.cfg.env)
        self._set_log_level(self.cfg.log_level)
        self.device = self._select_device(self.cfg.num_gpus)
        set_compute_threads(self.cfg.torch_num_threads)
        if self.cfg.seed is not None:
            torch.manual_seed(self.cfg.seed)
        self.rng = np.random.default_rng(self.cfg.seed)

        self.iteration = 0
        self.timesteps_total = 0
        self.episodes_total = 0
        self.time_total_s = 0.0
        self._episode_window: deque[EpisodeMetrics] = deque(maxlen=self.cfg.metrics_num_episodes_for_smoothing)
        self._results_root = Path(os.path.expanduser(results_dir or os.environ.get("RLTUNE_RESULTS_DIR", DEFAULT_RESULTS_DIR)))
        self._logdir: Path | None = None
        self._eval_workers: dict[int, RolloutWorker] = {}  # by number of envs
        self._eval_cfg: TrainerConfig | None = None
        self._last_evaluation: dict[str, Any] | None = None
        self._stopped = False

        self.callbacks = self._make_trainer_callbacks()
        self.workers = WorkerSet(self.env_spec, self.cfg, self.policy_class, str(self.device))
        # Stop the worker processes at interpreter exit even if stop() is never called.
        self._finalizer = weakref.finalize(self, WorkerSet.stop, self.workers)
        try:
            self.workers.on_worker_recreated(self._worker_recreated)
            self.setup()
            self.workers.sync_weights({"timestep": 0})
            self.workers.foreach_env(lambda env: None)  # learn the envs' initial tasks
            self._call("on_trainer_init", trainer=self)
        except BaseException:
            self.stop()
            raise

    def _make_trainer_callbacks(self) -> DefaultCallbacks:
        callbacks = make_callbacks(self.cfg.callbacks)
        if self.cfg.curriculum is None:
            return callbacks
        curriculum = CurriculumCallback(self.cfg.curriculum)
        if type(callbacks) is DefaultCallbacks:
            return curriculum
        inner = callbacks.callbacks if isinstance(callbacks, MultiCallbacks) else [callbacks]
        return MultiCallbacks([*inner, curriculum])

    def _call(self, hook: str, **kwargs: Any) -> None:
        if self.callbacks.overrides(hook):
            call_hook(self.callbacks, hook, f"the trainer process (iteration {self.iteration})", **kwargs)

    def _worker_recreated(self, worker_index: int) -> None:
        self._call("on_worker_recreated", trainer=self, worker_index=worker_index)

    @staticmethod
    def _set_log_level(level: str) -> None:
        # As in the worker processes, so that env code sampled here (num_workers: 0) logs the same way.
        setup_logging(level, in_users_process=True)

    @staticmethod
    def _select_device(num_gpus: float) -> torch.device:
        if num_gpus > 0:
            if not torch.cuda.is_available():
                raise ConfigError(
                    f"num_gpus: {num_gpus} asks for a GPU, but torch.cuda.is_available() is False here "
                    "(no CUDA device or a CPU build of torch); set num_gpus: 0"
                )
            return torch.device("cuda")
        return torch.device("cpu")

    # -- to implement by algorithms ------------------------------------------------------
    def setup(self) -> None:
        """Build optimizers and other learner state (policies already exist)."""

    def training_step(self) -> StepOutcome:
        """Sample and update once; return what was done."""
        raise NotImplementedError

    def get_algorithm_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Learner state beyond the policy weights: (JSON-able values, tensors)."""
        return {}, {}

    def set_algorithm_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        """Restore what :meth:`get_algorithm_state` returned."""

    def checkpoint_array_names(self) -> list[str]:
        """The file names :meth:`get_checkpoint_arrays` writes (without building the arrays)."""
        return []

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Extra numpy arrays to checkpoint (e.g. a replay buffer), by file name."""
        return {}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray] | None]) -> None:
        """Restore what :meth:`get_checkpoint_arrays` returned (None for a file the checkpoint lacks).

        Called last by :meth:`restore`: it must check everything before it
        changes anything, so that a failure leaves the old arrays in place.
        """

    # -- training ----------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Run one training iteration and return its result dict (DESIGN's keys)."""
        if self._stopped:
            raise RLTuneError(f"{self.name} was stopped; create a new trainer")
        start = time.perf_counter()
        outcome = self.training_step()
        self.iteration += 1
        self.timesteps_total += outcome.env_steps
        self.episodes_total += len(outcome.episodes)
        self._episode_window.extend(outcome.episodes)
        result = self._make_result(outcome, time.perf_counter() - start)
        if self.cfg.evaluation_interval is not None:
            result["evaluation"] = self._periodic_evaluation()
        if self.cfg.env_task_fn is not None:
            self.workers.apply_env_task_fn(resolve_callable(self.cfg.env_task_fn, "env_task_fn"), result)
        self._call("on_train_result", trainer=self, result=result)
        self._add_task_to_result(result)
        elapsed = time.perf_counter() - start
        self.time_total_s += elapsed
        result["time_this_iter_s"] = elapsed
        result["time_total_s"] = self.time_total_s
        return result

    # -- tasks (curriculum) --------------------------------------------------------------
    def set_task(self, task: Any) -> None:
        """Give every task-settable env of every worker (and the evaluation env) ``task``."""
        self.workers.set_task(task)
        for worker in self._eval_workers.values():
            worker.set_task_all(task)

    def get_tasks(self) -> dict[tuple[int, int], Any]:
        """The last known task of every task-settable env, by (worker_index, vector_index)."""
        return dict(self.workers.env_tasks)

    def current_task(self) -> Any:
        """The task most envs have (None when no env is task-settable)."""
        tasks = list(self.workers.env_tasks.values())
        if not tasks:
            return None
        counts: list[tuple[int, Any]] = []
        for task in tasks:
            for i, (count, seen) in enumerate(counts):
                if seen == task:
                    counts[i] = (count + 1, seen)
                    break
            else:
                counts.append((1, task))
        return max(counts, key=lambda c: c[0])[1]

    def _add_task_to_result(self, result: dict[str, Any]) -> None:
        if "curriculum_task" in result or not self.workers.env_tasks:
            return
        tasks = list(self.workers.env_tasks.values())
        result["curriculum_task"] = tasks[0] if all(t == tasks[0] for t in tasks) else tasks

    def _make_result(self, outcome: StepOutcome, elapsed: float) -> dict[str, Any]:
        window = list(self._episode_window)
        rewards = [e.episode_reward for e in window]
        lengths = [float(e.episode_length) for e in window]
        result: dict[str, Any] = {
            "episode_reward_mean": _mean_or_nan(rewards),
            "episode_reward_min": float(np.min(rewards)) if rewards else math.nan,
            "episode_reward_max": float(np.max(rewards)) if rewards else math.nan,
            "episode_len_mean": _mean_or_nan(lengths),
            "episodes_this_iter": len(outcome.episodes),
            "episodes_total": self.episodes_total,
            "timesteps_this_iter": outcome.env_steps,
            "timesteps_total": self.timesteps_total,
            "num_env_steps_sampled": self.timesteps_total,
            "training_iteration": self.iteration,
            "time_this_iter_s": elapsed,
            "time_total_s": self.time_total_s,
            "env_steps_per_s": outcome.env_steps / elapsed if elapsed > 0 else math.nan,
            "info": {"learner": outcome.learner_info},
            # Custom metrics summarise the same window of episodes as episode_reward_mean, so an
            # iteration in which no episode ended keeps the keys (with the last window's values).
            "custom_metrics": summarize_custom_metrics(e.custom_metrics for e in window),
            "hist_stats": {
                "episode_reward": rewards,
                "episode_lengths": [int(x) for x in lengths],
                **merge_hist_data(e.hist_data for e in outcome.episodes),
            },
            "policy_reward_mean": {},
            "num_healthy_workers": sum(w.is_alive() for w in self.workers.remote_workers),
            "num_worker_restarts": sum(w.restarts for w in self.workers.remote_workers),
            "num_env_restarts": self.workers.num_env_restarts,
        }
        result.update(outcome.extra)
        return result

    # -- policies and inference ---------------------------------------------------------
    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy:
        """The learner's policy with this id (``get_weights()`` / ``set_weights()``)."""
        try:
            return self.workers.local_worker.policy_map[policy_id]
        except KeyError:
            known = sorted(self.workers.local_worker.policy_map)
            raise ConfigError(f"no policy {policy_id!r}; the policies are {known}") from None

    def get_weights(self) -> dict[str, dict[str, np.ndarray]]:
        """Every policy's weights, by policy id (numpy arrays, as ``Policy.get_weights``)."""
        return self.workers.local_worker.get_weights()

    def set_weights(self, weights: dict[str, dict[str, np.ndarray]]) -> None:
        """Load weights by policy id into the learner's policies and every rollout worker's.

        ``get_policy(id).set_weights(w)`` changes the learner's policy only
        (as in RLlib), so remote workers sample with their old weights until
        the next sync at the end of an iteration; this method syncs at once.
        """
        policies = self.workers.local_worker.policy_map
        unknown = set(weights) - set(policies)
        if unknown:
            raise ConfigError(f"set_weights: no policy {sorted(unknown)}; the policies are {sorted(policies)}")
        for pid, policy_weights in weights.items():  # all checked before any is loaded
            problem = _state_dict_mismatch(policies[pid].model.state_dict(), policy_weights, "the weights given")
            if problem:
                raise ConfigError(f"set_weights: the weights of policy {pid!r} do not fit its model: {problem}")
        self.workers.local_worker.set_weights(weights)
        self.workers.sync_weights()

    def compute_single_action(self, obs: Any, *, explore: bool = False, policy_id: str = DEFAULT_POLICY_ID) -> Any:
        """The action for one raw observation; deterministic unless ``explore``."""
        return self.get_policy(policy_id).compute_single_action(obs, explore=explore)

    def _periodic_evaluation(self) -> dict[str, Any]:
        """The ``evaluation`` stats for this iteration's result (``evaluation_interval`` is set).

        The first iteration (of a trainer that has no evaluation yet) and
        every ``evaluation_interval``-th one run :meth:`evaluate`; the others
        carry the latest stats with ``episodes_this_iter: 0``. So every
        result has the keys and a value: a stop criterion or a tuning metric
        on ``evaluation/episode_reward_mean`` works from the first result on,
        and a trial that stops early still has a final value.
        """
        if self._last_evaluation is None or self.iteration % self.cfg.evaluation_interval == 0:
            self._last_evaluation = self.evaluate()["evaluation"]
            return copy.deepcopy(self._last_evaluation)  # callbacks may edit the result; the carried stats stay as measured
        return {**copy.deepcopy(self._last_evaluation), "episodes_this_iter": 0, "hist_stats": {"episode_reward": []}}

    def evaluate(self, num_episodes: int | None = None, *, task: Any = None) -> dict[str, Any]:
        """Run deterministic episodes in a separate env (with ``evaluation_config``); training stats are untouched.

        The evaluation env gets the training envs' current task, or ``task``
        when given (e.g. the hardest task, to judge a curriculum).
        """
        n = num_episodes or self.cfg.evaluation_duration
        worker = self._evaluation_worker(n)
        if task is None:
            task = self.current_task()
        if task is not None:
            worker.set_task_all(task)
        worker.set_weights(self.workers.local_worker.get_weights(), {"timestep": self.timesteps_total})
        episodes = worker.run_episodes(n, explore=False)
        return {"evaluation": _evaluation_stats(episodes)}

    def _evaluation_worker(self, num_episodes: int) -> RolloutWorker:
        """The worker that runs ``num_episodes`` evaluation episodes, built on first use.

        It steps up to ``num_envs_per_worker`` envs of the evaluation config
        at once, never more envs than episodes (so ``evaluate(1)`` builds one
        env). Its ``worker_index`` is ``num_workers + 1``: its envs get seeds
        (and indices) of their own, not the training envs'.
        """
        if self._eval_cfg is None:  # validated once: evaluate() may run every few iterations
            self._eval_cfg = self.validate({**self.config, **self.cfg.evaluation_config}) if self.cfg.evaluation_config else self.cfg
        eval_cfg = self._eval_cfg
        num_envs = min(eval_cfg.num_envs_per_worker, num_episodes)
        worker = self._eval_workers.get(num_envs)
        if worker is None:
            local = self.workers.local_worker
            worker = RolloutWorker(
                env_spec=self.env_spec,
                config=eval_cfg,
                policy_class=self.policy_class,
                worker_index=self.cfg.num_workers + 1,
                num_workers=self.cfg.num_workers,
                num_envs=num_envs,
                spaces=(local.observation_space, local.action_space),
            )
            self._eval_workers[num_envs] = worker
        return worker

    # -- workers and envs --------------------------------------------------------------
    def foreach_worker(self, fn: Callable[[RolloutWorker], Any]) -> list[Any]:
        """``fn(worker)`` on the local worker and every rollout worker process; results in worker order."""
        return self.workers.foreach_worker(fn)

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
            stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            env = self.env_spec.name.replace("/", "_").replace(":", "_")
            self._results_root.mkdir(parents=True, exist_ok=True)
            # mkdtemp creates the directory exclusively: two trainers never share one.
            self._logdir = Path(tempfile.mkdtemp(prefix=f"{self.name}_{env}_{stamp}_", dir=self._results_root))
        return self._logdir

    @logdir.setter
    def logdir(self, path: str | os.PathLike[str]) -> None:
        self._logdir = Path(path)
        self._logdir.mkdir(parents=True, exist_ok=True)

    def save(self, checkpoint_dir: str | os.PathLike[str] | None = None) -> str:
        """Write a checkpoint directory atomically and return its path.

        Without ``checkpoint_dir``: ``<logdir>/checkpoint_<iteration>``.
        """
        path = Path(checkpoint_dir) if checkpoint_dir is not None else self.logdir / f"checkpoint_{self.iteration:06d}"
        values, tensors = self.get_algorithm_state()
        policy = self.get_policy()
        metadata = {
            "algorithm": self.name,
            "rltune_version": __version__,
            "iteration": self.iteration,
            "timesteps_total": self.timesteps_total,
            "episodes_total": self.episodes_total,
            "time_total_s": self.time_total_s,
            "episode_window": [
                [e.episode_reward, e.episode_length, ckpt.json_safe(e.custom_metrics)] for e in self._episode_window
            ],
            "last_evaluation": self._last_evaluation,
            "config": ckpt.json_safe(self.config),
            "observation_space": repr(policy.observation_space),
            "action_space": repr(policy.action_space),
            "numpy_rng": self.rng.bit_generator.state,
            "policy_rngs": {pid: p.rng.bit_generator.state for pid, p in self.workers.local_worker.policy_map.items()},
            "algorithm_state": values,
            "callbacks_state": self.callbacks.get_state(),
            "env_tasks": [[w, v, ckpt.json_safe(task)] for (w, v), task in self.workers.env_tasks.items()],
        }
        state = {
            "policies": {pid: p.model.state_dict() for pid, p in self.workers.local_worker.policy_map.items()},
            "torch_rng": torch.get_rng_state(),
            "algorithm": tensors,
        }
        saved = ckpt.write_checkpoint(path, metadata, state, self.get_checkpoint_arrays())
        self._call("on_checkpoint_saved", trainer=self, path=str(saved))
        return str(saved)

    def restore(self, checkpoint_path: str | os.PathLike[str]) -> None:
        """Load a checkpoint of this algorithm; training goes on from its iteration and timestep counts.

        The checkpoint may come from a trainer with another ``num_workers``.
        A checkpoint that is missing, partial, corrupt or does not fit raises
        :class:`CheckpointError` naming what is wrong, and the trainer stays
        as it was (weights, optimizer, counters, RNG states, replay buffer).
        The rollout workers get the new weights and env tasks after that: a
        worker that fails then raises as it would in training.
        """
        saved = self._read_checkpoint(checkpoint_path, self.checkpoint_array_names())
        before = self._current_state()  # to go back to if loading fails
        try:
            self._set_state(saved, checkpoint_path)
            with ckpt.loading(checkpoint_path, f"the arrays ({', '.join(f'{n}.npz' for n in saved.arrays)})"):
                self.set_checkpoint_arrays(saved.arrays)  # last; changes nothing when it fails
        except BaseException:
            try:
                self._set_state(before)
            except Exception:  # keep the original error: it is what the user must fix
                logger.exception("%s: putting back the state from before the failed restore failed too", self.name)
            raise
        self.workers.sync_weights({"timestep": self.timesteps_total})
        self._restore_tasks(saved.env_tasks)
        self._call("on_checkpoint_loaded", trainer=self)

    def _read_checkpoint(self, checkpoint_path: str | os.PathLike[str], array_names: list[str]) -> ckpt.TrainerState:
        """Read and check everything :meth:`restore` loads, without changing this trainer."""
        saved = ckpt.read_trainer_state(checkpoint_path, self.name)
        path = str(checkpoint_path)
        policies = self.workers.local_worker.policy_map
        missing = set(policies) - set(saved.weights)
        if missing:
            raise CheckpointError(f"checkpoint {path!r} has no weights for policies {sorted(missing)}")
        for pid, policy in policies.items():
            problem = _state_dict_mismatch(policy.model.state_dict(), saved.weights[pid])
            if problem:
                raise CheckpointError(
                    f"checkpoint {path!r} does not fit this {self.name}'s {pid!r} model "
                    f"(another env or model config?): {problem}"
                )
            rng = policy.rng.bit_generator
            if pid in saved.policy_rngs and not ckpt.valid_rng_state(saved.policy_rngs[pid], rng):
                problem = f"is not a valid numpy {type(rng).__name__} state for policy {pid!r}"
                raise ckpt.field_error(path, "policy_rngs", problem)
        if saved.numpy_rng is not None and not ckpt.valid_rng_state(saved.numpy_rng, self.rng.bit_generator):
            raise ckpt.field_error(path, "numpy_rng", f"is not a valid numpy {type(self.rng.bit_generator).__name__} state")
        saved.arrays = {name: ckpt.read_arrays(checkpoint_path, name, saved.metadata) for name in array_names}
        return saved

    def _current_state(self) -> ckpt.TrainerState:
        """What :meth:`restore` would change, tensors cloned: the state a failed restore goes back to."""
        values, tensors = self.get_algorithm_state()
        policies = self.workers.local_worker.policy_map
        return ckpt.TrainerState(
            iteration=self.iteration,
            timesteps_total=self.timesteps_total,
            episodes_total=self.episodes_total,
            time_total_s=self.time_total_s,
            episode_window=list(self._episode_window),
            last_evaluation=copy.deepcopy(self._last_evaluation),
            weights={pid: copy.deepcopy(p.model.state_dict()) for pid, p in policies.items()},
            policy_rngs={pid: p.rng.bit_generator.state for pid, p in policies.items()},
            numpy_rng=self.rng.bit_generator.state,
            torch_rng=torch.get_rng_state(),
            algorithm_values=copy.deepcopy(values),
            algorithm_tensors=copy.deepcopy(tensors),
            callbacks_state=copy.deepcopy(self.callbacks.get_state()),
        )

    def _set_state(self, state: ckpt.TrainerState, checkpoint_path: str | os.PathLike[str] | None = None) -> None:
        """Load a checked ``state`` into this trainer (not its arrays, workers or envs).

        The algorithm's and callbacks' setters can still fail on input that
        passed the checks (e.g. an optimizer state for other parameters):
        with ``checkpoint_path`` that is a :class:`CheckpointError` naming
        the part, and :meth:`restore` puts the state from before back.
        """
        with ckpt.loading(checkpoint_path, f"{ckpt.TENSORS_FILE} entry 'policies'"):
            for pid, policy in self.workers.local_worker.policy_map.items():
                policy.model.load_state_dict(state.weights[pid])
                policy.weights_changed()
                if pid in state.policy_rngs:
                    policy.rng.bit_generator.state = state.policy_rngs[pid]
        algorithm_part = f"the algorithm state (metadata field 'algorithm_state', {ckpt.TENSORS_FILE} entry 'algorithm')"
        with ckpt.loading(checkpoint_path, algorithm_part):
            self.set_algorithm_state(state.algorithm_values, state.algorithm_tensors)
        with ckpt.loading(checkpoint_path, "metadata field 'callbacks_state'"):
            self.callbacks.set_state(state.callbacks_state)
        self.iteration = state.iteration
        self.timesteps_total = state.timesteps_total
        self.episodes_total = state.episodes_total
        self.time_total_s = state.time_total_s
        self._episode_window.clear()
        self._episode_window.extend(state.episode_window)
        self._last_evaluation = state.last_evaluation
        if state.numpy_rng is not None:
            self.rng.bit_generator.state = state.numpy_rng
        if state.torch_rng is not None:
            torch.set_rng_state(state.torch_rng)

    def _restore_tasks(self, tasks: dict[tuple[int, int], Any]) -> None:
        if not tasks:
            return
        values = list(tasks.values())
        if all(t == values[0] for t in values):
            self.set_task(values[0])  # one task for all: fits any num_workers
        else:
            self.workers.set_env_tasks(tasks)

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint_path: str | os.PathLike[str],
        config_overrides: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> "Trainer":
        """Build the trainer a checkpoint was written by (its saved config, updated by ``config_overrides``) and restore it.

        Called on :class:`Trainer` itself it picks the algorithm from the
        checkpoint. A config value that could not be saved as JSON (a lambda,
        a class from ``__main__``) must be given again in ``config_overrides``.

        A checkpoint is data: of its saved config, ``env`` must be a
        gymnasium id, a :func:`register_env` name or an import string of a
        ``gymnasium.Env`` subclass, ``callbacks`` import strings of
        ``DefaultCallbacks`` subclasses, and ``env_task_fn`` unset (give it
        in ``config_overrides``); anything else is a :class:`CheckpointError`
        naming the key, before anything the checkpoint names is called.
        """
        from rltune.trainers import get_trainer_class

        meta = ckpt.Fields(checkpoint_path, ckpt.read_metadata(checkpoint_path))
        trainer_cls = cls
        if cls is Trainer:
            algorithm = meta.get("algorithm", str)
            try:
                trainer_cls = get_trainer_class(algorithm)
            except ConfigError as exc:
                raise meta.error("algorithm", f"names no trainer here ({'; '.join(exc.problems)})") from None
        config = ckpt.checked_config(checkpoint_path, meta.get("config", dict, {}), config_overrides)
        trainer = trainer_cls(config, **kwargs)
        try:
            trainer.restore(checkpoint_path)
        except BaseException:
            trainer.stop()
            raise
        return trainer

    # -- shutdown ----------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the rollout worker processes and close every env; the trainer cannot train after this."""
        if self._stopped:
            return
        self._stopped = True
        for worker in self._eval_workers.values():
            worker.stop()
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


def _evaluation_stats(episodes: list[EpisodeMetrics]) -> dict[str, Any]:
    """The ``evaluation`` dict of a result for these episodes (NaN stats when there are none)."""
    rewards = [e.episode_reward for e in episodes]
    return {
        "episode_reward_mean": _mean_or_nan(rewards),
        "episode_reward_min": float(np.min(rewards)) if rewards else math.nan,
        "episode_reward_max": float(np.max(rewards)) if rewards else math.nan,
        "episode_len_mean": _mean_or_nan([float(e.episode_length) for e in episodes]),
        "episodes_this_iter": len(episodes),
        "hist_stats": {"episode_reward": rewards},
    }
