"""PPO with a recurrent model: the acting step with state, value bootstraps with the state after a step, updates by sequence.

A recurrent model (see ``docs/recurrent.md``) has ``get_initial_state()``
(one env's state tensors, no batch dimension) and
``forward(obs [B, T, ...], state [B, ...] each, seq_lens [B] or None) ->
(dist_inputs [B, T, n], values [B, T], state_out)``. Its updates run
eagerly over padded sequences (the compiled step serves stateless models):
minibatches are whole sequences, shuffled by sequence, and the loss is the
same PPO loss over the real steps (the padding is masked out).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rltune.errors import ConfigError
from rltune.trainers.learning._sequences import SEQ_STARTS, STATE_IN, STATE_OUT, pad_sequences, state_columns
from rltune.trainers.sampling._sample_batch import (
    ACTION_LOGP,
    ACTIONS,
    ADVANTAGES,
    NEW_OBS,
    OBS,
    VALUE_TARGETS,
    SampleBatch,
)

_TRAINED = (OBS, ACTIONS, ACTION_LOGP, ADVANTAGES, VALUE_TARGETS)


def recurrent_step(policy: Any, obs: np.ndarray, state: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """One step of ``policy``'s recurrent model for a batch of rows: dist inputs ``[B, n]``, values ``[B]`` and the next states."""
    device = policy.device
    with torch.inference_mode():
        dist_inputs, values, state_out = policy.model(
            policy.obs_tensor(obs)[:, None], [torch.as_tensor(s, dtype=torch.float32, device=device) for s in state], None
        )
        return dist_inputs[:, 0].cpu().numpy(), values[:, 0].cpu().numpy(), [s.cpu().numpy() for s in state_out]


def recurrent_values(policy: Any, batch: SampleBatch, rows: np.ndarray) -> np.ndarray:
    """V(new_obs) of the ``rows`` (a ``[T, K]`` mask) with the state after each row's step (``state_out_*``)."""
    outs = state_columns(batch, STATE_OUT)
    if not outs:
        raise ConfigError("a recurrent policy's batch needs its state_out_* columns (the state after each step) "
                         "to bootstrap values; its sample source did not record them")
    _, values, _ = recurrent_step(policy, batch[NEW_OBS][rows], [batch[name][rows] for name in outs])
    return values


def update_by_sequences(learner: Any, batch: SampleBatch, clip: float, entropy_coeff: float) -> tuple[np.ndarray, int]:
    """``num_sgd_iter`` epochs over ``batch``'s sequences in minibatches of whole sequences.

    A minibatch holds about ``sgd_minibatch_size`` steps (at least one
    sequence). Returns the mean stats of the last epoch (as the flat update
    gathers them: losses, entropy, KL, clip fraction, gradient norm) and the
    number of SGD steps.
    """
    cfg, device = learner.cfg, learner.policy.device
    starts = batch[SEQ_STARTS]
    padded, seq_lens, mask, first = pad_sequences({name: batch[name] for name in _TRAINED}, starts)
    obs, actions, old_logp, adv, targets = (torch.from_numpy(padded[name]).to(device) for name in _TRAINED)
    obs = obs.float()  # uint8 image rows become the model's floats here, as in the flat update
    states = [torch.from_numpy(np.ascontiguousarray(batch[name][first])).to(device) for name in state_columns(batch, STATE_IN)]
    mask_t, lens_t = torch.from_numpy(mask).to(device), torch.from_numpy(seq_lens).to(device)
    num_seqs = len(seq_lens)
    per_minibatch = max(1, min(num_seqs, round(num_seqs * cfg.sgd_minibatch_size / len(starts))))
    stat_sums = torch.zeros(7, device=device)
    steps = stat_steps = 0
    for epoch in range(cfg.num_sgd_iter):
        last_epoch = epoch == cfg.num_sgd_iter - 1
        order = learner.rng.permutation(num_seqs) if cfg.shuffle_sequences else np.arange(num_seqs)
        for start in range(0, num_seqs - per_minibatch + 1, per_minibatch):
            idx = torch.from_numpy(order[start:start + per_minibatch]).to(device)
            m = mask_t[idx]
            dist_inputs, values, _ = learner.policy.model(obs[idx], [s[idx] for s in states], lens_t[idx])
            outputs = (dist_inputs[m], values[m])
            mb_adv = adv[idx][m]
            if cfg.normalize_advantages and len(mb_adv) > 1:
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            loss, stats = learner.loss(lambda _: outputs, None, actions[idx][m], old_logp[idx][m], mb_adv, targets[idx][m],
                                       clip, entropy_coeff, learner.kl_coeff, with_stats=last_epoch)
            grad_norm = learner.sgd_step.apply(loss)
            steps += 1
            if last_epoch:
                stat_sums[:6] += stats
                stat_sums[6] += grad_norm
                stat_steps += 1
    return stat_sums.cpu().numpy() / max(stat_steps, 1), steps
