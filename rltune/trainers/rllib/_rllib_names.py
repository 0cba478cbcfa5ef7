"""RLlib's config names, old and new, translated into rltune's at the edge, before validation.

:func:`translate_config` runs on every user config (``Trainer(config=...)``,
``tune.run``, study and train files) and returns rltune's spelling of it:

- new-stack and old names of rltune's keys become rltune's (``num_env_runners``
  -> ``num_workers``, ``num_epochs`` -> ``num_sgd_iter``, top-level
  ``vf_share_layers`` -> ``model.vf_share_layers``; the table is
  :data:`~rltune.trainers.rllib._rllib_keys.ALIASES`); an alias and its rltune key
  given with different values is an error naming both;
- ``framework: tf | tf2`` and ``use_pytorch`` run on PyTorch (the fully
  connected models are framework-neutral), with one warning;
- API-stack and TensorFlow switches are dropped with a note that they change
  nothing here; with ``_fake_gpus``, ``num_gpus > 0`` runs on the CPU when
  there is no CUDA device;
- gym ids that gymnasium renamed (``Pendulum-v0``) become the version
  gymnasium has (``Pendulum-v1``), with a warning naming both;
- ``use_kl_loss: false`` is ``kl_coeff: 0``; ``rollout_fragment_length: auto``
  and ``evaluation_duration: auto`` get their values;
- a config that switches RLlib's new API stack on (``enable_rl_module_and_learner``
  or ``enable_env_runner_and_connector_v2: true``) gets that stack's defaults
  where they differ from the classic ones rltune keeps, for the keys it does
  not set (the trainer config's ``NEW_STACK_DEFAULTS``: PPO's
  ``rollout_fragment_length: auto``), so that a file tuned on the new stack
  trains as it did there.

Each note is logged once per process (aliases at INFO, behaviour that differs
from RLlib as a WARNING). :func:`rllib_key_problem` words the error for an
unknown key that is an RLlib key rltune lacks, with the nearest rltune
feature. :func:`add_result_spellings` gives results RLlib's other spellings
of the episode stats.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from rltune.errors import Problem
from rltune.trainers.rllib._rllib_keys import (
    ALIASES,
    BLOCK_ALIASES,
    BLOCK_NO_EFFECT,
    BLOCK_UNSUPPORTED,
    EXPERIMENT_FIELDS,
    NO_EFFECT,
    UNSUPPORTED,
)

logger = logging.getLogger(__name__)

TF_FRAMEWORKS = ("tf", "tf2", "tfe")
NEW_STACK_SWITCHES = ("enable_rl_module_and_learner", "enable_env_runner_and_connector_v2")
_said: set[str] = set()
_MISSING = object()


def say_once(level: int, message: str) -> None:
    """Log ``message`` at ``level`` the first time this process logs it (a level not shown does not count)."""
    if message not in _said and logger.isEnabledFor(level):
        _said.add(message)
        logger.log(level, message)


@dataclass
class Translation:
    """A config in rltune's names: ``config``, the RLlib name each renamed key was given as, the problems found."""

    config: Any
    origins: dict[str, str] = field(default_factory=dict)  # rltune dotted path -> the name the user wrote
    problems: list[Problem] = field(default_factory=list)

    def name_problems(self, problems: list[Problem]) -> list[Problem]:
        """Validation problems at (or inside) a renamed key, shown with the name the user wrote."""
        out = []
        for problem in problems:
            for path, given in self.origins.items():
                target = tuple(path.split("."))
                if problem.shown is None and problem.path[:len(target)] == target:
                    inside = "".join(f".{key}" for key in problem.path[len(target):])
                    problem = problem.shown_as(f"{given} ({path} in rltune){inside}")
                    break
            out.append(problem)
        return out

    def translated(self) -> "Translated":
        """The config, marked as translated: :func:`translate_config` takes it as it is."""
        return Translated(self.config, origins=self.origins)


