"""Callbacks: the hook API, Episode, custom metrics, curriculum.

Public names::

    DefaultCallbacks, MultiCallbacks, make_callbacks
    Episode
    TaskSettableEnv (defined in rltune.env), CurriculumCallback
"""

from rltune.callbacks._callbacks import DefaultCallbacks, MultiCallbacks, make_callbacks
from rltune.callbacks._curriculum import CurriculumCallback, CurriculumConfig
from rltune.callbacks._episode import Episode, MultiAgentEpisode
from rltune.env._task import TaskSettableEnv

__all__ = [
    "CurriculumCallback",
    "CurriculumConfig",
    "DefaultCallbacks",
    "Episode",
    "MultiAgentEpisode",
    "MultiCallbacks",
    "TaskSettableEnv",
    "make_callbacks",
]
