"""RLlib 2.x's keyword names for what a hook gets: ``algorithm`` (the trainer), ``base_env`` and ``policies``.

RLlib 2.0-2.9 callbacks declare these as required keywords
(``on_train_result(self, *, algorithm, result, **kwargs)``,
``on_episode_start(self, *, worker, base_env, policies, episode, env_index, **kwargs)``),
so a callbacks class ported by renaming its imports gets them beside rltune's
own names (``trainer``, ``env``). A hook without ``**kwargs`` gets only the
names its signature takes (read once per class and hook); one that requires
a name no hook gets fails as Python says (a missing keyword argument).
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Any, Optional

# rltune's hook -> RLlib 2.x's name of the same hook, which a subclass may override instead
HOOK_ALIASES = {"on_trainer_init": "on_algorithm_init"}


def with_rllib_names(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` plus RLlib 2.x's names of the same objects."""
    out = dict(kwargs)
    if "trainer" in kwargs:
        out.setdefault("algorithm", kwargs["trainer"])
    if "episode" in kwargs and "env" in kwargs:
        out.setdefault("base_env", kwargs["env"])
        out.setdefault("policies", getattr(kwargs.get("worker"), "policy_map", None))
    return out


@lru_cache(maxsize=None)
def _accepted(cls: type, hook: str) -> Optional[frozenset[str]]:
    """The keywords ``cls.hook`` takes (None: any, it has ``**kwargs``)."""
    try:
        parameters = inspect.signature(getattr(cls, hook)).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters)


def hook_kwargs(callbacks: Any, hook: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """What ``callbacks.hook`` is called with: rltune's keywords and RLlib 2.x's that it takes."""
    full = with_rllib_names(kwargs)
    names = _accepted(type(callbacks), hook)
    if names is None:
        return full
    return {key: value for key, value in full.items() if key in names}
