"""A learner's named optimizers: what each one is (:class:`OptimizerSpec`), building them, and the eager step over several.

A learner names its optimizers (``Learner.optimizer_specs``): each has its
parameters, any ``torch.optim`` class with its own arguments, a learning rate
and its schedule, and its own gradient clipping. One optimizer over the
whole model (PPO's and DQN's Adam) runs on the flat-parameter step of
``_sgd_step.py`` (eager or compiled); any other set runs on
:class:`OptimizerStep`, eager:

- the loss function returns one loss per optimizer name (or one loss for
  all of them), computed on the weights before any optimizer steps;
- each optimizer's gradients are those of its own loss with respect to its
  own parameters (``torch.autograd.grad``), so an actor loss that reads the
  critic puts no gradient into the critic's optimizer;
- each optimizer clips its gradients to its ``grad_clip`` (global norm over
  its parameters) and steps; one whose loss or gradient norm is not finite
  is skipped (its parameters and state stay as they were) and counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import torch
from torch import nn

from rltune.errors import ConfigError
from rltune.trainers.policies._models import make_adam

DEFAULT_OPTIMIZER = "default"  # the name of the single optimizer of a learner that names none

LossFn = Callable[..., tuple[Any, Optional[torch.Tensor]]]


@dataclass(frozen=True, kw_only=True)
class OptimizerSpec:
    """One named optimizer of a learner: its parameters, ``torch.optim`` class, learning rate, schedule and clipping.

    ``params`` None stands for every trainable parameter of the policy's
    model (a learner whose only optimizer is that runs on the flat,
    compilable step). ``options`` are the class's other arguments
    (``eps``, ``betas``, ``momentum``, ...). ``lr_schedule`` is a
    piecewise-linear ``[[timestep, lr], ...]`` that overrides ``lr``;
    ``grad_clip`` the largest global gradient norm of this optimizer's
    parameters (None: no clipping).
    """

    lr: float
    params: Optional[Sequence[torch.Tensor]] = None
    optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam
    options: Mapping[str, Any] = field(default_factory=dict)
    lr_schedule: Optional[Sequence[tuple[int, float]]] = None
    grad_clip: Optional[float] = None

    def problems(self, name: str) -> list[str]:
        """What is wrong with this spec, each naming the optimizer (empty when it is valid)."""
        out = []
        if not isinstance(self.optimizer_class, type) or not issubclass(self.optimizer_class, torch.optim.Optimizer):
            out.append(f"optimizers.{name}.optimizer_class: must be a torch.optim.Optimizer subclass, but got {self.optimizer_class!r}")
        if not _positive(self.lr):
            out.append(f"optimizers.{name}.lr: must be a finite number > 0, but got {self.lr!r}")
        if self.grad_clip is not None and not _positive(self.grad_clip):
            out.append(f"optimizers.{name}.grad_clip: must be a finite number > 0 or None, but got {self.grad_clip!r}")
        if self.lr_schedule is not None:
            steps = [p[0] for p in self.lr_schedule]
            if not steps or steps != sorted(steps) or not all(p[1] == 0 or _positive(p[1]) for p in self.lr_schedule):
                out.append(f"optimizers.{name}.lr_schedule: must be [[timestep, lr >= 0], ...] with increasing "
                           f"timesteps, but got {self.lr_schedule!r}")
        if self.params is not None:
            params = list(self.params)
            if not params:
                out.append(f"optimizers.{name}.params: is empty")
            elif not all(isinstance(p, torch.Tensor) and p.is_leaf and p.requires_grad for p in params):
                out.append(f"optimizers.{name}.params: must be leaf tensors that require grad (e.g. module.parameters())")
        return out


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def resolve_params(specs: Mapping[str, OptimizerSpec], model: nn.Module, *, where: str) -> dict[str, list[torch.Tensor]]:
    """Each optimizer's parameters (``params`` None: the model's trainable ones); ConfigError listing every problem.

    A parameter may belong to one optimizer only (two would step it twice
    on one loss).
    """
    problems: list[str] = []
    if not isinstance(specs, Mapping) or not specs:
        raise ConfigError("must return a non-empty dict of optimizer names to OptimizerSpec", where=where)
    for name, spec in specs.items():
        if not isinstance(name, str) or not isinstance(spec, OptimizerSpec):
            problems.append(f"optimizers.{name}: must be a str name mapped to an OptimizerSpec, but got {type(spec).__name__}")
        else:
            problems.extend(spec.problems(name))
    if problems:
        raise ConfigError(problems, where=where)
    params = {
        name: list(spec.params) if spec.params is not None else [p for p in model.parameters() if p.requires_grad]
        for name, spec in specs.items()
    }
    owner: dict[int, str] = {}
    for name, group in params.items():
        if not group:
            problems.append(f"optimizers.{name}.params: the model has no trainable parameters")
        for p in group:
            first = owner.setdefault(id(p), name)
            if first != name:
                problems.append(f"optimizers.{name}.params: a parameter of optimizer {first!r} too (each belongs to one)")
                break
    if problems:
        raise ConfigError(problems, where=where)
    return params


def build_optimizer(name: str, spec: OptimizerSpec, params: list[torch.Tensor], *, where: str) -> torch.optim.Optimizer:
    """``spec``'s optimizer over ``params`` (plain Adam with the fused kernel where torch has one); ConfigError on bad options."""
    options = dict(spec.options)
    try:
        if spec.optimizer_class is torch.optim.Adam and "fused" not in options and "foreach" not in options:
            return make_adam(params, lr=spec.lr, **options)
        return spec.optimizer_class(params, lr=spec.lr, **options)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ConfigError(
            f"optimizers.{name}: {spec.optimizer_class.__name__}(lr={spec.lr!r}, **{options!r}) failed: {exc}", where=where
        ) from None


