"""Spaces as JSON: one form for checkpoints and exported policies, every space rltune takes round-trips,
and the forms older rltune wrote (checkpoints' and exported models') still read."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rltune.trainers.policies._space_json import space_from_json, space_to_json

SPACES = {
    "box": spaces.Box(-1.0, 1.0, (4,), np.float32),
    "box_bounds_per_entry": spaces.Box(np.array([-1.0, 0.0]), np.array([2.0, np.inf]), dtype=np.float64),
    "box_unbounded": spaces.Box(-np.inf, np.inf, (3,), np.float32),
    "image": spaces.Box(0, 255, (84, 84, 3), np.uint8),
    "box_int": spaces.Box(-5, 5, (2, 3), np.int64),
    "box_scalar": spaces.Box(0.0, 1.0, (), np.float32),
    "discrete": spaces.Discrete(5),
    "discrete_start": spaces.Discrete(4, start=-2),
    "multi_discrete": spaces.MultiDiscrete([3, 4]),
    "multi_discrete_int32_start": spaces.MultiDiscrete([3, 4], dtype=np.int32, start=[1, -2]),
    "multi_discrete_2d": spaces.MultiDiscrete([[2, 3], [4, 5]], dtype=np.int8),
    "multi_binary": spaces.MultiBinary(3),
    "multi_binary_2d": spaces.MultiBinary([2, 3]),
    "tuple": spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,), np.float32))),
    "dict": spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (2,), np.float32), "kind": spaces.Discrete(3, start=1)}),
    "nested": spaces.Dict({
        "image": spaces.Box(0, 255, (8, 8, 1), np.uint8),
        "parts": spaces.Tuple((spaces.MultiBinary(2), spaces.MultiDiscrete([2, 2], dtype=np.int32),
                               spaces.Dict({"x": spaces.Discrete(2)}))),
    }),
}


def _same(a: gym.Space, b: gym.Space) -> None:
    """Equal as gymnasium compares spaces, and with the same dtypes and starts (which ``==`` may not check)."""
    assert a == b and type(a) is type(b) and a.dtype == b.dtype, (a, b)
    if isinstance(a, spaces.Box):
        np.testing.assert_array_equal(a.low, b.low)
        np.testing.assert_array_equal(a.high, b.high)
    if isinstance(a, (spaces.Discrete, spaces.MultiDiscrete)):
        np.testing.assert_array_equal(a.start, b.start)
    for x, y in zip(getattr(a, "spaces", {}).values() if isinstance(a, spaces.Dict) else getattr(a, "spaces", ()),
                    getattr(b, "spaces", {}).values() if isinstance(b, spaces.Dict) else getattr(b, "spaces", ())):
        _same(x, y)


@pytest.mark.parametrize("name", sorted(SPACES))
def test_every_space_kind_round_trips_through_json_text(name):
    space = SPACES[name]
    back = space_from_json(json.loads(json.dumps(space_to_json(space))))
    _same(space, back)
    assert back.contains(space.sample())


def test_an_image_space_is_saved_small():
    assert len(json.dumps(space_to_json(SPACES["image"]))) < 200  # not 2 x 21168 bounds


# The forms older rltune wrote, as JSON literals.
OLD_CHECKPOINT_SPACES = """{
 "observation_space": {"type": "Dict", "spaces": {
   "pos": {"type": "Box", "low": [-1.0, -1.0], "high": [1.0, 1.0], "shape": [2], "dtype": "float32"},
   "kind": {"type": "Discrete", "n": 3, "start": 0}}},
 "action_space": {"type": "MultiDiscrete", "nvec": [3, 4]}
}"""
OLD_EXPORTED_SPACES = """{
 "observation_space": {"type": "Box", "low": [[0, 0], [0, 0]], "high": [[255, 255], [255, 255]], "shape": [2, 2],
                       "dtype": "uint8"},
 "action_space": {"type": "Tuple", "spaces": [{"type": "MultiDiscrete", "nvec": [3, 4], "dtype": "int32"},
                                              {"type": "Discrete", "n": 2}, {"type": "MultiBinary", "n": 3}]}
}"""


def test_spaces_in_a_checkpoint_of_an_older_rltune_still_read():
    saved = json.loads(OLD_CHECKPOINT_SPACES)
    _same(space_from_json(saved["observation_space"]), spaces.Dict({
        "pos": spaces.Box(-1.0, 1.0, (2,), np.float32), "kind": spaces.Discrete(3)}))
    _same(space_from_json(saved["action_space"]), spaces.MultiDiscrete([3, 4]))  # int64 then


def test_spaces_in_a_policy_exported_by_an_older_rltune_still_read():
    saved = json.loads(OLD_EXPORTED_SPACES)
    _same(space_from_json(saved["observation_space"]), spaces.Box(0, 255, (2, 2), np.uint8))
    _same(space_from_json(saved["action_space"]), spaces.Tuple((
        spaces.MultiDiscrete([3, 4], dtype=np.int32), spaces.Discrete(2), spaces.MultiBinary(3))))


@pytest.mark.parametrize("value, match", [
    ({"type": "Box", "low": 0, "high": 1, "shape": [2]}, "malformed saved Box space"),
    ({"type": "MultiDiscrete", "nvec": [3, 4], "dtype": "float32"}, "malformed saved MultiDiscrete space"),
    ({"type": "Text", "max_length": 3}, "unknown saved space type 'Text'"),
    ([1, 2], "not a saved space"),
])
def test_a_malformed_saved_space_is_a_value_error_naming_it(value, match):
    with pytest.raises(ValueError, match=match):
        space_from_json(value)


def test_a_space_without_a_json_form_is_refused_by_name():
    with pytest.raises(ValueError, match="cannot save a Text space"):
        space_to_json(spaces.Text(5))


class Int32ObsEnv(gym.Env):
    """MultiDiscrete int32 observations with a start, as checkpoints and exports must keep them."""

    observation_space = spaces.MultiDiscrete([3, 4], dtype=np.int32, start=[1, -1])
    action_space = spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.start.copy(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.start.copy(), float(action == 0), self.t >= 4, False, {}


def test_a_policy_exported_from_a_checkpoint_keeps_a_multi_discrete_dtype_and_start(tmp_path: Path):
    """The checkpoint saved spaces in one JSON form and the export read them in another: int32 and the start were lost."""
    from rltune.tracking._mlflow_model import load_policy, write_policy_dir
    from rltune.trainers import PPO

    config = {"train_batch_size": 32, "rollout_fragment_length": 16, "sgd_minibatch_size": 16, "num_sgd_iter": 1,
              "model": {"fcnet_hiddens": [8]}}
    with PPO(config=config, env=Int32ObsEnv) as trainer:
        checkpoint = trainer.save(tmp_path / "ckpt")
    policy = load_policy(write_policy_dir(checkpoint, tmp_path / "policy"))
    _same(policy.observation_space, Int32ObsEnv.observation_space)
