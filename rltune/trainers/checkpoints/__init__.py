"""Checkpoints: the directory format, what a saved config may import, signatures, the trainer's save and restore.

Modules here are private; public names are exported by :mod:`rltune.trainers`.
"""
