"""Old RLlib's dict of callback functions (``{"on_episode_end": fn}``, each ``fn(info)``) as a DefaultCallbacks subclass.

Before its ``DefaultCallbacks`` class, RLlib took ``config["callbacks"]`` as a
dict of functions, each called with one ``info`` dict. Such a dict is
turned into a generated :class:`DefaultCallbacks` subclass whose hooks call
the functions with the ``info`` old RLlib passed:

- ``on_episode_start(info)`` / ``on_episode_end(info)``: ``env``, ``policy``
  (the worker's policies by id), ``episode``;
- ``on_episode_step(info)``: ``env``, ``episode``;
- ``on_sample_end(info)``: ``worker``, ``samples``;
- ``on_train_result(info)``: ``trainer``, ``result``.
"""

from __future__ import annotations

from typing import Any, Callable

from rltune.callbacks._callbacks import DefaultCallbacks
from rltune.errors import ConfigError


def _episode_info(kwargs: dict[str, Any]) -> dict[str, Any]:
    worker = kwargs.get("worker")
    return {"env": kwargs.get("env"), "policy": getattr(worker, "policy_map", {}), "episode": kwargs.get("episode")}


# Old name -> (the hook it runs in, the info dict it gets from the hook's keyword arguments).
LEGACY_HOOKS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "on_episode_start": ("on_episode_start", _episode_info),
    "on_episode_step": ("on_episode_step", lambda kw: {"env": kw.get("env"), "episode": kw.get("episode")}),
    "on_episode_end": ("on_episode_end", _episode_info),
    "on_sample_end": ("on_sample_end", lambda kw: {"worker": kw.get("worker"), "samples": kw.get("samples")}),
    "on_train_result": ("on_train_result", lambda kw: {"trainer": kw.get("trainer"), "result": kw.get("result")}),
}
NOT_CARRIED = {
    "on_postprocess_traj": "rltune's on_postprocess_trajectory hook does not see the agent's batch before "
                           "postprocessing (old RLlib's pre_batch); write a DefaultCallbacks subclass with "
                           "on_postprocess_trajectory(postprocessed_batch=..., original_batches=...)",
}


def legacy_callbacks_class(functions: dict[Any, Any], where: str = "callbacks") -> type[DefaultCallbacks]:
    """A DefaultCallbacks subclass that calls each function of an old RLlib callbacks dict; ConfigError if invalid."""
    problems = []
    for name, fn in functions.items():
        if name in NOT_CARRIED:
            problems.append(f"{where}.{name}: not carried over: {NOT_CARRIED[name]}")
        elif name not in LEGACY_HOOKS:
            problems.append(f"{where}.{name}: not a hook of old RLlib's callbacks dict (those are "
                            f"{', '.join(LEGACY_HOOKS)}); for other hooks write a DefaultCallbacks subclass")
        elif not callable(fn):
            problems.append(f"{where}.{name}: must be a function fn(info), but got {fn!r:.60}")
    if problems:
        raise ConfigError(problems)
    methods = {LEGACY_HOOKS[name][0]: _hook(fn, LEGACY_HOOKS[name][1]) for name, fn in functions.items()}
    methods["__doc__"] = f"Old RLlib's callbacks dict ({', '.join(functions)}), as hooks."
    return type("LegacyCallbacksDict", (DefaultCallbacks,), methods)


def _hook(fn: Callable[[dict[str, Any]], Any], make_info: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[..., None]:
    def hook(self: DefaultCallbacks, **kwargs: Any) -> None:
        fn(make_info(kwargs))

    hook.__name__ = getattr(fn, "__name__", "hook")
    return hook
