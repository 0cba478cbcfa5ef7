"""The model catalog's encoder seam: which network reads the preprocessed observations, by what the preprocessor produces.

An encoder builder takes the preprocessor's ``kind``, its row ``shape``
(before flattening) and flat ``size``, and the ``model`` config, and returns
``(module, out_size)``: a module from ``[B, size]`` float32 rows to
``[B, out_size]`` features. Today every kind (``"flat"``, ``"image"``) is the
fcnet MLP; a CNN or a recurrent encoder plugs in as one small module that
calls :func:`register_encoder` for its kind. The built-in models run their
fast rollout paths (fused layers, numpy) only over MLP encoders.
"""

from __future__ import annotations

import math
from typing import Callable

from torch import nn

from rltune.trainers._config import ModelConfig
from rltune.trainers.policies._activations import ACTIVATIONS

EncoderBuilder = Callable[[tuple[int, ...], int, ModelConfig], tuple[nn.Module, int]]
_ENCODERS: dict[str, EncoderBuilder] = {}


def _linear(in_size: int, out_size: int, gain: float) -> nn.Linear:
    # Orthogonal init with per-layer gains (as in the PPO implementation-details
    # literature); small policy-head gains keep the first policy near uniform.
    layer = nn.Linear(in_size, out_size)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def mlp(in_size: int, hiddens: list[int], activation: str) -> tuple[nn.Sequential, int]:
    """Hidden layers of an MLP and the size of its output."""
    layers: list[nn.Module] = []
    size = in_size
    for hidden in hiddens:
        layers += [_linear(size, hidden, math.sqrt(2)), ACTIVATIONS[activation].module()]
        size = hidden
    return nn.Sequential(*layers), size


def register_encoder(kind: str, builder: EncoderBuilder) -> None:
    """Build the encoders of observations of ``kind`` (a preprocessor's ``kind``) with ``builder``."""
    _ENCODERS[kind] = builder


def build_encoder(kind: str, shape: tuple[int, ...], size: int, cfg: ModelConfig) -> tuple[nn.Module, int]:
    """The encoder of ``kind`` (the MLP for a kind no builder was registered for) and its output size."""
    return _ENCODERS.get(kind, mlp_encoder)(shape, size, cfg)


def mlp_encoder(shape: tuple[int, ...], size: int, cfg: ModelConfig) -> tuple[nn.Module, int]:
    """The fcnet MLP over the flat rows (``fcnet_hiddens``, ``fcnet_activation``)."""
    return mlp(size, cfg.fcnet_hiddens, cfg.fcnet_activation)


def is_mlp(module: nn.Module) -> bool:
    """Whether ``module`` is an MLP as :func:`mlp` builds it (linear layers and activations only), which the fast paths fuse."""
    return isinstance(module, nn.Sequential) and all(
        isinstance(m, nn.Linear) or not any(True for _ in m.parameters()) for m in module
    )


register_encoder("flat", mlp_encoder)
register_encoder("image", mlp_encoder)  # until a CNN encoder registers for images
