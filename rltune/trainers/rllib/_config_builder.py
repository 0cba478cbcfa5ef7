"""The config builder API of RLlib (``AlgorithmConfig``): ``PPOConfig().environment(...).training(...).build()``.

Each builder method sets a group of keys and validates them at once with the
trainer's typed settings (``PPOSettings``, ...): an unknown keyword or a bad
value raises a :class:`~rltune.errors.ConfigError` naming the method and the
keyword, at the call that gave it. Checks across keys (a policy mapping
function needs policies, ...) wait for :meth:`AlgorithmConfig.build` and
:meth:`AlgorithmConfig.validate`, so that the order of calls does not matter.

A builder holds the keys set so far (rltune's config-dict names, RLlib's
classic ones); :meth:`AlgorithmConfig.to_dict` is the trainer's whole config
dict (defaults included), search-space entries (``tune.grid_search``, ...)
kept as given for ``tune.run``. Which keywords each method takes, and RLlib's
builder names that differ from the dict keys, are in ``_builder_keys.py``.
"""

from __future__ import annotations

import difflib
import logging
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from rltune.errors import ConfigError
from rltune.trainers.rllib import _builder_mapping as _mapping
from rltune.trainers.rllib._builder_calls import builder_method
from rltune.trainers.rllib._builder_keys import ALGORITHM_TRAINING_KEYWORDS, METHOD_KEYWORDS, NO_EFFECT_KEYWORDS, RLLIB_BUILDER_NAMES
from rltune.trainers.rllib._builder_values import (
    candidates,
    copy_tree,
    entries,
    explain,
    merged,
    problems_of,
    put_value,
    same_as_rltune,
    settings_keys,
)
from rltune.trainers._config import TrainerSettings, default_config

if TYPE_CHECKING:
    from rltune.trainers._trainer import Trainer

logger = logging.getLogger(__name__)

