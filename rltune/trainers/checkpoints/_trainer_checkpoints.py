"""Trainer checkpoints: save, restore (checked first, all or nothing) and from_checkpoint.

:class:`TrainerCheckpoints` is the trainer's collaborator for them; the
trainer's hooks that algorithms override (``get_algorithm_state``...) reach
it through the :class:`AlgorithmStateHooks` protocol.
Every policy's weights and RNG state, every learner's state (through the
algorithm, ``Algorithm.get_state``) and the master observation filters'
statistics are saved; the layout is ``_checkpoint.py``'s.
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

import torch

from rltune import __version__
from rltune.errors import CheckpointError, ConfigError
from rltune.trainers.checkpoints import _checkpoint as ckpt
from rltune.trainers.policies._filters import filter_stats
from rltune.trainers.sampling._nonfinite import check_finite_tensors

if TYPE_CHECKING:
    import numpy as np

    from rltune.trainers._trainer import Trainer
    from rltune.trainers._trainer_policies import TrainerPolicies
    from rltune.trainers._trainer_parts import TrainerParts

logger = logging.getLogger(__name__)


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


def saved_spaces(policy: Any) -> dict[str, Any] | None:
    """The policy's spaces as JSON data (read back without building the env, e.g. to export the policy), or None."""
    from rltune.trainers.policies._space_json import space_to_json

    try:
        return {key: space_to_json(getattr(policy, key)) for key in ("observation_space", "action_space")}
    except ValueError:  # a space of a kind that has no JSON form here: readers build the env instead
        return None


class AlgorithmStateHooks(Protocol):
    """The trainer's hooks for what an algorithm checkpoints beyond the policies (subclasses override them)."""

    def get_algorithm_state(self) -> tuple[dict[str, Any], dict[str, Any]]: ...

    def set_algorithm_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None: ...

    def checkpoint_array_names(self) -> list[str]: ...

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]: ...

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray] | None]) -> None: ...


