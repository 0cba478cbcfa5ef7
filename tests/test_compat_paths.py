"""RLlib's and Ray's import paths under rltune (issue 26): every path of the table imports, re-exports the object
it names, shadows nothing of rltune's own, and docs/porting-from-rllib.md lists exactly the table."""

from __future__ import annotations

import importlib
import importlib.machinery
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rltune
from rltune._compat_paths import _MODULE_PACKAGES, PATHS, PENDING

DOC = Path(__file__).resolve().parents[1] / "docs" / "porting-from-rllib.md"
ENTRIES = [(path, name) for path, names in PATHS.items() for name in names]


def _ray_path(path: str) -> str:
    if path == "rltune":
        return "ray"
    rest = path.split(".", 1)[1]
    return ("ray." if rest.split(".")[0] in ("tune", "train", "air") else "ray.rllib.") + rest


@pytest.mark.parametrize("path, name", ENTRIES, ids=[f"{p}.{n}" for p, n in ENTRIES])
def test_every_path_of_the_table_imports_the_object_it_names(path, name):
    module = importlib.import_module(path)
    assert name in module.__all__
    target_module, _, attribute = PATHS[path][name].partition(":")
    target = importlib.import_module(target_module)
    if f"{path}:{name}" in PENDING and not hasattr(target, attribute):
        with pytest.raises(AttributeError, match=f"{name!r} yet: it comes with issue 26"):
            getattr(module, name)
        pytest.xfail(f"pending: {path}.{name} ({PENDING[f'{path}:{name}']})")
    assert getattr(module, name) is getattr(target, attribute)
    namespace: dict = {}
    exec(f"from {path} import {name}", namespace)  # the ported script's own line
    assert namespace[name] is getattr(target, attribute)


def test_the_examples_of_the_issue_import():
    from rltune.algorithms.ppo import PPOConfig
    from rltune.env.multi_agent_env import MultiAgentEnv
    from rltune.policy.policy import Policy
    from rltune.utils.test_utils import check_learning_achieved
    from rltune.trainers import PPOConfig as Builder, Policy as RLtunePolicy
    from rltune.env import MultiAgentEnv as RLtuneMultiAgentEnv

    assert PPOConfig is Builder and Policy is RLtunePolicy and MultiAgentEnv is RLtuneMultiAgentEnv
    assert callable(check_learning_achieved)


def test_the_table_shadows_no_module_of_rltune_and_tune_stays_its_module():
    root = Path(rltune.__file__).parent
    for path in set(PATHS) - {"rltune"} - _MODULE_PACKAGES:  # rltune.tune, .train, .air: real, and packages too
        relative = Path(*path.split(".")[1:])
        assert not (root / relative).with_suffix(".py").exists() and not (root / relative / "__init__.py").exists(), path
    from rltune import tune
    from rltune.tune import registry  # a submodule of the module rltune/tune.py

    assert tune.__file__.endswith("tune.py") and callable(tune.run) and registry.get_trainable_cls("PPO").name == "PPO"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rltune.algorithms.nope")
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        importlib.import_module("rltune.algorithms.ppo").Nope


def test_importing_rltune_and_a_compat_path_stays_cheap():
    code = ("import sys, rltune, rltune.algorithms.ppo, rltune.train; "
            "print(sorted(m for m in ('torch', 'gymnasium', 'optuna') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_porting_guide_lists_exactly_the_table_and_marks_the_pending_names():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Import paths", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(ray[\w.]*)` \| `(rltune[\w.]*)` \| (.*) \|$", section, flags=re.MULTILINE)
    listed = {path: dict(re.findall(r"`(\w+)`(†?)", names)) for _, path, names in rows}
    assert {path: sorted(names) for path, names in listed.items()} == {p: sorted(n) for p, n in PATHS.items()}
    assert all(ray == _ray_path(path) for ray, path, _ in rows)
    marked = {f"{path}:{name}" for path, names in listed.items() for name, mark in names.items() if mark}
    assert marked == set(PENDING)


def test_rays_own_init_and_shutdown_are_there_and_change_nothing():
    assert rltune.init(num_cpus=2, local_mode=True) is None and rltune.is_initialized() is True
    assert rltune.shutdown() is None
    with pytest.raises(AttributeError, match="has no attribute 'remote'"):
        rltune.remote


def test_rllibs_utility_names_behave_as_example_code_uses_them():
    from rltune import Policy, SampleBatch
    from rltune.trainers import Policy as RltunePolicy
    from rltune.utils.annotations import PublicAPI, override
    from rltune.utils.framework import try_import_tf, try_import_torch

    import torch

    assert Policy is RltunePolicy and try_import_torch() == (torch, torch.nn)
    assert try_import_tf() == (None, None, None)
    with pytest.raises(ImportError, match="PyTorch only"):
        try_import_tf(error=True)

    class Base:
        def f(self):
            return 1

    class Child(Base):
        @override(Base)
        def f(self):
            return 2

        @PublicAPI
        def g(self):
            return 3

    assert Child().f() == 2 and Child().g() == 3
    batch = SampleBatch({SampleBatch.REWARDS: [1.0, 2.0], SampleBatch.OBS: [[0], [1]]})
    assert len(batch) == 2 and batch["rewards"] == [1.0, 2.0] and SampleBatch.NEXT_OBS == "new_obs"


def test_an_rllib_vector_env_given_as_env_is_refused_by_name():
    from rltune.env.vector_env import VectorEnv
    from rltune.errors import ConfigError, EnvError
    from rltune.trainers import PPO

    class OldVector(VectorEnv):
        pass

    with pytest.raises((ConfigError, EnvError)) as info:
        PPO(config={"env": lambda cfg: OldVector(), "num_workers": 0})
    assert "OldVector" in str(info.value) or "gymnasium" in str(info.value)


def test_tune_placement_group_factory_loads_on_first_use():
    from rltune.tune import PlacementGroupFactory  # Ray Tune's tune.PlacementGroupFactory

    assert PlacementGroupFactory([{"CPU": 1}, {"CPU": 2}]).required_resources == {"CPU": 3}


def test_ray_tunes_submodules_are_attributes_of_tune_as_in_ray():
    code = ("from rltune import tune\n"
            "print(tune.schedulers.ASHAScheduler.__name__, tune.search.optuna.OptunaSearch.__name__, "
            "tune.registry.get_trainable_cls.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ASHAScheduler", "OptunaSearch", "get_trainable_cls"]
    from rltune import tune

    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        tune.nope