class AlgorithmConfig:
    """Builds a trainer's config step by step, RLlib's way; :class:`PPOConfig` and :class:`DQNConfig` are its kinds.

    ::

        config = (PPOConfig()
                  .environment("CartPole-v1", env_config={})
                  .env_runners(num_env_runners=2)            # or .rollouts(num_rollout_workers=2)
                  .training(lr=3e-4, num_epochs=10, model={"fcnet_hiddens": [64, 64]})
                  .debugging(seed=0))
        trainer = config.build()                           # or PPO(config=config), Trainer(config=config)
        tune.run("PPO", config=config.to_dict())           # search-space entries kept

    ``AlgorithmConfig(algo_class=MyTrainer)`` configures any trainer class;
    ``AlgorithmConfig()`` alone holds the keys every trainer shares.
    Reading ``config.lr`` or ``config["lr"]`` gives the value the trainer
    would get; assigning ``config.lr = 0.01`` is :meth:`update_from_dict`.
    """

    # RLlib 2.x's switches of its newer API stacks, read by scripts (``if config._enable_learner_api:``): the classic
    # stack's answers, since that is the stack rltune's trainers are
    _enable_learner_api = False
    _enable_rl_module_api = False
    enable_rl_module_and_learner = False
    enable_env_runner_and_connector_v2 = False

    algo_name: ClassVar[str | None] = None
    _is_config_builder: ClassVar[bool] = True  # what builder_method checks its calls are made on

    def __init__(self, algo_class: type[Trainer] | None = None) -> None:
        object.__setattr__(self, "_algo_class", _checked_algo_class(algo_class, f"{type(self).__name__}()"))
        object.__setattr__(self, "_values", {})

    # -- what it configures -----------------------------------------------------------------
    @property
    def algo_class(self) -> type[Trainer] | None:
        """The trainer class that :meth:`build` makes (None for a bare ``AlgorithmConfig()``)."""
        if self._algo_class is None and self.algo_name is not None:
            from rltune.trainers import get_trainer_class

            object.__setattr__(self, "_algo_class", get_trainer_class(self.algo_name))
        return self._algo_class

    @property
    def settings_class(self) -> type[TrainerSettings]:
        """The typed settings the keys are validated with (the trainer's ``config_class``)."""
        algo = self.algo_class
        return algo.config_class if algo is not None else TrainerSettings

    def _name(self) -> str:
        return type(self).__name__

    # -- builder methods (RLlib's names; see _builder_keys.py for every keyword) ------------------
    @builder_method
    def environment(self, env: Any = None, **kwargs: Any) -> "AlgorithmConfig":
        """The env (a gymnasium id, env class, ``register_env`` name or ``'pkg.module:Name'``) and its settings.

        Keywords: ``env_config`` (merged into the one set before),
        ``observation_space``, ``action_space``, ``env_task_fn``,
        ``clip_actions``, ``disable_env_checking``, and rltune's
        ``curriculum``.
        """
        return self._update("environment", {"env": env, **kwargs} if env is not None else kwargs)

    @builder_method
    def rollouts(self, **kwargs: Any) -> "AlgorithmConfig":
        """Sampling (RLlib's classic names): ``num_rollout_workers``, ``num_envs_per_worker``,
        ``rollout_fragment_length``, ``batch_mode``, ``observation_filter``, ``recreate_failed_workers``,
        ``sample_timeout_s``, ..."""
        return self._update("rollouts", kwargs)

    @builder_method
    def env_runners(self, **kwargs: Any) -> "AlgorithmConfig":
        """Sampling (RLlib's new names): ``num_env_runners``, ``num_envs_per_env_runner``,
        ``rollout_fragment_length``, ``batch_mode``, ``explore``, ``observation_filter``, ``sample_timeout_s``, ..."""
        return self._update("env_runners", kwargs)

    @builder_method
    def training(self, **kwargs: Any) -> "AlgorithmConfig":
        """Learning: ``lr``, ``gamma``, ``train_batch_size``, ``model`` (merged into the one set before),
        ``grad_clip``, ``lr_schedule``, and every key of the algorithm itself (PPO: ``lambda_``,
        ``num_epochs``/``num_sgd_iter``, ``minibatch_size``/``sgd_minibatch_size``, ``clip_param``, ...;
        DQN: ``target_network_update_freq``, ``replay_buffer_config``, ``double_q``, ...)."""
        return self._update("training", kwargs)

    @builder_method
    def resources(self, **kwargs: Any) -> "AlgorithmConfig":
        """Compute: ``num_gpus`` (the learner's device), ``num_cpus_per_worker``, ``num_gpus_per_worker``,
        and rltune's ``torch_num_threads``."""
        return self._update("resources", kwargs)

    @builder_method
    def framework(self, framework: str | None = None, **kwargs: Any) -> "AlgorithmConfig":
        """The deep-learning framework (rltune runs on PyTorch) and ``torch_compile_learner*``."""
        return self._update("framework", {"framework": framework, **kwargs} if framework is not None else kwargs)

    @builder_method
    def debugging(self, **kwargs: Any) -> "AlgorithmConfig":
        """``log_level`` (DEBUG, INFO, WARN, ERROR) and ``seed``."""
        return self._update("debugging", kwargs)

    @builder_method
    def evaluation(self, **kwargs: Any) -> "AlgorithmConfig":
        """``evaluation_interval``, ``evaluation_duration`` (episodes) and ``evaluation_config``
        (a dict of overrides, e.g. ``PPOConfig.overrides(explore=False)``, or a builder)."""
        if isinstance(kwargs.get("evaluation_config"), AlgorithmConfig):
            kwargs["evaluation_config"] = kwargs["evaluation_config"].overrides_dict()
        return self._update("evaluation", kwargs)

    @builder_method
    def multi_agent(self, **kwargs: Any) -> "AlgorithmConfig":
        """``policies`` (ids to PolicySpec, or a set of ids), ``policy_mapping_fn``, ``policies_to_train``."""
        return self._update("multi_agent", kwargs)

    @builder_method
    def callbacks(self, callbacks_class: Any = None) -> "AlgorithmConfig":
        """A ``DefaultCallbacks`` subclass (an import string, a list of them, or old RLlib's dict of hook functions)."""
        from rltune.callbacks._callbacks import make_callbacks

        try:
            make_callbacks(callbacks_class)
        except ConfigError as exc:
            raise ConfigError(exc.problems, where=f"{self._name()}.callbacks()") from None
        return self._update("callbacks", {"callbacks": callbacks_class})

    @builder_method
    def exploration(self, **kwargs: Any) -> "AlgorithmConfig":
        """``explore`` and ``exploration_config`` (merged into the one set before unless its ``type`` changes)."""
        return self._update("exploration", kwargs)

    @builder_method
    def reporting(self, **kwargs: Any) -> "AlgorithmConfig":
        """``metrics_num_episodes_for_smoothing``, ``min_sample_timesteps_per_iteration`` (DQN)."""
        return self._update("reporting", kwargs)

    @builder_method
    def fault_tolerance(self, **kwargs: Any) -> "AlgorithmConfig":
        """``recreate_failed_workers``/``restart_failed_env_runners``, ``max_num_worker_restarts``/
        ``max_num_env_runner_restarts``, ``restart_failed_sub_environments``."""
        return self._update("fault_tolerance", kwargs)

    @builder_method
    def offline_data(self, **kwargs: Any) -> "AlgorithmConfig":
        """RLlib's offline input and output: not supported yet (``input_="sampler"``, the default, is accepted)."""
        return self._update("offline_data", kwargs)

    @builder_method
    def checkpointing(self, **kwargs: Any) -> "AlgorithmConfig":
        """RLlib's checkpoint options: not supported yet (checkpoints hold every policy and learner)."""
        return self._update("checkpointing", kwargs)

    @builder_method
    def rl_module(self, **kwargs: Any) -> "AlgorithmConfig":
        """The new stack's ``model_config`` (``fcnet_hiddens``, ...): merged into ``model``."""
        return self._update("rl_module", kwargs)

    @builder_method
    def learners(self, **kwargs: Any) -> "AlgorithmConfig":
        """The new stack's learners: ``num_gpus_per_learner`` is ``num_gpus``; ``num_learners`` 0 or 1 only."""
        return self._update("learners", kwargs)

    @builder_method
    def api_stack(self, **kwargs: Any) -> "AlgorithmConfig":
        """RLlib's switch between its API stacks: accepted, and changes nothing (rltune has one)."""
        return self._update("api_stack", kwargs)

    @builder_method
    def experimental(self, **kwargs: Any) -> "AlgorithmConfig":
        """``_enable_new_api_stack`` is accepted and changes nothing; the rest is not supported."""
        return self._update("experimental", kwargs)

    # -- dicts ------------------------------------------------------------------------------
    @builder_method
    def to_dict(self) -> dict[str, Any]:
        """The trainer's whole config dict: its defaults updated by every key set (search-space entries kept)."""
        algo = self.algo_class
        config = default_config(algo.config_class if algo is not None else TrainerSettings)
        for key, value in copy_tree(self._values).items():
            config[key] = merged(key, config.get(key), value)
        return config

    @builder_method
    def overrides_dict(self) -> dict[str, Any]:
        """Only the keys set on this builder (what ``evaluation_config`` or a PolicySpec's config takes)."""
        return copy_tree(self._values)

    @builder_method
    def update_from_dict(self, config_dict: Mapping[str, Any]) -> "AlgorithmConfig":
        """Set the keys of a config dict (RLlib's classic keys; builder names such as ``num_env_runners`` too)."""
        if not isinstance(config_dict, Mapping):
            raise ConfigError(f"must be a dict of config keys, but got {type(config_dict).__name__}",
                              where=f"{self._name()}.update_from_dict()")
        given = [(str(k), RLLIB_BUILDER_NAMES.get(str(k), str(k)), v) for k, v in config_dict.items()]
        return self._apply(given, f"{self._name()}.update_from_dict()")

    @classmethod
    @builder_method
    def from_dict(cls, config_dict: Mapping[str, Any]) -> "AlgorithmConfig":
        """A builder holding the keys of a config dict (e.g. ``PPOConfig.from_dict(DEFAULT_CONFIG)``)."""
        return cls().update_from_dict(config_dict)

    @classmethod
    @builder_method
    def overrides(cls, **kwargs: Any) -> dict[str, Any]:
        """A validated dict of some keys (builder names allowed), for ``evaluation_config`` or a PolicySpec's config."""
        return cls().update_from_dict(kwargs).overrides_dict()

    @builder_method
    def copy(self) -> "AlgorithmConfig":
        """An independent copy: later calls on either change only that one (dicts and lists are copied,
        other values such as classes, functions and PolicySpecs are shared)."""
        other = type(self)(algo_class=self._algo_class)
        object.__setattr__(other, "_values", copy_tree(self._values))
        return other

    # -- building ---------------------------------------------------------------------------
    @builder_method
    def validate(self) -> None:
        """Run every check the trainer runs (across keys too); ConfigError with every problem."""
        algo = self._trainer_class("validate()")
        for candidate, malformed in candidates(self.to_dict()):
            if malformed is None:
                algo.validate(candidate)

    @builder_method
    def build(self, env: Any = None, *, results_dir: str | None = None) -> "Trainer":
        """The trainer of this config (``env`` overrides the configured one); a search space is refused."""
        algo = self._trainer_class("build()")
        return algo(config=self.single_config("build()"), env=env, results_dir=results_dir)

    build_algo = build  # RLlib's newer name

    def single_config(self, where: str) -> dict[str, Any]:
        """:meth:`to_dict` for one trainer: a search-space entry is an error that points to ``tune.run``."""
        found = [".".join(path) for path, _ in entries(self._values)]
        if found:
            raise ConfigError(
                f"{', '.join(found)}: search-space entries make a study of many trials; pass "
                f"config.to_dict() (or the config) to tune.run, or give one value", where=f"{self._name()}.{where}")
        return self.to_dict()

    def _trainer_class(self, where: str) -> type[Trainer]:
        algo = self.algo_class
        if algo is None:
            raise ConfigError("AlgorithmConfig() has no algorithm: use PPOConfig() or DQNConfig(), "
                              "or AlgorithmConfig(algo_class=MyTrainer)", where=f"{self._name()}.{where}")
        return algo

    # -- reading and writing like a dict (RLlib 2.x kept the classic API on its builder) -------
    __getitem__ = _mapping.getitem
    __setitem__ = _mapping.setitem
    __delitem__ = _mapping.delitem
    __iter__ = _mapping.iterate
    __len__ = _mapping.length
    __eq__ = _mapping.equals  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]
    __deepcopy__ = _mapping.deep_copy
    __copy__ = copy
    values = builder_method(_mapping.values)
    update = builder_method(_mapping.update)
    pop = builder_method(_mapping.pop)

    @builder_method
    def get(self, key: str, default: Any = None) -> Any:
        """The value of a config key (as :meth:`to_dict` has it), or ``default``."""
        return self.to_dict().get(RLLIB_BUILDER_NAMES.get(key, key), default)

    @builder_method
    def keys(self) -> list[str]:
        """The config keys (of :meth:`to_dict`)."""
        return list(self.to_dict())

    @builder_method
    def items(self) -> list[tuple[str, Any]]:
        """The (key, value) pairs of :meth:`to_dict`."""
        return list(self.to_dict().items())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and RLLIB_BUILDER_NAMES.get(key, key).split(".")[0] in self.to_dict()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        node: Any = self.to_dict()
        for part in RLLIB_BUILDER_NAMES.get(name, name).split("."):
            if not isinstance(node, dict) or part not in node:
                raise AttributeError(f"{self._name()} has no setting {name!r}")
            node = node[part]
        return self[name] if isinstance(node, dict) else node  # a block: the builder's own (config.model[...] = ...)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "algo_class":
            object.__setattr__(self, "_algo_class", _checked_algo_class(value, f"{self._name()}.algo_class"))
        elif name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            self.update_from_dict({name: value})

    def __repr__(self) -> str:
        return f"{self._name()}({self._values!r})"

    # -- the one update path ------------------------------------------------------------------
    def _update(self, method: str, given: dict[str, Any]) -> "AlgorithmConfig":
        where = f"{self._name()}.{method}()"
        routed, problems = [], []
        no_effect = sorted(k for k in given if k in NO_EFFECT_KEYWORDS and k in METHOD_KEYWORDS[method])
        if no_effect:
            logger.warning("%s: %s: rltune has one API stack, so this changes nothing", where, ", ".join(no_effect))
        for keyword, value in given.items():
            target, problem = self._route(method, keyword, value)
            if problem:
                problems.append(f"{keyword}: {problem}")
            elif target is not None:
                routed.append((keyword, target, value))
        if problems:
            raise ConfigError(problems, where=where)
        return self._apply(routed, where)

    def _route(self, method: str, keyword: str, value: Any) -> tuple[str | None, str | None]:
        """(rltune key, None) for a keyword ``method`` takes; (None, None) to ignore it; (None, problem) otherwise."""
        if keyword in NO_EFFECT_KEYWORDS and keyword in METHOD_KEYWORDS[method]:
            return None, None  # (warned about in _update)
        target = RLLIB_BUILDER_NAMES.get(keyword, keyword)
        keys = settings_keys(self.settings_class)
        owners = self._owners(keys)
        if keyword in self._keywords(method) or (method == "training" and target in keys and not owners.get(target)):
            if target not in keys and same_as_rltune(keyword, value):
                return None, None
            return target, None
        if target in keys:
            calls = " or ".join(f".{m}({k}=...)" for m, k in sorted(owners[target].items()))
            return None, f"not a keyword of {method}(); set it with {calls}"
        other = [m for m in METHOD_KEYWORDS if keyword in self._keywords(m)]
        if other:
            return None, f"a keyword of {other[0]}(), not of {method}()"
        algos = [a for a, keywords in ALGORITHM_TRAINING_KEYWORDS.items() if keyword in keywords]
        if algos:
            if self.algo_name is None:
                return None, f"a training() keyword of {' and '.join(algos)} only; use {algos[0]}Config()"
            return None, f"a training() keyword of {' and '.join(algos)}, not of {self.algo_name}"
        return None, self._unknown(method, keyword, keys, owners)

    def _unknown(self, method: str, keyword: str, keys: frozenset[str], owners: dict[str, dict[str, str]]) -> str:
        choices = set(self._keywords(method))
        if method == "training":
            choices |= {k for k in keys if "." not in k and not owners.get(k)}
        close = difflib.get_close_matches(keyword, sorted(choices), n=1, cutoff=0.6)
        if close:
            return f"unknown keyword; did you mean {close[0]!r}?"
        if method == "training":
            name = self.algo_name or "the trainer"
            return (f"unknown keyword (training() takes lr, gamma, train_batch_size, model, ... and {name}'s own keys; "
                    f"'rltune train --run {self.algo_name or 'ALGO'} --show-config' lists them all)")
        return f"unknown keyword (the keywords of {method}() are {', '.join(sorted(choices))})"

    def _keywords(self, method: str) -> tuple[str, ...]:
        if method == "training":
            return METHOD_KEYWORDS["training"] + ALGORITHM_TRAINING_KEYWORDS.get(self.algo_name or "", ())
        return METHOD_KEYWORDS[method]

    def _owners(self, keys: frozenset[str]) -> dict[str, dict[str, str]]:
        """The methods (and their keyword) that set each settings key; a key no method lists is ``training()``'s."""
        owners: dict[str, dict[str, str]] = {}
        for method in METHOD_KEYWORDS:
            for keyword in self._keywords(method):
                target = RLLIB_BUILDER_NAMES.get(keyword, keyword)
                if target in keys:
                    owners.setdefault(target, {}).setdefault(method, keyword)
                    if "." in target and method != "training":  # the block too ('multiagent' is multi_agent()'s)
                        owners.setdefault(target.split(".")[0], {}).setdefault(method, keyword)
        return owners

    def _apply(self, routed: list[tuple[str, str, Any]], where: str) -> "AlgorithmConfig":
        """Validate the keys set so far plus ``routed`` ((keyword, key, value) triples); keep them if valid."""
        values = dict(self._values)
        for _, target, value in routed:
            put_value(values, target, value)
        problems = problems_of(self.settings_class, values)
        if problems:
            renamed = {target: keyword for keyword, target, _ in routed if keyword != target}
            unsupported = {target: keyword for keyword, target, _ in routed}
            raise ConfigError([explain(p, renamed, unsupported) for p in problems], where=where)
        object.__setattr__(self, "_values", values)
        return self


