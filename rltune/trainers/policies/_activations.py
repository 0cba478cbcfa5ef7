"""The built-in models' hidden-layer activations by ``fcnet_activation`` name: one table for every path.

Each entry has the torch layer of the model (training, ``forward``), the
torch function of the fused inference chain and the numpy function of the
rollout path, so the three cannot disagree on a name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _swish(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) overflows to inf for very negative x: x / inf = -0, as torch
        return x / (1 + np.exp(-x))


@dataclass(frozen=True)
class Activation:
    """One activation in its three forms (the numpy one may work in place on its argument)."""

    module: type[nn.Module]
    torch_fn: Callable[[torch.Tensor], torch.Tensor]
    numpy_fn: Callable[[np.ndarray], np.ndarray]


ACTIVATIONS: dict[str, Activation] = {
    "tanh": Activation(nn.Tanh, torch.tanh, np.tanh),
    "relu": Activation(nn.ReLU, torch.relu, lambda x: np.maximum(x, 0, out=x)),
    "elu": Activation(nn.ELU, torch.nn.functional.elu, _elu),
    "swish": Activation(nn.SiLU, torch.nn.functional.silu, _swish),
    "linear": Activation(nn.Identity, lambda x: x, lambda x: x),
}
