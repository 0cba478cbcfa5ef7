"""Algorithm: a training step over policies by id, their learners, and the on- and off-policy bases.

An algorithm is its policy class (action computation and postprocessing),
its learner class (loss and update) and its training step: what it samples
from its :class:`SampleSource` and how it feeds the learners. The
:class:`~rltune.trainers._trainer.Trainer` around it keeps the loop,
results, evaluation and checkpoints.

Checkpoint layout (unchanged from the single-policy trainers): the default
policy's learner state sits at the top level of the algorithm state, next
to the algorithm's own; other policies' learner states under ``learners``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional

import numpy as np
import torch

from rltune.errors import ConfigError
from rltune.trainers._config import TrainerSettings
from rltune.trainers.learning._learner import Learner
from rltune.trainers.policies._policy import DEFAULT_POLICY_ID, Policy
from rltune.trainers.policies._policy_set import PolicySet
from rltune.trainers.algorithms._postprocess import Postprocessor
from rltune.trainers.algorithms._replay_buffer import ReplayBuffer
from rltune.trainers.sampling._sample_batch import EpisodeMetrics, SampleBatch, SampleResult, concat_batches
from rltune.trainers.sampling._sample_source import SampleSource


@dataclass
class StepOutcome:
    """What one algorithm ``training_step`` did: env steps sampled, episodes ended, learner stats by policy id."""

    env_steps: int = 0
    episodes: list[EpisodeMetrics] = field(default_factory=list)
    learner_info: dict[str, dict[str, float]] = field(default_factory=dict)
    agent_steps: int = 0  # actions computed by every agent (single-agent: = env_steps)


class Algorithm:
    """Base of PPO, DQN and later algorithms: the policy set it owns, one :class:`Learner` per trained policy, a training step.

    ``policies``: the trainer's :class:`~rltune.trainers.policies._policy_set.PolicySet`
    (every policy the trainer trains or hosts, the master observation
    filters, ``policies_to_train``), which the algorithm owns and the
    trainer's local rollout worker acts with; or, for an algorithm used on
    its own, just the policies to train by id. ``self.policies`` holds the
    learner-side policies that have a learner. ``source`` gives the
    batches and takes the weights.
    """

    policy_class: ClassVar[type[Policy]] = Policy
    learner_class: ClassVar[type[Learner]] = Learner

    def __init__(
        self, cfg: TrainerSettings, policies: PolicySet | dict[str, Policy], source: SampleSource, rng: np.random.Generator
    ) -> None:
        self.cfg = cfg
        self.policy_set: PolicySet | None = policies if isinstance(policies, PolicySet) else None
        self.policies: dict[str, Policy] = policies.trained() if isinstance(policies, PolicySet) else policies
        self.source = source
        self.rng = rng
        self.learners: dict[str, Learner] = {pid: self.make_learner(pid, policy) for pid, policy in self.policies.items()}
        # Raw fragments to training batches (the trainer gives it the callbacks and the hook's worker).
        self.postprocessor = Postprocessor()

    def trains(self, policy_id: str, batch: SampleBatch) -> bool:
        """Whether a sampled batch goes to its policy's learner (the policy set's ``policies_to_train``)."""
        return self.policy_set is None or self.policy_set.training.trains(policy_id, batch)

    def make_learner(self, policy_id: str, policy: Policy) -> Learner:
        """The learner of one policy (default: ``learner_class`` with the policy's config and the trainer's generator)."""
        return self.learner_class(policy, policy.config, self.rng)

    def add_policy(self, policy_id: str, policy: Policy) -> None:
        """A policy added during training gets its learner."""
        self.policies[policy_id] = policy
        self.learners[policy_id] = self.make_learner(policy_id, policy)

    def remove_policy(self, policy_id: str) -> None:
        """A removed policy's learner goes with it."""
        self.policies.pop(policy_id, None)
        self.learners.pop(policy_id, None)

    def sync_learners(self) -> None:
        """After the policy set changed: a learner for every policy that may be trained now, none for a removed one."""
        if self.policy_set is None:
            return
        policies = self.policy_set.policies
        for pid in sorted(self.policy_set.training.candidates() - set(self.learners)):
            self.add_policy(pid, policies[pid])
        for pid in [pid for pid in self.learners if pid not in policies]:
            self.remove_policy(pid)

    def postprocess(self, sample: SampleResult) -> dict[str, SampleBatch]:
        """A sample's flat training batches of the policies with a learner: its raw fragments postprocessed
        here, with the learners' policies (value bootstraps, GAE, n-step returns), plus any ready batches."""
        batches = {pid: b for pid, b in sample.batches.items() if pid in self.learners}
        if sample.fragments:
            for pid, batch in self.postprocessor(self.policies, sample.fragments).items():
                batches[pid] = concat_batches([batches[pid], batch]) if pid in batches else batch
        return batches

    def batches_to_learn(self, sample: SampleResult) -> dict[str, SampleBatch]:
        """A sample's training batches (:meth:`postprocess`) that go to a learner, selected by ``policies_to_train``."""
        return {pid: b for pid, b in self.postprocess(sample).items() if self.trains(pid, b)}

    def training_step(self, timesteps_total: int) -> StepOutcome:
        """Sample and update once (``timesteps_total`` env steps were sampled before); return what was done."""
        raise NotImplementedError

    # -- checkpoints -------------------------------------------------------------------
    def get_extra_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The algorithm's own state beyond its learners': (JSON-able values, tensors)."""
        return {}, {}

    def set_extra_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        """Restore what :meth:`get_extra_state` returned (keys may be missing in older checkpoints)."""

    def get_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Own and every learner's state: (JSON-able values, tensors), in the layout of the module docstring."""
        values, tensors = self.get_extra_state()
        nested_values: dict[str, Any] = {}
        nested_tensors: dict[str, Any] = {}
        for pid, learner in self.learners.items():
            learner_values, learner_tensors = learner.get_state()
            if pid == DEFAULT_POLICY_ID:
                values.update(learner_values)
                tensors.update(learner_tensors)
            else:
                nested_values[pid], nested_tensors[pid] = learner_values, learner_tensors
        if nested_values:
            values["learners"], tensors["learners"] = nested_values, nested_tensors
        return values, tensors

    def set_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self.set_extra_state(values, tensors)
        nested_values, nested_tensors = values.get("learners", {}), tensors.get("learners", {})
        for pid, learner in self.learners.items():
            if pid == DEFAULT_POLICY_ID:
                learner.set_state(values, tensors)
            else:
                learner.set_state(nested_values.get(pid, {}), nested_tensors.get(pid, {}))

    def checkpoint_array_names(self) -> list[str]:
        """The file names :meth:`get_checkpoint_arrays` writes (without building the arrays)."""
        return []

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Extra numpy arrays to checkpoint (e.g. a replay buffer), by file name."""
        return {}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray] | None]) -> None:
        """Restore what :meth:`get_checkpoint_arrays` returned (None for a file the checkpoint lacks).

        Called last by ``Trainer.restore``: it must check everything before it
        changes anything, so that a failure leaves the old arrays in place.
        """


class OnPolicyAlgorithm(Algorithm):
    """Sample ``train_batch_size`` env steps with the current policies, update each learner once on its batch."""

    def training_step(self, timesteps_total: int) -> StepOutcome:
        sample = self.source.sample(self.cfg.train_batch_size)
        info = {
            pid: self.learners[pid].update(batch, timestep=timesteps_total)
            for pid, batch in self.batches_to_learn(sample).items()
        }
        self.source.sync_weights({"timestep": timesteps_total + sample.env_steps})
        return StepOutcome(sample.env_steps, sample.episodes, info, sample.agent_steps or sample.env_steps)


class OffPolicyLearner(Learner):
    """A learner with a target network: a frozen copy of the model that :meth:`sync_target` moves toward the model."""

    def __init__(self, policy: Policy, cfg: TrainerSettings, rng: np.random.Generator) -> None:
        self.target_model = copy.deepcopy(policy.model)
        self.target_model.requires_grad_(False)
        super().__init__(policy, cfg, rng)

    def frozen_modules(self) -> dict[str, Any] | None:
        return {"target_fn": self.target_model}

    def sync_target(self, tau: float = 1.0) -> None:
        """Move the target network toward the online model: ``target = tau * online + (1 - tau) * target``.

        ``tau`` 1 copies the online weights (a hard update); below 1 it is
        the polyak (soft) update of DDPG, TD3 and SAC, applied to every
        parameter, while buffers (noise samples, normalisation statistics)
        are copied.
        """
        if tau >= 1.0:
            self.target_model.load_state_dict(self.policy.model.state_dict())
            return
        with torch.no_grad():
            for target, online in zip(self.target_model.parameters(), self.policy.model.parameters()):
                target.lerp_(online, tau)
            for target, online in zip(self.target_model.buffers(), self.policy.model.buffers()):
                target.copy_(online)

    def get_extra_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return {}, {"target_model": self.target_model.state_dict()}

    def set_extra_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        if "target_model" in tensors:
            self.target_model.load_state_dict(tensors["target_model"])


MAX_STEPS_PER_DRAW = 32  # gradient steps whose minibatches are drawn (and targets computed) together


@dataclass(frozen=True)
class ReplaySettings:
    """What the off-policy base takes from an algorithm's config (each algorithm maps its own keys to it)."""

    capacity: int  # transitions kept per policy id; the oldest are overwritten
    learning_starts: int  # sampled env steps before the first gradient step
    target_update_freq: int  # sampled env steps between target network syncs
    min_steps_per_iteration: int  # sampled env steps per training step, at least
    training_intensity: Optional[float] = None  # gradient steps per sampled step (x train_batch_size); None: one per round
    store_buffer_in_checkpoints: bool = False
    tau: float = 1.0  # each target sync: target = tau * online + (1 - tau) * target; 1.0 copies (a hard update)

    def __post_init__(self) -> None:
        if not 0.0 < self.tau <= 1.0:
            raise ConfigError(f"tau: must be in (0, 1], but got {self.tau!r}")


