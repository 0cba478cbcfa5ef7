"""Opening a checkpoint imports nothing it names by itself (the trust set), and optional HMAC signatures.

The threat: someone who can edit a shared or downloaded checkpoint (and
recompute its checksums) names a module planted beside it, or any
installed module, in its saved config. rltune must not import it: not from
the current directory, not from the checkpoint's, not at all unless the
user trusts it. See docs/checkpoints.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from rltune.errors import CheckpointError, ConfigError
from rltune.trainers import PPO, Trainer
from rltune.trainers.checkpoints import _checkpoint as ckpt

from .checkpoints import reseal

RLTUNE = Path(sys.executable).parent / "rltune"
KEY_ENV = "RLTUNE_CHECKPOINT_KEY"
TINY = {"train_batch_size": 64, "rollout_fragment_length": 32, "sgd_minibatch_size": 32, "num_sgd_iter": 1,
        "model": {"fcnet_hiddens": [8]}}
PLANTED = "plantedmod"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A PPO CartPole checkpoint of one iteration."""
    root = tmp_path_factory.mktemp("trust")
    with PPO(config=TINY, env="CartPole-v1", results_dir=root) as trainer:
        trainer.train()
        return Path(trainer.save(root / "base"))


def _edit(path: Path, edit: Callable[[dict], Any]) -> Path:
    """Edit a checkpoint's metadata and recompute its checksums, as whoever edits a shared checkpoint can."""
    meta_file = path / ckpt.METADATA_FILE
    metadata = json.loads(meta_file.read_text())
    edit(metadata)
    meta_file.write_text(json.dumps(metadata))
    reseal(path)
    return path


def _module_source(marker: Path) -> str:
    """A module that writes ``marker`` when imported, with an env (CartPole's), callbacks, a policy and functions."""
    return (
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "import os\n"
        "from os import system\n"
        "from gymnasium.envs.classic_control import CartPoleEnv\n"
        "from rltune.callbacks import DefaultCallbacks\n"
        "from rltune.trainers import RandomPolicy\n"
        "class Env(CartPoleEnv):\n"
        "    def __init__(self, env_config=None):\n"
        "        super().__init__()\n"
        "class Callbacks(DefaultCallbacks):\n"
        "    pass\n"
        "class Heuristic(RandomPolicy):\n"
        "    pass\n"
        "def task(result, env, ctx):\n"
        "    return 1\n"
    )


PLANTED_KEYS: dict[str, Callable[[dict], Any]] = {
    "env": lambda m: m["config"].update(env=f"{PLANTED}:Env"),
    "callbacks": lambda m: m["config"].update(callbacks=f"{PLANTED}:Callbacks"),
    "multiagent.policies.p0.policy_class": lambda m: m["config"].update(
        multiagent={"policies": {"p0": {"policy_class": f"{PLANTED}:Heuristic"}}}),
    "evaluation_config.env": lambda m: m["config"].update(evaluation_config={"env": f"{PLANTED}:Env"}),
}


def _download(trained: Path, tmp_path: Path, key: str) -> tuple[Path, Path, Path]:
    """A download folder holding the edited checkpoint, with the planted module beside it and inside it."""
    folder = tmp_path / "downloads"
    path = _edit(Path(shutil.copytree(trained, folder / "checkpoint")), PLANTED_KEYS[key])
    marker = tmp_path / "IMPORTED"
    for where in (folder, path):
        (where / f"{PLANTED}.py").write_text(_module_source(marker))
    return folder, path, marker


def _rollout(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``rltune rollout`` as a user runs it: the console script, in the download folder."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RLTUNE_TRUST", KEY_ENV)}
    return subprocess.run([str(RLTUNE), "rollout", *args], cwd=folder, capture_output=True, text=True, timeout=300,
                          env={**environ, "RLTUNE_TRACKING": "0", **env})


@pytest.mark.parametrize("key", list(PLANTED_KEYS))
def test_rollout_never_imports_a_module_planted_beside_the_checkpoint(trained, tmp_path, key):
    folder, path, marker = _download(trained, tmp_path, key)
    proc = _rollout(folder, "checkpoint", "--episodes", "1")
    assert not marker.exists(), "rollout imported the planted module"
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert f"config key {key!r} is '{PLANTED}:" in proc.stderr
    assert f"whose module {PLANTED!r} is neither imported in this process nor trusted" in proc.stderr
    assert f"--trust {PLANTED}" in proc.stderr and f"trust=[{PLANTED!r}]" in proc.stderr


def test_trust_lets_a_checkpoint_name_a_module_from_pythons_path_never_from_the_current_directory(trained, tmp_path):
    folder, path, marker = _download(trained, tmp_path, "evaluation_config.env")
    proc = _rollout(folder, "checkpoint", "--episodes", "1", "--trust", PLANTED)
    assert proc.returncode == 2 and not marker.exists()  # trusted, but rltune does not import from the current directory
    assert f"'{PLANTED}' is not importable; {PLANTED}.py is in the current directory" in proc.stderr
    assert "run with PYTHONPATH=. or install your package" in proc.stderr
    package = tmp_path / "site"
    package.mkdir()
    (package / f"{PLANTED}.py").write_text(_module_source(marker))
    proc = _rollout(folder, "checkpoint", "--episodes", "1", "--trust", PLANTED, PYTHONPATH=str(package))
    assert proc.returncode == 0, proc.stderr
    assert "episode_reward_mean" in proc.stdout and marker.exists()


