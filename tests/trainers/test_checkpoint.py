"""Checkpoints: exact round trips, counters that continue, clear errors, atomic directories."""

from __future__ import annotations

import copy
import errno
import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rltune.callbacks import DefaultCallbacks
from rltune.errors import CheckpointError
from rltune.trainers import PPO, Trainer
from trainer_params import iteration_config, steps_per_iteration
from rltune.trainers.checkpoints import _checkpoint as ckpt

from .checkpoints import reseal
from .envs import ContextEnv

SHARED = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 10,
    "model": {"fcnet_hiddens": [16]},
    "seed": 3,
    "lr": 1e-3,
}
CONFIG = {**SHARED, "train_batch_size": 40, "sgd_minibatch_size": 20, "num_sgd_iter": 2}  # PPO's


def config_of(trainer_cls) -> dict:
    """The config of ``trainer_cls`` in these tests: 40 env steps (2 rounds) per iteration.

    DQN syncs its target network every 2 rounds: a checkpoint's target is a trained one, not the
    initial weights a fresh trainer of the same seed already has.
    """
    if trainer_cls is PPO:
        return CONFIG
    return {**SHARED, **iteration_config(trainer_cls, 40), "target_network_update_freq": 40}


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def weights_differ(a: dict, b: dict) -> bool:
    return any(not np.array_equal(a[k], b[k]) for k in a)


def _train_and_save(trainer_cls, path: Path):
    """A ``trainer_cls`` trained for 2 iterations, its checkpoint, and what it held when saved."""
    trainer = trainer_cls(config=config_of(trainer_cls), env=ContextEnv)
    for _ in range(2):
        trainer.train()
    path = trainer.save(path)
    saved = {
        "weights": trainer.get_policy().get_weights(),
        "iteration": trainer.iteration,
        "timesteps_total": trainer.timesteps_total,
        "state": _restorable_state(trainer),
        "global_timestep": trainer.get_policy().global_timestep,
        "learner_modules": _learner_modules(trainer),
    }
    return trainer, path, saved