class Translated(dict):
    """A config already in rltune's names (what :func:`translate_config` made of the user's), with the
    names the user wrote (``origins``): validating it translates nothing again, and names its problems as
    the user wrote them. Copies made with :meth:`copy` keep the mark; any other change of it is the caller's."""

    def __init__(self, config: dict[str, Any], *, origins: dict[str, str] | None = None) -> None:
        super().__init__(config)
        self.origins = dict(origins or {})

    def copy(self) -> "Translated":  # type: ignore[override]
        """A shallow copy, still marked as translated."""
        return Translated(self, origins=self.origins)


def _fields(model: Any) -> dict[str, Any]:
    """A pydantic model's keys as users write them (aliases such as ``lambda``) -> the field."""
    return {f.alias or name: f for name, f in model.model_fields.items()}


def _block_model(config_cls: Any, block: str) -> Any:
    """The pydantic model of a nested block of ``config_cls`` (model, multiagent, ...), or None."""
    f = _fields(config_cls).get(block)
    annotation = getattr(f, "annotation", None)
    return annotation if isinstance(annotation, type) and hasattr(annotation, "model_fields") else None


def _has_path(config_cls: Any, path: str) -> bool:
    head, _, rest = path.partition(".")
    if not rest:
        return head in _fields(config_cls)
    inner = _block_model(config_cls, head)
    return inner is not None and rest in _fields(inner)


def translate_config(config: Any, config_cls: Any) -> Translation:
    """``config`` in rltune's names for the trainer config class ``config_cls`` (see the module docstring).

    Values that are not plain (search-space entries of a study) pass
    through untouched; a key that is no alias for this trainer is left for
    validation to name. Never raises: problems are returned.
    """
    if isinstance(config, Translated):  # translated once already: never again
        return Translation(dict(config), dict(config.origins))
    if not isinstance(config, dict):
        return Translation(config)
    t = Translation(dict(config))
    out, fields = t.config, _fields(config_cls)
    for name, target in ALIASES.items():
        if name in out and name not in fields and _has_path(config_cls, target):
            _move(t, name, target)
    fake_gpus = out.get("_fake_gpus") is True
    _new_stack_defaults(out, config_cls)
    _drop_no_effect(t, out, NO_EFFECT, ())
    _framework(t, out)
    _gpus(out, fake_gpus)
    if "use_kl_loss" in out and "use_kl_loss" not in fields and "kl_coeff" in fields:
        if out.pop("use_kl_loss") is False:  # RLlib then ignores kl_coeff
            out["kl_coeff"] = 0.0
            say_once(logging.INFO, "use_kl_loss: false is kl_coeff: 0 in rltune")
    _env_id(out)
    _autos(out, fields)
    for block in ("model", "multiagent", "replay_buffer_config"):
        if isinstance(out.get(block), dict) and _block_model(config_cls, block) is not None:
            _translate_block(t, out, block, config_cls)
    if isinstance(out.get("evaluation_config"), dict):
        inner = translate_config(out["evaluation_config"], config_cls)
        out["evaluation_config"] = inner.config
        t.problems.extend(p.under("evaluation_config") for p in inner.problems)
        t.origins.update({f"evaluation_config.{k}": f"evaluation_config.{v}" for k, v in inner.origins.items()})
    return t


def _move(t: Translation, name: str, target: str) -> None:
    """Move the value of ``name`` to the dotted ``target``."""
    value = t.config.pop(name)
    _set(t, name, target, value)
    say_once(logging.INFO, f"RLlib's {name} is {target} in rltune")


def _set(t: Translation, name: str, target: str, value: Any) -> None:
    """Set the dotted ``target`` to ``value`` unless the user gave it another value (a problem naming both)."""
    head, _, rest = target.partition(".")
    if rest:
        block = t.config.get(head)
        block = dict(block) if isinstance(block, dict) else {}
        t.config[head] = block
        current, key = block.get(rest, _MISSING), rest
    else:
        block, key = t.config, head
        current = block.get(head, _MISSING)
    origin = t.origins.get(target)
    if current is not _MISSING and not _same(current, value):
        first = origin or target
        t.problems.append(Problem(tuple(name.split(".")), f"the same setting as {first} ({name} is RLlib's name of "
                                  f"{target})", f"give one of them, but got {name}={value!r} and {first}={current!r}",
                                  kind="conflict"))
        return
    block[key] = value
    t.origins.setdefault(target, name)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    try:
        return bool(a == b)
    except Exception:  # arrays and other values without a plain ==
        return a is b


