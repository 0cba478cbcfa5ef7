"""The built-in torch models, built from the ``model`` config block."""

from __future__ import annotations

from typing import Any, Iterable, Optional

import numpy as np
import torch
from torch import nn

from rltune.trainers.policies._activations import ACTIVATIONS
from rltune.trainers._config import ModelConfig
from rltune.trainers.policies._encoders import _linear, build_encoder, is_mlp, mlp  # noqa: F401  (mlp, _linear: re-exported)
from rltune.trainers.policies._numpy_mlp import NumpyMLP


def _body_and_stacked_heads(body: nn.Sequential, heads: list[nn.Linear]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(weight, bias)`` of each linear layer of ``body``, then of all ``heads`` as one layer (outputs in order)."""
    layers = [(m.weight, m.bias) for m in body if isinstance(m, nn.Linear)]
    layers.append((torch.cat([h.weight for h in heads]), torch.cat([h.bias for h in heads])))
    return layers


class ActorCriticModel(nn.Module):
    """Policy head (distribution inputs) and value head over one or two encoders (``vf_share_layers``).

    The encoders come from the model catalog by the observations' ``obs_kind``
    and ``obs_shape`` (``_encoders.py``; the fcnet MLP by default). The fast
    rollout paths (:meth:`forward_inference`, :meth:`numpy_forward`) fuse MLP
    encoders; over any other encoder they fall back to :meth:`forward`.
    """

    def __init__(
        self, obs_size: int, num_outputs: int, cfg: ModelConfig, *, free_log_std: int = 0, obs_kind: str = "flat",
        obs_shape: Optional[tuple[int, ...]] = None,
    ) -> None:
        super().__init__()
        shape = obs_shape or (obs_size,)
        self.pi_body, pi_size = build_encoder(obs_kind, shape, obs_size, cfg)
        self.activation = cfg.fcnet_activation
        self.shared = cfg.vf_share_layers
        if self.shared:
            self.vf_body = None
            vf_size = pi_size
        else:
            self.vf_body, vf_size = build_encoder(obs_kind, shape, obs_size, cfg)
        self.fusable = is_mlp(self.pi_body) and (self.vf_body is None or is_mlp(self.vf_body))
        self.pi_head = _linear(pi_size, num_outputs, 0.01)
        self.vf_head = _linear(vf_size, 1, 1.0)
        # State-independent log stds of the Gaussian parts of the actions (appended after the head's outputs; 0: none).
        self.log_std = nn.Parameter(torch.zeros(free_log_std)) if free_log_std else None
        self.invalidate_fused()

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Distribution inputs ``[B, num_outputs(+log_std)]`` and values ``[B]``."""
        pi_features = self.pi_body(obs)
        vf_features = pi_features if self.vf_body is None else self.vf_body(obs)
        dist_inputs = self.pi_head(pi_features)
        if self.log_std is not None:
            dist_inputs = torch.cat([dist_inputs, self.log_std.expand(len(dist_inputs), -1)], dim=-1)
        return dist_inputs, self.vf_head(vf_features).squeeze(-1)

    def forward_inference(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Same outputs as :meth:`forward`, faster for sampling (call under ``torch.inference_mode``).

        The policy and value networks run as one chain of layers (see
        :meth:`_fused_layers`): half the kernel launches per step with separate
        networks. The fused weights are rebuilt after :meth:`invalidate_fused`,
        which the policy calls, before using this path, when its
        ``weights_version`` grew since the last use.
        """
        if not self.fusable:
            return self.forward(obs)
        layers = self._fused_layers()
        activation = ACTIVATIONS[self.activation].torch_fn
        x = obs
        for i, (weight, bias) in enumerate(layers):
            x = torch.nn.functional.linear(x, weight, bias)
            if i < len(layers) - 1:
                x = activation(x)
        n = self.pi_head.out_features
        dist_inputs, values = x[:, :n], x[:, n]
        if self.log_std is not None:
            dist_inputs = torch.cat([dist_inputs, self.log_std.expand(len(dist_inputs), -1)], dim=-1)
        return dist_inputs, values

    def numpy_forward(self, obs: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """:meth:`forward_inference` on float32 numpy rows, in numpy (a rollout step's few rows, on the CPU); None over a non-MLP encoder."""
        if self._numpy is None:
            if not self.fusable:
                return None
            log_std = None if self.log_std is None else self.log_std.detach().cpu().numpy().copy()
            self._numpy = (NumpyMLP(self._fused_layers(), self.activation), log_std)
        net, log_std = self._numpy
        x = net(obs)
        n = self.pi_head.out_features
        dist_inputs, values = x[:, :n], x[:, n]
        if log_std is not None:
            dist_inputs = np.concatenate([dist_inputs, np.broadcast_to(log_std, (len(dist_inputs), len(log_std)))], axis=1)
        return dist_inputs, values

    def invalidate_fused(self) -> None:
        """Forget the fused inference weights (call after changing parameters)."""
        self._fused: Optional[list[tuple[torch.Tensor, torch.Tensor]]] = None
        self._numpy: Optional[tuple[NumpyMLP, Optional[np.ndarray]]] = None

    def _fused_layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Policy and value networks as one chain of layers whose last outputs are ``[pi_head | vf_head]``.

        Shared layers: the body, then both heads stacked as one layer. Separate
        networks: the first layers read the same input (their rows are
        stacked), the later ones are block-diagonal.
        """
        if self._fused is None:
            with torch.no_grad():
                pi = [m for m in self.pi_body if isinstance(m, nn.Linear)] + [self.pi_head]
                if self.vf_body is None:
                    fused = _body_and_stacked_heads(self.pi_body, [self.pi_head, self.vf_head])
                else:
                    vf = [m for m in self.vf_body if isinstance(m, nn.Linear)] + [self.vf_head]
                    fused = []
                    for i, (a, b) in enumerate(zip(pi, vf)):
                        weight = torch.cat([a.weight, b.weight]) if i == 0 else torch.block_diag(a.weight, b.weight)
                        fused.append((weight, torch.cat([a.bias, b.bias])))
                self._fused = [(w.detach().clone(), b.detach().clone()) for w, b in fused]
        return self._fused

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Values ``[B]`` alone."""
        features = self.pi_body(obs) if self.vf_body is None else self.vf_body(obs)
        return self.vf_head(features).squeeze(-1)


def make_adam(params: Iterable[torch.nn.Parameter], **kwargs: Any) -> torch.optim.Adam:
    """Adam with the fused kernel where torch has one for the device (a third fewer ops per step on CPU)."""
    params = list(params)
    try:
        return torch.optim.Adam(params, fused=True, **kwargs)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, **kwargs)