def _learner_modules(trainer) -> dict:
    """The weights of the torch modules a learner holds besides its policy's (DQN's target network), copied."""
    learner = trainer.get_learner()
    modules = {name: m for name, m in vars(learner).items() if isinstance(m, torch.nn.Module) and m is not learner.policy.model}
    return {name: copy.deepcopy(m.state_dict()) for name, m in modules.items()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A PPO trained for 2 iterations, its checkpoint, and what it held when saved (the file-format tests)."""
    trainer, path, saved = _train_and_save(PPO, tmp_path_factory.mktemp("ckpt") / "checkpoint")
    yield trainer, path, saved
    trainer.stop()


@pytest.fixture(scope="module")
def trained_by(trainer_cls, trained, tmp_path_factory):
    """``trained`` for each trainer class (the round-trip tests every trainer must pass)."""
    if trainer_cls is PPO:
        yield trained
        return
    trainer, path, saved = _train_and_save(trainer_cls, tmp_path_factory.mktemp("ckpt") / "checkpoint")
    yield trainer, path, saved
    trainer.stop()


def test_save_returns_a_directory_with_the_documented_files(trainer_cls, trained_by):
    _, path, _ = trained_by
    path = Path(path)
    assert path.is_dir()
    assert {"rltune_checkpoint.json", "state.pt"} <= set(os.listdir(path))
    metadata = json.loads((path / "rltune_checkpoint.json").read_text())
    assert metadata["algorithm"] == trainer_cls.name
    assert metadata["iteration"] == 2 and metadata["timesteps_total"] == 80


def test_restore_gives_identical_weights_and_continues_the_counters(trainer_cls, trained_by):
    _, path, saved = trained_by
    with trainer_cls(config=config_of(trainer_cls), env=ContextEnv) as fresh:
        assert weights_differ(fresh.get_policy().get_weights(), saved["weights"])  # so the restore has work to do
        fresh.restore(path)
        assert_same_weights(fresh.get_policy().get_weights(), saved["weights"])
        assert (fresh.iteration, fresh.timesteps_total) == (2, 80)
        # Optimizer, target networks, the algorithm's counters, RNGs and the exploration timestep too.
        _assert_same(saved["state"], _restorable_state(fresh))
        _assert_same(saved["learner_modules"], _learner_modules(fresh))  # even if the saved state left them out
        assert fresh.get_policy().global_timestep == saved["global_timestep"]
        result = fresh.train()
        assert result["training_iteration"] == 3
        assert result["timesteps_total"] == 120
        assert weights_differ(fresh.get_policy().get_weights(), saved["weights"])


def test_restore_into_a_trainer_with_remote_workers(trainer_cls, trained_by):
    _, path, saved = trained_by
    with trainer_cls(config={**config_of(trainer_cls), "num_workers": 1}, env=ContextEnv) as other:
        other.restore(path)
        assert_same_weights(other.get_policy().get_weights(), saved["weights"])
        # Every rollout worker got the restored weights, and the timestep its exploration follows.
        for weights in other.foreach_worker(lambda w: w.get_policy().get_weights()):
            assert_same_weights(weights, saved["weights"])
        assert other.foreach_worker(lambda w: w.get_policy().global_timestep) == [saved["global_timestep"]] * 2
        result = other.train()
        assert result["training_iteration"] == 3
        assert result["timesteps_total"] == 80 + 40
        for weights in other.foreach_worker(lambda w: w.get_policy().get_weights()):
            assert_same_weights(weights, other.get_policy().get_weights())


def test_from_checkpoint_rebuilds_the_algorithm_with_overrides(trainer_cls, trained_by):
    _, path, saved = trained_by
    restored = Trainer.from_checkpoint(path, {"lr": 5e-4})
    try:
        assert type(restored) is trainer_cls
        assert restored.config["lr"] == 5e-4
        assert restored.config["model"]["fcnet_hiddens"] == [16]
        assert steps_per_iteration(trainer_cls, restored.config) == 40
        assert_same_weights(restored.get_policy().get_weights(), saved["weights"])
        assert restored.train()["training_iteration"] == 3
    finally:
        restored.stop()


def test_saving_twice_to_the_same_dir_replaces_it_atomically(trainer_cls, trained_by, tmp_path):
    trainer, _, _ = trained_by
    target = tmp_path / "ckpt"
    first = trainer.save(target)
    trainer.train()
    second = trainer.save(target)
    assert Path(first) == Path(second) == target.resolve()
    metadata = json.loads((target / "rltune_checkpoint.json").read_text())
    assert metadata["iteration"] == trainer.iteration
    # No temporary or old directories are left next to the checkpoint.
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    with trainer_cls(config=config_of(trainer_cls), env=ContextEnv) as fresh:
        fresh.restore(target)
        assert_same_weights(fresh.get_policy().get_weights(), trainer.get_policy().get_weights())


def test_save_without_a_dir_writes_a_numbered_checkpoint_in_the_results_dir(trainer_cls, tmp_path):
    with trainer_cls(config=config_of(trainer_cls), env=ContextEnv, results_dir=tmp_path) as trainer:
        trainer.train()
        path = Path(trainer.save())
    assert path.name == "checkpoint_000001"
    assert tmp_path in path.parents
    assert (path / "rltune_checkpoint.json").exists()


@pytest.mark.parametrize("fails", ["torch.save", "file write"])
def test_a_save_that_fails_midway_keeps_the_old_checkpoint(trained, tmp_path, monkeypatch, fails):
    """A full disk: a CheckpointError (not a raw OSError), the old checkpoint intact, no temporary directory."""
    trainer, _, _ = trained
    target = tmp_path / "ckpt"
    trainer.save(target)
    before = {name: (target / name).read_bytes() for name in os.listdir(target)}

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if fails == "torch.save":
        monkeypatch.setattr(torch, "save", disk_full)
    else:  # the metadata file, written last (after state.pt)
        real = ckpt._write_file
        monkeypatch.setattr(ckpt, "_write_file", lambda path, write: disk_full() if path.suffix == ".json" else real(path, write))
    with pytest.raises(CheckpointError, match="cannot write checkpoint .*No space left on device"):
        trainer.save(target)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no partial or temporary directory left
    assert {name: (target / name).read_bytes() for name in os.listdir(target)} == before


def test_from_checkpoint_asks_for_config_values_it_could_not_save(trainer_cls, tmp_path):
    def creator(ctx):  # a local function: cannot be saved as an import string
        return ContextEnv(ctx)

    with trainer_cls(config=config_of(trainer_cls), env=creator) as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ckpt")
        weights = trainer.get_policy().get_weights()
    with pytest.raises(CheckpointError) as info:
        Trainer.from_checkpoint(path)
    assert "'env'" in str(info.value) and "config_overrides" in str(info.value)
    restored = Trainer.from_checkpoint(path, {"env": creator})
    try:
        assert_same_weights(restored.get_policy().get_weights(), weights)
        assert restored.iteration == 1
    finally:
        restored.stop()


def test_save_into_a_dir_holding_other_files_does_not_delete_them(trained, tmp_path):
    """save(dir) on a directory that is not a checkpoint must not silently wipe the user's files."""
    trainer, _, _ = trained
    target = tmp_path / "my_results"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    try:
        trainer.save(target)
    except CheckpointError:
        pass  # refusing is fine too
    assert (target / "notes.txt").exists(), "save() deleted a file it did not write"


# --- what cannot be restored -------------------------------------------------------------


def _copy_checkpoint(src: str, dst: Path) -> Path:
    dst.mkdir()
    for name in os.listdir(src):
        (dst / name).write_bytes((Path(src) / name).read_bytes())
    return dst


@pytest.fixture()
def fresh():
    trainer = PPO(config=CONFIG, env=ContextEnv)
    yield trainer
    trainer.stop()


def test_missing_checkpoint_dir(fresh, tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        fresh.restore(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="does not exist"):
        Trainer.from_checkpoint(tmp_path / "nope")


def test_dir_that_is_not_a_checkpoint(fresh, tmp_path):
    with pytest.raises(CheckpointError, match="rltune_checkpoint.json"):
        fresh.restore(tmp_path)


def test_truncated_state_file(trained, fresh, tmp_path):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    data = (path / "state.pt").read_bytes()
    (path / "state.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as info:
        fresh.restore(path)
    assert "state.pt" in str(info.value) and "corrupt" in str(info.value)


def test_missing_state_file(trained, fresh, tmp_path):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    (path / "state.pt").unlink()
    with pytest.raises(CheckpointError, match="state.pt"):
        fresh.restore(path)


@pytest.mark.parametrize("garbage", ["{not json", "", "[1, 2, 3]", '{"algorithm": "PPO"}'])
def test_garbage_metadata(trained, fresh, tmp_path, garbage):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    (path / "rltune_checkpoint.json").write_text(garbage)
    with pytest.raises(CheckpointError) as info:
        fresh.restore(path)
    assert "rltune_checkpoint.json" in str(info.value)
    with pytest.raises(CheckpointError):
        Trainer.from_checkpoint(path)


def test_checkpoint_of_another_algorithm(fresh, tmp_path):
    class OtherAlgo(PPO):
        name = "OtherAlgo"

    other = OtherAlgo(config=CONFIG, env=ContextEnv)
    try:
        path = other.save(tmp_path / "other")
    finally:
        other.stop()
    with pytest.raises(CheckpointError) as info:
        fresh.restore(path)
    assert "OtherAlgo" in str(info.value) and "PPO" in str(info.value)


def test_dqn_checkpoint_into_ppo(fresh, tmp_path):
    from rltune.trainers import DQN

    dqn = DQN(config={"model": {"fcnet_hiddens": [16]}}, env=ContextEnv)
    try:
        path = dqn.save(tmp_path / "dqn")
    finally:
        dqn.stop()
    with pytest.raises(CheckpointError) as info:
        fresh.restore(path)
    assert "DQN" in str(info.value) and "PPO" in str(info.value)
    # Trainer.from_checkpoint picks the algorithm the checkpoint names.
    restored = Trainer.from_checkpoint(path)
    try:
        assert isinstance(restored, DQN)
    finally:
        restored.stop()


@pytest.mark.parametrize(
    "head",
    [{"hiddens": [8, 8], "noisy": True}, {"hiddens": [8], "dueling": False},
     {"hiddens": [8], "exploration_config": {"type": "ParameterNoise", "random_timesteps": 0}}],
    ids=["noisy", "one stream", "parameter noise (layer norms)"],
)
def test_dqn_q_heads_round_trip(head, tmp_path):
    """RLlib's Q heads: weights, target network and Q-values come back; training goes on."""
    from rltune.trainers import DQN

    config = {**config_of(DQN), **head}
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    with DQN(config=config, env="CartPole-v1") as trainer:
        trainer.train()
        path = trainer.save(tmp_path / "ck")
        saved = trainer.get_policy().get_weights()
        q_values = trainer.get_policy().q_values(obs)
        target = _learner_modules(trainer)
    with Trainer.from_checkpoint(path) as restored:
        assert restored.config["hiddens"] == head["hiddens"]
        assert_same_weights(restored.get_policy().get_weights(), saved)
        np.testing.assert_array_equal(restored.get_policy().q_values(obs), q_values)
        _assert_same(target, _learner_modules(restored))
        assert restored.train()["training_iteration"] == 2


def test_checkpoint_of_an_incompatible_model(trainer_cls, trained_by, tmp_path):
    _, path, _ = trained_by
    with trainer_cls(config={**config_of(trainer_cls), "model": {"fcnet_hiddens": [32, 32]}}, env=ContextEnv) as bigger:
        with pytest.raises(CheckpointError) as info:
            bigger.restore(path)
    message = str(info.value)
    assert str(path) in message and "does not fit" in message


def test_failed_restore_leaves_the_trainer_unchanged(trainer_cls, trained_by):
    """A CheckpointError from restore() must not leave a half-loaded model behind."""
    _, path, _ = trained_by
    with trainer_cls(config={**config_of(trainer_cls), "model": {"fcnet_hiddens": [32]}}, env=ContextEnv) as other:
        other.train()
        before = other.get_policy().get_weights()
        state = _restorable_state(other)
        with pytest.raises(CheckpointError):
            other.restore(path)
        after = other.get_policy().get_weights()
        assert other.iteration == 1
        changed = sorted(k for k in before if not np.array_equal(before[k], after[k]))
        assert changed == [], f"a failed restore overwrote {changed}"
        _assert_same(state, _restorable_state(other))  # target networks and counters too


def test_after_restore_training_still_moves_the_weights_through_the_flat_tensor(tmp_path):
    from rltune.trainers import DQN

    for cls, config in ((PPO, {"train_batch_size": 64, "sgd_minibatch_size": 32, "num_sgd_iter": 2, "seed": 0}),
                        (DQN, {"learning_starts": 32, "rollout_fragment_length": 32, "train_batch_size": 16,
                               "min_sample_timesteps_per_iteration": 64, "seed": 0})):
        with cls(config=config, env="CartPole-v1") as trainer:
            trainer.train()
            path = trainer.save(tmp_path / cls.__name__)
        with cls(config=config, env="CartPole-v1") as restored:
            restored.restore(path)
            before = restored.get_policy().get_weights()
            restored.train()
            model = restored.get_policy().model
            flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            torch.testing.assert_close(restored.get_learner().flat_params.param.detach(), flat)
            after = restored.get_policy().get_weights()
            assert any(not np.array_equal(before[k], after[k]) for k in before), cls.__name__


# --- corrupt checkpoints: a CheckpointError naming the field, and a trainer left as it was ------------


def _set_metadata(key, value):
    """An edit of a checkpoint copy: metadata ``key`` set to ``value`` (or ``value(metadata)``; deleted if None)."""

    def edit(path: Path) -> None:
        meta_file = path / "rltune_checkpoint.json"
        metadata = json.loads(meta_file.read_text())
        new = value(metadata) if callable(value) else value
        if new is None:
            del metadata[key]
        else:
            metadata[key] = new
        meta_file.write_text(json.dumps(metadata))
        reseal(path)

    return edit


def _set_tensors(change):
    """An edit of a checkpoint copy: state.pt replaced by ``change(state)``."""

    def edit(path: Path) -> None:
        state = torch.load(path / "state.pt", weights_only=True)
        torch.save(change(state), path / "state.pt")
        reseal(path)

    return edit


def _other_generators(metadata: dict) -> dict:
    # Well-formed, but for numpy's MT19937 while the policies draw from PCG64.
    return {pid: {**state, "bit_generator": "MT19937"} for pid, state in metadata["policy_rngs"].items()}


def _optimizer_for_other_params(state: dict) -> dict:
    # The weights stay valid: only loading the optimizer, after them, can fail.
    state["algorithm"]["optimizers"]["default"]["param_groups"][0]["params"] = [0, 1]
    return state


def _optimizer_moments_of_another_shape(state: dict) -> dict:
    # torch's load_state_dict takes it; the first step after the restore would fail.
    state["algorithm"]["optimizers"]["default"]["state"][0]["exp_avg"] = torch.zeros(3)
    return state


def _optimizer_not_a_dict(state: dict) -> dict:
    state["algorithm"]["optimizers"]["default"] = torch.zeros(3)
    return state


def _optimizers_of_another_learner(state: dict) -> dict:
    # A learner's optimizers by name: this one has no "actor".
    state["algorithm"]["optimizers"] = {"actor": state["algorithm"]["optimizers"]["default"]}
    return state


CORRUPTIONS = {
    "policy_rngs garbage": (_set_metadata("policy_rngs", {"default_policy": "garbage"}), "metadata field 'policy_rngs'"),
    "policy_rngs of another generator": (_set_metadata("policy_rngs", _other_generators), "metadata field 'policy_rngs'"),
    "numpy_rng garbage": (_set_metadata("numpy_rng", 17), "metadata field 'numpy_rng'"),
    "env_tasks garbage": (_set_metadata("env_tasks", "garbage"), "metadata field 'env_tasks'"),
    "env_tasks entry too short": (_set_metadata("env_tasks", [[0, 0]]), "metadata field 'env_tasks'"),
    "callbacks_state a list": (_set_metadata("callbacks_state", [1]), "metadata field 'callbacks_state'"),
    # Fails in the trainer's callbacks' set_state, after the weights and the optimizer state were loaded.
    "callbacks reject their state": (_set_metadata("callbacks_state", {"level": "high"}), "metadata field 'callbacks_state'"),
    "iteration a string": (_set_metadata("iteration", "ten"), "metadata field 'iteration'"),
    "timesteps_total missing": (_set_metadata("timesteps_total", lambda m: None), "metadata field 'timesteps_total'"),
    "episode_window garbage": (_set_metadata("episode_window", [[1.0]]), "metadata field 'episode_window'"),
    "algorithm_state a list": (_set_metadata("algorithm_state", [1]), "metadata field 'algorithm_state'"),
    "state.pt a plain tensor": (_set_tensors(lambda state: torch.zeros(3)), "state.pt holds a Tensor"),
    "torch_rng garbage": (_set_tensors(lambda state: {**state, "torch_rng": torch.zeros(3)}), "state.pt entry 'torch_rng'"),
    "optimizer for other params": (_set_tensors(_optimizer_for_other_params), "state.pt entry 'algorithm'"),
    "optimizer not a dict": (_set_tensors(_optimizer_not_a_dict), "state.pt entry 'algorithm'"),
    "optimizer moments of another shape": (_set_tensors(_optimizer_moments_of_another_shape), "'exp_avg' has shape (3,)"),
    "optimizers of another learner": (_set_tensors(_optimizers_of_another_learner), "optimizers ['actor'] this learner does not have"),
}


def _corrupt_copy(trained, tmp_path: Path, corruption: str) -> Path:
    path = _copy_checkpoint(trained[1], tmp_path / "checkpoint_000002")
    CORRUPTIONS[corruption][0](path)
    return path


def _restorable_state(trainer) -> dict:
    """Everything a restore changes, copied: weights, optimizer, counters and RNG states."""
    values, tensors = trainer.get_algorithm_state()
    return {
        "weights": trainer.get_policy().get_weights(),
        "algorithm": copy.deepcopy((values, tensors)),
        "counters": (trainer.iteration, trainer.timesteps_total, trainer.episodes_total),
        "callbacks": trainer.callbacks.get_state(),
        "rngs": (trainer.rng.bit_generator.state, trainer.get_policy().rng.bit_generator.state, torch.get_rng_state()),
    }


def _assert_same(a, b, where: str = "state") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), f"{where} changed"
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=f"{where} changed")
    else:
        assert a == b, f"{where} changed: {a!r} -> {b!r}"


class LevelCallbacks(DefaultCallbacks):
    """Callbacks whose state is an int level; set_state raises on anything else."""

    level = 0

    def get_state(self) -> dict:
        return {"level": self.level}

    def set_state(self, state: dict) -> None:
        self.level = int(state.get("level", 0))


@pytest.fixture()
def trained_once():
    """A PPO one iteration in: other weights and counters than the checkpoint's, and an optimizer state."""
    trainer = PPO(config={**CONFIG, "callbacks": LevelCallbacks}, env=ContextEnv)
    trainer.train()
    yield trainer
    trainer.stop()


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_corrupt_checkpoint_raises_naming_the_field_and_leaves_the_trainer_unchanged(
    trained, trained_once, tmp_path, corruption
):
    path = _corrupt_copy(trained, tmp_path, corruption)
    before = _restorable_state(trained_once)
    assert weights_differ(before["weights"], trained[2]["weights"])  # so a partial restore would show
    assert before["algorithm"][1]["optimizers"]["default"]["state"]  # the optimizer has state to lose
    with pytest.raises(CheckpointError) as info:
        trained_once.restore(path)
    message = str(info.value)
    assert f"checkpoint {str(path)!r}" in message and CORRUPTIONS[corruption][1] in message, message
    assert "\n" not in message
    _assert_same(before, _restorable_state(trained_once))
    assert trained_once.train()["training_iteration"] == 2  # and it still trains


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("config", [1, 2], "metadata field 'config' must be a dict, but is a list"),
        ("algorithm", 7, "metadata field 'algorithm' must be a str, but is an int"),
        ("algorithm", "NoSuchAlgo", "metadata field 'algorithm' names no trainer here"),
    ],
)
def test_from_checkpoint_with_a_corrupt_config_or_algorithm(trained, tmp_path, key, value, expected):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    _set_metadata(key, value)(path)
    with pytest.raises(CheckpointError) as info:
        Trainer.from_checkpoint(path)
    assert f"checkpoint {str(path)!r}: {expected}" in str(info.value)


