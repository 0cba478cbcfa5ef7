"""Sampling: sample sources, rollout workers (local and remote), samplers, sample batches and their screening.

Modules here are private; public names are exported by :mod:`rltune.trainers`.
"""