def _drop_no_effect(t: Translation, out: dict[str, Any], table: dict[str, tuple[tuple | None, str]],
                    block: tuple[str, ...]) -> None:
    """Drop the keys that change nothing here (noting why); a value that would change something is a problem."""
    dropped: dict[str, list[str]] = {}
    for key, (harmless, note) in table.items():
        if key not in out:
            continue
        value = out[key]
        if harmless is not None and _plain(value) and value not in harmless:
            t.problems.append(Problem((*block, key), f"{value!r} is not supported yet: {note}", kind="unsupported"))
            continue
        out.pop(key)
        dropped.setdefault(note, []).append(".".join((*block, key)))
    for note, keys in dropped.items():
        say_once(logging.WARNING, f"{', '.join(keys)}: ignored: {note}")


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _framework(t: Translation, out: dict[str, Any]) -> None:
    use_pytorch = out.pop("use_pytorch", None)
    framework = out.get("framework")
    tf_given = framework in TF_FRAMEWORKS or (use_pytorch is False and framework is None)
    if tf_given:
        shown = f"framework: {framework}" if framework in TF_FRAMEWORKS else "use_pytorch: false"
        say_once(logging.WARNING, f"{shown}: running on PyTorch; rltune's fully connected models are "
                                  "framework-neutral (the model block builds the same layers and activations)")
        out["framework"] = "torch"
    elif framework == "jax":
        t.problems.append(Problem(("framework",), "'jax' is not supported yet: rltune runs on PyTorch (framework: torch)",
                                  kind="unsupported"))
        out.pop("framework")
    elif use_pytorch is not None:
        say_once(logging.INFO, "use_pytorch: true is framework: torch in rltune")


def _gpus(out: dict[str, Any], fake: bool) -> None:
    """``num_gpus`` > 1 uses one device; with ``_fake_gpus`` and no CUDA device, the learner runs on the CPU."""
    gpus = out.get("num_gpus")
    if not isinstance(gpus, (int, float)) or isinstance(gpus, bool) or gpus <= 0:
        return
    if fake:
        import torch

        if not torch.cuda.is_available():
            out["num_gpus"] = 0
            say_once(logging.WARNING, f"num_gpus: {gpus} with _fake_gpus: no CUDA device here, so the learner runs "
                                      "on the CPU (num_gpus: 0)")
            return
    if gpus > 1:
        say_once(logging.WARNING, f"num_gpus: {gpus}: rltune's learner uses one device (a fraction shares it)")


def _env_id(out: dict[str, Any]) -> None:
    if "env" in out:
        out["env"] = env_in_rltune_names(out["env"])


def env_in_rltune_names(env: Any) -> Any:
    """``env`` as the translation has it: an old gym id that gymnasium renamed is gymnasium's (with a warning)."""
    renamed = gymnasium_id(env) if isinstance(env, str) else None
    if not renamed:
        return env
    say_once(logging.WARNING, f"env {env!r} is not in gymnasium; running {renamed!r}, gymnasium's version of it")
    return renamed


def copy_config(config: Any) -> dict[str, Any]:
    """A shallow copy of a config dict; a :class:`Translated` one stays marked (it is not translated again)."""
    return config.copy() if isinstance(config, Translated) else dict(config)


def gymnasium_id(env_id: str) -> str | None:
    """The id gymnasium registers for an old gym id it renamed (``Pendulum-v0`` -> ``Pendulum-v1``), else None.

    Only an id that is neither registered with gymnasium nor with
    :func:`~rltune.env.register_env` and whose name gymnasium has under
    another version is renamed: ``CartPole-v0`` stays (gymnasium has it).
    """
    import gymnasium as gym

    from rltune.env._registry import registered_creator

    if ":" in env_id or env_id in gym.registry or registered_creator(env_id) is not None:
        return None
    try:
        ns, name, version = gym.envs.registration.parse_env_id(env_id)
    except Exception:  # not of the form [ns/]Name-vN
        return None
    if version is None:
        return None
    versions = [spec.version for spec in gym.registry.values()
                if spec.namespace == ns and spec.name == name and spec.version is not None]
    if not versions:
        return None
    return gym.envs.registration.get_env_id(ns, name, max(versions))


