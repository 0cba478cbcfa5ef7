"""Callbacks: the hook API, Episode, custom metrics, curriculum.

Public names::

    DefaultCallbacks, MultiCallbacks, make_callbacks
    Episode
    TaskSettableEnv (defined in rltune.env), CurriculumCallback
    AutoCurriculumCallback, LearningProgressSampler, PrioritizedLevelReplay, TaskStats (automatic curricula)
"""

from rltune.callbacks._callbacks import DefaultCallbacks, MultiCallbacks, make_callbacks
from rltune.callbacks._auto_curriculum import AutoCurriculumCallback
from rltune.callbacks._curriculum import CurriculumCallback, CurriculumConfig
from rltune.callbacks._episode import Episode, MultiAgentEpisode
from rltune.callbacks._task_samplers import LearningProgressSampler, PrioritizedLevelReplay, TaskStats
from rltune.env._task import TaskSettableEnv

__all__ = [
    "AutoCurriculumCallback",
    "CurriculumCallback",
    "CurriculumConfig",
    "DefaultCallbacks",
    "Episode",
    "LearningProgressSampler",
    "MultiAgentEpisode",
    "MultiCallbacks",
    "PrioritizedLevelReplay",
    "TaskSettableEnv",
    "TaskStats",
    "make_callbacks",
]
