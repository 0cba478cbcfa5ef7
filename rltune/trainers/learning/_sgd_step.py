"""One gradient step of a learner with one optimizer over its whole model: loss, gradients, clipping and the optimizer.

The accelerator of ``Learner``'s single-optimizer case (PPO's and DQN's
Adam): the model's parameters as one flat tensor, and, for plain Adam, the
whole step compiled. A learner with other optimizers steps eagerly through
``_optimizers.OptimizerStep`` instead, with the same calling convention.

An algorithm writes its loss once, as ``loss_fn(model_fn, *tensors, with_stats)
-> (loss, stats)``, where ``model_fn(obs)`` runs the policy's model and
``stats`` is a 1-D tensor of the learner stats it reports (or None when
``with_stats`` is False). :class:`SGDStep` turns that into a step:

- eager: ``model_fn`` is the module itself, then ``loss.backward()``,
  :meth:`FlatParameters.clip_grad_norm_` and ``optimizer.step()`` (any
  ``torch.optim`` class over the flat tensor). It starts at once; each step
  costs one dispatch per op (~100 small ops for PPO's two MLPs).
- compiled (``torch_compile_learner``, plain Adam only): the same ``loss_fn`` under
  ``torch.func.grad_and_value`` over views of the flat parameter tensor, the
  clipping, and Adam's update (torch's arithmetic, with the bias corrections
  computed on the host) form one function, ``SGDStep._functional_step``,
  compiled once per key by the ``torch.compile`` backend (inductor: a few
  fused C++ kernels around the matmuls). It is compiled with public
  ``torch.compile(fullgraph=True, dynamic=False)``, or, on the torch release
  ``_torch_compat.py`` was written for, traced by that adapter (private
  torch API, faster calls). The first step of each key pays the trace and
  the compile; inductor's on-disk cache makes a later process's compile of
  the same graph much cheaper. Later steps call the compiled code with no
  guard to check: the key stands for the guards.

Invariants: both modes read and write the same ``optimizer.state`` (Adam's
moments and step count) and update the parameters in place, so checkpoints
are the same and a trainer restored in the other mode continues exactly.
A step whose loss or global gradient norm is not finite changes nothing
(parameters, moments, step count) and is counted (``num_nonfinite_steps``):
eager, the optimizer is not called; compiled, the update is selected away
inside the graph (``torch.where`` on a finite flag), so no host sync is added.
A compiled step keeps every Python value the loss reads as a constant of
its graph: values that change between calls (learning rate aside: clip
range, coefficients of a schedule) must be passed as tensors (anything else
is a TypeError), and Python values the loss branches on must be part of
``trace_key``. The key of a call is ``trace_key()``, the optimizer's
constants and each input's shape, stride, dtype and device: a step is
compiled again for each new key. The loss must reach the model only through
``model_fn`` (a ConfigError otherwise).
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Any, Callable, Hashable, Optional

import torch
from torch import nn

from rltune.errors import ConfigError
from rltune.trainers._config import TrainerSettings
from rltune.trainers.learning import _torch_compat
from rltune.trainers.learning._compile_auto import AutoCompile, cxx_compiler, mark_compiled, step_fingerprint
from rltune.trainers.learning._flat_params import FlatParameters, clip_coefficient

logger = logging.getLogger(__name__)

LossFn = Callable[..., tuple[torch.Tensor, Optional[torch.Tensor]]]


class SGDStep:
    """Runs ``loss_fn`` and one optimizer step on ``flat_params``; eager, or compiled with ``compile_backend``.

    ``optimizer`` must be over ``flat_params.param`` alone (one group); a
    compiled step needs plain ``torch.optim.Adam`` (``auto_compile`` keeps
    any other optimizer eager). ``frozen_modules`` are modules the loss reads but does not
    train (a target network): the loss gets each as a keyword argument of that
    name, and a compiled step reads their current weights on every call.
    ``trace_key`` returns the Python values the loss branches on (which terms
    it includes): a compiled step is traced once per value (and per shape of
    the input tensors). Calling the step returns ``(stats, grad_norm)``: the
    loss function's stats (None when it returned none) and the global gradient
    norm before clipping (NaN without ``grad_clip``). A step whose loss or
    gradient norm is not finite is skipped (see the module docstring).
    """

    # Compile through the private-API adapter (faster calls) on the torch release it was written for,
    # else through public torch.compile: see _torch_compat.py.
    private_trace: bool = _torch_compat.private_trace_available()

    def __init__(
        self,
        model: nn.Module,
        flat_params: FlatParameters,
        optimizer: torch.optim.Optimizer,
        loss_fn: LossFn,
        *,
        grad_clip: Optional[float],
        frozen_modules: Optional[dict[str, nn.Module]] = None,
        trace_key: Optional[Callable[[], Hashable]] = None,
        compile_backend: Optional[str] = None,
        compile_mode: Optional[str] = None,
        auto_compile: bool = False,
    ) -> None:
        if len(optimizer.param_groups) != 1 or optimizer.param_groups[0]["params"] != [flat_params.param]:
            raise ValueError("SGDStep needs an optimizer over the flat parameter tensor alone")
        group = optimizer.param_groups[0]
        # Exactly Adam: AdamW subclasses it (with decoupled weight decay the compiled update does not do).
        plain_adam = type(optimizer) is torch.optim.Adam and not (group["amsgrad"] or group["differentiable"])
        if auto_compile and not plain_adam:
            compile_backend = None  # auto compiles only what a compiled step can run
        if compile_backend is not None and not plain_adam:
            kind = type(optimizer).__name__ + (" with amsgrad or differentiable" if type(optimizer) is torch.optim.Adam else "")
            raise ConfigError(f"torch_compile_learner: a compiled learner step runs plain Adam, this learner's optimizer "
                              f"is {kind} (set torch_compile_learner: 'auto' or False to train eagerly)")
        self.model = model
        self.flat_params = flat_params
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.grad_clip = grad_clip
        self.frozen_modules = dict(frozen_modules or {})
        self.trace_key = trace_key or (lambda: None)
        self.compile_backend = compile_backend
        self.compile_mode = compile_mode
        self._nan = torch.full((), float("nan"), device=flat_params.param.device)
        # Steps skipped for a non-finite loss or gradient norm: eager ones counted here, compiled ones in
        # the tensor (updated inside the graph, read only when asked).
        self._eager_skips = 0
        self._compiled_skips = torch.zeros((), dtype=torch.int64, device=flat_params.param.device)
        # Tensors a compiled step takes as inputs besides the flat parameters, read on every call
        # (load_state_dict copies into these same tensors, so they stay current): the model's
        # buffers (key None), and each frozen module's parameters and buffers.
        self._read_tensors: dict[Optional[str], dict[str, torch.Tensor]] = {None: dict(model.named_buffers())}
        for name, module in self.frozen_modules.items():
            self._read_tensors[name] = dict(module.named_parameters()) | dict(module.named_buffers())
        self._compiled_steps: dict[Hashable, Callable[..., Any]] = {}
        # auto_compile: eager until _compile_auto's rule says the run has been long enough.
        self._auto = AutoCompile() if auto_compile and compile_backend is not None else None
        self._switching = False  # compiled from now on, but the current update's scalars are still floats
        self._auto_chosen = self._auto is not None
        if compile_backend is not None:
            _check_backend(compile_backend, compile_mode)

    @property
    def num_nonfinite_steps(self) -> int:
        """Steps skipped so far because their loss or gradient norm was not finite."""
        return self._eager_skips + int(self._compiled_skips.item())

    @property
    def compiled(self) -> bool:
        """Whether steps run as compiled functions (with ``auto_compile``: from the update after the switch)."""
        return self.compile_backend is not None and self._auto is None

    def __call__(self, *tensors: torch.Tensor, with_stats: bool = True) -> tuple[Optional[torch.Tensor], torch.Tensor]:
        if not self.compiled:
            if self._auto is not None and self._auto.due(lambda: self._fingerprint(tensors)):
                logger.info("torch_compile_learner auto: compiling the learner step after %d eager SGD steps (%s compile)",
                            self._auto.steps, "warm" if self._auto.warm else "cold")
                self._auto, self._switching = None, True
            return self._eager_step(tensors, with_stats)
        if self._switching:
            if not all(isinstance(t, torch.Tensor) for t in tensors):
                return self._eager_step(tensors, with_stats)
            self._switching = False
        # The compiled step always computes its stats: in fused kernels they cost next to nothing,
        # and one graph serves every call.
        state = self._adam_state()
        args = [self.flat_params.param.detach(), state["exp_avg"], state["exp_avg_sq"], state["step"], self._next_adam_scalars(state),
                self._compiled_skips]
        for read in self._read_tensors.values():
            args.extend(read.values())
        args.extend(tensors)
        group = self.optimizer.param_groups[0]
        trace_key = self.trace_key()
        try:
            key = (
                trace_key,
                *(group[k] for k in ("betas", "eps", "weight_decay", "maximize")),  # traced as constants
                *((t.shape, t.stride(), t.dtype, t.device) for t in tensors),
            )
        except (AttributeError, TypeError):  # a float or an array has no stride(): refused below
            key = None
        step = self._compiled_steps.get(key) if key is not None else None
        if step is not None:
            return step(*args)
        try:
            if key is None or not all(isinstance(t, torch.Tensor) for t in tensors):
                kinds = [type(t).__name__ for t in tensors]
                raise TypeError(f"a compiled learner step takes tensors only (another value would be traced as a constant); got {kinds}")
            step, result = self._first_call(args, tensors)
        except (ConfigError, TypeError) as exc:
            if not self._auto_chosen:
                raise
            # auto chose to compile, the user did not: a step that does not compile trains on eagerly.
            logger.warning("torch_compile_learner auto: the learner step stays eager: %s", exc)
            self.compile_backend = None
            return self._eager_step(tensors, with_stats)
        self._compiled_steps[key] = step
        mark_compiled(self._fingerprint(tensors))
        return result

    # -- eager ----------------------------------------------------------------------------
    def _eager_step(self, tensors: tuple[torch.Tensor, ...], with_stats: bool) -> tuple[Optional[torch.Tensor], torch.Tensor]:
        loss, stats = self.loss_fn(self.model, *tensors, with_stats=with_stats, **self.frozen_modules)
        return stats, self.apply(loss)

    def apply(self, loss: torch.Tensor) -> torch.Tensor:
        """One eager optimizer step on the gradients of ``loss`` (computed by the caller), as
        ``OptimizerStep.apply``; returns the gradient norm before clipping (NaN without ``grad_clip``).

        For losses the compiled step cannot run (a recurrent model's, over padded sequences).
        """
        self.flat_params.zero_grad()
        loss.backward()
        if self.grad_clip:
            grad_norm = self.flat_params.clip_grad_norm_(self.grad_clip)
        else:
            grad_norm = torch.linalg.vector_norm(self.flat_params.param.grad)
        if math.isfinite(float(loss.detach() + grad_norm)):  # NaN or inf in either makes the sum non-finite
            self.optimizer.step()
        else:
            self._eager_skips += 1
        return grad_norm if self.grad_clip else self._nan

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

    def _next_adam_scalars(self, state: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[step_size, bias_correction2_sqrt]`` of the coming Adam step, as ``Adam.step`` computes them.

        They depend on the step count alone, so they are computed here once,
        in float64: inside the compiled step inductor would recompute them
        (two ``pow``) for every 8 elements of the update, most of a DQN step's time.
        """
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        step = state["step"].item() + 1
        step_size = group["lr"] / (1 - beta1**step)
        return torch.tensor([step_size, math.sqrt(1 - beta2**step)], device=self.flat_params.param.device)

    def _compile(self, args: list[torch.Tensor]) -> Callable[..., Any]:
        """The step compiled for these arguments' key: on the adapter's torch release its trace, else ``torch.compile``."""
        options = dict(_INDUCTOR_OPTIONS) if self.compile_backend == "inductor" and self.compile_mode is None else None
        if self.private_trace:
            try:
                graph, fake_args, fake_mode = _torch_compat.trace_fake(self._functional_step, args)
            except Exception as exc:
                raise self._trace_error(exc) from exc
            try:
                return _torch_compat.compile_graph(graph, fake_args, fake_mode, self.compile_backend, options, self.compile_mode)
            except Exception as exc:
                raise self._backend_error("compiling", exc) from exc
        # One torch.compile per key, with its own graphs (isolate_recompiles: other keys and other steps in
        # this process count neither against its recompile limit nor in its guards) and no guards: the key
        # checked in __call__ stands for them, as it does for the adapter's trace.
        options = {**(options or {}), "guard_filter_fn": torch.compiler.skip_all_guards_unsafe}
        return torch.compile(
            self._functional_step, fullgraph=True, dynamic=False, backend=self.compile_backend,
            mode=self.compile_mode, options=options, isolate_recompiles=True,
        )

    def _first_call(self, args: list[torch.Tensor], tensors: tuple[torch.Tensor, ...]) -> tuple[Callable[..., Any], tuple[Optional[torch.Tensor], torch.Tensor]]:
        """The first call for a new key: checks what the loss reads, compiles, runs; (compiled step, its result)."""
        self._check_reads_through_model_fn(tensors)
        step = self._compile(args)
        try:
            return step, step(*args)
        except Exception as exc:
            # torch.compile traces and compiles here. It wraps a backend's error (BackendCompilerFailed)
            # with the backend's own as inner_exception; another error came from tracing (or running).
            if getattr(exc, "inner_exception", None) is not None:
                raise self._backend_error("compiling", exc) from exc
            if self.private_trace:
                raise self._backend_error("running", exc) from exc
            raise self._trace_error(exc) from exc

    def _fingerprint(self, tensors: tuple[Any, ...]) -> str:
        """What names this step's compiled graph in inductor's cache (``_compile_auto``)."""
        loss = getattr(self.loss_fn, "__qualname__", type(self.loss_fn).__qualname__)
        parts = [self.compile_backend, self.compile_mode, self.private_trace, repr(self.model), loss, self.trace_key(),
                 self.grad_clip, repr(self.frozen_modules), self.flat_params.param.dtype]
        return step_fingerprint(parts, tensors)

    def _check_reads_through_model_fn(self, tensors: tuple[torch.Tensor, ...]) -> None:
        """ConfigError when the loss reads the model's parameters other than through ``model_fn``.

        A compiled step differentiates with respect to the weights it passes
        to ``model_fn``; a parameter read directly (``model[0].weight``) would
        get no gradient. One eager forward on detached weights shows it: the
        loss then still depends on the model's own parameters.
        """
        weights = self.flat_params.views(self.flat_params.param.detach().clone()) | self._read_tensors[None]
        frozen_fns = {name: functools.partial(_call_with, module, self._read_tensors[name]) for name, module in self.frozen_modules.items()}
        with torch.enable_grad():
            loss, _stats = self.loss_fn(functools.partial(_call_with, self.model, weights), *tensors, with_stats=True, **frozen_fns)
            trained = [p for p in self.model.parameters() if p.requires_grad]
            if loss.requires_grad and any(g is not None for g in torch.autograd.grad(loss, trained, allow_unused=True)):
                raise ConfigError(
                    "torch_compile_learner: the loss reads a tensor that is not an input of the step (a module's "
                    "parameter or buffer read directly: reach the model through model_fn, other modules through "
                    "frozen_modules, other values as tensor arguments)"
                )

    @staticmethod
    def _trace_error(exc: Exception) -> ConfigError:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return ConfigError(
            f"torch_compile_learner: tracing the learner step failed: {type(exc).__name__}: {first_line} "
            "(set torch_compile_learner: False to train eagerly)"
        )

    def _backend_error(self, doing: str, exc: Exception) -> ConfigError:
        cause = getattr(exc, "inner_exception", None) or exc
        first_line = (str(cause).strip().splitlines() or [""])[0]
        return ConfigError(
            f"torch_compile_learner: {doing} the learner step with backend {self.compile_backend!r} failed: "
            f"{type(cause).__name__}: {first_line} (the 'inductor' backend needs a C++ compiler; "
            "set torch_compile_learner: False to train eagerly)"
        )

    def _functional_step(
        self,
        flat: torch.Tensor,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        step: torch.Tensor,
        adam_scalars: torch.Tensor,
        skipped: torch.Tensor,
        *rest: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The traced step: gradients by torch.func, clipping, then torch's Adam, updating ``flat`` in place.

        With a non-finite loss or gradient norm the update leaves every state as it was and ``skipped`` counts it.
        """
        read: dict[Optional[str], dict[str, torch.Tensor]] = {}
        offset = 0
        for name, names in self._read_tensors.items():
            read[name] = dict(zip(names, rest[offset : offset + len(names)]))
            offset += len(names)
        tensors = rest[offset:]
        buffers = read.pop(None)
        frozen_fns = {name: functools.partial(_call_with, self.frozen_modules[name], weights) for name, weights in read.items()}

        def loss_of(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
            weights = params | buffers
            return self.loss_fn(functools.partial(_call_with, self.model, weights), *tensors, with_stats=True, **frozen_fns)

        # Gradients are taken per parameter and concatenated: inductor writes each into its slice
        # of the flat gradient, where the gradient of the flat tensor itself would be assembled
        # from per-parameter slices by masked kernels, several times the work.
        params = self.flat_params.views(flat)
        grads, (loss, stats) = torch.func.grad_and_value(loss_of, has_aux=True)(params)
        grad = torch.cat([grads[name].reshape(-1) for name in params])
        grad_norm = torch.linalg.vector_norm(grad)
        ok = torch.isfinite(loss.detach() + grad_norm)
        if self.grad_clip:
            grad = grad * clip_coefficient(grad_norm, self.grad_clip)
        else:
            grad_norm = flat.new_full((), float("nan"))
        group = self.optimizer.param_groups[0]
        with torch.no_grad():
            _adam_update(
                flat, grad, exp_avg, exp_avg_sq, step, adam_scalars, ok,
                betas=group["betas"], eps=group["eps"], weight_decay=group["weight_decay"], maximize=group["maximize"],
            )
            skipped.add_((~ok).to(skipped.dtype))
        return stats, grad_norm


def _adam_update(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: torch.Tensor,
    scalars: torch.Tensor,
    ok: torch.Tensor,
    *,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float,
    maximize: bool,
) -> None:
    """One Adam step of ``param`` in place, the arithmetic of ``torch.optim.Adam`` (amsgrad off), where ``ok``.

    ``scalars`` holds the step size (lr over the first bias correction) and
    the square root of the second bias correction. Where the flag ``ok`` (a
    bool tensor) is False, every state keeps its value: each new value is
    selected with ``torch.where`` (fused into the same kernel by a compiler;
    a product with the flag would keep NaN). This is torch's
    single-tensor Adam written for tracing: torch's functional ``adam`` reads
    the step count with ``.item()`` (a traced graph cannot), and its
    traceable variant computes the bias corrections inside the update, which
    inductor then recomputes for every vector of elements.
    """
    beta1, beta2 = betas
    if maximize:
        grad = -grad
    if weight_decay:
        grad = grad + weight_decay * param
    new_exp_avg = exp_avg.lerp(grad, 1 - beta1)
    new_exp_avg_sq = (exp_avg_sq * beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = new_exp_avg_sq.sqrt() / scalars[1] + eps
    new_param = param - scalars[0] * new_exp_avg / denom
    param.copy_(torch.where(ok, new_param, param))
    exp_avg.copy_(torch.where(ok, new_exp_avg, exp_avg))
    exp_avg_sq.copy_(torch.where(ok, new_exp_avg_sq, exp_avg_sq))
    step.add_(ok.to(step.dtype))


def _call_with(module: nn.Module, weights: dict[str, torch.Tensor], *inputs: torch.Tensor) -> Any:
    """``module(*inputs)`` computed with ``weights`` in place of its own parameters and buffers."""
    return torch.func.functional_call(module, weights, inputs)


# Inductor's options for small RL networks on the CPU. ``cpp.use_decompose_tanh`` computes tanh as
# ``2 / (1 + exp(-2x)) - 1``: inductor's vectorized tanh is several times slower than the exp form
# on the tanh MLPs of PPO; the result differs from tanh by about 1e-7 (off by default in torch for
# exact-match tests, not for training).
_INDUCTOR_OPTIONS = {"cpp.use_decompose_tanh": True}


def _check_backend(backend: str, mode: Optional[str]) -> None:
    """ConfigError naming the closest backend (or mode) when torch.compile has none of that name."""
    import difflib

    backends = torch.compiler.list_backends(exclude_tags=())
    if backend not in backends:
        close = difflib.get_close_matches(backend, backends, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; torch.compile has {backends}"
        raise ConfigError(f"torch_compile_learner_dynamo_backend: unknown backend {backend!r}{hint}")
    if mode is None:
        return
    if backend != "inductor":
        raise ConfigError(f"torch_compile_learner_dynamo_mode: modes are inductor's; backend {backend!r} takes none")
    try:
        torch.compile(_check_backend, backend=backend, mode=mode)  # checks the mode; compiles nothing until called
    except RuntimeError as exc:
        # "Unrecognized mode=x, should be one of: default, reduce-overhead, ..."
        modes = [m.strip() for m in str(exc).partition("should be one of:")[2].split(",") if m.strip()]
        close = difflib.get_close_matches(mode, modes, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; inductor has {modes}"
        raise ConfigError(f"torch_compile_learner_dynamo_mode: unknown mode {mode!r}{hint}") from None


def make_sgd_step(
    cfg: TrainerSettings,
    model: nn.Module,
    flat_params: FlatParameters,
    optimizer: torch.optim.Optimizer,
    loss_fn: LossFn,
    *,
    grad_clip: Optional[float],
    frozen_modules: Optional[dict[str, nn.Module]] = None,
    trace_key: Optional[Callable[[], Hashable]] = None,
) -> SGDStep:
    """The learner step a trainer config asks for: ``torch_compile_learner`` True, False or auto (``_compile_auto``).

    ``grad_clip`` is the optimizer's own (the default optimizer's is the config's ``grad_clip``).
    """
    setting = cfg.torch_compile_learner
    backend: Optional[str] = cfg.torch_compile_learner_dynamo_backend
    if setting is False:
        backend = None
    elif setting == "auto" and backend == "inductor" and cxx_compiler() is None:
        _check_backend(backend, cfg.torch_compile_learner_dynamo_mode)  # a bad key is an error whatever the machine
        backend = None
    return SGDStep(
        model,
        flat_params,
        optimizer,
        loss_fn,
        grad_clip=grad_clip,
        frozen_modules=frozen_modules,
        trace_key=trace_key,
        compile_backend=backend,
        compile_mode=cfg.torch_compile_learner_dynamo_mode,
        auto_compile=setting == "auto",
    )
