"""One gradient step of a learner: loss, gradients, global-norm clipping and Adam, eager or compiled.

An algorithm writes its loss once, as ``loss_fn(model_fn, *tensors, with_stats)
-> (loss, stats)``, where ``model_fn(obs)`` runs the policy's model and
``stats`` is a 1-D tensor of the learner stats it reports (or None when
``with_stats`` is False). :class:`SGDStep` turns that into a step:

- eager (the default): ``model_fn`` is the module itself, then
  ``loss.backward()``, :meth:`FlatParameters.clip_grad_norm_` and
  ``optimizer.step()``. It starts at once; each step costs one dispatch per
  op (~100 small ops for PPO's two MLPs).
- compiled (``torch_compile_learner``): the same ``loss_fn`` under
  ``torch.func.grad_and_value`` over views of the flat parameter tensor, the
  clipping, and torch's functional Adam (the function ``Adam.step`` runs)
  form one function that ``torch.compile`` turns into a few fused kernels
  and the matmuls. It costs a compile on the first step (seconds, more with a
  cold inductor cache) and then runs each step at close to kernel speed:
  worth it from runs of a minute or so.

Invariants: both modes read and write the same ``optimizer.state`` (Adam's
moments and step count) and update the parameters in place, so checkpoints
are the same and a trainer restored in the other mode continues exactly.
Tensors passed to a step that change between calls (learning rate, clip
range, coefficients of a schedule) must be tensors, never Python floats, or
a compiled step would be recompiled for every new value.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import nn
from torch.optim.adam import adam as functional_adam

from rltune.errors import ConfigError
from rltune.trainers._config import TrainerConfig
from rltune.trainers._flat_params import FlatParameters, clip_coefficient

LossFn = Callable[..., tuple[torch.Tensor, Optional[torch.Tensor]]]


class SGDStep:
    """Runs ``loss_fn`` and one Adam step on ``flat_params``; eager, or compiled with ``compile_backend``.

    ``optimizer`` must be a ``torch.optim.Adam`` over ``flat_params.param`` alone
    (one group). Calling the step returns ``(stats, grad_norm)``: the loss
    function's stats (None when it returned none) and the global gradient norm
    before clipping (NaN without ``grad_clip``).
    """

    def __init__(
        self,
        model: nn.Module,
        flat_params: FlatParameters,
        optimizer: torch.optim.Adam,
        loss_fn: LossFn,
        *,
        grad_clip: Optional[float],
        compile_backend: Optional[str] = None,
        compile_mode: Optional[str] = None,
    ) -> None:
        if len(optimizer.param_groups) != 1 or optimizer.param_groups[0]["params"] != [flat_params.param]:
            raise ValueError("SGDStep needs an Adam optimizer over the flat parameter tensor alone")
        self.model = model
        self.flat_params = flat_params
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.grad_clip = grad_clip
        self.compile_backend = compile_backend
        self._nan = torch.full((), float("nan"), device=flat_params.param.device)
        self._compiled: Any = None
        self._compile_checked = False
        if compile_backend is not None:
            _check_backend(compile_backend)
            self._lr = torch.zeros((), device=flat_params.param.device)
            self._compiled = torch.compile(
                self._functional_step, backend=compile_backend, mode=compile_mode, options=_inductor_options(compile_backend, compile_mode)
            )

    @property
    def compiled(self) -> bool:
        """Whether steps run as one compiled function."""
        return self._compiled is not None

    def __call__(self, *tensors: torch.Tensor, with_stats: bool = True) -> tuple[Optional[torch.Tensor], torch.Tensor]:
        if self._compiled is None:
            return self._eager_step(tensors, with_stats)
        # The compiled step always computes its stats: in fused kernels they cost next to nothing,
        # and one graph serves every call.
        self._lr.fill_(self.optimizer.param_groups[0]["lr"])
        state = self._adam_state()
        args = (self.flat_params.param.detach(), state["exp_avg"], state["exp_avg_sq"], state["step"], self._lr, *tensors)
        if self._compile_checked:
            return self._compiled(*args)
        try:  # the first call compiles
            result = self._compiled(*args)
        except Exception as exc:
            # torch wraps a backend's error (BackendCompilerFailed); name the one that says what went wrong.
            cause = getattr(exc, "inner_exception", None) or exc
            first_line = (str(cause).strip().splitlines() or [""])[0]
            raise ConfigError(
                f"torch_compile_learner: torch.compile with backend {self.compile_backend!r} failed on the first "
                f"learner step: {type(cause).__name__}: {first_line} (the 'inductor' backend needs a C++ compiler; "
                "set torch_compile_learner: False to train eagerly)"
            ) from exc
        self._compile_checked = True
        return result

    # -- eager ----------------------------------------------------------------------------
    def _eager_step(self, tensors: tuple[torch.Tensor, ...], with_stats: bool) -> tuple[Optional[torch.Tensor], torch.Tensor]:
        loss, stats = self.loss_fn(self.model, *tensors, with_stats=with_stats)
        self.flat_params.zero_grad()
        loss.backward()
        grad_norm = self.flat_params.clip_grad_norm_(self.grad_clip) if self.grad_clip else self._nan
        self.optimizer.step()
        return stats, grad_norm

    # -- compiled -------------------------------------------------------------------------
    def _adam_state(self) -> dict[str, torch.Tensor]:
        """Adam's state of the flat parameter, created as ``Adam.step`` would on its first call."""
        param = self.flat_params.param
        state = self.optimizer.state[param]
        if not state:
            # Fused Adam keeps its step count as a float32 tensor on the parameter's device.
            state["step"] = torch.zeros((), dtype=torch.float32, device=param.device)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        return state

    def _functional_step(
        self,
        flat: torch.Tensor,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        step: torch.Tensor,
        lr: torch.Tensor,
        *tensors: torch.Tensor,
    ) -> tuple[Optional[torch.Tensor], torch.Tensor]:
        """The traced step: gradients by torch.func, clipping, then torch's Adam, updating ``flat`` in place."""

        def loss_of(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
            return self.loss_fn(lambda obs: torch.func.functional_call(self.model, params, (obs,)), *tensors, with_stats=True)

        # Gradients are taken per parameter and concatenated: inductor writes each into its slice
        # of the flat gradient, where the gradient of the flat tensor itself would be assembled
        # from per-parameter slices by masked kernels, several times the work.
        params = self.flat_params.views(flat)
        grads, (_loss, stats) = torch.func.grad_and_value(loss_of, has_aux=True)(params)
        grad = torch.cat([grads[name].reshape(-1) for name in params])
        if self.grad_clip:
            grad_norm = torch.linalg.vector_norm(grad)
            grad = grad * clip_coefficient(grad_norm, self.grad_clip)
        else:
            grad_norm = self._nan
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        with torch.no_grad():
            functional_adam(
                [flat], [grad], [exp_avg], [exp_avg_sq], [], [step],
                foreach=False, capturable=flat.device.type != "cpu", differentiable=False, fused=None,
                grad_scale=None, found_inf=None, has_complex=False,
                amsgrad=False, beta1=beta1, beta2=beta2, lr=lr, weight_decay=group["weight_decay"],
                eps=group["eps"], maximize=group["maximize"],
            )
        return stats, grad_norm


def _inductor_options(backend: str, mode: Optional[str]) -> Optional[dict[str, Any]]:
    """Inductor settings for small RL networks on the CPU (None for other backends or an explicit mode).

    ``cpp.use_decompose_tanh`` computes tanh as ``2 / (1 + exp(-2x)) - 1``:
    inductor's vectorized tanh took ~45 us on a 256x64 tensor here against
    ~17 us for the exp form, ~15% of a compiled PPO step with 64x64 tanh MLPs;
    the result differs from tanh by about 1e-7 (off by default in torch
    for exact-match tests, not for training).
    """
    if backend != "inductor" or mode is not None:  # torch.compile takes a mode or options, not both
        return None
    return {"cpp.use_decompose_tanh": True}


def _check_backend(backend: str) -> None:
    """ConfigError naming the closest backend when torch.compile has no backend of that name."""
    import difflib

    import torch._dynamo

    backends = torch._dynamo.list_backends(exclude_tags=())
    if backend not in backends:
        close = difflib.get_close_matches(backend, backends, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; torch.compile has {backends}"
        raise ConfigError(f"torch_compile_learner_dynamo_backend: unknown backend {backend!r}{hint}")


def make_sgd_step(
    cfg: TrainerConfig, model: nn.Module, flat_params: FlatParameters, optimizer: torch.optim.Adam, loss_fn: LossFn
) -> SGDStep:
    """The learner step a trainer config asks for: compiled with ``torch_compile_learner``, else eager."""
    return SGDStep(
        model,
        flat_params,
        optimizer,
        loss_fn,
        grad_clip=cfg.grad_clip,
        compile_backend=cfg.torch_compile_learner_dynamo_backend if cfg.torch_compile_learner else None,
        compile_mode=cfg.torch_compile_learner_dynamo_mode,
    )