class TrainerCheckpoints:
    """A trainer's checkpoints: write, read and check, load all or nothing (the trainer calls the callbacks).

    ``hooks``: the algorithm state hooks (the trainer, whose subclasses
    override them); ``policies``: the policy set (policies added while
    training are saved and restored); ``set_task``: gives every env a task;
    ``logdir``: the directory a checkpoint goes to when none is given.
    """

    def __init__(
        self,
        parts: "TrainerParts",
        hooks: AlgorithmStateHooks,
        policies: "TrainerPolicies",
        set_task: Callable[[Any], None],
        logdir: Callable[[], Path],
    ) -> None:
        self.parts = parts
        self.hooks = hooks
        self.policies = policies
        self.set_task = set_task
        self.logdir = logdir

    def save(self, checkpoint_dir: str | os.PathLike[str] | None = None) -> str:
        """Write a checkpoint directory atomically and return its path.

        Without ``checkpoint_dir``: ``<logdir>/checkpoint_<iteration>``.
        """
        progress = self.parts.progress
        path = Path(checkpoint_dir) if checkpoint_dir is not None else self.logdir() / f"checkpoint_{progress.iteration:06d}"
        values, tensors = self.hooks.get_algorithm_state()
        policy = next(iter(self.parts.policy_set.policies.values()))  # the first (the only one, single-agent)
        metadata = {
            "algorithm": self.parts.name,
            "rltune_version": __version__,
            "iteration": progress.iteration,
            "timesteps_total": progress.timesteps_total,
            "agent_timesteps_total": progress.agent_timesteps_total,
            "episodes_total": progress.episodes_total,
            "time_total_s": progress.time_total_s,
            "episode_window": [
                [e.episode_reward, e.episode_length, ckpt.json_safe(e.custom_metrics)]
                + ([[[ckpt.json_safe(a), p, r] for a, p, r in e.agent_rewards]] if e.agent_rewards else [])
                for e in progress.episode_window
            ],
            "last_evaluation": progress.last_evaluation,
            "config": ckpt.json_safe(self.parts.config),
            "observation_space": repr(policy.observation_space),
            "action_space": repr(policy.action_space),
            "spaces": saved_spaces(policy),
            "numpy_rng": self.parts.rng.bit_generator.state,
            "policy_rngs": {pid: p.rng.bit_generator.state for pid, p in self.parts.policy_set.policies.items()},
            "policy_specs": self.policies.specs_state(),
            "algorithm_state": values,
            "callbacks_state": self.parts.callbacks.get_state(),
            "env_tasks": [[w, v, ckpt.json_safe(task)] for (w, v), task in self.parts.workers.env_tasks.items()],
        }
        state = {
            "policies": {pid: p.model.state_dict() for pid, p in self.parts.policy_set.policies.items()},
            "torch_rng": torch.get_rng_state(),
            "algorithm": tensors,
        }
        if self.parts.policy_set.filters:
            state["observation_filters"] = ckpt.filter_tensors(filter_stats(self.parts.policy_set.filters))
        check_finite_tensors(state, f"cannot save checkpoint {str(path)!r}")
        saved = ckpt.write_checkpoint(path, metadata, state, self.hooks.get_checkpoint_arrays())
        return str(saved)

    def restore(self, checkpoint_path: str | os.PathLike[str]) -> None:
        """Load a checkpoint of this algorithm; training goes on from its iteration and timestep counts.

        The checkpoint may come from a trainer with another ``num_workers``
        (the observation filters are the trainer's master statistics, which
        every worker gets with the weights).
        A checkpoint that is missing, partial, corrupt or does not fit raises
        :class:`CheckpointError` naming what is wrong, and the trainer stays
        as it was (weights, optimizer, counters, RNG states, replay buffer).
        The rollout workers get the new weights and env tasks after that: a
        worker that fails then raises as it would in training. Nothing the
        checkpoint names is imported: this trainer's own config names the
        code (a saved policy class must be one it uses), and a checkpoint of
        another policy set (multi-agent into single-agent, a policy missing)
        is a :class:`CheckpointError` naming both.
        """
        progress = self.parts.progress
        # Policies the checkpoint holds beyond this trainer's config (added while training) are added first.
        added = self.policies.add_saved(checkpoint_path, ckpt.read_metadata(checkpoint_path).get("policy_specs"))
        try:
            saved = self._read_checkpoint(checkpoint_path, self.hooks.checkpoint_array_names())
        except BaseException:
            self.policies.remove_saved(added)
            raise
        before = self._current_state()  # to go back to if loading fails
        try:
            self._set_state(saved, checkpoint_path)
            with ckpt.loading(checkpoint_path, f"the arrays ({', '.join(f'{n}.npz' for n in saved.arrays)})"):
                self.hooks.set_checkpoint_arrays(saved.arrays)  # last; changes nothing when it fails
        except BaseException:
            try:
                self._set_state(before)
            except Exception:  # keep the original error: it is what the user must fix
                logger.exception("%s: putting back the state from before the failed restore failed too", self.parts.name)
            self.policies.remove_saved(added)
            raise
        self.parts.sync_weights({"timestep": progress.timesteps_total})
        self._restore_tasks(saved.env_tasks)

    def _read_checkpoint(self, checkpoint_path: str | os.PathLike[str], array_names: list[str]) -> ckpt.TrainerState:
        """Read and check everything :meth:`restore` loads, without changing this trainer."""
        saved = ckpt.read_trainer_state(checkpoint_path, self.parts.name)
        path = str(checkpoint_path)
        check_finite_tensors({"policies": saved.weights, "algorithm": saved.algorithm_tensors}, f"checkpoint {path!r}")
        policies = self.parts.policy_set.policies
        missing = set(policies) - set(saved.weights)
        if missing:
            single = not (saved.metadata or {}).get("policy_specs") and self.parts.policy_set.multi_agent
            shape = f" of a single-agent config; this {self.parts.name} is multi-agent" if single else ""
            raise CheckpointError(f"checkpoint {path!r} has no weights for policies {sorted(missing)}: it holds "
                                  f"{sorted(saved.weights)}{shape}")
        for pid, policy in policies.items():
            problem = _state_dict_mismatch(policy.model.state_dict(), saved.weights[pid])
            if problem:
                raise CheckpointError(
                    f"checkpoint {path!r} does not fit this {self.parts.name}'s {pid!r} model "
                    f"(another env or model config?): {problem}"
                )
            rng = policy.rng.bit_generator
            if pid in saved.policy_rngs and not ckpt.valid_rng_state(saved.policy_rngs[pid], rng):
                problem = f"is not a valid numpy {type(rng).__name__} state for policy {pid!r}"
                raise ckpt.field_error(path, "policy_rngs", problem)
        self._check_saved_filters(path, saved)
        if saved.numpy_rng is not None and not ckpt.valid_rng_state(saved.numpy_rng, self.parts.rng.bit_generator):
            raise ckpt.field_error(path, "numpy_rng", f"is not a valid numpy {type(self.parts.rng.bit_generator).__name__} state")
        saved.arrays = {name: ckpt.read_arrays(checkpoint_path, name, saved.metadata) for name in array_names}
        return saved

    def _check_saved_filters(self, path: str, saved: ckpt.TrainerState) -> None:
        """The checkpoint's observation filters must be this trainer's: its policies act on what they were trained on."""
        filters = self.parts.policy_set.filters
        name = self.parts.cfg.observation_filter
        if bool(filters) != bool(saved.observation_filters):
            had = "a MeanStdFilter" if saved.observation_filters else "no observation filter (NoFilter)"
            raise CheckpointError(
                f"checkpoint {path!r} was trained with {had}, but this {self.parts.name} has observation_filter {name!r}: "
                "its policies would act on observations unlike those they learned on; "
                f"set observation_filter to {'MeanStdFilter' if saved.observation_filters else 'NoFilter'}"
            )
        for pid, obs_filter in filters.items():
            stats = saved.observation_filters.get(pid)
            if stats is None:
                raise CheckpointError(f"checkpoint {path!r} has no observation filter statistics for policy {pid!r}")
            if stats.size != obs_filter.size:
                raise CheckpointError(
                    f"checkpoint {path!r}: the observation filter of policy {pid!r} is for observations of "
                    f"{stats.size} numbers, {obs_filter.size} here (another env?)"
                )

    def _current_state(self) -> ckpt.TrainerState:
        """What :meth:`restore` would change, tensors cloned: the state a failed restore goes back to."""
        progress = self.parts.progress
        values, tensors = self.hooks.get_algorithm_state()
        policies = self.parts.policy_set.policies
        return ckpt.TrainerState(
            iteration=progress.iteration,
            timesteps_total=progress.timesteps_total,
            agent_timesteps_total=progress.agent_timesteps_total,
            episodes_total=progress.episodes_total,
            time_total_s=progress.time_total_s,
            episode_window=list(progress.episode_window),
            last_evaluation=copy.deepcopy(progress.last_evaluation),
            weights={pid: copy.deepcopy(p.model.state_dict()) for pid, p in policies.items()},
            policy_rngs={pid: p.rng.bit_generator.state for pid, p in policies.items()},
            numpy_rng=self.parts.rng.bit_generator.state,
            torch_rng=torch.get_rng_state(),
            algorithm_values=copy.deepcopy(values),
            algorithm_tensors=copy.deepcopy(tensors),
            callbacks_state=copy.deepcopy(self.parts.callbacks.get_state()),
            observation_filters=filter_stats(self.parts.policy_set.filters),
        )

    def _set_state(self, state: ckpt.TrainerState, checkpoint_path: str | os.PathLike[str] | None = None) -> None:
        """Load a checked ``state`` into this trainer (not its arrays, workers or envs).

        The algorithm's and callbacks' setters can still fail on input that
        passed the checks (e.g. an optimizer state for other parameters):
        with ``checkpoint_path`` that is a :class:`CheckpointError` naming
        the part, and :meth:`restore` puts the state from before back.
        """
        progress = self.parts.progress
        with ckpt.loading(checkpoint_path, f"{ckpt.TENSORS_FILE} entry 'policies'"):
            for pid, policy in self.parts.policy_set.policies.items():
                policy.model.load_state_dict(state.weights[pid])
                if pid in state.policy_rngs:
                    policy.rng.bit_generator.state = state.policy_rngs[pid]
        algorithm_part = f"the algorithm state (metadata field 'algorithm_state', {ckpt.TENSORS_FILE} entry 'algorithm')"
        with ckpt.loading(checkpoint_path, algorithm_part):
            self.hooks.set_algorithm_state(state.algorithm_values, state.algorithm_tensors)
        with ckpt.loading(checkpoint_path, "metadata field 'callbacks_state'"):
            self.parts.callbacks.set_state(state.callbacks_state)
        for pid, obs_filter in self.parts.policy_set.filters.items():  # checked to fit by _read_checkpoint
            obs_filter.set_stats(state.observation_filters[pid])
        progress.iteration = state.iteration
        progress.timesteps_total = state.timesteps_total
        agent_steps = state.agent_timesteps_total
        progress.agent_timesteps_total = state.timesteps_total if agent_steps is None else agent_steps
        progress.episodes_total = state.episodes_total
        progress.time_total_s = state.time_total_s
        progress.set_window(state.episode_window)
        progress.last_evaluation = state.last_evaluation
        if state.numpy_rng is not None:
            self.parts.rng.bit_generator.state = state.numpy_rng
        if state.torch_rng is not None:
            torch.set_rng_state(state.torch_rng)

    def _restore_tasks(self, tasks: dict[tuple[int, int], Any]) -> None:
        if not tasks:
            return
        values = list(tasks.values())
        if all(t == values[0] for t in values):
            self.set_task(values[0])  # one task for all: fits any num_workers
        else:
            self.parts.workers.set_env_tasks(tasks)


