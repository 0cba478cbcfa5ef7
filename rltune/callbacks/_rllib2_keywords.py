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


RLLIB_NAMES = frozenset({"algorithm", "base_env", "policies"})


@lru_cache(maxsize=None)
def _plan(cls: type, hook: str) -> tuple[bool, Optional[frozenset[str]]]:
    """For ``cls.hook`` (read once): whether it names one of RLlib 2.x's keywords, and the keywords it takes (None:
    any, it has ``**kwargs``)."""
    try:
        parameters = inspect.signature(getattr(cls, hook)).parameters.values()
    except (TypeError, ValueError):
        return True, None
    names = frozenset(p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    return bool(names & RLLIB_NAMES), (None if takes_any else names)


def hook_kwargs(callbacks: Any, hook: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """What ``callbacks.hook`` is called with: rltune's keywords, and RLlib 2.x's where its signature names them.

    A hook that names none of them and takes ``**kwargs`` (rltune's own style) gets ``kwargs`` as they are: a
    per-step hook pays one cached lookup.
    """
    rllib, names = _plan(type(callbacks), hook)
    if not rllib and names is None:
        return kwargs
    full = with_rllib_names(kwargs) if rllib else kwargs
    return full if names is None else {key: value for key, value in full.items() if key in names}
