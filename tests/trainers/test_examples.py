"""The multi-agent examples (examples/): their envs do what the docstrings say, and each trains on a tiny budget.

The full runs take 10-30 s each; these tests train for a few iterations,
or check the parts a full run relies on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rltune.trainers import PPO

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def examples(monkeypatch):
    """The examples package, importable as from the repository root (as `rltune tune` sees it)."""
    monkeypatch.syspath_prepend(str(REPO))
    import examples

    return examples


def same_weights(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# -- PettingZoo ---------------------------------------------------------------------------------
def test_pettingzoo_rps_learner_finds_paper_against_the_rock_lover(examples, tmp_path):
    from examples import multi_agent_pettingzoo as rps

    run = rps.train(seed=0, max_iterations=15, verbose=False, results_dir=str(tmp_path))
    result = run["result"]
    assert rps.BEST_RETURN == pytest.approx(4.0)
    assert result["policy_reward_mean"]["learner"] >= 0.9 * rps.BEST_RETURN
    assert result["policy_reward_mean"]["rock_lover"] == -result["policy_reward_mean"]["learner"]  # zero-sum
    assert set(result["info"]["learner"]) == {"learner"}  # the heuristic only acts
    assert run["greedy_moves"] == [rps.PAPER] * 4


def test_the_rps_env_class_of_the_study_file_is_pettingzoos_game(examples):
    from examples import multi_agent_pettingzoo as rps

    env = rps.RockPaperScissors({"rounds": 2})
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_0"]
    env.step({"player_0": rps.PAPER})
    _, rewards, _, _, _ = env.step({"player_1": rps.ROCK})
    assert rewards == {"player_0": 1.0, "player_1": -1.0}
    assert rps.map_players("player_0") == "learner" and rps.map_players("player_1") == "rock_lover"


def test_the_pettingzoo_example_without_pettingzoo_exits_with_one_line_naming_the_install(tmp_path):
    # a PettingZoo that is not installed: its import fails as a missing module's does
    (tmp_path / "pettingzoo").mkdir()
    (tmp_path / "pettingzoo" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pettingzoo'\", name='pettingzoo')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "examples/multi_agent_pettingzoo.py"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "examples/multi_agent_pettingzoo.py needs rltune's 'pettingzoo' extra (pettingzoo not installed): "
        "pip install -e '.[pettingzoo]' (from the repository root)"
    ]
    assert done.stdout == ""


# -- agent groups -------------------------------------------------------------------------------
def test_the_grouped_card_swap_gives_tuples_summed_rewards_and_individual_rewards(examples):
    from examples import multi_agent_groups as groups

    env = groups.make_team({})
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["team"] and len(obs["team"]) == 2
    left, right = obs["team"]
    _, rewards, terminateds, _, infos = env.step({"team": (right, (left + 1) % 3)})  # left names right's card, right misses
    assert rewards == {"team": 1.0} and terminateds["__all__"]
    assert infos["team"]["individual_rewards"] == [1.0, 0.0]
    assert env.action_space["team"] == gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.Discrete(3)])


def test_grouped_agents_learn_the_card_swap_with_tuple_actions(examples, tmp_path):
    from examples import multi_agent_groups as groups

    run = groups.train(groups.GROUPED, iterations=25, seed=0, results_dir=str(tmp_path))
    assert run["calls"] == {(left, right): (right, left) for left in range(3) for right in range(3)}
    assert run["result"]["episode_reward_mean"] > 1.8  # best 2; independent learners guess: about 0.67
    assert run["result"]["custom_metrics"]["left_payoff_mean"] > 0.9  # the members' own rewards, from infos


# -- two trainers -------------------------------------------------------------------------------
def test_two_trainers_of_two_algorithms_train_their_own_policy_and_share_both(examples, tmp_path):
    from examples import multi_agent_two_trainers as two

    run = two.train(iterations=2, verbose=False, results_dir=str(tmp_path))
    assert set(run["ppo_result"]["info"]["learner"]) == {"ppo_policy"}
    assert set(run["dqn_result"]["info"]["learner"]) == {"dqn_policy"}
    for pid in ("ppo_policy", "dqn_policy"):  # each trainer holds the other's latest weights
        assert same_weights(run["weights"]["ppo"][pid], run["weights"]["dqn"][pid])
    assert {"ppo_policy", "dqn_policy"} <= set(run["ppo_result"]["policy_reward_mean"])


# -- hierarchical -------------------------------------------------------------------------------
def test_two_rooms_creates_a_low_level_agent_per_pick_and_rewards_progress(examples):
    from examples.hierarchical import LANDMARKS, TwoRooms

    env = TwoRooms()
    obs, _ = env.reset()
    assert list(obs) == ["top_level"]
    door = list(LANDMARKS).index("door")
    obs, *_ = env.step({"top_level": door})
    assert list(obs) == ["low_level_1"] and np.allclose(obs["low_level_1"], [0, 0, 3 / 6, 4 / 4])
    obs, rewards, terminateds, *_ = env.step({"low_level_1": 0})  # up: closer to the door
    assert rewards == {"low_level_1": 1.0, "top_level": -0.02} and not terminateds["low_level_1"]
    obs, rewards, *_ = env.step({"low_level_1": 2})  # left: into the west wall
    assert rewards["low_level_1"] == -0.2
    for move in (3, 3, 3, 3):  # right three times (the third into the wall), then right again: 6 steps in all
        obs, rewards, terminateds, *_ = env.step({"low_level_1": move})
    assert terminateds["low_level_1"] and set(obs) == {"low_level_1", "top_level"}  # the top level picks again
    obs, *_ = env.step({"top_level": door})
    assert list(obs) == ["low_level_2"]


def test_hierarchical_training_stages_train_only_their_subset(examples, tmp_path):
    from examples.hierarchical import CONFIG

    with PPO(config={**CONFIG, "seed": 0}, results_dir=tmp_path) as trainer:
        top, results = trainer.get_policy("top_level").get_weights(), []
        for _ in range(6):
            results.append(trainer.train())
        assert all(set(r["info"]["learner"]) == {"low_level"} for r in results)
        assert same_weights(trainer.get_policy("top_level").get_weights(), top)
        low_rewards = [r["policy_reward_mean"]["low_level"] for r in results[1:]]
        assert low_rewards[-1] > low_rewards[0] + 0.5, low_rewards  # it learns to walk to a landmark
        low = trainer.get_policy("low_level").get_weights()
        trainer.set_policies_to_train(["top_level"])
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"top_level"}
        assert same_weights(trainer.get_policy("low_level").get_weights(), low)
        assert not same_weights(trainer.get_policy("top_level").get_weights(), top)


# -- self-play ----------------------------------------------------------------------------------
def test_nim_rewards_the_player_who_takes_the_last_stone(examples):
    from examples.self_play import Nim, perfect_take

    env = Nim()
    env.reset(seed=0)
    env.stones = 5
    assert list(env.step({"p1": 0})[0]) == ["p2"]  # p1 takes 1: 4 left
    obs, rewards, terminateds, _, _ = env.step({"p2": 2})  # p2 takes 3: 1 left
    obs, rewards, terminateds, _, _ = env.step({"p1": 2})  # p1 takes 3, only 1 is left: p1 wins
    assert rewards == {"p1": 1.0, "p2": -1.0} and terminateds["__all__"] and set(obs) == {"p1", "p2"}
    assert [perfect_take(n) for n in (5, 6, 7, 8)] == [1, 2, 3, 1]


def test_self_play_snapshots_join_the_league_frozen_and_main_learns(examples, tmp_path):
    from examples.self_play import CONFIG, win_rate

    with PPO(config={**CONFIG, "seed": 0}, results_dir=tmp_path) as trainer:
        for _ in range(5):
            result = trainer.train()
        assert [h["snapshot"] for h in result["league"]] == ["main_v1"]
        snapshot = trainer.get_policy("main_v1").get_weights()
        assert same_weights(snapshot, trainer.get_policy("main").get_weights())
        for _ in range(5):
            result = trainer.train()
        assert [h["snapshot"] for h in result["league"]] == ["main_v1", "main_v2"]
        assert set(result["info"]["learner"]) == {"main"}
        assert same_weights(trainer.get_policy("main_v1").get_weights(), snapshot)  # frozen
        assert "main_v1" in result["policy_reward_mean"]  # the snapshot plays
        assert win_rate(trainer, lambda stones, rng: int(rng.integers(1, 4))) > 0.8  # a random player rarely wins


# -- centralized critic -----------------------------------------------------------------------
def test_the_central_critic_sees_the_partners_observation_and_action(examples, tmp_path):
    from examples.centralized_critic import CONFIG, TARGETS, CentralCriticPolicy, same_policy
    from rltune.trainers import PolicySpec
    from rltune.trainers.sampling._sample_batch import ACTIONS, OBS

    config = {**CONFIG, "seed": 0, "num_envs_per_worker": 1, "rollout_fragment_length": 5,
              "multiagent": {"policies": {"shared": PolicySpec(policy_class=CentralCriticPolicy)},
                             "policy_mapping_fn": same_policy}}
    with PPO(config=config, results_dir=tmp_path) as trainer:
        batch = trainer.algorithm.postprocess(trainer.workers.local_worker.sample())["shared"]
    obs, actions = batch[OBS], batch[ACTIONS]
    own = TARGETS + 1
    assert obs.shape == (10, 2 * own + TARGETS)  # one episode of 5 steps, for each of the two agents
    a, b = obs[:5], obs[5:]  # the two agents' trajectories
    np.testing.assert_array_equal(a[:, own:2 * own], b[:, :own])  # a's critic input holds b's observation
    np.testing.assert_array_equal(a[:, 2 * own:].argmax(1), actions[5:])  # and b's actions, one-hot
    np.testing.assert_array_equal(b[:, own:2 * own], a[:, :own])


def test_the_centralized_critic_example_trains(examples, tmp_path):
    from examples.centralized_critic import train

    run = train(True, iterations=8, seed=0, results_dir=str(tmp_path))
    per_step = run["result"]["policy_reward_mean"]["shared"] / 5
    assert per_step > 2.0  # random play scores 1.0 a step (each hit 1 in 4), the best 4.0


# -- structured spaces ----------------------------------------------------------------------------
def test_the_workshop_robot_learns_its_dict_observation_and_tuple_action(examples, tmp_path):
    from examples import structured_spaces

    run = structured_spaces.train(iterations=12, seed=0, results_dir=str(tmp_path))
    assert run["result"]["episode_reward_mean"] > 1.4  # best 2, random about 0.8
    for tool, (taken, aim) in run["answers"].items():
        assert taken == tool  # the env's own tool numbers (Discrete(3, start=1))
        assert structured_spaces.Workshop().action_space.contains((taken, aim))


# -- recurrent policies ------------------------------------------------------------------------------
def test_the_gru_example_remembers_three_steps_back_and_the_mlp_does_not(examples, tmp_path):
    from examples import recurrent_memory

    gru = recurrent_memory.train(recurrent_memory.GRUPPO, iterations=12, results_dir=str(tmp_path))
    mlp = recurrent_memory.train(recurrent_memory.PPO, iterations=5, results_dir=str(tmp_path))
    assert gru["reward_per_step"] > 0.8 and mlp["reward_per_step"] < 0.6  # chance: 0.5
