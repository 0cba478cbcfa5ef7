"""Learner: the optimizer and the update step of one policy.

A :class:`Learner` owns the optimizer over its policy's parameters (one flat
tensor, :class:`FlatParameters`), the gradient step (eager or compiled, see
``_sgd_step.py``: algorithm code never branches on which), global-norm
clipping and the learning-rate schedule. An algorithm subclasses it with
its loss and :meth:`Learner.update`, which turns a training batch into
gradient steps and returns the learner stats.

Invariants: ``update`` changes the policy's model in place, and the base
bumps the policy's ``weights_version`` after every ``update`` of every
subclass (no algorithm calls it) and adds ``num_nonfinite_updates`` (the
gradient steps skipped so far for a non-finite loss or gradient norm) to
its stats; ``get_state``/``set_state`` round-trip everything a checkpoint
needs besides the policy weights.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar, Hashable, Optional

import numpy as np
import torch
from torch import nn

from rltune.trainers._config import TrainerSettings, schedule_value
from rltune.trainers.learning._flat_params import FlatParameters
from rltune.trainers.policies._models import make_adam
from rltune.trainers.policies._policy import Policy
from rltune.trainers.sampling._sample_batch import SampleBatch
from rltune.trainers.learning._sgd_step import LossFn, make_sgd_step


class Learner:
    """Optimizer and update step of one policy; subclasses give :meth:`loss` and :meth:`update`.

    ``rng`` is the trainer's generator (minibatch shuffling, replay draws), so
    a seeded trainer trains the same way in every run.
    """

    adam_eps: ClassVar[float] = 1e-8  # torch's default

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "update" in cls.__dict__:
            cls.update = _bumps_weights_version(cls.__dict__["update"])  # type: ignore[method-assign]

    def __init__(self, policy: Policy, cfg: TrainerSettings, rng: np.random.Generator) -> None:
        self.policy = policy
        self.cfg = cfg
        self.rng = rng
        self.flat_params = FlatParameters(policy.model)
        self.optimizer = make_adam([self.flat_params.param], lr=cfg.lr, eps=self.adam_eps)
        self.sgd_step = make_sgd_step(
            cfg, policy.model, self.flat_params, self.optimizer, self.loss_function(),
            frozen_modules=self.frozen_modules(), trace_key=self.trace_key(),
        )

    # -- to implement ----------------------------------------------------------------
    def loss(self, model_fn: Callable[..., Any], *tensors: torch.Tensor, with_stats: bool) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The loss of one minibatch as ``_sgd_step.LossFn`` describes it, and its stats when asked."""
        raise NotImplementedError

    def update(self, batch: SampleBatch, *, timestep: int = 0) -> dict[str, float]:
        """Gradient steps on ``batch`` (the trainer has sampled ``timestep`` env steps); return the learner stats."""
        raise NotImplementedError

    def loss_function(self) -> LossFn:
        """The loss the gradient step runs (default :meth:`loss`)."""
        return self.loss

    def frozen_modules(self) -> Optional[dict[str, nn.Module]]:
        """Modules the loss reads but does not train (e.g. a target network), by keyword name."""
        return None

    def trace_key(self) -> Optional[Callable[[], Hashable]]:
        """The Python values the loss branches on (a compiled step is traced once per value)."""
        return None

    def get_extra_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """State beyond the optimizer's: (JSON-able values, tensors)."""
        return {}, {}

    def set_extra_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        """Restore what :meth:`get_extra_state` returned (keys may be missing in older checkpoints)."""

    # -- shared ----------------------------------------------------------------------
    @property
    def num_nonfinite_updates(self) -> int:
        """Gradient steps skipped so far (never applied) because their loss or gradient norm was not finite."""
        return self.sgd_step.num_nonfinite_steps

    def apply_lr(self, timestep: int) -> float:
        """Set the optimizer's learning rate for ``timestep`` (``lr_schedule``) and return it."""
        lr = schedule_value(self.cfg.lr_schedule, self.cfg.lr, timestep)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def step_scalars(self, *values: float) -> tuple[Any, ...]:
        """Values that change between updates, as the gradient step takes them.

        A compiled step takes them as tensors (a float would be traced as a
        constant and recompiled); eager ops are cheaper on floats.
        """
        if not self.sgd_step.compiled:
            return values
        device = self.flat_params.param.device
        return tuple(torch.tensor(v, dtype=torch.float32, device=device) for v in values)

    def get_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Everything to checkpoint: (JSON-able values, tensors incl. ``optimizer``)."""
        values, tensors = self.get_extra_state()
        return values, {"optimizer": self.optimizer.state_dict(), **tensors}

    def set_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self.set_extra_state(values, tensors)
        if "optimizer" in tensors:
            self.flat_params.load_optimizer_state(self.optimizer, tensors["optimizer"])


def _bumps_weights_version(update: Callable[..., dict[str, float]]) -> Callable[..., dict[str, float]]:
    """``update`` followed by a bump of the policy's ``weights_version`` (its steps changed the weights in place).

    Its stats get ``num_nonfinite_updates``.
    """

    @functools.wraps(update)
    def wrapper(self: Learner, *args: Any, **kwargs: Any) -> dict[str, float]:
        try:
            stats = update(self, *args, **kwargs)
        finally:
            self.policy.weights_changed()
        if isinstance(stats, dict):
            stats["num_nonfinite_updates"] = self.num_nonfinite_updates
        return stats

    return wrapper
