"""The callback hook API: DefaultCallbacks and how a config's ``callbacks`` value becomes one.

Hooks, in the order they fire, and the process each runs in:

0. ``on_trainer_init(trainer)``: once the trainer and its workers exist,
   in the trainer's process.
1. ``on_environment_created(env, env_context, worker)``: after each env is
   built (also rebuilt after a failure), in the process owning the env.
2. ``on_episode_start(episode, env, env_index, worker)``: after the reset
   that starts an episode, in the env's process.
3. ``on_episode_step(episode, env, env_index, worker)``: after every step
   of the episode (the step is already in ``episode``).
4. ``on_episode_end(episode, env, env_index, worker)``: after the step that
   ended the episode; set ``episode.custom_metrics`` / ``hist_data`` here.
5. ``on_postprocess_trajectory(worker, episode, agent_id, policy_id,
   policies, postprocessed_batch, original_batches)``: multi-agent envs,
   after one agent's trajectory of one episode was postprocessed, in the
   env's process; may change ``postprocessed_batch`` in place.
6. ``on_sample_end(samples, worker)``: after a worker collected (and
   postprocessed) one fragment, in the worker's process.
7. ``on_train_result(trainer, result)``: after each ``train()``, in the
   trainer's process; may add keys to ``result``.
8. ``on_checkpoint_saved(trainer, path)`` / ``on_checkpoint_loaded(trainer)``:
   after ``save()`` / ``restore()``, in the trainer's process.
9. ``on_worker_recreated(trainer, worker_index)``: after a dead rollout
   worker was restarted and given the current weights and tasks.

Each worker process has its own callbacks instance, so state kept on
``self`` is per worker; ``episode.user_data`` is per episode. A hook that is
not overridden costs nothing: the sampler only tracks episodes when an
episode hook is overridden.
"""

from __future__ import annotations

from typing import Any

from rltune._imports import import_object
from rltune.callbacks._rllib2_keywords import HOOK_ALIASES, hook_kwargs
from rltune.errors import CallbackError, ConfigError

EPISODE_HOOKS = ("on_episode_start", "on_episode_step", "on_episode_end")
ALL_HOOKS = (
    "on_trainer_init",
    "on_environment_created",
    *EPISODE_HOOKS,
    "on_postprocess_trajectory",
    "on_sample_end",
    "on_train_result",
    "on_checkpoint_saved",
    "on_checkpoint_loaded",
    "on_worker_recreated",
)


