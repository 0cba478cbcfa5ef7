"""Trainer configs: defaults with every documented key, errors that name the key and the fix."""

from __future__ import annotations

import pytest
import torch

from rltune.errors import ConfigError
from rltune.trainers import PPO, Trainer, get_trainer_class

# Keys DESIGN.md promises (RLlib's classic names) and PPO's own.
DOCUMENTED_KEYS = [
    "env",
    "env_config",
    "num_workers",
    "num_envs_per_worker",
    "rollout_fragment_length",
    "train_batch_size",
    "gamma",
    "lr",
    "model",
    "seed",
    "callbacks",
    "multiagent",
    "num_gpus",
    "observation_space",
    "action_space",
    "disable_env_checking",
    "restart_failed_sub_environments",
    "recreate_failed_workers",
]
PPO_KEYS = [
    "lambda",
    "use_gae",
    "clip_param",
    "vf_clip_param",
    "vf_loss_coeff",
    "entropy_coeff",
    "kl_coeff",
    "kl_target",
    "sgd_minibatch_size",
    "num_sgd_iter",
    "grad_clip",
]


def _error(config: dict, trainer_cls=PPO) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        trainer_cls(config=config, env="CartPole-v1")
    return info.value


@pytest.mark.parametrize(
    "config, path, suggestion",
    [
        ({"lr_": 1e-3}, "lr_", "lr"),
        ({"num_sgd_iters": 3}, "num_sgd_iters", "num_sgd_iter"),
        ({"rollout_fragment_lenght": 10}, "rollout_fragment_lenght", "rollout_fragment_length"),
        ({"lamda": 0.9}, "lamda", "lambda"),
        ({"model": {"fcnet_hidden": [8]}}, "model.fcnet_hidden", "fcnet_hiddens"),
        ({"multiagent": {"policy_maping_fn": None}}, "multiagent.policy_maping_fn", "policy_mapping_fn"),
    ],
)
def test_unknown_key_names_the_key_and_the_closest_valid_one(config, path, suggestion):
    error = _error(config)
    assert len(error.problems) == 1
    problem = error.problems[0]
    assert problem.startswith(f"{path}:")
    assert "unknown key" in problem
    assert f"did you mean '{suggestion}'" in problem
    assert isinstance(error, ValueError)  # ConfigError is also a ValueError


def test_unknown_key_far_from_any_gives_no_bogus_suggestion(trainer_cls):
    error = _error({"zzzzqqqq": 1}, trainer_cls)
    assert "zzzzqqqq" in str(error) and "did you mean" not in str(error)


def test_every_problem_is_listed_by_its_path(trainer_cls):
    error = _error(
        {
            "lr_": 1e-3,
            "gamma": 1.5,
            "num_workers": -1,
            "model": {"fcnet_activation": "sigmoid", "fcnet_hiddens": [8, 0]},
            "train_batch_size": "many",
        },
        trainer_cls,
    )
    assert len(error.problems) == 6
    message = str(error)
    for path in ("lr_", "gamma", "num_workers", "model.fcnet_activation", "model.fcnet_hiddens", "train_batch_size"):
        assert any(p.startswith(f"{path}:") for p in error.problems), path
        assert path in message
    assert "6 problems" in message
    assert "1.5" in message and "sigmoid" in message  # the bad values are shown


def test_cross_field_check_shows_the_arithmetic():
    error = _error({"train_batch_size": 100, "sgd_minibatch_size": 500})
    assert "sgd_minibatch_size (500)" in str(error) and "train_batch_size (100)" in str(error)


def test_use_gae_without_critic_is_refused():
    error = _error({"use_gae": True, "use_critic": False})
    assert "use_critic" in str(error)


def test_unknown_evaluation_config_key(trainer_cls):
    error = _error({"evaluation_config": {"lrr": 0.1}}, trainer_cls)
    assert "evaluation_config" in str(error) and "lrr" in str(error)


def test_config_must_be_a_mapping(trainer_cls):
    with pytest.raises(ConfigError, match="mapping"):
        trainer_cls.validate([("lr", 0.1)])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_num_gpus_without_cuda_is_a_clear_config_error(trainer_cls):
    error = _error({"num_gpus": 1}, trainer_cls)
    message = str(error)
    assert "num_gpus" in message and "cuda" in message.lower()
    assert "num_gpus: 0" in message  # the fix


