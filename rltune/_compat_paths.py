"""RLlib's and Ray's import paths under rltune: ``ray.rllib.X`` -> ``rltune.X`` and ``ray.X`` -> ``rltune.X``.

A script ported by renaming its imports (``from ray.rllib.algorithms.ppo
import PPOConfig`` -> ``from rltune.algorithms.ppo import PPOConfig``) finds
each name here. :data:`PATHS` is the one table: module path -> {name: where
the object lives, ``"module:attr"``}. No file of rltune's own layout holds
these modules: :class:`CompatFinder` (installed by ``import rltune``) builds
each one on import as a thin re-export whose names load on first access, so
``import rltune.algorithms.ppo`` costs nothing until ``PPOConfig`` is read.
A prefix of a path (``rltune.algorithms``) is a package of the paths under
it; ``rltune.tune`` stays the module ``rltune/tune.py`` and also becomes the
package of ``rltune.tune.schedulers`` and its siblings.

:data:`PENDING` names entries whose objects are still to come (none
today): reading one before it exists is an AttributeError (an ImportError
for ``from ... import``) that says so; tests/test_compat_paths.py reports
them as expected failures.
docs/porting-from-rllib.md lists the table (the same test checks it).

This module imports no other part of rltune (every target is a string), so
``import rltune`` stays cheap.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, Sequence

_T = "rltune.trainers"
_TUNE = "rltune.tune"
_O = "rltune._compat_objects"

# module path -> {name: "module:attribute"}.
PATHS: dict[str, dict[str, str]] = {
    # -- Ray itself: import ray; ray.init() -> import rltune; rltune.init()
    "rltune": {**{name: f"rltune._compat_paths:{name}" for name in ("init", "shutdown", "is_initialized")},
               "Policy": f"{_T}:Policy", "SampleBatch": f"{_O}:SampleBatch", "BaseEnv": f"{_O}:BaseEnv",
               "MultiAgentEnv": "rltune.env:MultiAgentEnv", "VectorEnv": f"{_O}:VectorEnv"},
    # -- RLlib's utility modules (ray.rllib.utils ...)
    "rltune.utils": {"override": f"{_O}:override", "try_import_torch": f"{_O}:try_import_torch",
                     "try_import_tf": f"{_O}:try_import_tf"},
    "rltune.utils.framework": {"try_import_torch": f"{_O}:try_import_torch", "try_import_tf": f"{_O}:try_import_tf"},
    "rltune.utils.annotations": {"override": f"{_O}:override", **{name: f"{_O}:api_marker" for name in (
        "PublicAPI", "DeveloperAPI", "ExperimentalAPI", "OldAPIStack")}},
    "rltune.utils.error": {"EnvError": "rltune.errors:EnvError"},
    "rltune.utils.deprecation": {name: f"{_O}:{name}" for name in ("Deprecated", "deprecation_warning")},
    "rltune.utils.typing": {name: f"{_O}:{name}" for name in (
        "AgentID", "PolicyID", "EnvType", "EnvID", "EnvConfigDict", "MultiAgentDict", "TensorType", "TensorStructType",
        "ModelConfigDict", "ModelWeights", "AlgorithmConfigDict", "PartialAlgorithmConfigDict", "ResultDict",
        "SampleBatchType")},
    "rltune.policy.sample_batch": {"SampleBatch": f"{_O}:SampleBatch"},
    "rltune.env.base_env": {"BaseEnv": f"{_O}:BaseEnv"},
    "rltune.env.vector_env": {"VectorEnv": f"{_O}:VectorEnv"},
    # -- RLlib 2.x: ray.rllib.algorithms ...
    "rltune.algorithms": {"Algorithm": f"{_T}:Trainer", "AlgorithmConfig": f"{_T}:AlgorithmConfig"},
    "rltune.algorithms.algorithm": {"Algorithm": f"{_T}:Trainer"},
    "rltune.algorithms.algorithm_config": {"AlgorithmConfig": f"{_T}:AlgorithmConfig"},
    "rltune.algorithms.ppo": {"PPO": f"{_T}:PPO", "PPOConfig": f"{_T}:PPOConfig", "PPOTorchPolicy": f"{_T}:PPOPolicy",
                              "DEFAULT_CONFIG": f"{_T}.ppo:DEFAULT_CONFIG",
                              # TF policies run on torch, as framework: tf configs do
                              "PPOTF1Policy": f"{_T}:PPOPolicy", "PPOTF2Policy": f"{_T}:PPOPolicy"},
    "rltune.algorithms.ppo.ppo_tf_policy": {"PPOTF1Policy": f"{_T}:PPOPolicy", "PPOTF2Policy": f"{_T}:PPOPolicy"},
    "rltune.algorithms.ppo.ppo": {"PPO": f"{_T}:PPO", "PPOConfig": f"{_T}:PPOConfig"},
    "rltune.algorithms.ppo.ppo_torch_policy": {"PPOTorchPolicy": f"{_T}:PPOPolicy"},
    "rltune.algorithms.dqn": {"DQN": f"{_T}:DQN", "DQNConfig": f"{_T}:DQNConfig", "DQNTorchPolicy": f"{_T}:DQNPolicy",
                              "DEFAULT_CONFIG": f"{_T}.dqn:DEFAULT_CONFIG", "DQNTFPolicy": f"{_T}:DQNPolicy"},
    "rltune.algorithms.dqn.dqn_tf_policy": {"DQNTFPolicy": f"{_T}:DQNPolicy"},
    "rltune.algorithms.dqn.dqn": {"DQN": f"{_T}:DQN", "DQNConfig": f"{_T}:DQNConfig"},
    "rltune.algorithms.dqn.dqn_torch_policy": {"DQNTorchPolicy": f"{_T}:DQNPolicy"},
    "rltune.algorithms.callbacks": {"DefaultCallbacks": "rltune.callbacks:DefaultCallbacks"},
    "rltune.algorithms.registry": {"get_algorithm_class": f"{_T}:get_trainer_class"},
    # -- RLlib 1.x: ray.rllib.agents ...
    "rltune.agents": {"Trainer": f"{_T}:Trainer"},
    "rltune.agents.trainer": {"Trainer": f"{_T}:Trainer"},
    "rltune.agents.ppo": {"PPOTrainer": f"{_T}:PPO", "DEFAULT_CONFIG": f"{_T}.ppo:DEFAULT_CONFIG"},
    "rltune.agents.dqn": {"DQNTrainer": f"{_T}:DQN", "DEFAULT_CONFIG": f"{_T}.dqn:DEFAULT_CONFIG"},
    "rltune.agents.callbacks": {"DefaultCallbacks": "rltune.callbacks:DefaultCallbacks"},
    # -- policies, envs, callbacks, evaluation
    "rltune.policy": {"Policy": f"{_T}:Policy"},
    "rltune.policy.policy": {"Policy": f"{_T}:Policy", "PolicySpec": f"{_T}:PolicySpec"},
    "rltune.env.multi_agent_env": {"MultiAgentEnv": "rltune.env:MultiAgentEnv",
                                   "make_multi_agent": "rltune.env:make_multi_agent"},
    "rltune.env.env_context": {"EnvContext": "rltune.env:EnvContext"},
    "rltune.env.apis.task_settable_env": {"TaskSettableEnv": "rltune.env:TaskSettableEnv", "TaskType": f"{_O}:TaskType"},
    "rltune.env.wrappers.pettingzoo_env": {"PettingZooEnv": "rltune.env:PettingZooEnv",
                                           "ParallelPettingZooEnv": "rltune.env:ParallelPettingZooEnv"},
    "rltune.callbacks.callbacks": {"DefaultCallbacks": "rltune.callbacks:DefaultCallbacks"},
    "rltune.evaluation": {"Episode": "rltune.callbacks:Episode", "RolloutWorker": "rltune.trainers.sampling._rollout_worker:RolloutWorker"},
    "rltune.evaluation.rollout_worker": {"RolloutWorker": "rltune.trainers.sampling._rollout_worker:RolloutWorker"},
    "rltune.evaluation.episode": {"Episode": "rltune.callbacks:Episode"},
    "rltune.utils.test_utils": {"check_learning_achieved": "rltune.orchestrator._rllib_study:check_learning_achieved"},
    # -- Ray Tune: ray.tune ...
    "rltune.tune.registry": {"register_env": "rltune.env:register_env", "get_trainable_cls": f"{_T}:get_trainable_cls"},
    "rltune.tune.logger": {"pretty_print": f"{_T}:pretty_print"},
    "rltune.tune.execution.placement_groups": {
        "PlacementGroupFactory": f"{_T}.rllib._old_trainer_names:PlacementGroupFactory"},
    "rltune.tune.schedulers": {name: f"{_TUNE}:{name}" for name in (
        "FIFOScheduler", "ASHAScheduler", "AsyncHyperBandScheduler", "HyperBandScheduler", "MedianStoppingRule",
        "PopulationBasedTraining", "PB2")},
    "rltune.tune.schedulers.pb2": {"PB2": f"{_TUNE}:PB2"},
    "rltune.tune.search": {name: f"{_TUNE}:{name}" for name in ("BasicVariantGenerator", "ConcurrencyLimiter")},
    "rltune.tune.search.basic_variant": {"BasicVariantGenerator": f"{_TUNE}:BasicVariantGenerator"},
    "rltune.tune.search.optuna": {"OptunaSearch": f"{_TUNE}:OptunaSearch"},
    "rltune.tune.search.hyperopt": {"HyperOptSearch": f"{_TUNE}:HyperOptSearch"},
    "rltune.tune.search.bayesopt": {"BayesOptSearch": f"{_TUNE}:BayesOptSearch"},
    "rltune.air.integrations.mlflow": {name: f"{_TUNE}:{name}" for name in ("MLflowLoggerCallback", "setup_mlflow")},
    "rltune.tune.integration.mlflow": {name: f"{_TUNE}:{name}" for name in ("MLflowLoggerCallback", "setup_mlflow")},
    # -- Ray Train / AIR (2.x): the Tuner's configs and checkpoints
    "rltune.train": {name: f"{_TUNE}:{name}" for name in (
        "RunConfig", "CheckpointConfig", "FailureConfig", "Checkpoint", "Result", "report", "get_checkpoint",
        "get_context")},
    "rltune.air": {name: f"{_TUNE}:{name}" for name in (
        "RunConfig", "CheckpointConfig", "FailureConfig", "Checkpoint", "Result")},
    "rltune.air.config": {name: f"{_TUNE}:{name}" for name in ("RunConfig", "CheckpointConfig", "FailureConfig")},
    "rltune.air.session": {name: f"rltune.orchestrator._session:{name}" for name in (
        "report", "get_checkpoint", "get_context", "get_trial_name", "get_trial_id", "get_trial_dir",
        "get_experiment_name")},
    "rltune.tune.tuner": {"Tuner": f"{_TUNE}:Tuner"},
    "rltune.tune.tune_config": {"TuneConfig": f"{_TUNE}:TuneConfig"},
    "rltune.tune.result_grid": {"ResultGrid": f"{_TUNE}:ResultGrid"},
}

# Entries whose objects are still to come (none today): "path:name" -> the work that adds it. Reading one is an
# error that says so; tests/test_compat_paths.py reports them as expected failures.
PENDING: dict[str, str] = {}
# rltune.air.session.report of Ray 2.0-2.6 and rltune.train.report are the Tuner's function-trainable report.


def init(*args: Any, **kwargs: Any) -> None:
    """Ray's ``ray.init(...)``: rltune starts no cluster (a study's trials are processes), so it changes nothing."""
    import logging

    logging.getLogger(__name__).info("rltune.init (Ray's ray.init) changes nothing: rltune needs no cluster; a study's "
                                     "CPU budget is n_jobs and resources_per_trial")


def shutdown() -> None:
    """Ray's ``ray.shutdown()``: nothing to shut down (a trainer's ``stop()`` ends its worker processes)."""


def is_initialized() -> bool:
    """Ray's ``ray.is_initialized()``: always True (there is nothing to start)."""
    return True


