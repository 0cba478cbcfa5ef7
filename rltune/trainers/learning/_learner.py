"""Learner: the named optimizers and the update step of one policy.

A :class:`Learner` owns its policy's optimizers, by name
(:meth:`Learner.optimizer_specs`: any ``torch.optim`` class, each with its
parameters, learning rate and schedule, and gradient clipping), and the
gradient step over them. An algorithm subclasses it with its loss and
:meth:`Learner.update`, which turns a training batch into gradient steps
and returns the learner stats.

Two steps serve one contract (``step(*tensors, with_stats) -> (stats,
grad_norm)``, algorithm code never branches on which):

- one optimizer over every parameter of the model (the default: Adam over
  ``lr``, ``lr_schedule``, ``grad_clip``, PPO's and DQN's) runs on the flat
  parameter tensor (:class:`FlatParameters`), eager or compiled
  (``_sgd_step.py``): the accelerator;
- any other set of optimizers (an actor and a critic, a temperature, ...)
  runs on the eager :class:`~rltune.trainers.learning._optimizers.OptimizerStep`:
  the loss returns a loss per optimizer name, each optimizer gets the
  gradients of its own loss, clips them and steps.

Invariants: ``update`` changes the policy's model in place, and the base
bumps the policy's ``weights_version`` after every ``update`` of every
subclass (no algorithm calls it) and adds ``num_nonfinite_updates`` (the
optimizer steps skipped so far for a non-finite loss or gradient norm) to
its stats; ``get_state``/``set_state`` round-trip everything a checkpoint
needs besides the policy weights, every optimizer's state by its name
(``optimizers.<name>``; a checkpoint written before names, with one
``optimizer`` entry, restores the learner's single optimizer).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar, Hashable, Mapping, Optional, Union

import numpy as np
import torch
from torch import nn

from rltune.trainers._config import TrainerSettings, schedule_value
from rltune.trainers.learning._flat_params import FlatParameters
from rltune.trainers.learning._optimizers import (
    DEFAULT_OPTIMIZER,
    OptimizerSpec,
    OptimizerStep,
    build_optimizer,
    check_state_fits,
    resolve_params,
)
from rltune.trainers.policies._policy import Policy
from rltune.trainers.sampling._sample_batch import SampleBatch
from rltune.trainers.learning._sgd_step import LossFn, SGDStep, make_sgd_step


class Learner:
    """Named optimizers and update step of one policy; subclasses give :meth:`loss` and :meth:`update`.

    ``rng`` is the trainer's generator (minibatch shuffling, replay draws), so
    a seeded trainer trains the same way in every run. After ``__init__``:
    :attr:`optimizers` by name, :attr:`sgd_step` the gradient step over them
    (see the module docstring), :attr:`flat_params` the flat parameters of
    the single-optimizer step (None on the other).
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
        where = f"{type(self).__name__}.optimizer_specs()"
        specs = self.optimizer_specs()
        params = resolve_params(specs, policy.model, where=where)  # checks the specs first
        self.specs: dict[str, OptimizerSpec] = dict(specs)
        self.flat_params: Optional[FlatParameters] = None
        self.optimizers: dict[str, torch.optim.Optimizer]
        self.sgd_step: Union[SGDStep, OptimizerStep]
        if len(self.specs) == 1 and next(iter(self.specs.values())).params is None:
            (name, spec), = self.specs.items()
            self.flat_params = FlatParameters(policy.model)
            self.optimizers = {name: build_optimizer(name, spec, [self.flat_params.param], where=where)}
            self.sgd_step = make_sgd_step(
                cfg, policy.model, self.flat_params, self.optimizers[name], self.loss_function(), grad_clip=spec.grad_clip,
                frozen_modules=self.frozen_modules(), trace_key=self.trace_key(),
            )
        else:
            self.optimizers = {name: build_optimizer(name, spec, params[name], where=where) for name, spec in self.specs.items()}
            self.sgd_step = OptimizerStep(
                policy.model, self.optimizers, params, {name: spec.grad_clip for name, spec in self.specs.items()},
                self.loss_function(), frozen_modules=self.frozen_modules(),
            )

    # -- to implement ----------------------------------------------------------------
    def loss(self, model_fn: Callable[..., Any], *tensors: torch.Tensor, with_stats: bool) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The loss of one minibatch as ``_sgd_step.LossFn`` describes it, and its stats when asked."""
        raise NotImplementedError

    def update(self, batch: SampleBatch, *, timestep: int = 0) -> dict[str, float]:
        """Gradient steps on ``batch`` (the trainer has sampled ``timestep`` env steps); return the learner stats."""
        raise NotImplementedError

    def optimizer_specs(self) -> Mapping[str, OptimizerSpec]:
        """The learner's optimizers by name (called once, in ``__init__``, before :attr:`optimizers` exist).

        Default: one Adam (``eps`` :attr:`adam_eps`) named ``"default"``
        over the whole model, with the config's ``lr``, ``lr_schedule`` and
        ``grad_clip``: the flat, compilable step. Parameters the learner
        owns besides the model's (a SAC temperature) are created before
        ``super().__init__`` and named in a spec's ``params``.
        """
        cfg = self.cfg
        return {DEFAULT_OPTIMIZER: OptimizerSpec(
            lr=cfg.lr, lr_schedule=cfg.lr_schedule, grad_clip=cfg.grad_clip, options={"eps": self.adam_eps},
        )}

    def loss_function(self) -> LossFn:
        """The loss the gradient step runs (default :meth:`loss`).

        On the single-optimizer step it returns one loss; with several
        optimizers a loss per optimizer name (or one for all), see
        :class:`~rltune.trainers.learning._optimizers.OptimizerStep`.
        """
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
    def optimizer(self) -> torch.optim.Optimizer:
        """The learner's optimizer when it has one (with several: see :attr:`optimizers`)."""
        if len(self.optimizers) != 1:
            raise AttributeError(f"{type(self).__name__} has {len(self.optimizers)} optimizers: use .optimizers[name], "
                                 f"name in {sorted(self.optimizers)}")
        return next(iter(self.optimizers.values()))

    @property
    def num_nonfinite_updates(self) -> int:
        """Optimizer steps skipped so far (never applied) because their loss or gradient norm was not finite."""
        return self.sgd_step.num_nonfinite_steps

    def apply_lr(self, timestep: int) -> float:
        """Set each optimizer's learning rate for ``timestep`` (its ``lr_schedule``); return the first optimizer's."""
        lrs = self.learning_rates(timestep)
        for name, lr in lrs.items():
            for group in self.optimizers[name].param_groups:
                group["lr"] = lr
        return next(iter(lrs.values()))

    def learning_rates(self, timestep: int) -> dict[str, float]:
        """Each optimizer's learning rate at ``timestep`` by name (its ``lr``, or its ``lr_schedule``'s value)."""
        return {name: schedule_value(spec.lr_schedule, spec.lr, timestep) for name, spec in self.specs.items()}  # type: ignore[arg-type]

    def step_scalars(self, *values: float) -> tuple[Any, ...]:
        """Values that change between updates, as the gradient step takes them.

        A compiled step takes them as tensors (a float would be traced as a
        constant and recompiled); eager ops are cheaper on floats.
        """
        if not self.sgd_step.compiled:
            return values
        device = self.policy.device
        return tuple(torch.tensor(v, dtype=torch.float32, device=device) for v in values)

    def get_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Everything to checkpoint: (JSON-able values, tensors incl. ``optimizers``, each optimizer's state by name)."""
        values, tensors = self.get_extra_state()
        return values, {"optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()}, **tensors}

    def set_state(self, values: dict[str, Any], tensors: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (or a checkpoint's single ``optimizer`` entry from before names).

        Raises ValueError when the saved optimizers are not this learner's
        (other names, parameters of other shapes); an optimizer the
        checkpoint lacks keeps its fresh state.
        """
        self.set_extra_state(values, tensors)
        saved = tensors.get("optimizers")
        if saved is None and "optimizer" in tensors:
            if len(self.optimizers) != 1:
                raise ValueError(f"the checkpoint holds one optimizer; this learner has {sorted(self.optimizers)}")
            saved = {next(iter(self.optimizers)): tensors["optimizer"]}
        if saved is None:
            return
        if not isinstance(saved, Mapping):
            raise ValueError(f"'optimizers' must map optimizer names to their states, but is a {type(saved).__name__}")
        unknown = sorted(set(saved) - set(self.optimizers))
        if unknown:
            raise ValueError(f"the checkpoint holds optimizers {unknown} this learner does not have ({sorted(self.optimizers)})")
        for name, state in saved.items():
            if self.flat_params is not None:
                self.flat_params.load_optimizer_state(self.optimizers[name], state)
            else:
                check_state_fits(self.optimizers[name], state, name)
                self.optimizers[name].load_state_dict(state)


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