@pytest.fixture()
def _keep_log_levels():
    """The CLI's main() configures logging, as a command does: keep other tests' levels."""
    levels = {name: logging.getLogger(name).level for name in ("", "rltune")}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("_keep_log_levels")
@pytest.mark.parametrize("corruption", ["policy_rngs garbage", "env_tasks garbage", "state.pt a plain tensor"])
def test_rollout_of_a_corrupt_checkpoint_exits_2_with_one_line(trained, tmp_path, capsys, corruption):
    from rltune.orchestrator.cli import main

    path = _corrupt_copy(trained, tmp_path, corruption)
    code = main(["rollout", str(path), "--episodes", "1"])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith(f"rltune rollout: error: checkpoint {str(path)!r}")
    assert CORRUPTIONS[corruption][1] in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert out == ""


# --- a checkpoint is data: it runs no code it names, except envs and callbacks of the expected kinds ---------
MARKER_FN = f"{ContextEnv.__module__}:touch_marker"


def _crafted(trained, tmp_path: Path, **config) -> Path:
    """A copy of the trained checkpoint whose saved config has ``config`` set (checksums made consistent)."""
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    _set_metadata("config", lambda metadata: {**metadata["config"], **config})(path)
    return path


def _popen_env(marker: Path) -> dict:
    # With the env built as ``Popen(EnvContext(env_config))``, Popen runs the dict's keys: ``touch <marker>``.
    return {"env": "subprocess:Popen", "env_config": {"touch": 1, str(marker): 2}}