def test_config_errors_are_raised_before_any_worker_starts(trainer_cls, monkeypatch):
    from rltune.trainers.sampling import _worker_set

    def no_workers(*args, **kwargs):
        raise AssertionError("a WorkerSet was built for an invalid config")

    monkeypatch.setattr(_worker_set.WorkerSet, "__init__", no_workers)
    _error({"num_workers": 2, "lr_": 1}, trainer_cls)
    if not torch.cuda.is_available():
        _error({"num_workers": 2, "num_gpus": 1}, trainer_cls)


# --- defaults --------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["PPO", "DQN"])
def test_default_config_has_every_shared_documented_key(algorithm):
    defaults = get_trainer_class(algorithm).get_default_config()
    assert [k for k in DOCUMENTED_KEYS if k not in defaults] == []
    assert {"fcnet_hiddens", "fcnet_activation"} <= set(defaults["model"])
    assert {"policies", "policy_mapping_fn", "policies_to_train"} <= set(defaults["multiagent"])
    # RLlib's classic defaults users rely on.
    assert defaults["num_workers"] == 0 and defaults["num_envs_per_worker"] == 1
    assert defaults["num_gpus"] == 0 and defaults["env_config"] == {}


def test_ppo_default_config_has_ppos_keys():
    defaults = PPO.get_default_config()
    assert [k for k in PPO_KEYS if k not in defaults] == []
    assert "lambda_" not in list(defaults)  # a key: RLlib's name, not the Python field name
    assert defaults["gamma"] == 0.99


@pytest.mark.parametrize("algorithm", ["PPO", "DQN"])
def test_every_key_has_a_description(algorithm):
    trainer_cls = get_trainer_class(algorithm)

    def undocumented(model, prefix=""):
        missing = []
        for name, field in model.model_fields.items():
            key = prefix + (field.alias or name)
            if not (field.description or "").strip():
                missing.append(key)
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                missing += undocumented(annotation, key + ".")
        return missing

    assert undocumented(trainer_cls.config_class) == []
    described = trainer_cls.describe_config()
    for key in trainer_cls.get_default_config():
        assert f"\n{key}:" in "\n" + described, key


@pytest.mark.parametrize("algorithm", ["PPO", "DQN"])
def test_default_config_validates_back(algorithm):
    trainer_cls = get_trainer_class(algorithm)
    cfg = trainer_cls.validate(trainer_cls.get_default_config())
    assert cfg.model_dump(by_alias=True) == trainer_cls.get_default_config()


def test_default_config_is_a_fresh_copy():
    defaults = PPO.get_default_config()
    defaults["model"]["fcnet_hiddens"].append(7)
    defaults["env_config"]["x"] = 1
    again = PPO.get_default_config()
    assert again["model"]["fcnet_hiddens"] == [256, 256]
    assert again["env_config"] == {}


def test_trainer_config_reflects_user_values_with_rllib_names():
    with PPO(
        config={"lambda": 0.9, "lr": 1e-3, "train_batch_size": 20, "sgd_minibatch_size": 10, "model": {"fcnet_hiddens": [8]}},
        env="CartPole-v1",
    ) as trainer:
        assert trainer.config["lambda"] == 0.9
        assert trainer.config["lr"] == 1e-3
        assert trainer.config["model"]["fcnet_hiddens"] == [8]
        assert trainer.config["model"]["fcnet_activation"] == "tanh"  # defaults filled in


# --- algorithm names -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["PPO", "ppo", "Ppo", "rltune.trainers.algorithms._ppo:PPO"])
def test_get_trainer_class_resolves_names(name):
    assert get_trainer_class(name) is PPO


def test_get_trainer_class_dqn():
    from rltune.trainers import DQN

    assert get_trainer_class("dqn") is DQN and DQN.name == "DQN"


def test_get_trainer_class_accepts_the_class():
    assert get_trainer_class(PPO) is PPO
    assert issubclass(PPO, Trainer)


def test_unknown_algorithm_has_a_hint():
    with pytest.raises(ConfigError) as info:
        get_trainer_class("PPPO")
    message = str(info.value)
    assert "PPPO" in message and "did you mean 'PPO'" in message and "PPO" in message.split("available")[-1]


def test_import_string_to_a_non_trainer_is_refused():
    with pytest.raises(ConfigError, match="not a rltune Trainer"):
        get_trainer_class("collections:OrderedDict")
    with pytest.raises(ConfigError, match="cannot import"):
        get_trainer_class("no_such_module_xyz:Algo")