def test_a_stdlib_module_the_process_has_not_imported_is_refused_without_importing_it(trained, tmp_path):
    path = _edit(Path(shutil.copytree(trained, tmp_path / "ckpt")), lambda m: m["config"].update(env="this:Env"))
    script = (
        "import sys\n"
        "from rltune.errors import CheckpointError\n"
        "from rltune.trainers import Trainer\n"
        "try:\n"
        f"    Trainer.from_checkpoint({str(path)!r})\n"
        "except CheckpointError as exc:\n"
        "    print(exc)\n"
        "print('this' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "config key 'env' is 'this:Env', whose module 'this' is neither imported" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "False"
    assert "Zen of Python" not in proc.stdout


@pytest.fixture()
def own_module(tmp_path, monkeypatch) -> Callable[[str], Path]:
    """``make(name)``: a module ``name`` (see :func:`_module_source`) on the import path; its import marker."""
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    made = []

    def make(name: str) -> Path:
        marker = tmp_path / f"{name}.imported"
        (directory / f"{name}.py").write_text(_module_source(marker))
        made.append(name)
        return marker

    yield make
    for name in made:
        sys.modules.pop(name, None)


def test_trust_on_the_python_api_and_in_rltune_trust(trained, tmp_path, monkeypatch, own_module):
    marker = own_module("rltune_test_trusted_env")
    path = _edit(Path(shutil.copytree(trained, tmp_path / "ckpt")),
                 lambda m: m["config"].update(env="rltune_test_trusted_env:Env"))
    with pytest.raises(CheckpointError, match="trust=\\['rltune_test_trusted_env'\\]"):
        Trainer.from_checkpoint(path)
    assert not marker.exists()
    with pytest.raises(ConfigError, match="trust: 'not a module' is not a module or package name"):
        Trainer.from_checkpoint(path, trust=["not a module"])
    with Trainer.from_checkpoint(path, trust=["rltune_test_trusted_env"], results_dir=tmp_path) as trainer:
        assert trainer.env_spec.name == "rltune_test_trusted_env:Env"
    assert marker.exists()
    marker.unlink()
    sys.modules.pop("rltune_test_trusted_env")
    monkeypatch.setenv("RLTUNE_TRUST", "other, rltune_test_trusted_env")  # what a trial process or script inherits
    Trainer.from_checkpoint(path, results_dir=tmp_path).stop()
    assert marker.exists()


def test_a_checkpoints_function_runs_only_from_a_module_trusted_by_name(trained, tmp_path, own_module):
    own_module("rltune_test_fns")
    __import__("rltune_test_fns")  # imported already: enough for a class of the expected kind, not for a function
    copy = Path(shutil.copytree(trained, tmp_path / "ckpt"))

    def with_task_fn(ref: str) -> Path:
        return _edit(copy, lambda m: m["config"].update(env_task_fn=ref))

    with pytest.raises(CheckpointError, match="config key 'env_task_fn' is 'rltune_test_fns:task', a function"):
        Trainer.from_checkpoint(with_task_fn("rltune_test_fns:task"))
    with Trainer.from_checkpoint(copy, trust=["rltune_test_fns"], results_dir=tmp_path) as trainer:
        assert trainer.config["env_task_fn"] == "rltune_test_fns:task"
    # Even from a trusted module: not a function it merely imported, nor one reached through another module.
    with pytest.raises(CheckpointError, match="a function defined in 'posix', not in a module you trust"):
        Trainer.from_checkpoint(with_task_fn("rltune_test_fns:system"), trust=["rltune_test_fns"])
    with pytest.raises(CheckpointError, match="reaches module 'os' through 'rltune_test_fns'"):
        Trainer.from_checkpoint(with_task_fn("rltune_test_fns:os.system"), trust=["rltune_test_fns"])


def test_a_module_named_in_the_overrides_is_trusted_for_the_classes_of_the_checkpoint(trained, tmp_path, own_module):
    """rollout --config naming a module (the multi-agent mapping function) lets the same module's env load."""
    marker = own_module("rltune_test_given")
    path = _edit(Path(shutil.copytree(trained, tmp_path / "ckpt")),
                 lambda m: m["config"].update(env="rltune_test_given:Env", callbacks="rltune_test_given:Callbacks"))
    with pytest.raises(CheckpointError, match="config key 'env'"):
        Trainer.from_checkpoint(path, {"evaluation_config": {"env_config": {}}})
    assert not marker.exists()
    with Trainer.from_checkpoint(path, {"evaluation_config": {"env": "rltune_test_given:Env"}},
                                 results_dir=tmp_path) as trainer:
        assert type(trainer.callbacks).__name__ == "Callbacks"


def test_an_rllib_alias_in_a_saved_config_does_not_bypass_the_checks(trained, tmp_path, own_module):
    marker = own_module("rltune_test_alias")

    def aliased(metadata: dict) -> None:
        metadata["config"].pop("multiagent")
        metadata["config"]["policies"] = {"p0": {"policy_class": "rltune_test_alias:Heuristic"}}

    path = _edit(Path(shutil.copytree(trained, tmp_path / "ckpt")), aliased)
    with pytest.raises(CheckpointError, match="config key 'multiagent.policies.p0.policy_class'"):
        Trainer.from_checkpoint(path)
    assert not marker.exists()


def test_the_algorithm_a_checkpoint_names_is_in_the_trust_set_too(trained, tmp_path, own_module):
    marker = own_module("rltune_test_algo")
    path = _edit(Path(shutil.copytree(trained, tmp_path / "ckpt")), lambda m: m.update(algorithm="rltune_test_algo:X"))
    with pytest.raises(CheckpointError, match="metadata field 'algorithm' is 'rltune_test_algo:X', whose module"):
        Trainer.from_checkpoint(path)
    assert not marker.exists()


def test_the_trust_set_decides_without_importing():
    from rltune.trainers.checkpoints._checkpoint_trust import CheckpointTrust

    trust = CheckpointTrust(trusted=("mypkg",), given=frozenset({"given.module:fn"}))
    assert trust.import_problem("mypkg.envs:Env") is None  # a package trusts its submodules
    assert trust.import_problem("mypkg:fn", function=True) is None
    assert trust.import_problem("mypkgother:Env") is not None
    assert trust.import_problem("rltune.trainers:PPO") is None  # rltune's own
    assert trust.import_problem("rltune.trainers:PPO", function=True) is not None  # a function needs trust by name
    assert trust.import_problem("json:JSONDecoder") is None  # imported already: looking up an attribute runs nothing
    assert trust.import_problem("given.module:Env") is None  # the module of an import string the caller gave
    assert trust.import_problem("given.module:other", function=True) is not None
    assert trust.import_problem("given.module:fn", function=True) is None  # the very string the caller gave
    assert "not an import string" in trust.import_problem("../evil:Env")
    assert "not an import string" in trust.import_problem("mypkg:__import__('os')")


# --- signatures -------------------------------------------------------------------------------------------


def _signed(trained: Path, tmp_path: Path, monkeypatch, key: str = "team secret") -> Path:
    with Trainer.from_checkpoint(trained, results_dir=tmp_path) as trainer:
        monkeypatch.setenv(KEY_ENV, key)
        path = Path(trainer.save(tmp_path / "signed"))
        monkeypatch.delenv(KEY_ENV)
    return path


def test_a_signed_checkpoint_edited_without_the_key_is_refused(trained, tmp_path, monkeypatch):
    path = _signed(trained, tmp_path, monkeypatch)
    assert "team secret" not in (path / ckpt.METADATA_FILE).read_text()
    assert json.loads((path / ckpt.METADATA_FILE).read_text())["signature"]["algorithm"] == "hmac-sha256"
    edited = _edit(Path(shutil.copytree(path, tmp_path / "edited")), lambda m: m["config"].update(gamma=0.5))
    monkeypatch.setenv(KEY_ENV, "team secret")
    Trainer.from_checkpoint(path, results_dir=tmp_path).stop()
    with pytest.raises(CheckpointError, match="signed with another key or edited by someone without the key") as info:
        Trainer.from_checkpoint(edited)
    assert "team secret" not in str(info.value)
    monkeypatch.setenv(KEY_ENV, "another key")
    with pytest.raises(CheckpointError, match="signed with another key"):
        ckpt.read_metadata(path)
    monkeypatch.delenv(KEY_ENV)
    assert ckpt.read_metadata(edited)["config"]["gamma"] == 0.5  # no key: signatures are not checked


def test_with_a_key_set_the_tensors_are_covered_and_unsigned_checkpoints_refused(trained, tmp_path, monkeypatch):
    path = _signed(trained, tmp_path, monkeypatch)
    swapped = Path(shutil.copytree(path, tmp_path / "swapped"))
    tensors = torch.load(swapped / ckpt.TENSORS_FILE, weights_only=True)
    for weight in tensors["policies"]["default_policy"].values():
        weight.zero_()  # other weights, and checksums recomputed to match
    torch.save(tensors, swapped / ckpt.TENSORS_FILE)
    reseal(swapped)
    stripped = _edit(Path(shutil.copytree(path, tmp_path / "stripped")), lambda m: m.pop("signature"))
    monkeypatch.setenv(KEY_ENV, "team secret")
    with PPO(config=TINY, env="CartPole-v1") as fresh, pytest.raises(CheckpointError, match="without the key"):
        fresh.restore(swapped)
    for unsigned in (stripped, trained):
        with pytest.raises(CheckpointError, match=f"is not signed; {KEY_ENV} is set"):
            Trainer.from_checkpoint(unsigned)