CODE_IN_CONFIG = {
    "env a Popen": ("env", lambda marker: _popen_env(marker)),
    "env a function": ("env", lambda marker: {"env": MARKER_FN}),
    "callbacks a function": ("callbacks", lambda marker: {"callbacks": MARKER_FN}),
    "callbacks list with a function": ("callbacks", lambda marker: {"callbacks": [MARKER_FN]}),
    "env_task_fn": ("env_task_fn", lambda marker: {"env_task_fn": MARKER_FN}),
    "env_task_fn os.system": ("env_task_fn", lambda marker: {"env_task_fn": "os:system"}),
    "evaluation callbacks": ("evaluation_config.callbacks", lambda marker: {"evaluation_config": {"callbacks": MARKER_FN}}),
}


@pytest.mark.parametrize("case", list(CODE_IN_CONFIG))
def test_from_checkpoint_calls_nothing_the_checkpoint_names_but_envs_and_callbacks(trained, tmp_path, monkeypatch, case):
    key, config = CODE_IN_CONFIG[case]
    marker = tmp_path / "marker"
    monkeypatch.setenv("RLTUNE_TEST_MARKER", str(marker))
    path = _crafted(trained, tmp_path, **config(marker))
    with pytest.raises(CheckpointError) as info:
        trainer = Trainer.from_checkpoint(path)
        trainer.train()  # an env_task_fn runs after an iteration
        trainer.stop()
    assert f"checkpoint {str(path)!r}: config key {key!r}" in str(info.value)
    assert "config_overrides" in str(info.value)
    assert not marker.exists(), "loading the checkpoint ran code it names"