class DefaultCallbacks:
    """No-op hooks to override; every hook takes keyword arguments only, plus ``**kwargs`` for new ones."""

    def on_trainer_init(self, *, trainer: Any, **kwargs: Any) -> None:
        """The trainer was built (workers started), before the first ``train()``; in the trainer's process.

        By default it calls :meth:`on_algorithm_init` (RLlib 2.x's name of this hook) when that is overridden.
        """
        if type(self).on_algorithm_init is not DefaultCallbacks.on_algorithm_init:
            self.on_algorithm_init(**hook_kwargs(self, "on_algorithm_init", {"trainer": trainer, **kwargs}))

    def on_algorithm_init(self, *, algorithm: Any, **kwargs: Any) -> None:
        """RLlib 2.x's name of :meth:`on_trainer_init` (``algorithm`` is the trainer)."""

    def on_environment_created(self, *, env: Any, env_context: Any, worker: Any = None, **kwargs: Any) -> None:
        """An env was just built (``env_context.recreated`` is True after a rebuild)."""

    def on_episode_start(self, *, episode: Any, env: Any, env_index: int, worker: Any = None, **kwargs: Any) -> None:
        """An episode started (after its reset)."""

    def on_episode_step(self, *, episode: Any, env: Any, env_index: int, worker: Any = None, **kwargs: Any) -> None:
        """The episode took one step."""

    def on_episode_end(self, *, episode: Any, env: Any, env_index: int, worker: Any = None, **kwargs: Any) -> None:
        """The episode ended (terminated or truncated)."""

    def on_postprocess_trajectory(
        self,
        *,
        worker: Any = None,
        episode: Any = None,
        agent_id: Any = None,
        policy_id: str = "",
        policies: Any = None,
        postprocessed_batch: Any = None,
        original_batches: Any = None,
        **kwargs: Any,
    ) -> None:
        """A multi-agent trajectory was postprocessed; ``original_batches`` maps agent ids to ``(policy_id, batch)``."""

    def on_sample_end(self, *, samples: Any, worker: Any = None, **kwargs: Any) -> None:
        """A worker finished collecting one fragment (``samples`` is a SampleResult)."""

    def on_train_result(self, *, trainer: Any, result: dict[str, Any], **kwargs: Any) -> None:
        """A training iteration ended; add keys to ``result`` or act on the trainer (e.g. a curriculum)."""

    def on_checkpoint_saved(self, *, trainer: Any, path: str, **kwargs: Any) -> None:
        """A checkpoint was written to ``path``."""

    def on_checkpoint_loaded(self, *, trainer: Any, **kwargs: Any) -> None:
        """The trainer was restored from a checkpoint."""

    def on_worker_recreated(self, *, trainer: Any, worker_index: int, **kwargs: Any) -> None:
        """Rollout worker ``worker_index`` died and was restarted."""

    # -- plumbing ---------------------------------------------------------------------
    def overrides(self, hook: str) -> bool:
        """Whether ``hook`` (or RLlib 2.x's name of it) does anything (is overridden somewhere)."""
        names = (hook, HOOK_ALIASES[hook]) if hook in HOOK_ALIASES else (hook,)
        return any(getattr(type(self), name) is not getattr(DefaultCallbacks, name) for name in names)

    def get_state(self) -> dict[str, Any]:
        """JSON-able state saved in checkpoints (e.g. a curriculum phase)."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""


class MultiCallbacks(DefaultCallbacks):
    """Runs several callbacks objects, in order, for every hook."""

    def __init__(self, callbacks: list[DefaultCallbacks]) -> None:
        self.callbacks = list(callbacks)

    def overrides(self, hook: str) -> bool:
        return any(c.overrides(hook) for c in self.callbacks)

    def get_state(self) -> dict[str, Any]:
        return {str(i): c.get_state() for i, c in enumerate(self.callbacks)}

    def set_state(self, state: dict[str, Any]) -> None:
        for i, c in enumerate(self.callbacks):
            if str(i) in state:
                c.set_state(state[str(i)])


def _fan_out(hook: str):
    def call(self: MultiCallbacks, **kwargs: Any) -> None:
        for callbacks in self.callbacks:
            if callbacks.overrides(hook):
                getattr(callbacks, hook)(**hook_kwargs(callbacks, hook, kwargs))

    call.__name__ = hook
    call.__doc__ = f"Call ``{hook}`` of every callbacks object in order."
    return call


for _hook in ALL_HOOKS:
    setattr(MultiCallbacks, _hook, _fan_out(_hook))


def _resolve_one(spec: Any, where: str) -> DefaultCallbacks:
    if isinstance(spec, dict):  # old RLlib's {"on_episode_end": fn, ...}
        from rltune.callbacks._legacy import legacy_callbacks_class

        return legacy_callbacks_class(spec, where)()
    if isinstance(spec, str):
        spec = import_object(spec, where)
    if isinstance(spec, DefaultCallbacks):
        return spec
    if isinstance(spec, type) and issubclass(spec, DefaultCallbacks):
        return spec()
    if callable(spec):  # a factory, e.g. functools.partial(MyCallbacks, arg=1)
        made = spec()
        if isinstance(made, DefaultCallbacks):
            return made
    raise ConfigError(f"{where}: {spec!r} is not a DefaultCallbacks subclass (or an import string naming one)")


def make_callbacks(spec: Any, where: str = "callbacks") -> DefaultCallbacks:
    """Build the callbacks object for a config's ``callbacks`` value: None, a class, an import string, a list,
    or old RLlib's dict of hook functions (see ``_legacy.py``)."""
    if spec is None:
        return DefaultCallbacks()
    if isinstance(spec, (list, tuple)):
        items = [_resolve_one(s, f"{where}[{i}]") for i, s in enumerate(spec)]
        return items[0] if len(items) == 1 else MultiCallbacks(items)
    return _resolve_one(spec, where)


def call_hook(callbacks: DefaultCallbacks, hook: str, where: str, **kwargs: Any) -> None:
    """Run one hook; anything it raises becomes a :class:`CallbackError` naming the hook and ``where``."""
    try:
        getattr(callbacks, hook)(**hook_kwargs(callbacks, hook, kwargs))
    except CallbackError:
        raise
    except Exception as exc:
        raise CallbackError(
            f"callback {type(callbacks).__name__}.{hook} raised in {where}: {type(exc).__name__}: {exc}"
        ) from exc
