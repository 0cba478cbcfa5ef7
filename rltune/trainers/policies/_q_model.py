"""DQN's Q-network as RLlib builds it: the ``model`` block's encoder (fcnet layers), then a Q head per stream.

Layout (RLlib's classic DQN model)::

    features  = encoder (the model catalog's for the observations' kind, ``_encoders.py``:
                the fcnet body, fcnet_hiddens with fcnet_activation after every layer, by default)
    advantage = [Linear(h) -> ReLU (-> LayerNorm)] for h in hiddens -> Linear(num_actions)
    value     = [Linear(h) -> ReLU (-> LayerNorm)] for h in hiddens -> Linear(1)      (dueling only)
    Q         = value + advantage - mean(advantage)    (dueling)   |   advantage   (otherwise)

With ``noisy`` every head layer is a :class:`NoisyLinear` (factorised
Gaussian noise, Fortunato et al. 2018); ``layer_norm`` (RLlib adds it for
ParameterNoise) puts a LayerNorm after each head hidden layer. ``hiddens``
empty is the head-less net: the output layers read the body's features.

Rollout inference runs in numpy (see ``_numpy_mlp.py``): without noise and
layer norms as one fused chain of affine layers (the streams stacked, then
block-diagonal), else layer by layer (:class:`NumpyQNet`), which also
serves parameter-noise copies of the weights. Over an encoder other than
the MLP (a CNN registered for images, say) the model runs in torch:
:meth:`QModel.numpy_forward` returns None and parameter-noise copies are
the model run with other parameters (:class:`TorchQNet`).
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rltune.trainers._config import ModelConfig
from rltune.trainers.policies._encoders import _linear, build_encoder, is_mlp
from rltune.trainers.policies._numpy_mlp import NumpyMLP


def scaled_noise(x: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """``sign(x) * sqrt(|x|)``: the factorised-noise transform of standard normal samples."""
    if isinstance(x, torch.Tensor):
        return x.sign() * x.abs().sqrt()
    return np.sign(x) * np.sqrt(np.abs(x))


class NoisyLinear(nn.Module):
    """``y = (mu_W + sigma_W * (e_out e_in^T)) x + mu_b + sigma_b * e_out`` with factorised Gaussian noise.

    The noise ``e_in``, ``e_out`` (already through :func:`scaled_noise`) lives in
    buffers that are not saved (``persistent=False``): the learner resamples them
    in place before each gradient step (:meth:`resample_`), a compiled step reads
    them as inputs. ``forward(x, noise=False)`` is the mean layer (greedy acting).
    """

    def __init__(self, in_features: int, out_features: int, sigma0: float) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma0 * bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma0 * bound))
        self.register_buffer("eps_in", torch.zeros(in_features), persistent=False)
        self.register_buffer("eps_out", torch.zeros(out_features), persistent=False)

    def forward(self, x: torch.Tensor, noise: bool = True) -> torch.Tensor:
        y = F.linear(x, self.weight_mu, self.bias_mu)
        if not noise:
            return y
        # (sigma_W * e_out e_in^T) x = e_out * (sigma_W (e_in * x)): no [out, in] noise matrix is built.
        return y + (F.linear(x * self.eps_in, self.weight_sigma) + self.bias_sigma) * self.eps_out

    @torch.no_grad()
    def resample_(self) -> None:
        """New noise from torch's generator, in place (the tensors a compiled step reads stay the same)."""
        for eps in (self.eps_in, self.eps_out):
            eps.normal_()
            eps.copy_(scaled_noise(eps))


