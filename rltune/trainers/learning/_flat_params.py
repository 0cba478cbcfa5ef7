"""A model's parameters as views into one flat tensor, so that a learner step costs one optimizer tensor.

Small RL networks make many small parameter tensors (two 64x64 MLPs with
heads: 12), and torch's optimizers and ``clip_grad_norm_`` pay a Python
overhead per tensor on every gradient step, a large share of a small
network's step (figures in benchmarks/README.md). :class:`FlatParameters` moves every parameter's data and
gradient into two flat tensors (each parameter keeps its name, shape and
module, as a view), and gives the optimizer the flat one.

Invariants the learners keep:

- Gradients accumulate into the views in place, so ``param.grad`` must never
  be set to None: call :meth:`FlatParameters.zero_grad`, never
  ``optimizer.zero_grad()`` or ``model.zero_grad()``.
- Loading weights (``load_state_dict``) copies into the views in place; the
  flat tensor sees the new values.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class FlatParameters:
    """Every trainable parameter of ``module`` as a view into :attr:`param` (and its grad into ``param.grad``).

    Frozen parameters (``requires_grad=False``) stay as they are, out of the optimizer.
    """

    def __init__(self, module: nn.Module) -> None:
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        params = [p for _, p in named]
        if not params:
            raise ValueError("the model has no trainable parameters")
        first = params[0]
        if any(p.dtype != first.dtype or p.device != first.device for p in params):
            raise ValueError("all parameters must share one dtype and device to be flattened")
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for p in params]
        self.param = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
        self.param.grad = torch.zeros_like(self.param)
        for p, data, grad in zip(params, self.views(self.param.detach()).values(), self.views(self.param.grad).values()):
            p.data = data
            p.grad = grad
        self._params = params

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each parameter's name to its view into ``flat`` (a tensor laid out as :attr:`param`).

        The model's parameters are these views of :attr:`param` (and their
        gradients of ``param.grad``); views of another tensor so laid out
        (Adam's moments, a traced copy) serve ``torch.func.functional_call``.
        """
        views: dict[str, torch.Tensor] = {}
        offset = 0
        for name, shape in zip(self.names, self.shapes):
            n = shape.numel()
            views[name] = flat[offset : offset + n].view(shape)
            offset += n
        return views

    def zero_grad(self) -> None:
        """Zero every parameter's gradient (one op; the views stay in place).

        Raises RuntimeError when a gradient was detached from the flat one
        (something set ``.grad`` to None or replaced it): the optimizer
        would no longer see the model's gradients.
        """
        grad = self.param.grad
        first = self._params[0].grad
        if grad is None or first is None or first.data_ptr() != grad.data_ptr():
            raise RuntimeError(
                "the model's gradients no longer live in the flat tensor (was optimizer.zero_grad() or "
                "model.zero_grad() called?); zero them with FlatParameters.zero_grad()"
            )
        grad.zero_()

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Scale the gradients to a global norm of at most ``max_norm``; the norm before scaling.

        The same result as ``torch.nn.utils.clip_grad_norm_(self.param, max_norm)``
        (scale ``max_norm / (norm + 1e-6)``, capped at 1). With every gradient
        in one tensor the global norm is that tensor's norm, so two ops do it,
        where torch's function groups many tensors by device and dtype first.
        """
        grad = self.param.grad
        assert grad is not None  # set in __init__; zero_grad() checks it stays
        norm = torch.linalg.vector_norm(grad)
        grad.mul_(clip_coefficient(norm, max_norm))
        return norm

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]) -> None:
        """Load a saved state into ``optimizer`` (of :attr:`param`), converting a per-parameter one first.

        Raises ValueError when a saved buffer does not have :attr:`param`'s
        shape: torch's ``load_state_dict`` would take it, and the first
        step after the restore would fail far from the cause.
        """
        state_dict = self.optimizer_state_from_per_parameter(state_dict)
        for key, value in state_dict.get("state", {}).get(0, {}).items():
            if torch.is_tensor(value) and value.dim() > 0 and value.shape != self.param.shape:
                raise ValueError(
                    f"optimizer buffer {key!r} has shape {tuple(value.shape)}, but the model has "
                    f"{self.param.numel()} parameters (a checkpoint of another model?)"
                )
        optimizer.load_state_dict(state_dict)

    def optimizer_state_from_per_parameter(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        """An optimizer state dict of one per-parameter group (older checkpoints) as one for :attr:`param`.

        Per-parameter buffers of the parameter's shape (Adam's moments) are
        concatenated in parameter order; scalars (Adam's ``step``) are taken
        from the first parameter, as every parameter stepped together. A
        state dict that is already flat is returned as it is.
        """
        groups = state_dict.get("param_groups", [])
        if len(groups) != 1 or len(groups[0].get("params", [])) != len(self._params) or len(self._params) == 1:
            return state_dict
        ids = groups[0]["params"]
        per_param = state_dict.get("state", {})
        stepped = [k for k, i in enumerate(ids) if i in per_param]
        group = {**groups[0], "params": [0]}
        if not stepped:
            return {"state": {}, "param_groups": [group]}
        # A parameter that never had a gradient (e.g. the value net with use_critic: False)
        # has no state: its moments are zeros.
        first = stepped[0]
        merged: dict[str, Any] = {}
        for key, value in per_param[ids[first]].items():
            if torch.is_tensor(value) and value.shape == self.shapes[first]:
                merged[key] = torch.cat([
                    per_param[i][key].reshape(-1) if i in per_param else torch.zeros(shape.numel(), dtype=value.dtype)
                    for i, shape in zip(ids, self.shapes)
                ])
            else:
                merged[key] = value
        return {"state": {0: merged}, "param_groups": [group]}


def clip_coefficient(norm: torch.Tensor, max_norm: float) -> torch.Tensor:
    """The factor that scales gradients of global norm ``norm`` to at most ``max_norm`` (torch's rule)."""
    return (max_norm / (norm + 1e-6)).clamp(max=1.0)