def check_state_fits(optimizer: torch.optim.Optimizer, state_dict: Mapping[str, Any], name: str) -> None:
    """ValueError when a saved optimizer state has buffers of other shapes than ``optimizer``'s parameters.

    torch's ``load_state_dict`` checks the number of parameters only; a
    buffer of another shape would fail the first step after a restore, far
    from the cause.
    """
    params = [p for group in optimizer.param_groups for p in group["params"]]
    saved_ids = [i for group in state_dict.get("param_groups", []) for i in group.get("params", [])]
    for param, saved_id in zip(params, saved_ids):
        for key, value in state_dict.get("state", {}).get(saved_id, {}).items():
            if torch.is_tensor(value) and value.dim() > 0 and value.shape != param.shape:
                raise ValueError(
                    f"optimizer {name!r}: buffer {key!r} has shape {tuple(value.shape)}, but its parameter has "
                    f"{tuple(param.shape)} (a checkpoint of another model?)"
                )


class OptimizerStep:
    """The eager step of a learner with named optimizers other than one over the flat model (module docstring).

    Called as ``_sgd_step.SGDStep`` is: ``step(*tensors, with_stats)`` runs
    ``loss_fn(model, *tensors, with_stats=..., **frozen_modules)``, which
    returns ``(losses, stats)`` with ``losses`` a tensor (one loss for every
    optimizer) or a dict of losses by optimizer name (an optimizer without
    one does not step this time), and returns ``(stats, grad_norm)``:
    ``grad_norm`` is the global norm of every stepped optimizer's gradients
    before clipping, and :attr:`last_grad_norms` holds each one's.
    """

    compiled = False

    def __init__(
        self,
        model: nn.Module,
        optimizers: dict[str, torch.optim.Optimizer],
        params: dict[str, list[torch.Tensor]],
        grad_clips: dict[str, Optional[float]],
        loss_fn: LossFn,
        *,
        frozen_modules: Optional[dict[str, nn.Module]] = None,
    ) -> None:
        self.model = model
        self.optimizers = optimizers
        self.params = params
        self.grad_clips = grad_clips
        self.loss_fn = loss_fn
        self.frozen_modules = dict(frozen_modules or {})
        self.num_nonfinite_steps = 0  # optimizer steps skipped for a non-finite loss or gradient norm
        self.last_grad_norms: dict[str, torch.Tensor] = {}

    def __call__(self, *tensors: torch.Tensor, with_stats: bool = True) -> tuple[Optional[torch.Tensor], torch.Tensor]:
        losses, stats = self.loss_fn(self.model, *tensors, with_stats=with_stats, **self.frozen_modules)
        return stats, self.apply(losses)

    def apply(self, losses: torch.Tensor | Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Gradients of each optimizer's loss for its own parameters, then each optimizer's clip and step.

        Every gradient is taken before any optimizer steps (a step changes
        parameters the other losses were computed from). Returns the global
        gradient norm before clipping over the optimizers that had a loss.
        """
        if isinstance(losses, torch.Tensor):
            losses = dict.fromkeys(self.optimizers, losses)
        unknown = sorted(set(losses) - set(self.optimizers))
        if unknown:
            raise ValueError(f"losses for optimizers {unknown} the learner does not have (it has {sorted(self.optimizers)})")
        grads = self._gradients(losses)
        norms = {}
        for name, optimizer in self.optimizers.items():
            if name not in losses:
                continue
            params = self.params[name]
            for p, g in zip(params, grads[name]):
                p.grad = g
            with_grad = [p for p in params if p.grad is not None]
            clip = self.grad_clips[name]
            if not with_grad:
                norm = params[0].new_zeros(())
            elif clip:
                norm = torch.nn.utils.clip_grad_norm_(with_grad, clip)
            else:
                norm = torch.nn.utils.get_total_norm([p.grad for p in with_grad])
            norms[name] = norm
            if math.isfinite(float(losses[name].detach() + norm)):  # NaN or inf in either makes the sum non-finite
                optimizer.step()
            else:
                self.num_nonfinite_steps += 1
        self.last_grad_norms = norms
        if not norms:
            return torch.full((), float("nan"))
        return torch.linalg.vector_norm(torch.stack([n.to(torch.float32) for n in norms.values()]))

    def _gradients(self, losses: Mapping[str, torch.Tensor]) -> dict[str, list[Optional[torch.Tensor]]]:
        """Each named loss's gradients for its optimizer's parameters; one backward per distinct loss tensor."""
        by_loss: dict[int, list[str]] = {}
        for name in self.optimizers:
            if name in losses:
                by_loss.setdefault(id(losses[name]), []).append(name)
        grads: dict[str, list[Optional[torch.Tensor]]] = {}
        for i, names in enumerate(by_loss.values()):
            loss = losses[names[0]]
            params = [p for name in names for p in self.params[name]]
            if loss.requires_grad:
                flat = list(torch.autograd.grad(loss, params, retain_graph=i < len(by_loss) - 1, allow_unused=True))
            else:
                flat = [None] * len(params)
            for name in names:
                grads[name], flat = flat[: len(self.params[name])], flat[len(self.params[name]) :]
        return grads