def test_a_checkpoints_env_class_and_callbacks_class_by_import_string_still_load(trained, tmp_path):
    env = f"{ContextEnv.__module__}:ContextEnv"
    path = _crafted(trained, tmp_path, env=env, callbacks=[f"{LevelCallbacks.__module__}:LevelCallbacks"])
    with Trainer.from_checkpoint(path) as restored:
        assert restored.env_spec.name == env
        assert type(restored.callbacks).__name__ == "LevelCallbacks"
        assert_same_weights(restored.get_policy().get_weights(), trained[2]["weights"])


def test_overrides_replace_what_a_checkpoint_may_not_name(trained, tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    monkeypatch.setenv("RLTUNE_TEST_MARKER", str(marker))
    path = _crafted(trained, tmp_path, **_popen_env(marker), callbacks=MARKER_FN, env_task_fn=MARKER_FN)
    overrides = {"env": ContextEnv, "env_config": {}, "callbacks": None, "env_task_fn": None}
    with Trainer.from_checkpoint(path, overrides) as restored:
        assert restored.iteration == trained[2]["iteration"]
    assert not marker.exists()


# --- checksums ----------------------------------------------------------------------------------------


def _flip_byte(file: Path, at: float = 0.5) -> None:
    data = bytearray(file.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    file.write_bytes(bytes(data))


def test_a_flipped_byte_in_state_pt_is_a_checkpoint_error(trained, fresh, tmp_path):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    # A byte of the tensors' data, not of the zip's headers: torch.load would take it and change the weights.
    _flip_byte(path / "state.pt", 0.3)
    with pytest.raises(CheckpointError, match=r"state\.pt is corrupt \(its sha256 does not match"):
        fresh.restore(path)


def test_a_changed_metadata_value_is_a_checkpoint_error(trained, fresh, tmp_path):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    meta_file = path / "rltune_checkpoint.json"
    metadata = json.loads(meta_file.read_text())
    metadata["timesteps_total"] += 1
    meta_file.write_text(json.dumps(metadata))
    with pytest.raises(CheckpointError, match="rltune_checkpoint.json does not match its checksum"):
        fresh.restore(path)


def test_a_version_2_checkpoint_without_checksums_is_refused(trained, fresh, tmp_path):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    _set_metadata("checksums", lambda metadata: None)(path)
    with pytest.raises(CheckpointError, match="metadata field 'checksums' is missing"):
        fresh.restore(path)


def test_a_version_1_checkpoint_without_checksums_still_restores(trained, fresh, tmp_path):
    path = _copy_checkpoint(trained[1], tmp_path / "ckpt")
    metadata = json.loads((path / "rltune_checkpoint.json").read_text())
    for key in ("checksums", "metadata_sha256"):
        del metadata[key]
    (path / "rltune_checkpoint.json").write_text(json.dumps({**metadata, "format_version": 1}))
    fresh.restore(path)
    assert_same_weights(fresh.get_policy().get_weights(), trained[2]["weights"])


def test_arrays_files_are_checksummed_too(tmp_path):
    arrays = {"buffer": {"obs": np.arange(1000, dtype=np.float32)}}
    path = ckpt.write_checkpoint(tmp_path / "ckpt", {"algorithm": "X"}, {"w": torch.zeros(2)}, arrays)
    np.testing.assert_array_equal(ckpt.read_arrays(path, "buffer")["obs"], arrays["buffer"]["obs"])
    assert ckpt.read_arrays(path, "other") is None
    (path / "other.npz").write_bytes((path / "buffer.npz").read_bytes())  # a file the writer did not write
    with pytest.raises(CheckpointError, match="other.npz is not one of its files"):
        ckpt.read_arrays(path, "other")
    _flip_byte(path / "buffer.npz", 0.6)
    with pytest.raises(CheckpointError, match="buffer.npz is corrupt"):
        ckpt.read_arrays(path, "buffer")
    (path / "buffer.npz").unlink()
    with pytest.raises(CheckpointError, match="is partial: buffer.npz is missing"):
        ckpt.read_arrays(path, "buffer")


# --- crashes: the checkpoint under its name is always a complete one, and leftovers are cleaned up ---------


def _write_and_crash(target: Path, iteration: int, crash: str, monkeypatch) -> None:
    """Write a checkpoint of ``iteration`` at ``target`` in a child process that dies (os._exit) at ``crash``."""
    from rltune import _atomic_dir

    calls = {"rename": 0}
    real_rename = os.rename

    def die(*args, **kwargs):
        os._exit(17)

    def rename(src, dst):
        calls["rename"] += 1
        if calls["rename"] == 2:
            die()
        real_rename(src, dst)

    pid = os.fork()
    if pid == 0:  # the child: crash where asked, never return into pytest
        try:
            if crash == "writing state.pt":
                monkeypatch.setattr(torch, "save", die)
            elif crash == "between the two renames":
                monkeypatch.setattr(_atomic_dir, "exchange", lambda a, b: False)
                monkeypatch.setattr(_atomic_dir.os, "rename", rename)
            elif crash == "after the two renames":
                monkeypatch.setattr(_atomic_dir, "exchange", lambda a, b: False)
                monkeypatch.setattr(_atomic_dir.shutil, "rmtree", die)
            elif crash == "after the swap":
                monkeypatch.setattr(_atomic_dir.shutil, "rmtree", die)
            ckpt.write_checkpoint(target, {"algorithm": "X", "iteration": iteration}, {"w": torch.full((3,), iteration)})
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 17, "the child did not crash where asked"


@pytest.mark.parametrize("crash", ["writing state.pt", "between the two renames", "after the two renames", "after the swap"])
def test_a_crash_while_overwriting_leaves_a_complete_checkpoint_under_its_name(tmp_path, monkeypatch, crash):
    target = tmp_path / "ckpt"
    ckpt.write_checkpoint(target, {"algorithm": "X", "iteration": 1}, {"w": torch.full((3,), 1)})
    _write_and_crash(target, 2, crash, monkeypatch)
    assert any(name.startswith(".ckpt.") for name in os.listdir(tmp_path))  # what the crash left
    if crash == "between the two renames":
        assert not target.exists()  # the old writer's state: no checkpoint under its name
    iteration = ckpt.read_metadata(target)["iteration"]  # recovers, then reads
    assert iteration in (1, 2)
    assert torch.equal(ckpt.read_tensors(target)["w"], torch.full((3,), iteration))
    assert os.listdir(tmp_path) == ["ckpt"]  # leftovers cleaned up
    ckpt.write_checkpoint(target, {"algorithm": "X", "iteration": 3}, {"w": torch.full((3,), 3)})
    assert ckpt.read_metadata(target)["iteration"] == 3 and os.listdir(tmp_path) == ["ckpt"]


def test_a_crash_between_the_renames_is_recovered_by_the_next_write_too(tmp_path, monkeypatch):
    target = tmp_path / "ckpt"
    ckpt.write_checkpoint(target, {"algorithm": "X", "iteration": 1}, {"w": torch.full((3,), 1)})
    _write_and_crash(target, 2, "between the two renames", monkeypatch)
    ckpt.write_checkpoint(tmp_path / "other", {"algorithm": "X", "iteration": 5}, {"w": torch.zeros(3)})
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "other"]
    assert ckpt.read_metadata(target)["iteration"] == 1


def test_leftovers_of_live_writers_are_never_deleted(tmp_path):
    from rltune import _atomic_dir

    ckpt.write_checkpoint(tmp_path / "ckpt", {"algorithm": "X", "iteration": 1}, {"w": torch.zeros(3)})
    live = tmp_path / f".ckpt.tmp-{_atomic_dir._HOST}-{os.getppid()}-0123abcd"  # pytest's parent: running
    other_host = tmp_path / ".ckpt.tmp-elsewhere-1-0123abcd"  # another machine's writer: only by age
    legacy_fresh = tmp_path / ".ckpt.tmp-4567abcd"  # names of older rltune versions: only by age
    legacy_stale = tmp_path / ".ckpt.old-89abcdef"
    for path in (live, other_host, legacy_fresh, legacy_stale):
        path.mkdir()
    stale = time.time() - _atomic_dir.STALE_AFTER_S - 60
    os.utime(legacy_stale, (stale, stale))
    ckpt.write_checkpoint(tmp_path / "ckpt", {"algorithm": "X", "iteration": 2}, {"w": torch.zeros(3)})
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt", live.name, other_host.name, legacy_fresh.name])
    os.utime(other_host, (stale, stale))
    ckpt.read_metadata(tmp_path / "ckpt")
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt", live.name, legacy_fresh.name])
    reused = time.time() - _atomic_dir.PID_REUSED_AFTER_S - 60  # unchanged for a day: its pid was reused since
    os.utime(live, (reused, reused))
    ckpt.read_metadata(tmp_path / "ckpt")
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt", legacy_fresh.name])
