"""Learning: learners, the gradient step (eager or compiled) and return/advantage estimation.

Modules here are private; public names are exported by :mod:`rltune.trainers`.
"""
