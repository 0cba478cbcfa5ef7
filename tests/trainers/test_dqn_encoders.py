"""DQN's Q-model builds its body through the model catalog's encoder seam; DQN learns over structured observations.

An encoder registered for an observation kind is the Q-model's body for
observations of that kind (run in torch: the numpy fast path fuses MLPs
only), with noisy layers and parameter noise too. Without one, the body is
the fcnet MLP exactly as before the seam: the same parameters, the same
Q-values for a seed (numbers recorded from the Q-model built before it).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from rltune.trainers import DQN
from rltune.trainers.algorithms._dqn import DQNPolicy, DQNSettings
from rltune.trainers.policies import _encoders

TINY = {"learning_starts": 16, "min_sample_timesteps_per_iteration": 64, "train_batch_size": 16, "hiddens": [8],
        "model": {"fcnet_hiddens": [8]}, "seed": 0}


class _RecordingEncoder(nn.Module):
    """An encoder that is no MLP: the rows as images, a linear map of their pixels, counting the rows it reads."""

    def __init__(self, shape: tuple[int, ...], size: int) -> None:
        super().__init__()
        self.shape = shape
        self.pixels = nn.Linear(size, 4)
        self.rows = 0

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        self.rows += len(rows)
        images = rows.reshape((-1,) + self.shape) / 255.0
        return torch.tanh(self.pixels(images.flatten(1)))


class _LitPixelEnv(gym.Env):
    """A 3x3x1 uint8 image with one lit pixel; reward 1 for the action naming the lit pixel's row (0..2)."""

    def __init__(self, config: Any = None) -> None:
        self.observation_space = spaces.Box(0, 255, (3, 3, 1), np.uint8)
        self.action_space = spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self._image(), {}

    def _image(self) -> np.ndarray:
        self.lit = int(self.np_random.integers(9))
        image = np.zeros((3, 3, 1), np.uint8)
        image[self.lit // 3, self.lit % 3, 0] = 255
        return image

    def step(self, action):
        return self._image(), float(int(action) == self.lit // 3), True, False, {}


@pytest.fixture
def recording_images(monkeypatch) -> list[tuple[int, ...]]:
    """Register :class:`_RecordingEncoder` for images (for this test only); the shapes it was built for."""
    monkeypatch.setattr(_encoders, "_ENCODERS", dict(_encoders._ENCODERS))
    built: list[tuple[int, ...]] = []

    def build(shape: tuple[int, ...], size: int, cfg: Any) -> tuple[nn.Module, int]:
        built.append(shape)
        return _RecordingEncoder(shape, size), 4

    _encoders.register_encoder("image", build)
    return built


@pytest.mark.parametrize("extra", [{}, {"noisy": True}, {"exploration_config": {"type": "ParameterNoise"}}],
                         ids=["epsilon-greedy", "noisy", "parameter-noise"])
def test_an_encoder_registered_for_images_is_the_body_of_dqns_q_model(recording_images, extra):
    with DQN(config={**TINY, **extra}, env=_LitPixelEnv) as trainer:
        policy = trainer.get_policy()
        model = policy.model
        assert isinstance(model.body, _RecordingEncoder) and not model.fusable
        assert recording_images == [(3, 3, 1)]  # one Q-model; the target network is its copy
        assert isinstance(trainer.get_learner().target_model.body, _RecordingEncoder)
        result = trainer.train()
        assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
        # acting falls back from the numpy path to the model in torch, which reads through the encoder
        obs = np.stack([policy.preprocessor(_LitPixelEnv().reset(seed=s)[0]) for s in range(5)])
        rows = model.body.rows
        q_values = policy.q_values(obs)
        assert model.body.rows == rows + 5
        with torch.no_grad():
            np.testing.assert_allclose(q_values, model(torch.from_numpy(obs), noise=False).numpy(), rtol=1e-6)
        actions, _ = policy.compute_actions(obs, explore=True)
        assert actions.shape == (5,) and set(actions.tolist()) <= {0, 1, 2}
        assert trainer.compute_single_action(np.zeros((3, 3, 1), np.uint8)) in (0, 1, 2)
        if "exploration_config" in extra:  # the perturbed copy runs the encoder with perturbed head weights
            perturbed = policy.exploration.perturbed_q(policy, obs)
            assert perturbed.shape == (5, 3) and not np.allclose(perturbed, policy.q_values(obs))


def test_observations_of_another_kind_keep_the_fused_mlp(recording_images):
    policy = DQNPolicy(spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2), DQNSettings.model_validate(TINY), seed=0)
    assert isinstance(policy.model.body, nn.Sequential) and policy.model.fusable and recording_images == []


# Q-values of the rows OBS at initialisation (torch.manual_seed(0)), recorded from the Q-model built before the seam.
OBS = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
BEFORE = [
    ({"model": {"fcnet_hiddens": [16, 16]}, "hiddens": [8]},
     [[0.22265428, -0.2622012, 0.3182816], [0.20349073, -0.13391396, -0.038732897], [0.15434176, -0.5452048, 0.0020011961]],
     ["body.0", "body.2", "advantage_hidden.0.linear", "advantage_head", "value_hidden.0.linear", "value_head"]),
    ({"model": {"fcnet_hiddens": [8], "fcnet_activation": "relu"}, "hiddens": [], "dueling": False},
     [[0.4059946, -0.4967835, -0.3779657], [-0.1337431, -0.17888142, -0.30911982], [-0.33339503, -0.6850325, 0.032567155]],
     ["body.0", "advantage_head"]),
    ({"model": {"fcnet_hiddens": [8]}, "hiddens": [8], "noisy": True},
     [[-0.49817505, 0.017354071, 0.3274567], [-0.3582216, 0.1443089, 0.40291417], [-0.40486327, 0.17317012, 0.39672238]],
     ["body.0"]),
]


@pytest.mark.parametrize("config,q_values,linear_layers", BEFORE, ids=["dueling", "head-less", "noisy"])
def test_the_default_mlp_body_gives_the_q_values_of_before(config, q_values, linear_layers):
    torch.manual_seed(0)
    policy = DQNPolicy(spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(3), DQNSettings.model_validate(config), seed=0)
    names = set(policy.model.state_dict())
    assert all(f"{layer}.weight" in names and f"{layer}.bias" in names for layer in linear_layers)
    np.testing.assert_allclose(policy.q_values(OBS), q_values, rtol=1e-5, atol=1e-6)  # the numpy path
    with torch.no_grad():
        np.testing.assert_allclose(policy.model(torch.from_numpy(OBS), noise=False).numpy(), q_values, rtol=1e-5, atol=1e-6)


def test_a_seeded_cartpole_run_gives_the_q_values_and_actions_of_before():
    config = {"seed": 0, "learning_starts": 64, "min_sample_timesteps_per_iteration": 256, "train_batch_size": 32,
              "hiddens": [16], "model": {"fcnet_hiddens": [16]}}
    with DQN(config=config, env="CartPole-v1") as trainer:
        trainer.train()
        q_values = trainer.get_policy().q_values(OBS)
        actions = [trainer.compute_single_action(o) for o in OBS]
    np.testing.assert_allclose(q_values, [[0.3327126, 1.1431283], [0.35505417, 0.3503591], [0.9518724, 0.3104627]],
                               rtol=1e-4, atol=1e-5)
    assert actions == [1, 0, 0]


class _DictObsBandit(gym.Env):
    """Observation ``{"x": Box(-1, 1, (1,)), "k": Discrete(3, start=1)}``; action Discrete(3).

    Reward 1 for the action ``(k - 1 + [x > 0]) % 3``, else 0: it depends on
    both parts (one part alone gets at most 0.5, random actions 1/3).
    """

    def __init__(self, config: Any = None) -> None:
        self.observation_space = spaces.Dict({"x": spaces.Box(-1.0, 1.0, (1,), np.float32), "k": spaces.Discrete(3, start=1)})
        self.action_space = spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.obs = {"x": self.np_random.uniform(-1, 1, (1,)).astype(np.float32), "k": int(self.np_random.integers(1, 4))}
        return self.obs, {}

    @staticmethod
    def best(obs: dict) -> int:
        return (obs["k"] - 1 + int(obs["x"][0] > 0)) % 3

    def step(self, action):
        reward = float(int(action) == self.best(self.obs))
        return {"x": self.obs["x"].copy(), "k": self.obs["k"]}, reward, True, False, {}


def test_dqn_learns_a_dict_observation_of_a_box_and_a_discrete():
    # 8 envs, one-step episodes: 4 iterations of 512 steps, 8 trained rows per sampled one
    config = {"num_envs_per_worker": 8, "learning_starts": 256, "min_sample_timesteps_per_iteration": 512,
              "train_batch_size": 32, "training_intensity": 8.0, "lr": 3e-3, "hiddens": [], "dueling": False,
              "target_network_update_freq": 128, "model": {"fcnet_hiddens": [32]},
              "exploration_config": {"epsilon_timesteps": 1500, "final_epsilon": 0.02}, "seed": 0}
    with DQN(config=config, env=_DictObsBandit) as trainer:
        for _ in range(4):
            result = trainer.train()
        assert result["episode_reward_mean"] > 0.7, result["episode_reward_mean"]  # random: 1/3
        rng = np.random.default_rng(1)
        observations = [{"x": rng.uniform(-1, 1, (1,)).astype(np.float32), "k": int(rng.integers(1, 4))} for _ in range(200)]
        hits = sum(trainer.compute_single_action(obs) == _DictObsBandit.best(obs) for obs in observations)
        assert hits / len(observations) > 0.85, hits  # greedy: reads both parts
