"""Policies: models, action distributions, exploration, spaces and observation filters.

Modules here are private; public names are exported by :mod:`rltune.trainers`.
"""
