"""Train files: fields validated, errors name the file, the line and the fix; the shipped study file is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltune.errors import ConfigError
from rltune.orchestrator._train_file import load_train_file
from rltune.trainers import get_trainer_class

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return path


def test_reads_every_field(tmp_path):
    path = write(
        tmp_path,
        "name: t\nrun: PPO\nenv: CartPole-v1\nstop: {timesteps_total: 2e5}\ncheckpoint_freq: 5\n"
        "checkpoint_at_end: true\nresults_dir: /tmp/r\ntensorboard: false\nconfig: {lr: 1.0e-3, lambda: 0.9}\n",
    )
    spec = load_train_file(path)
    assert spec.model_dump() == {
        "name": "t",
        "run": "PPO",
        "env": "CartPole-v1",
        "config": {"lr": 1e-3, "lambda": 0.9},
        "stop": {"timesteps_total": 200000.0},  # 2e5 is a number (YAML 1.1 would read a string)
        "checkpoint_freq": 5,
        "checkpoint_at_end": True,
        "results_dir": "/tmp/r",
        "tensorboard": False,
        "curriculum": None,
        "num_samples": None,
        "schedule": None,
    }


def test_rllib_layout_with_the_name_as_top_key(tmp_path):
    spec = load_train_file(write(tmp_path, "cartpole-ppo:\n  run: PPO\n  env: CartPole-v1\n"))
    assert (spec.name, spec.run, spec.env) == ("cartpole-ppo", "PPO", "CartPole-v1")


def test_an_rllib_tuned_example_ports_as_it_is(tmp_path):
    # The layout and keys of RLlib's tuned examples, with YAML 1.2 numbers like 1e5.
    path = write(
        tmp_path,
        "cartpole-ppo:\n  env: CartPole-v1\n  run: PPO\n  stop:\n    episode_reward_mean: 150\n"
        "    timesteps_total: 1e5\n  config:\n    framework: torch\n    observation_filter: NoFilter\n"
        "    lr_schedule: [[0, 3e-4], [1e5, 1e-5]]\n    num_workers: 1\n",
    )
    spec = load_train_file(path)
    config = get_trainer_class(spec.run).validate({**spec.config, "env": spec.env})
    assert config.lr_schedule == [(0, 3e-4), (100_000, 1e-5)]
    assert (config.framework, config.observation_filter) == ("torch", "NoFilter")
    assert spec.stop == {"episode_reward_mean": 150, "timesteps_total": 100_000.0}


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("framework", "jax", "framework: 'jax' is not supported yet"),
        ("observation_filter", "MeanStd", "observation_filter: 'MeanStd' is not an observation filter; use one of"),
    ],
)
def test_rllib_keys_rltune_cannot_honour_are_named(key, value, message):
    with pytest.raises(ConfigError, match=message):
        get_trainer_class("PPO").validate({key: value})


def test_missing_file_is_named(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_train_file(path)
    assert str(info.value) == f"invalid train file {str(path)!r}: the file does not exist"


def test_malformed_yaml_names_line_and_column(tmp_path):
    path = write(tmp_path, "run: PPO\nenv: CartPole-v1\nconfig: {lr: 0.1\nstop: {}\n")
    with pytest.raises(ConfigError) as info:
        load_train_file(path)
    message = str(info.value)
    assert message.startswith(f"invalid train file {str(path)!r}: line 4, column 5: not valid YAML:")
    assert "expected ',' or '}'" in message


def test_unknown_field_names_its_line_and_the_closest_field(tmp_path):
    path = write(tmp_path, "run: PPO\nenv: CartPole-v1\n\nstpo: {training_iteration: 3}\n")
    with pytest.raises(ConfigError) as info:
        load_train_file(path)
    assert str(info.value) == f"invalid train file {str(path)!r}: line 4: stpo: unknown field; did you mean 'stop'?"


def test_every_wrong_type_is_listed_with_its_line(tmp_path):
    path = write(tmp_path, "run: PPO\ncheckpoint_freq: often\nstop:\n  timesteps_total: lots\n")
    with pytest.raises(ConfigError) as info:
        load_train_file(path)
    message = str(info.value)
    assert "(2 problems)" in message
    assert "line 2: checkpoint_freq: Input should be a valid integer" in message
    assert "line 4: stop.timesteps_total: Input should be a valid number" in message


@pytest.mark.parametrize("text, expected", [("", "the file is empty"), ("- run\n- PPO\n", "line 1: must be a mapping of fields")])
def test_empty_or_not_a_mapping(tmp_path, text, expected):
    with pytest.raises(ConfigError, match=expected):
        load_train_file(write(tmp_path, text))


def test_shipped_cartpole_study_is_a_valid_ppo_train_file():
    spec = load_train_file(REPO / "studies" / "cartpole-ppo.yaml")
    assert (spec.run, spec.env) == ("PPO", "CartPole-v1")
    assert spec.stop == {"episode_reward_mean": 475.0, "timesteps_total": 200000.0}
    cfg = get_trainer_class(spec.run).validate({**spec.config, "env": spec.env})
    assert cfg.lr_schedule == [(0, 1e-3), (100000, 0.0)]
    assert cfg.lambda_ == 0.8 and cfg.vf_clip_param is None and cfg.model.fcnet_hiddens == [64, 64]