class PPOConfig(AlgorithmConfig):
    """The config builder of :class:`~rltune.trainers.PPO` (RLlib's ``PPOConfig``)."""

    algo_name = "PPO"


class DQNConfig(AlgorithmConfig):
    """The config builder of :class:`~rltune.trainers.DQN` (RLlib's ``DQNConfig``)."""

    algo_name = "DQN"


def _checked_algo_class(value: Any, where: str) -> Any:
    """``algo_class`` of a builder: None or a trainer class; ConfigError naming ``where`` otherwise."""
    from rltune.trainers._trainer import Trainer

    if value is None or (isinstance(value, type) and issubclass(value, Trainer)):
        return value
    raise ConfigError(f"algo_class: must be a trainer class (a rltune.trainers.Trainer subclass such as PPO) or None, "
                      f"but got {value!r:.60}", where=where)


def builder_of(trainer_cls: type[Trainer]) -> AlgorithmConfig:
    """A new config builder of ``trainer_cls`` (``PPOConfig`` for PPO and its subclasses; ``AlgorithmConfig`` else)."""
    kinds = [kind for kind in (PPOConfig, DQNConfig) if kind.algo_name == trainer_cls.name]
    return (kinds[0] if kinds else AlgorithmConfig)(algo_class=trainer_cls)


def config_for_trainer(config: Any, trainer_cls: type) -> Any:
    """A trainer's ``config`` argument as a dict: a builder becomes its :meth:`~AlgorithmConfig.to_dict`.

    A builder of another algorithm is an error that names the builder to use;
    a builder class (not an instance) or a value that is not a dict is one too.
    """
    if isinstance(config, type) and issubclass(config, AlgorithmConfig):
        raise ConfigError(f"got the class {config.__name__}, not a config: use {config.__name__}() and its methods",
                          where=f"{trainer_cls.name}(config=...)")
    if not isinstance(config, AlgorithmConfig):
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(f"must be a dict of config keys or a {trainer_cls.name}Config(), but got "
                              f"{type(config).__name__} {config!r:.60}", where=f"{trainer_cls.name}(config=...)")
        return config
    algo = config.algo_class
    if algo is not None and not issubclass(trainer_cls, algo):
        raise ConfigError(
            f"got a {type(config).__name__}, which configures {algo.name}, not {trainer_cls.name}; "
            f"use {trainer_cls.name}Config() (or {type(config).__name__}().build())", where=f"{trainer_cls.name}(config=...)")
    return config.single_config(f"build() as {trainer_cls.name}(config=...)")