def _new_stack_defaults(out: dict[str, Any], config_cls: Any) -> None:
    """The new API stack's defaults for the keys ``out`` leaves unset, when ``out`` switches that stack on."""
    if not any(out.get(switch) is True for switch in NEW_STACK_SWITCHES):
        return
    defaults = getattr(config_cls, "NEW_STACK_DEFAULTS", {})
    unset = {key: value for key, value in defaults.items() if key not in out}
    if unset:
        out.update(unset)
        given = ", ".join(f"{key}: {value}" for key, value in unset.items())
        say_once(logging.INFO, f"{given}: the new API stack's default, which this config switches on "
                               "(rltune's classic default otherwise)")


def _autos(out: dict[str, Any], fields: dict[str, Any]) -> None:
    """``rollout_fragment_length: auto`` (one round fills the train batch) and ``evaluation_duration: auto``."""
    inputs = ("num_workers", "num_envs_per_worker", "train_batch_size")
    searched = any(key in out and not _plain(out[key]) for key in inputs)
    # A study's search entry among them: each trial's config resolves "auto" with its own values.
    if out.get("rollout_fragment_length") == "auto" and not searched:
        def value(key: str) -> Any:
            given = out.get(key, fields[key].default if key in fields else 1)
            return given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else 1
        per_round = max(1, value("num_workers")) * value("num_envs_per_worker")
        out["rollout_fragment_length"] = max(1, math.ceil(value("train_batch_size") / per_round))
        say_once(logging.INFO, f"rollout_fragment_length: auto is {out['rollout_fragment_length']} here "
                               "(train_batch_size / (num_workers x num_envs_per_worker))")
    if out.get("evaluation_duration") == "auto":
        out.pop("evaluation_duration")
        say_once(logging.WARNING, "evaluation_duration: auto: evaluating "
                                  f"{fields['evaluation_duration'].default} episodes (rltune's default)")


def _translate_block(t: Translation, out: dict[str, Any], block: str, config_cls: Any) -> None:
    inner = dict(out[block])
    out[block] = inner
    fields = _fields(_block_model(config_cls, block))
    for name, target in BLOCK_ALIASES.get(block, {}).items():
        if name not in inner or name in fields:
            continue
        value = inner.pop(name)
        if target.startswith("^"):
            if target[1:] in _fields(config_cls):
                _set(t, f"{block}.{name}", target[1:], value)
                say_once(logging.INFO, f"RLlib's {block}.{name} is {target[1:]} in rltune")
            else:
                inner[name] = value
            continue
        if target in inner and not _same(inner[target], value):
            t.problems.append(Problem((block, name), f"the same setting as {block}.{target} ({name} is RLlib's old "
                                      f"name of {target})", f"give one of them, but got {inner[target]!r} and {value!r}",
                                      kind="conflict"))
            continue
        inner[target] = value
        t.origins.setdefault(f"{block}.{target}", f"{block}.{name}")
        say_once(logging.INFO, f"RLlib's {block}.{name} is {block}.{target} in rltune")
    _drop_no_effect(t, inner, BLOCK_NO_EFFECT.get(block, {}), (block,))
    if block == "replay_buffer_config":
        _replay_type(t, inner)


_UNIFORM_BUFFERS = ("ReplayBuffer", "MultiAgentReplayBuffer", "EpisodeReplayBuffer", "MultiAgentEpisodeReplayBuffer")


def _replay_type(t: Translation, inner: dict[str, Any]) -> None:
    kind = inner.get("type")
    if not isinstance(kind, str):
        return
    short = kind.rsplit(".", 1)[-1]
    if short in _UNIFORM_BUFFERS:
        inner["type"] = "ReplayBuffer"
        if short != "ReplayBuffer":
            say_once(logging.INFO, f"replay_buffer_config.type: {kind} is ReplayBuffer in rltune (uniform replay)")
    elif "Prioritized" in short:
        t.problems.append(Problem(("replay_buffer_config", "type"), f"{kind!r} is not supported yet: rltune replays "
                                  "uniformly (type: ReplayBuffer)", kind="unsupported"))
        inner.pop("type")