class OffPolicyAlgorithm(Algorithm):
    """Replay: sample rounds into one buffer per policy, sync target networks when due, learn on replayed minibatches.

    One training step repeats, until ``min_sample_timesteps_per_iteration``
    env steps were sampled: sample one round, add it to the buffers, and
    once ``learning_starts`` steps exist, sync the targets every
    ``target_network_update_freq`` steps (by ``tau``: a copy at 1.0, a
    polyak step below) and take ``training_intensity``
    gradient steps per sampled step (x ``train_batch_size``; one per round
    without it). Those numbers are the :class:`ReplaySettings` a subclass
    maps from its own config keys (:meth:`replay_settings`).
    """

    learner_class: ClassVar[type[OffPolicyLearner]] = OffPolicyLearner

    def __init__(self, cfg: TrainerSettings, policies: dict[str, Policy], source: SampleSource, rng: np.random.Generator) -> None:
        super().__init__(cfg, policies, source, rng)
        self.replay = self.replay_settings()
        self.buffers = {pid: ReplayBuffer(self.replay.capacity) for pid in self.learners}
        self.last_target_update = 0
        self.num_target_updates = 0
        self.num_grad_steps = 0
        self._grad_step_debt = 0.0

    def add_policy(self, policy_id: str, policy: Policy) -> None:
        super().add_policy(policy_id, policy)
        self.buffers[policy_id] = ReplayBuffer(self.replay.capacity)

    def remove_policy(self, policy_id: str) -> None:
        super().remove_policy(policy_id)
        self.buffers.pop(policy_id, None)

    def replay_settings(self) -> ReplaySettings:
        """The replay, target-sync and sampling numbers of this algorithm, from ``self.cfg``."""
        raise NotImplementedError

    def training_step(self, timesteps_total: int) -> StepOutcome:
        outcome = StepOutcome()
        stats: dict[str, dict[str, float]] = {pid: {} for pid in self.learners}
        while True:
            sample = self.source.sample(1)
            outcome.env_steps += sample.env_steps
            outcome.agent_steps += sample.agent_steps or sample.env_steps
            outcome.episodes.extend(sample.episodes)
            for pid, batch in self.batches_to_learn(sample).items():
                self.buffers[pid].add(batch)
            sampled = timesteps_total + outcome.env_steps
            if sampled >= self.replay.learning_starts and any(len(b) for b in self.buffers.values()):
                self._learn_round(sampled, sample.env_steps, stats)
            self.source.sync_weights({"timestep": sampled})
            if outcome.env_steps >= self.replay.min_steps_per_iteration:
                break
        outcome.learner_info = {
            pid: {**pid_stats, **self.round_stats(pid)} for pid, pid_stats in stats.items() if pid in self.learners
        }
        return outcome

    def _learn_round(self, sampled: int, new_steps: int, stats: dict[str, dict[str, float]]) -> None:
        if sampled - self.last_target_update >= self.replay.target_update_freq:
            for learner in self.learners.values():
                learner.sync_target(self.replay.tau)  # type: ignore[attr-defined]
            self.last_target_update = sampled
            self.num_target_updates += 1
        num_steps = self._grad_steps_for(new_steps)
        if num_steps:
            for pid in self.learners:
                if len(self.buffers[pid]):
                    stats[pid] = self._updates(num_steps, pid, timestep=sampled)

    def _grad_steps_for(self, sampled_steps: int) -> int:
        if self.replay.training_intensity is None:
            return 1
        # Carry the fractional part over, so the long-run ratio is exact.
        self._grad_step_debt += self.replay.training_intensity * sampled_steps / self.cfg.train_batch_size
        steps = int(self._grad_step_debt)
        self._grad_step_debt -= steps
        return steps

    def _updates(self, num_steps: int, policy_id: str = DEFAULT_POLICY_ID, *, timestep: int = 0) -> dict[str, float]:
        """``num_steps`` gradient steps of one policy, each on its own replay minibatch; stats of the last draw.

        The target network is fixed between syncs, so the steps of one round
        share a draw: their minibatches are drawn together (uniform, with
        replacement, as one at a time) and the learner may share work across
        them (``update`` gets ``n x train_batch_size`` rows). At most
        :data:`MAX_STEPS_PER_DRAW` steps share a draw, which bounds the memory
        of large observations.
        """
        stats: dict[str, float] = {}
        size = self.cfg.train_batch_size
        for start in range(0, num_steps, MAX_STEPS_PER_DRAW):
            n = min(MAX_STEPS_PER_DRAW, num_steps - start)
            batch = self.buffers[policy_id].sample(n * size, self.rng)
            stats = self.learners[policy_id].update(batch, timestep=timestep)
            self.num_grad_steps += n
        return stats

    def round_stats(self, policy_id: str) -> dict[str, float]:
        """Stats of a policy reported with every result besides its learner's."""
        return {
            "num_grad_steps": self.num_grad_steps,
            "num_target_updates": self.num_target_updates,
            "replay_buffer_size": len(self.buffers[policy_id]),
        }

    # -- checkpoints -------------------------------------------------------------------
    def get_extra_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        values = {
            "last_target_update": self.last_target_update,
            "num_target_updates": self.num_target_updates,
            "num_grad_steps": self.num_grad_steps,
            "grad_step_debt": self._grad_step_debt,
        }
        return values, {}

    def set_extra_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        self.last_target_update = int(values.get("last_target_update", 0))
        self.num_target_updates = int(values.get("num_target_updates", 0))
        self.num_grad_steps = int(values.get("num_grad_steps", 0))
        self._grad_step_debt = float(values.get("grad_step_debt", 0.0))

    def _array_name(self, policy_id: str) -> str:
        return "replay_buffer" if policy_id == DEFAULT_POLICY_ID else f"replay_buffer_{policy_id}"

    def checkpoint_array_names(self) -> list[str]:
        if not self.replay.store_buffer_in_checkpoints:
            return []
        return [self._array_name(pid) for pid in self.buffers]

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        if not self.replay.store_buffer_in_checkpoints:
            return {}
        return {self._array_name(pid): buffer.get_state() for pid, buffer in self.buffers.items()}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray] | None]) -> None:
        new_buffers = {}
        for pid in self.buffers:
            state = arrays.get(self._array_name(pid))
            if state is None:
                continue
            self._check_buffer_state(pid, state)
            buffer = ReplayBuffer(self.replay.capacity)
            buffer.set_state(state)
            new_buffers[pid] = buffer
        self.buffers.update(new_buffers)  # swapped in whole, after the checks: a failure leaves the old buffers

    def buffer_columns(self, policy_id: str) -> dict[str, tuple[int, ...]]:
        """The replay columns a learner trains on, with the shape of one row (checked when a buffer is restored)."""
        return {}

    def _check_buffer_state(self, policy_id: str, state: SampleBatch) -> None:
        """ValueError naming the column when saved replay rows could not train this policy."""
        if not state:
            return  # saved while empty
        name = f"{self._array_name(policy_id)}.npz"
        row_shapes = self.buffer_columns(policy_id)
        missing = sorted(set(row_shapes) - set(state))
        if missing:
            raise ValueError(f"{name} lacks the columns {missing}")
        rows = {key: len(state[key]) for key in row_shapes}
        if len(set(rows.values())) > 1:
            raise ValueError(f"{name} columns have different numbers of rows: {rows}")
        for key, shape in row_shapes.items():
            if state[key].shape[1:] != shape:
                raise ValueError(f"{name} column {key!r} has rows of shape {state[key].shape[1:]}, not {shape}")
