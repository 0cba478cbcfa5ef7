"""RLlib's names at the edge: old and new config keys, the config builder, translated once into rltune's settings.

Modules here are private; public names are exported by :mod:`rltune.trainers`.
"""