class _HeadLayer(nn.Module):
    """One hidden layer of a Q-head stream: linear (or noisy), ReLU, optional LayerNorm."""

    def __init__(self, in_size: int, out_size: int, noisy: bool, sigma0: float, layer_norm: bool) -> None:
        super().__init__()
        self.linear = NoisyLinear(in_size, out_size, sigma0) if noisy else _linear(in_size, out_size, math.sqrt(2))
        self.norm = nn.LayerNorm(out_size) if layer_norm else None

    def forward(self, x: torch.Tensor, noise: bool = True) -> torch.Tensor:
        x = torch.relu(self.linear(x, noise) if isinstance(self.linear, NoisyLinear) else self.linear(x))
        return x if self.norm is None else self.norm(x)


class QModel(nn.Module):
    """Q-values ``[B, num_actions]``: encoder, then ``hiddens`` head layers per stream (dueling: value + advantages).

    The encoder (``body``) comes from the model catalog by the observations'
    ``obs_kind`` and ``obs_shape`` (the fcnet MLP by default); the numpy
    rollout paths run only over an MLP encoder (``fusable``).

    Parameter names: ``body.*``, ``advantage_hidden.<i>.*``,
    ``advantage_head.*``, ``value_hidden.<i>.*``, ``value_head.*`` (with
    ``hiddens`` empty the names of the head-less model before the head existed).
    """

    def __init__(
        self,
        obs_size: int,
        num_actions: int,
        cfg: ModelConfig,
        *,
        dueling: bool,
        hiddens: Sequence[int] = (),
        noisy: bool = False,
        sigma0: float = 0.5,
        layer_norm: bool = False,
        obs_kind: str = "flat",
        obs_shape: Optional[tuple[int, ...]] = None,
    ) -> None:
        super().__init__()
        self.body, size = build_encoder(obs_kind, obs_shape or (obs_size,), obs_size, cfg)
        self.fusable = is_mlp(self.body)
        self.activation = cfg.fcnet_activation
        self.dueling, self.noisy, self.layer_norm = dueling, noisy, layer_norm
        self.num_actions = num_actions
        self.advantage_hidden, self.advantage_head = self._stream(size, hiddens, num_actions, noisy, sigma0, layer_norm)
        self.value_hidden: Optional[nn.ModuleList] = None
        self.value_head: Optional[nn.Module] = None
        if dueling:
            self.value_hidden, self.value_head = self._stream(size, hiddens, 1, noisy, sigma0, layer_norm)
        self.invalidate_fused()

    @staticmethod
    def _stream(size: int, hiddens: Sequence[int], out: int, noisy: bool, sigma0: float, layer_norm: bool) -> tuple[nn.ModuleList, nn.Module]:
        layers = nn.ModuleList()
        for h in hiddens:
            layers.append(_HeadLayer(size, h, noisy, sigma0, layer_norm))
            size = h
        return layers, NoisyLinear(size, out, sigma0) if noisy else _linear(size, out, 1.0)

    def forward(self, obs: torch.Tensor, noise: bool = True) -> torch.Tensor:
        """Q-values ``[B, num_actions]``; ``noise=False`` runs noisy layers at their means."""
        features = self.body(obs)
        advantages = self._run(self.advantage_hidden, self.advantage_head, features, noise)
        if self.value_head is None:
            return advantages
        values = self._run(self.value_hidden, self.value_head, features, noise)
        return values + advantages - advantages.mean(dim=-1, keepdim=True)

    @staticmethod
    def _run(hidden: nn.ModuleList, head: nn.Module, x: torch.Tensor, noise: bool) -> torch.Tensor:
        for layer in hidden:
            x = layer(x, noise)
        return head(x, noise) if isinstance(head, NoisyLinear) else head(x)

    def resample_noise_(self) -> None:
        """New noise for every noisy layer (torch's generator), in place."""
        for module in self.modules():
            if isinstance(module, NoisyLinear):
                module.resample_()

    def perturbable_names(self) -> list[str]:
        """Names of the parameters parameter-space noise perturbs: every plain linear layer's weight and bias."""
        return [f"{name}.{p}" for name, m in self.named_modules() if type(m) is nn.Linear for p in ("weight", "bias")]

    # -- numpy rollout paths ---------------------------------------------------------------
    def numpy_forward(self, obs: np.ndarray, noise_rng: Optional[np.random.Generator] = None) -> Optional[np.ndarray]:
        """:meth:`forward` on float32 numpy rows, in numpy; noisy layers draw their noise from ``noise_rng`` (None: off).

        None over a non-MLP encoder (run :meth:`forward` instead).
        """
        if not self.fusable:
            return None
        if noise_rng is not None and self.noisy:
            if self._numpy_layers is None:
                self._numpy_layers = self.numpy_net()
            return self._numpy_layers(obs, noise_rng)
        if self._numpy is None:
            self._numpy = self._fused_numpy() if not self.layer_norm else self.numpy_net()
        return self._numpy(obs)

    def invalidate_fused(self) -> None:
        """Forget the numpy copies of the weights (call after changing parameters)."""
        self._numpy: Optional[NumpyMLP | NumpyQNet] = None
        self._numpy_layers: Optional[NumpyQNet] = None

    def numpy_net(self, params: Optional[Mapping[str, np.ndarray]] = None) -> NumpyQNet | TorchQNet:
        """This model layer by layer in numpy, with ``params`` (name -> array, e.g. perturbed weights) or its own.

        Over a non-MLP encoder: the model itself run in torch with ``params`` (:class:`TorchQNet`).
        """
        if params is None:
            params = {k: v.detach().cpu().numpy() for k, v in self.state_dict().items()}
        return NumpyQNet(self, params) if self.fusable else TorchQNet(self, params)

    def _fused_numpy(self) -> NumpyMLP | NumpyQNet:
        """One chain of affine layers whose output is ``[advantages | value]`` (noisy layers at their means)."""
        with torch.no_grad():
            body = [(m.weight, m.bias) for m in self.body if isinstance(m, nn.Linear)]
            streams = [(self.advantage_hidden, self.advantage_head)]
            if self.value_head is not None:
                streams.append((self.value_hidden, self.value_head))
            depth = len(self.advantage_hidden)
            head = []
            for i in range(depth + 1):
                layers = [_mean_weights(s[0][i].linear if i < depth else s[1]) for s in streams]
                weight = torch.cat([w for w, _ in layers]) if i == 0 else torch.block_diag(*[w for w, _ in layers])
                head.append((weight, torch.cat([b for _, b in layers])))
        net = NumpyMLP(body + head, [self.activation] * len(body) + ["relu"] * depth)
        if self.value_head is None:
            return net
        return _Dueling(net)


