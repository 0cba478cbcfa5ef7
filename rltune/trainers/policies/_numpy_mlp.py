"""The built-in MLPs' forward pass in numpy, for the few rows of a rollout step.

A rollout step runs the policy on one row per env of a worker (1 to a few
dozen). At that size a torch op costs its dispatch more than its
arithmetic, and numpy's forward of a row is several times faster than
torch's (figures in benchmarks/README.md). The learner, and larger batches,
stay in torch.

The weights are copies: a model rebuilds its :class:`NumpyMLP` after its
parameters change (the policy calls ``invalidate_fused`` on the models when
its ``weights_version`` grew).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from rltune.trainers.policies._activations import ACTIVATIONS

# Rows up to which rollout inference runs in numpy: beyond a few dozen rows torch's
# kernels catch up, and numpy's BLAS may start threads of its own.
MAX_NUMPY_ROWS = 64


class NumpyMLP:
    """Affine layers with ``activation`` between them (none after the last), on float32 arrays.

    ``activation`` is one name for every gap, or one name per gap (``len(layers) - 1``).
    """

    def __init__(self, layers: list[tuple[torch.Tensor, torch.Tensor]], activation: str | Sequence[str]) -> None:
        # Weights stored transposed and contiguous: x @ w reads them row by row.
        self.layers = [
            (weight.detach().cpu().numpy().T.copy(), bias.detach().cpu().numpy().copy()) for weight, bias in layers
        ]
        names = [activation] * (len(layers) - 1) if isinstance(activation, str) else list(activation)
        if len(names) != len(layers) - 1:
            raise ValueError(f"{len(layers)} layers need {len(layers) - 1} activations, but got {len(names)}")
        self.activations = [ACTIVATIONS[name].numpy_fn for name in names]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The network's output ``[B, out]`` for inputs ``[B, in]``."""
        last = len(self.layers) - 1
        for i, (weight, bias) in enumerate(self.layers):
            x = x @ weight
            x += bias
            if i < last:
                x = self.activations[i](x)
        return x