def trainer_from_checkpoint(
    cls: type["Trainer"],
    checkpoint_path: str | os.PathLike[str],
    config_overrides: dict[str, Any] | None = None,
    *,
    trust: Iterable[str] | None = None,
    **kwargs: Any,
) -> "Trainer":
    """``cls.from_checkpoint(...)``: build the trainer that wrote a checkpoint and restore it.

    The trainer gets the checkpoint's saved config, updated by ``config_overrides``.

    Called on :class:`Trainer` itself it picks the algorithm from the
    checkpoint. A config value that could not be saved as JSON (a lambda,
    a class from ``__main__``) must be given again in ``config_overrides``.

    A checkpoint is data, and opening it imports nothing it names by
    itself: an import string of its saved config (``env``,
    ``callbacks``, policy classes, a trainer class) is imported only from
    rltune, from a module this process has imported, from a module of an
    import string in ``config_overrides``, or from a module or package
    in ``trust`` (or ``$RLTUNE_TRUST``, comma-separated); a function
    (``env_task_fn``, ``multiagent.policy_mapping_fn``) only when given
    in ``config_overrides`` or defined in a module of ``trust``. Classes
    must be of the kind their key expects (a ``gymnasium.Env``,
    ``DefaultCallbacks`` or ``Policy`` subclass). Anything else is a
    :class:`CheckpointError` naming the key and how to allow it, raised
    before anything the checkpoint names is imported. See
    docs/checkpoints.md.
    """
    from rltune.trainers import Trainer, get_trainer_class
    from rltune.trainers.checkpoints._checkpoint_trust import CheckpointTrust

    checked_trust = CheckpointTrust.of(trust, config_overrides)
    meta = ckpt.Fields(checkpoint_path, ckpt.read_metadata(checkpoint_path))
    trainer_cls = cls
    if cls is Trainer:
        algorithm = meta.get("algorithm", str)
        problem = checked_trust.import_problem(algorithm) if ":" in algorithm else None
        if problem:
            raise meta.error("algorithm", problem)
        try:
            trainer_cls = get_trainer_class(algorithm)
        except ConfigError as exc:
            raise meta.error("algorithm", f"names no trainer here ({'; '.join(exc.problems)})") from None
    saved_config = trainer_cls.saved_config(meta.get("config", dict, {}))
    config = ckpt.checked_config(checkpoint_path, saved_config, config_overrides, trust=checked_trust,
                                 config_class=trainer_cls.config_class)
    trainer = trainer_cls(config, **kwargs)
    try:
        trainer.restore(checkpoint_path)
    except BaseException:
        trainer.stop()
        raise
    return trainer