def _packages() -> set[str]:
    """Every proper prefix of a table path under rltune (``rltune.algorithms`` of ``rltune.algorithms.ppo``)."""
    found = set()
    for path in PATHS:
        parts = path.split(".")
        found.update(".".join(parts[:i]) for i in range(2, len(parts)))
    return found


_PACKAGES = _packages()


def is_table_module(path: str) -> bool:
    """Whether ``path`` is a module the table makes: a path of it, or a package of paths under it."""
    return path in PATHS or path in _PACKAGES

# real modules (files) that are also packages of table paths (their own table entries document what they hold)
_MODULE_PACKAGES = {_TUNE, "rltune.train", "rltune.air"}


def resolve(path: str, name: str) -> Any:
    """The object the table maps ``path``'s ``name`` to; AttributeError (naming the pending work) if it is missing."""
    module_name, _, attribute = PATHS[path][name].partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except AttributeError:
        pending = PENDING.get(f"{path}:{name}")
        detail = f" yet: it comes with {pending}" if pending else f" ({module_name} has no {attribute})"
        raise AttributeError(f"module {path!r} has no attribute {name!r}{detail}") from None


class _ReexportLoader(importlib.abc.Loader):
    """Makes a table path's module: its names (``__all__``) resolve on first access; a package if paths lie under it."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: types.ModuleType) -> None:
        path = module.__name__
        names = PATHS.get(path, {})
        module.__doc__ = f"RLlib's / Ray's names at {path} (a re-export; see rltune/_compat_paths.py)."
        module.__all__ = sorted(names)  # type: ignore[attr-defined]

        def __getattr__(name: str) -> Any:
            child = f"{path}.{name}"
            if name not in names and is_table_module(child):  # a submodule, as Ray's packages hold
                return importlib.import_module(child)
            if name not in names:
                raise AttributeError(f"module {path!r} has no attribute {name!r}")
            value = resolve(path, name)
            setattr(module, name, value)
            return value

        module.__getattr__ = __getattr__  # type: ignore[attr-defined]


class CompatFinder(importlib.abc.MetaPathFinder):
    """Finds the table's module paths (and their packages); lets ``rltune/tune.py`` hold submodules."""

    _loader = _ReexportLoader()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in _MODULE_PACKAGES:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None:
                spec.submodule_search_locations = []  # a module and a package: rltune.tune.schedulers is found
            return spec
        if not is_table_module(fullname) or fullname == "rltune":
            return None
        if importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
            return None  # a real module or package of rltune's own: never shadowed
        return importlib.machinery.ModuleSpec(fullname, self._loader, is_package=fullname in _PACKAGES)


def install() -> None:
    """Put :class:`CompatFinder` first on ``sys.meta_path`` (once); only rltune's table paths go through it."""
    if not any(isinstance(finder, CompatFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, CompatFinder())