def _mean_weights(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(layer, NoisyLinear):
        return layer.weight_mu, layer.bias_mu
    return layer.weight, layer.bias


class _Dueling:
    """A fused chain with outputs ``[advantages | value]`` as Q-values."""

    def __init__(self, net: NumpyMLP) -> None:
        self.net = net

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        x = self.net(obs)
        advantages = x[:, :-1]
        return x[:, -1:] + advantages - advantages.mean(axis=1, keepdims=True)


class NumpyQNet:
    """A :class:`QModel` evaluated layer by layer in numpy with given parameters (noise, layer norms, perturbed weights)."""

    def __init__(self, model: QModel, params: Mapping[str, np.ndarray]) -> None:
        from rltune.trainers.policies._activations import ACTIVATIONS

        self.activation = ACTIVATIONS[model.activation].numpy_fn
        self.body = [(params[f"body.{i}.weight"].T.copy(), params[f"body.{i}.bias"].copy())
                     for i, m in enumerate(model.body) if isinstance(m, nn.Linear)]
        self.streams = [self._stream(params, "advantage", model.advantage_hidden, model.advantage_head)]
        if model.value_head is not None:
            self.streams.append(self._stream(params, "value", model.value_hidden, model.value_head))
        self.noise_size = sum(m.in_features + m.out_features for m in model.modules() if isinstance(m, NoisyLinear))

    @staticmethod
    def _layer(params: Mapping[str, np.ndarray], prefix: str, module: nn.Module) -> tuple[np.ndarray, ...]:
        if isinstance(module, NoisyLinear):
            names = ("weight_mu", "bias_mu", "weight_sigma", "bias_sigma")
            w, b, ws, bs = (params[f"{prefix}.{n}"] for n in names)
            return w.T.copy(), b.copy(), ws.T.copy(), bs.copy()
        return params[f"{prefix}.weight"].T.copy(), params[f"{prefix}.bias"].copy()

    def _stream(self, params: Mapping[str, np.ndarray], name: str, hidden: nn.ModuleList, head: nn.Module) -> tuple[list, tuple]:
        layers = []
        for i, layer in enumerate(hidden):
            norm = None
            if layer.norm is not None:
                norm = (params[f"{name}_hidden.{i}.norm.weight"], params[f"{name}_hidden.{i}.norm.bias"], layer.norm.eps)
            layers.append((self._layer(params, f"{name}_hidden.{i}.linear", layer.linear), norm))
        return layers, self._layer(params, f"{name}_head", head)

    def __call__(self, obs: np.ndarray, noise_rng: Optional[np.random.Generator] = None) -> np.ndarray:
        """Q-values of ``obs`` rows; noisy layers take one noise sample each from ``noise_rng`` (None: at their means).

        The noise of all layers is one draw, split in layer order (each stream's
        hidden layers, then its output layer; ``e_in`` before ``e_out``).
        """
        noise = None
        if noise_rng is not None and self.noise_size:
            noise = scaled_noise(noise_rng.standard_normal(self.noise_size).astype(np.float32))
        at = 0
        x = obs
        for weight, bias in self.body:
            x = self.activation(x @ weight + bias)
        outputs = []
        for hidden, head in self.streams:
            y = x
            for layer, norm in hidden:
                y, at = _affine(y, layer, noise, at)
                y = np.maximum(y, 0)
                if norm is not None:
                    gain, shift, eps = norm
                    y = (y - y.mean(axis=1, keepdims=True)) / np.sqrt(y.var(axis=1, keepdims=True) + eps) * gain + shift
            y, at = _affine(y, head, noise, at)
            outputs.append(y)
        if len(outputs) == 1:
            return outputs[0]
        advantages, values = outputs
        return values + advantages - advantages.mean(axis=1, keepdims=True)


class TorchQNet:
    """A :class:`QModel` over a non-MLP encoder run in torch with given parameters (e.g. perturbed weights), noise off."""

    def __init__(self, model: QModel, params: Mapping[str, np.ndarray]) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.params = {name: torch.from_numpy(np.asarray(value)).to(self.device) for name, value in params.items()}

    def __call__(self, obs: np.ndarray, noise_rng: Optional[np.random.Generator] = None) -> np.ndarray:
        """Q-values of ``obs`` rows (noisy layers at their means: parameter noise and noisy layers do not mix)."""
        with torch.no_grad():
            rows = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32)).to(self.device)
            return torch.func.functional_call(self.model, self.params, (rows,), {"noise": False}).cpu().numpy()


def _affine(x: np.ndarray, layer: tuple[np.ndarray, ...], noise: Optional[np.ndarray], at: int) -> tuple[np.ndarray, int]:
    """One (noisy) affine layer; noise ``e_in``, ``e_out`` read from ``noise`` at ``at``; the output and the next offset."""
    y = x @ layer[0] + layer[1]
    if len(layer) == 4 and noise is not None:
        weight_sigma, bias_sigma = layer[2], layer[3]
        n_in, n_out = weight_sigma.shape
        eps_in, eps_out = noise[at : at + n_in], noise[at + n_in : at + n_in + n_out]
        y = y + ((x * eps_in) @ weight_sigma + bias_sigma) * eps_out
        at += n_in + n_out
    return y, at
