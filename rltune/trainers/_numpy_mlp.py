"""The built-in MLPs' forward pass in numpy, for the few rows of a rollout step.

A rollout step runs the policy on one row per env of a worker (1 to a few
dozen). At that size a torch op costs its dispatch (~5-10 us here) more than
its arithmetic, and the whole forward of a 256x256 Q-network on one row took
~75 us in torch against ~17 us in numpy on this machine. The learner, and
larger batches, stay in torch.

The weights are copies: a model rebuilds its :class:`NumpyMLP` after its
parameters change (the policy calls ``invalidate_fused`` on the models when
its ``weights_version`` grew).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

# Rows up to which rollout inference runs in numpy: beyond a few dozen rows torch's
# kernels catch up, and numpy's BLAS may start threads of its own.
MAX_NUMPY_ROWS = 64


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _swish(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) overflows to inf for very negative x: x / inf = -0, as torch
        return x / (1 + np.exp(-x))


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0, out=x),
    "elu": _elu,
    "swish": _swish,
    "linear": lambda x: x,
}


class NumpyMLP:
    """Affine layers with ``activation`` between them (none after the last), on float32 arrays."""

    def __init__(self, layers: list[tuple[torch.Tensor, torch.Tensor]], activation: str) -> None:
        # Weights stored transposed and contiguous: x @ w reads them row by row.
        self.layers = [
            (weight.detach().cpu().numpy().T.copy(), bias.detach().cpu().numpy().copy()) for weight, bias in layers
        ]
        self.activation = _ACTIVATIONS[activation]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The network's output ``[B, out]`` for inputs ``[B, in]``."""
        last = len(self.layers) - 1
        for i, (weight, bias) in enumerate(self.layers):
            x = x @ weight
            x += bias
            if i < last:
                x = self.activation(x)
        return x