def _algorithm_with_key(key: str, config_cls: Any) -> str | None:
    """The name of another of rltune's algorithms whose settings have ``key`` (None if none has)."""
    from rltune.trainers import _TRAINERS, get_trainer_class

    for name in sorted(_TRAINERS):
        settings = get_trainer_class(name).config_class
        if settings is not config_cls and key in {f.alias or n for n, f in settings.model_fields.items()}:
            return name
    return None


def rllib_key_problem(config_cls: Any, loc: tuple[str, ...]) -> Problem | None:
    """The problem of an unknown key at ``loc`` that is an RLlib key rltune lacks, or None for any other key."""
    key, block = loc[-1], loc[:-1]
    trainer = config_cls.__name__.removesuffix("Settings") or "this trainer"
    if not block:
        owner = _algorithm_with_key(key, config_cls)
        if owner is not None:  # a key of another of rltune's algorithms (DQN's hiddens in a PPO config)
            return Problem(loc, f"a key of {owner}, which {trainer} does not have (run: {owner} to use it)",
                           kind="unsupported")
        hint = UNSUPPORTED.get(key)
        if hint is None and key in ALIASES:  # RLlib's name of a key of another algorithm
            return Problem(loc, f"an RLlib key rltune does not support yet: {trainer} has no {ALIASES[key]} "
                                f"(RLlib's {key})", kind="unsupported")
    elif len(block) == 1:
        hint = BLOCK_UNSUPPORTED.get(block[0], {}).get(key)
    else:
        hint = None
    if hint is None:
        return None
    return Problem(loc, "an RLlib key rltune does not support yet" + (f": the nearest here is {hint}" if hint else ""),
                   kind="unsupported")


def translate_fields(fields: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A study or train file's fields with Tune's experiment names (``local_dir``) as rltune's; and the problems."""
    out, problems = dict(fields), []
    for name, target in EXPERIMENT_FIELDS.items():
        if name not in out:
            continue
        value = out.pop(name)
        if target in out and out[target] != value:
            problems.append(f"{name}: the same field as {target} ({name} is Tune's name of {target}); give one")
            continue
        out[target] = value
        say_once(logging.INFO, f"Tune's {name} is {target} in rltune")
    return out, problems


def add_result_spellings(result: dict[str, Any]) -> dict[str, Any]:
    """Give ``result`` RLlib's other spellings of its episode stats (the same values); returns it.

    ``episode_return_mean/min/max`` (the new stack's names), an
    ``env_runners`` block (the new stack's: ``episode_return_*``,
    ``episode_reward_*``, ``episode_len_mean``, ``num_episodes``, step counts)
    and a ``sampler_results`` block (Ray 1.x-2.9's), so that stop criteria and
    study metrics written for any RLlib version find their key.
    :data:`rltune._metrics.RESULT_SPELLINGS` names them, so that MLflow logs
    each value once, under rltune's classic name.
    """
    stats = {key: result[key] for key in ("episode_reward_mean", "episode_reward_min", "episode_reward_max",
                                           "episode_len_mean", "episodes_this_iter") if key in result}
    returns = {f"episode_return_{s}": result[f"episode_reward_{s}"] for s in ("mean", "min", "max")
               if f"episode_reward_{s}" in result}
    counts = {"num_episodes": result.get("episodes_this_iter"), "num_episodes_lifetime": result.get("episodes_total"),
              "num_env_steps_sampled": result.get("timesteps_this_iter"),
              "num_env_steps_sampled_lifetime": result.get("timesteps_total"),
              "num_agent_steps_sampled_lifetime": result.get("agent_timesteps_total")}
    env_runners = {**returns, **stats, **{k: v for k, v in counts.items() if v is not None}}
    if result.get("policy_reward_mean"):
        env_runners["module_episode_returns_mean"] = result["policy_reward_mean"]
        stats["policy_reward_mean"] = result["policy_reward_mean"]
    result.update(returns)
    if result.get("timesteps_total") is not None:
        result["num_env_steps_sampled_lifetime"] = result["timesteps_total"]
    result["env_runners"] = env_runners
    result["sampler_results"] = stats
    return result
