"""Algorithms: the training steps of PPO, DQN and later algorithms, over their policies and learners.

Modules here are private; public names are exported by :mod:`rltune.trainers`.
"""
