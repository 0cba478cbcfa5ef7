"""PettingZoo envs through PettingZooEnv (AEC: rock-paper-scissors, tic-tac-toe) and ParallelPettingZooEnv (rps, MPE)."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pettingzoo
import pytest
from mpe2 import simple_spread_v3

from rltune.env import EnvContext, ParallelPettingZooEnv, PettingZooEnv
from rltune.env._build import build_env
from rltune.env._multi_agent_check import check_multi_agent_env
from rltune.env._registry import resolve_env
from rltune.errors import EnvError, RLTuneError

ROCK, PAPER, SCISSORS = 0, 1, 2  # rps_v2's actions


def rps(kind: str = "aec", **kwargs):
    return pettingzoo.make(kind, "classic/rps-v2", **kwargs)


def tictactoe():
    return pettingzoo.make("aec", "classic/tictactoe-v3")


def test_aec_spaces_and_agents_come_from_pettingzoo():
    env = PettingZooEnv(tictactoe())
    assert env.possible_agents == ["player_1", "player_2"] and env.get_agent_ids() == {"player_1", "player_2"}
    space = env.get_observation_space("player_2")
    assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"observation", "action_mask"}
    assert env.observation_space == gym.spaces.Dict({a: env.env.observation_space(a) for a in env.possible_agents})
    assert env.action_spaces == {"player_1": gym.spaces.Discrete(9), "player_2": gym.spaces.Discrete(9)}
    assert env.action_space["player_1"] == gym.spaces.Discrete(9)


def test_rps_turns_alternate_and_each_rounds_rewards_reach_both_players():
    env = PettingZooEnv(rps(max_cycles=2))
    obs, infos = env.reset(seed=0)
    assert list(obs) == ["player_0"] and list(infos) == ["player_0"]

    obs, rewards, terminateds, truncateds, _ = env.step({"player_0": PAPER})
    assert list(obs) == ["player_1"] and rewards == {"player_0": 0.0, "player_1": 0.0}
    assert terminateds == {"player_1": False, "__all__": False} and truncateds == {"player_1": False, "__all__": False}

    obs, rewards, terminateds, truncateds, _ = env.step({"player_1": ROCK})
    # the round's result goes to both players at once, the waiting player_0 included
    assert list(obs) == ["player_0"] and rewards == {"player_0": 1.0, "player_1": -1.0}
    assert int(obs["player_0"]) == ROCK  # rps observes the opponent's last move

    env.step({"player_0": ROCK})
    obs, rewards, terminateds, truncateds, _ = env.step({"player_1": PAPER})
    # max_cycles rounds: both truncated, both get the last round's reward and their final observation
    assert rewards == {"player_0": -1.0, "player_1": 1.0}
    assert set(obs) == {"player_0", "player_1"}
    assert truncateds == {"player_0": True, "player_1": True, "__all__": True}
    assert terminateds == {"player_0": False, "player_1": False, "__all__": False}
    with pytest.raises(EnvError, match="after the episode ended"):
        env.step({"player_0": ROCK})


def test_only_the_player_whose_turn_it_is_may_act():
    env = PettingZooEnv(rps())
    env.reset(seed=0)
    with pytest.raises(EnvError, match=r"it is agent 'player_0''s turn, and only its action is expected; got actions of \['player_1'\]"):
        env.step({"player_1": ROCK})


def _play(env, moves):
    """Play tic-tac-toe ``moves`` (cells 0-8) in turn; the last step's results and every step's rewards."""
    env.reset(seed=0)
    totals: dict[str, float] = {}
    for cell in moves:
        (agent,) = [a for a in env.env.agents if a == env.env.agent_selection]
        result = env.step({agent: cell})
        for a, r in result[1].items():
            totals[a] = totals.get(a, 0.0) + r
    return result, totals


def test_tictactoe_win_final_rewards_reach_both_players():
    env = PettingZooEnv(tictactoe())
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_1"]
    assert obs["player_1"]["action_mask"].tolist() == [1] * 9  # the action-mask dict is kept as PettingZoo gives it
    (obs, rewards, terminateds, truncateds, _), totals = _play(env, [0, 3, 1, 4, 2])  # player_1 fills the top row
    assert rewards == {"player_1": 1.0, "player_2": -1.0} and totals == {"player_1": 1.0, "player_2": -1.0}
    assert terminateds == {"player_1": True, "player_2": True, "__all__": True}
    assert truncateds["__all__"] is False
    assert set(obs) == {"player_1", "player_2"}  # final observations
    assert env.observation_space["player_2"].contains(obs["player_2"])


def test_tictactoe_turns_and_action_masks():
    env = PettingZooEnv(tictactoe())
    env.reset(seed=0)
    obs, rewards, *_ = env.step({"player_1": 4})
    assert list(obs) == ["player_2"]
    assert obs["player_2"]["action_mask"].tolist() == [1, 1, 1, 1, 0, 1, 1, 1, 1]
    obs, *_ = env.step({"player_2": 0})
    assert list(obs) == ["player_1"] and obs["player_1"]["action_mask"][[0, 4]].tolist() == [0, 0]


def test_tictactoe_illegal_move_ends_the_game_with_the_offender_losing():
    # PettingZoo's TerminateIllegalWrapper: the player making an illegal move gets -1, the game ends.
    env = PettingZooEnv(tictactoe())
    (obs, rewards, terminateds, truncateds, _), totals = _play(env, [4, 4])
    assert rewards == {"player_2": -1.0, "player_1": 0.0}
    assert terminateds["__all__"] is True and truncateds["__all__"] is False
    assert set(obs) == {"player_1", "player_2"}


def test_the_checker_passes_on_the_aec_and_parallel_wrappers():
    for env in (
        PettingZooEnv(rps(max_cycles=3)),
        PettingZooEnv(tictactoe()),
        ParallelPettingZooEnv(rps("parallel", max_cycles=3)),
        ParallelPettingZooEnv(simple_spread_v3.parallel_env(N=2, max_cycles=4)),
    ):
        check_multi_agent_env(env, type(env.env).__name__, EnvContext())


def test_build_env_builds_and_checks_a_wrapped_pettingzoo_env():
    env = build_env(resolve_env(lambda ctx: PettingZooEnv(tictactoe())), EnvContext(), check=True)
    assert isinstance(env, PettingZooEnv)


def test_a_bare_pettingzoo_env_is_told_to_be_wrapped():
    with pytest.raises(EnvError, match=r"a PettingZoo AEC env: wrap it, rltune.env.PettingZooEnv\(env\)"):
        build_env(resolve_env(lambda ctx: tictactoe()), EnvContext(), check=True)
    with pytest.raises(EnvError, match=r"a PettingZoo parallel env: wrap it, rltune.env.ParallelPettingZooEnv\(env\)"):
        build_env(resolve_env(lambda ctx: rps("parallel")), EnvContext(), check=True)


def test_parallel_rps_moves_are_simultaneous():
    env = ParallelPettingZooEnv(rps("parallel", max_cycles=2))
    assert env.possible_agents == ["player_0", "player_1"]
    assert env.action_space == gym.spaces.Dict({"player_0": gym.spaces.Discrete(3), "player_1": gym.spaces.Discrete(3)})
    obs, infos = env.reset(seed=0)
    assert set(obs) == {"player_0", "player_1"}
    obs, rewards, terminateds, truncateds, _ = env.step({"player_0": SCISSORS, "player_1": PAPER})
    assert rewards == {"player_0": 1, "player_1": -1} and terminateds["__all__"] is False and truncateds["__all__"] is False
    assert int(obs["player_0"]) == PAPER and int(obs["player_1"]) == SCISSORS
    obs, rewards, terminateds, truncateds, _ = env.step({"player_0": ROCK, "player_1": ROCK})
    assert truncateds == {"player_0": True, "player_1": True, "__all__": True} and terminateds["__all__"] is False


def test_parallel_mpe_observations_and_truncation():
    env = ParallelPettingZooEnv(simple_spread_v3.parallel_env(N=2, max_cycles=3))
    assert env.get_observation_space("agent_0") == gym.spaces.Box(-np.inf, np.inf, (12,), np.float32)
    obs, _ = env.reset(seed=0)
    for step in range(3):
        obs, rewards, terminateds, truncateds, _ = env.step({a: 0 for a in obs})
        assert set(rewards) == {"agent_0", "agent_1"} and all(np.isfinite(list(rewards.values())))
        assert truncateds["__all__"] is (step == 2)
    assert obs["agent_0"].shape == (12,)


def test_wrapping_the_wrong_kind_of_pettingzoo_env_is_named():
    with pytest.raises(EnvError, match="is a parallel env: use rltune.env.ParallelPettingZooEnv"):
        PettingZooEnv(rps("parallel"))
    with pytest.raises(EnvError, match="is an AEC env: use rltune.env.PettingZooEnv"):
        ParallelPettingZooEnv(rps())
    with pytest.raises(EnvError, match="wraps a PettingZoo AEC env"):
        PettingZooEnv(gym.make("CartPole-v1"))


def test_missing_pettingzoo_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pettingzoo", None)  # what an absent package looks like to import
    with pytest.raises(RLTuneError, match=r"pip install 'rltune\[pettingzoo\]'"):
        PettingZooEnv(object())


def test_importing_rltune_env_does_not_import_pettingzoo():
    code = (
        "import sys, rltune.env; from rltune.env import MultiAgentEnv, with_agent_groups, EnvContext;"
        "from rltune.env._build import build_env; print('pettingzoo' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


class Elimination(pettingzoo.AECEnv):
    """Three players take turns ("a", "b", "c"); "a"'s first move knocks "c" out (reward -1) before it moved.

    The game ends after "a" and "b" have moved twice each (+1 to "b" at the end).
    """

    metadata = {"name": "elimination_v0"}

    def __init__(self):
        self.possible_agents = ["a", "b", "c"]
        self.moved: list[str] = []
        self.observation_spaces = {a: gym.spaces.Discrete(10) for a in self.possible_agents}
        self.action_spaces = {a: gym.spaces.Discrete(2) for a in self.possible_agents}

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def observe(self, agent):
        return np.int64(len(self.moved))

    def reset(self, seed=None, options=None):
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = "a"
        self.moved = []

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self.moved.append(agent)
        self._clear_rewards()
        if agent == "a" and self.moved.count("a") == 1:
            self.terminations["c"] = True
            self.rewards["c"] = -1
        if self.moved.count("b") == 2:
            self.terminations = dict.fromkeys(self.agents, True)
            self.rewards["b"] = 1
        self._cumulative_rewards[agent] = 0
        self._accumulate_rewards()
        self.agent_selection = self.agents[(self.agents.index(agent) + 1) % len(self.agents)]
        self._deads_step_first()  # PettingZoo's way: the agents just done are stepped out first


def test_an_aec_agent_knocked_out_leaves_once_with_its_final_observation_and_never_acts():
    env = PettingZooEnv(Elimination())
    obs, _ = env.reset()
    assert list(obs) == ["a"]
    obs, rewards, terminateds, _, _ = env.step({"a": 0})
    assert obs == {"c": 1, "b": 1}  # "c"'s final observation, and "b" whose turn it is
    assert rewards == {"c": -1.0, "a": 0.0, "b": 0.0}
    assert terminateds == {"c": True, "b": False, "__all__": False}
    obs, rewards, terminateds, _, _ = env.step({"b": 1})
    assert list(obs) == ["a"] and terminateds == {"a": False, "__all__": False} and rewards == {"b": 0.0, "a": 0.0}
    assert env.env.agents == ["a", "b"]
    env.step({"a": 1})
    obs, rewards, terminateds, truncateds, _ = env.step({"b": 0})
    assert rewards == {"b": 1.0, "a": 0.0} and set(obs) == {"a", "b"}
    assert terminateds == {"a": True, "b": True, "__all__": True} and truncateds["__all__"] is False
    assert env.env.moved == ["a", "b", "a", "b"]


def test_the_checker_passes_on_an_aec_env_whose_agents_leave_mid_game():
    check_multi_agent_env(PettingZooEnv(Elimination()), "elimination", EnvContext())
