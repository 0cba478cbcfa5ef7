"""The observation preprocessor catalog and the model catalog's encoder seam.

Discrete parts are one-hot, Dict and Tuple parts are concatenated in a
stable order (a Tuple's, a Dict's sorted keys) that ``parts`` describes;
rows restore to the observation; images are of kind ``"image"``; an
encoder registered for a kind is the one PPO's model uses.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rltune.trainers import PPO
from rltune.trainers.policies import _encoders
from rltune.trainers.policies._preprocessors import BoxPreprocessor, get_preprocessor

DICT = spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (2,), np.float32), "kind": spaces.Discrete(3, start=1),
                    "nested": spaces.Tuple((spaces.MultiBinary(2), spaces.MultiDiscrete([2, 3])))})


def test_discrete_and_multi_discrete_are_one_hot_from_their_start():
    pre = get_preprocessor(spaces.Discrete(3, start=-1))
    np.testing.assert_array_equal(pre.batch([-1, 1]), [[1, 0, 0], [0, 0, 1]])
    pre = get_preprocessor(spaces.MultiDiscrete([2, 3], start=[1, 0]))
    np.testing.assert_array_equal(pre(np.array([2, 1])), [0, 1, 0, 1, 0])
    assert pre.restore(pre(np.array([2, 1]))).tolist() == [2, 1]


def test_dict_and_tuple_parts_are_concatenated_in_a_stable_order():
    pre = get_preprocessor(DICT)
    assert [p.path for p in pre.parts] == [("kind",), ("nested", 0), ("nested", 1), ("pos",)]  # sorted keys
    assert [(p.columns.start, p.columns.stop) for p in pre.parts] == [(0, 3), (3, 5), (5, 10), (10, 12)]
    obs = {"pos": np.array([0.5, -0.25], np.float32), "kind": 2, "nested": (np.array([1, 0], np.int8), np.array([1, 2]))}
    row = pre(obs)
    np.testing.assert_array_equal(row, [0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0.5, -0.25])
    assert row.dtype == np.float32 and pre.size == 12 and pre.kind == "flat"
    again = pre.restore(row)
    assert again["kind"] == 2 and again["nested"][1].tolist() == [1, 2] and again["pos"].tolist() == [0.5, -0.25]
    # the same space declared with its keys in another order flattens the same way
    shuffled = spaces.Dict({k: DICT[k] for k in ("pos", "nested", "kind")})
    np.testing.assert_array_equal(get_preprocessor(shuffled)(obs), row)
    np.testing.assert_array_equal(pre.batch([obs, obs]), [row, row])


def test_boxes_of_any_shape_are_one_row_and_images_are_of_their_own_kind():
    pre = get_preprocessor(spaces.Box(0, 255, (4, 3, 2), np.uint8))
    assert isinstance(pre, BoxPreprocessor) and pre.kind == "image" and pre.shape == (4, 3, 2) and pre.size == 24
    image = np.arange(24, dtype=np.uint8).reshape(4, 3, 2)
    row = pre(image)
    assert row.dtype == pre.dtype == np.uint8 and row.tolist() == list(range(24))  # uint8 until the model
    assert np.array_equal(pre.restore(row), image) and pre.restore(row).dtype == np.uint8
    assert pre.batch(np.stack([image, image])).shape == (2, 24)


class _ImageEnv(gym.Env):
    """A 6x6x1 uint8 image; reward 1 for action 1 when the image is bright."""

    def __init__(self, config: Any = None) -> None:
        self.observation_space = spaces.Box(0, 255, (6, 6, 1), np.uint8)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self._image(), {}

    def _image(self) -> np.ndarray:
        self.bright = bool(self.np_random.integers(2))
        return np.full((6, 6, 1), 200 if self.bright else 10, np.uint8)

    def step(self, action):
        return self._image(), float(int(action) == int(self.bright)), True, False, {}


class _TinyConv(nn.Module):
    """What a CNN encoder would be: rows back to images (``shape``), a convolution, flat features."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.shape = shape
        self.conv = nn.Conv2d(shape[2], 2, 3)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        images = rows.reshape((-1,) + self.shape).permute(0, 3, 1, 2) / 255.0
        return torch.relu(self.conv(images)).flatten(1)


def test_an_encoder_registered_for_images_is_the_one_ppo_uses(monkeypatch):
    monkeypatch.setattr(_encoders, "_ENCODERS", dict(_encoders._ENCODERS))
    built = []

    def conv_encoder(shape, size, cfg):
        built.append(shape)
        return _TinyConv(shape), 2 * (shape[0] - 2) * (shape[1] - 2)

    _encoders.register_encoder("image", conv_encoder)
    config = {"rollout_fragment_length": 16, "num_envs_per_worker": 2, "train_batch_size": 32, "sgd_minibatch_size": 16,
              "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}, "seed": 0}
    with PPO(config=config, env=_ImageEnv) as trainer:
        result = trainer.train()
        model = trainer.get_policy().model
        assert isinstance(model.pi_body, _TinyConv) and not model.fusable
        assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
        assert trainer.compute_single_action(np.zeros((6, 6, 1), np.uint8)) in (0, 1)
    assert built == [(6, 6, 1), (6, 6, 1)]  # policy and value encoders
