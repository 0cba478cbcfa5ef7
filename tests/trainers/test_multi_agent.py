"""Multi-agent training: transitions per agent, rewards of agents that do not act, mapping, training sets, results."""

from __future__ import annotations

import numpy as np
import pytest

from rltune.errors import ConfigError, EnvError
from rltune.trainers import DQN, PPO, Policy, PolicySpec, RandomPolicy
from rltune.trainers.sampling._sample_batch import NEW_OBS, OBS, REWARDS, TERMINATEDS, TRUNCATEDS
from trainer_params import iteration_config
from trainers.multi_agent_envs import (
    Bystander,
    Coordination,
    InPlaceCounter,
    LeavingAgents,
    NoAllInTruncateds,
    Respawning,
    RockPaperScissors,
    TurnGame,
)

TINY = {"model": {"fcnet_hiddens": [16]}, "seed": 1}


def by_player(agent_id, episode=None, worker=None, **kwargs):
    return f"pol_{agent_id}"


def ma_config(trainer_cls, env, policies, mapping, *, steps=64, fragment=8, **extra):
    return {
        "env": env,
        "multiagent": {"policies": policies, "policy_mapping_fn": mapping, **extra.pop("multiagent", {})},
        "rollout_fragment_length": fragment,
        **iteration_config(trainer_cls, steps),
        **TINY,
        **extra,
    }


def test_turn_based_rewards_of_a_player_who_does_not_act_reach_its_transition():
    cfg = ma_config(PPO, TurnGame, {"pol_x", "pol_o"}, by_player, fragment=8)
    with PPO(config=cfg) as trainer:
        result = trainer.workers.local_worker.sample()
        assert result.env_steps == 8 and result.agent_steps == 8
        batches = trainer.algorithm.postprocess(result)
        x, o = batches["pol_x"], batches["pol_o"]
        assert sorted(x[REWARDS].tolist()) == [1.5, 1.5, 1.5, 11.5]
        # o's first transition also holds the 1.0 o got from x's first move, before o ever observed
        assert sorted(o[REWARDS].tolist()) == [-9.5, 1.5, 1.5, 2.5]
        assert x[TERMINATEDS].sum() == 1 and o[TERMINATEDS].sum() == 1
        (episode,) = result.episodes
        assert sorted(episode.agent_rewards) == [("o", "pol_o", -4.0), ("x", "pol_x", 16.0)]
        assert episode.episode_reward == 12.0 and episode.episode_length == 8


def test_transitions_cut_by_fragments_keep_every_reward():
    # Fragments of 3 env steps cut the turns anywhere; over whole episodes nothing is lost or counted twice.
    cfg = ma_config(PPO, TurnGame, {"pol_x", "pol_o"}, by_player, fragment=3)
    with PPO(config=cfg) as trainer:
        worker = trainer.workers.local_worker
        rows = {"pol_x": [], "pol_o": []}
        for _ in range(8):  # 24 env steps: 3 episodes
            for pid, batch in trainer.algorithm.postprocess(worker.sample()).items():
                rows[pid].extend(batch[REWARDS].tolist())
        # every transition closed so far: 3 episodes, less the one still open at the end
        assert sum(rows["pol_x"]) == pytest.approx(3 * (3 * 1.5 + 11.5))
        assert sorted(rows["pol_o"])[:3] == [-9.5, -9.5, -9.5]


def test_agents_that_leave_early_stop_acting_and_their_last_step_is_terminated():
    cfg = ma_config(PPO, LeavingAgents, {"p"}, None, fragment=6)
    with PPO(config=cfg) as trainer:
        result = trainer.workers.local_worker.sample()
        batch = trainer.algorithm.postprocess(result)["p"]
        assert result.agent_steps == 12 == len(batch[REWARDS])  # (1 + 2 + 3) per episode, 2 episodes
        assert batch[TERMINATEDS].sum() == 6
        assert len(result.episodes) == 2
        assert sorted(r for _, _, r in result.episodes[0].agent_rewards) == [1.0, 2.0, 3.0]


def test_an_env_that_reuses_its_obs_array_keeps_every_next_obs_for_the_bootstrap(monkeypatch):
    # Truncated transitions bootstrap from their next obs; the env changes that array in place afterwards.
    cfg = ma_config(PPO, InPlaceCounter, {"p"}, None, fragment=12, disable_env_checking=True)
    with PPO(config=cfg) as trainer:
        policy = trainer.workers.local_worker.policy_map["p"]
        seen = []
        postprocess = policy.postprocess_trajectory

        def spy(batch, **kwargs):
            seen.append({name: column.copy() for name, column in batch.items()})
            return postprocess(batch, **kwargs)

        monkeypatch.setattr(policy, "postprocess_trajectory", spy)
        trainer.algorithm.postprocess(trainer.workers.local_worker.sample())
        (batch,) = seen
        truncated = batch[TRUNCATEDS]
        assert truncated.sum() == 3  # two episode ends (steps 5 and 10) and the fragment's cut (step 12)
        np.testing.assert_array_equal(batch[NEW_OBS][truncated], batch[OBS][truncated] + 1)


class CountingMapping:
    """Maps by episode: agent "x" to pol_a in one episode, pol_b in the next; counts its calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, agent_id, episode, worker, **kwargs):
        self.calls.append((agent_id, episode.episode_id))
        if agent_id == "o":
            return "pol_o"
        return "pol_a" if episode.episode_id % 2 else "pol_b"


def test_mapping_is_called_once_per_agent_and_episode_and_kept_for_the_episode():
    mapping = CountingMapping()
    cfg = ma_config(PPO, TurnGame, {"pol_a", "pol_b", "pol_o"}, mapping, fragment=8)
    with PPO(config=cfg) as trainer:
        mapping.calls.clear()
        episodes = []
        for _ in range(6):
            episodes.extend(trainer.workers.local_worker.sample().episodes)
        per_episode = {}
        for agent, episode_id in mapping.calls:
            per_episode.setdefault(episode_id, []).append(agent)
        assert all(len(set(agents)) == len(agents) for agents in per_episode.values())  # once per agent
        complete = [agents for agents in per_episode.values() if len(agents) == 2]
        assert len(complete) >= 5
        policies_of_x = {pid for e in episodes for agent, pid, _ in e.agent_rewards if agent == "x"}
        assert policies_of_x <= {"pol_a", "pol_b"}


def test_non_trained_policies_keep_their_weights_and_results_are_per_policy(trainer_cls):
    cfg = ma_config(
        trainer_cls, TurnGame, {"pol_x", "pol_o"}, by_player, multiagent={"policies_to_train": ["pol_x"]}
    )
    with trainer_cls(config=cfg) as trainer:
        frozen = trainer.get_policy("pol_o").get_weights()
        learned = trainer.get_policy("pol_x").get_weights()
        result = trainer.train()
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"pol_x"}
        for key, value in trainer.get_policy("pol_o").get_weights().items():
            np.testing.assert_array_equal(value, frozen[key])
        assert any(not np.array_equal(v, learned[k]) for k, v in trainer.get_policy("pol_x").get_weights().items())
        assert result["policy_reward_mean"] == {"pol_x": 16.0, "pol_o": -4.0}
        assert result["policy_reward_min"]["pol_o"] == -4.0
        assert result["num_agent_steps_sampled"] == result["timesteps_total"]


def test_policies_to_train_as_a_function_of_the_batch():
    seen = []

    def only_x(policy_id, batch):
        seen.append((policy_id, len(batch[REWARDS])))
        return policy_id == "pol_x"

    cfg = ma_config(PPO, TurnGame, {"pol_x", "pol_o"}, by_player, multiagent={"policies_to_train": only_x})
    with PPO(config=cfg) as trainer:
        frozen = trainer.get_policy("pol_o").get_weights()
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"pol_x"}
        assert {pid for pid, _ in seen} == {"pol_x", "pol_o"} and all(rows > 0 for _, rows in seen)
        for key, value in trainer.get_policy("pol_o").get_weights().items():
            np.testing.assert_array_equal(value, frozen[key])


def test_per_policy_config_overrides_reach_the_learner_and_the_model():
    policies = {
        "pol_x": PolicySpec(config={"lr": 0.01, "model": {"fcnet_hiddens": [8]}}),
        "pol_o": PolicySpec(),
    }
    with PPO(config=ma_config(PPO, TurnGame, policies, by_player)) as trainer:
        assert trainer.get_learner("pol_x").optimizer.param_groups[0]["lr"] == 0.01
        assert trainer.get_learner("pol_o").optimizer.param_groups[0]["lr"] == trainer.cfg.lr
        sizes = {k: v.shape for k, v in trainer.get_policy("pol_x").get_weights().items()}
        assert any(shape[0] == 8 for shape in sizes.values())
        assert not any(shape[0] == 8 for shape in (v.shape for v in trainer.get_policy("pol_o").get_weights().values()))


class AlwaysRock(Policy):
    """A fixed heuristic: always throws rock."""

    def compute_actions(self, obs, explore=True):
        return np.zeros(len(obs), dtype=np.int64), {}


def test_a_learned_policy_beats_a_fixed_heuristic_at_rock_paper_scissors():
    cfg = ma_config(
        PPO, RockPaperScissors,
        {"learned": PolicySpec(config={"lr": 0.01}), "rock": PolicySpec(policy_class=AlwaysRock)},
        lambda agent_id, *args, **kwargs: "learned" if agent_id == "p1" else "rock",
        steps=200, fragment=25, metrics_num_episodes_for_smoothing=50, num_sgd_iter=4, sgd_minibatch_size=50,
        multiagent={"policies_to_train": ["learned"]},
    )
    with PPO(config=cfg) as trainer:
        for _ in range(25):
            result = trainer.train()
            if result["policy_reward_mean"]["learned"] > 0.8:
                break
        assert result["policy_reward_mean"]["learned"] > 0.8, result["policy_reward_mean"]
        assert trainer.timesteps_total <= 5000


def test_two_ppo_policies_find_the_optimum_of_a_cooperative_game():
    cfg = ma_config(
        PPO, Coordination, {"pa": PolicySpec(config={"lr": 0.01}), "pb": PolicySpec(config={"lr": 0.01})},
        lambda agent_id, *args, **kwargs: "p" + agent_id, steps=200, fragment=25, num_sgd_iter=4, sgd_minibatch_size=50,
        metrics_num_episodes_for_smoothing=50,
    )
    with PPO(config=cfg) as trainer:
        for _ in range(30):
            result = trainer.train()
            if result["episode_reward_mean"] > 1.9:
                break
        assert result["episode_reward_mean"] > 1.9, result["policy_reward_mean"]


def test_two_dqn_policies_find_the_optimum_of_a_cooperative_game():
    # Each agent's Q-values, learned while the other explores: Q(1) ~ P(other plays 1) * 1 > Q(0) ~ P(other plays 0) * 0.5.
    cfg = {
        "env": Coordination, "seed": 0, "model": {"fcnet_hiddens": [16]}, "lr": 0.01,
        "multiagent": {"policies": {"pa": PolicySpec(), "pb": PolicySpec()},
                       "policy_mapping_fn": lambda agent_id, *args, **kwargs: "p" + agent_id},
        "rollout_fragment_length": 10, "target_network_update_freq": 50,
        "exploration_config": {"epsilon_timesteps": 300, "final_epsilon": 0.0},
        "evaluation_interval": 1, "evaluation_duration": 10,
        **iteration_config(DQN, 100, minibatch=16),
    }
    with DQN(config=cfg) as trainer:
        start = {pid: trainer.get_policy(pid).get_weights() for pid in ("pa", "pb")}
        for _ in range(10):
            result = trainer.train()
            if trainer.timesteps_total >= 400 and result["evaluation"]["episode_reward_mean"] == 2.0:
                break
        assert result["evaluation"]["policy_reward_mean"] == {"pa": 1.0, "pb": 1.0}, result["evaluation"]
        assert set(result["info"]["learner"]) == {"pa", "pb"}
        obs = np.ones(1, np.float32)
        assert [trainer.compute_single_action(obs, policy_id=pid) for pid in ("pa", "pb")] == [1, 1]
        for pid, weights in start.items():  # each policy learned with its own learner
            assert any(not np.array_equal(v, weights[k]) for k, v in trainer.get_policy(pid).get_weights().items())


def test_random_policy_acts_in_its_space_and_has_no_weights():
    cfg = ma_config(PPO, TurnGame, {"pol_x": PolicySpec(policy_class=RandomPolicy), "pol_o": None}, by_player,
                    multiagent={"policies_to_train": ["pol_o"]})
    with PPO(config=cfg) as trainer:
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"pol_o"}
        assert trainer.get_policy("pol_x").get_weights() == {}


# -- errors -----------------------------------------------------------------------------------
def test_a_multi_agent_env_of_unlike_agents_without_multiagent_config_is_a_clear_error():
    # (agents alike share default_policy: tests/trainers/test_multi_agent_defaults.py)
    with pytest.raises(ConfigError, match="no 'multiagent' block, so every agent acts with one shared 'default_policy'"):
        PPO(config={"env": DifferentSpaces, **TINY})


def test_multiagent_config_with_a_single_agent_env_is_a_clear_error():
    with pytest.raises(ConfigError, match="is a single-agent gymnasium.Env"):
        PPO(config={"env": "CartPole-v1", "multiagent": {"policies": {"p"}}, **TINY})


def test_a_mapping_to_an_unknown_policy_id_is_a_clear_error():
    cfg = ma_config(PPO, TurnGame, {"pol_x", "pol_o"}, lambda agent_id, *a, **k: "nobody")
    with pytest.raises(ConfigError, match=r"returned 'nobody' for agent '[xo]', which is not a policy id"):
        with PPO(config=cfg) as trainer:
            trainer.train()


def test_several_policies_need_a_mapping_function():
    with pytest.raises(ConfigError, match="policy_mapping_fn: needed to choose among the policies"):
        PPO(config={"env": TurnGame, "multiagent": {"policies": {"a", "b"}}, **TINY})


def test_policies_to_train_must_name_trainable_policies():
    cfg = ma_config(PPO, TurnGame, {"pol_x": PolicySpec(policy_class=AlwaysRock), "pol_o": None}, by_player,
                    multiagent={"policies_to_train": ["pol_x", "ghost"]})
    with pytest.raises(ConfigError) as info:
        PPO(config=cfg)
    text = str(info.value)
    assert "['ghost'] are not policy ids" in text and "['pol_x'] have a policy_class that is not PPOPolicy" in text


def test_run_level_keys_cannot_be_overridden_per_policy():
    cfg = ma_config(PPO, TurnGame, {"pol_x": PolicySpec(config={"num_workers": 2}), "pol_o": None}, by_player)
    with pytest.raises(ConfigError, match=r"multiagent.policies.pol_x.config.num_workers: a run-level key"):
        PPO(config=cfg)


class MissingSpaces(TurnGame):
    """Declares per-agent spaces for "x" only."""

    def __init__(self, config=None):
        super().__init__(config)
        import gymnasium as gym

        self.observation_space = gym.spaces.Dict({"x": self.observation_space})
        self.action_space = gym.spaces.Dict({"x": self.action_space})


def test_agent_ids_missing_from_the_spaces_are_a_clear_error():
    cfg = ma_config(PPO, MissingSpaces, {"pol_x", "pol_o"}, by_player, disable_env_checking=True)
    with pytest.raises(EnvError, match=r"agent 'o' has no observation space"):
        PPO(config=cfg)


class DifferentSpaces(TurnGame):
    """TurnGame with per-agent spaces: x observes 2 numbers, o observes 3 and has 3 actions."""

    def __init__(self, config=None):
        super().__init__(config)
        import gymnasium as gym

        self.observation_space = gym.spaces.Dict(
            {"x": gym.spaces.Box(0.0, 1.0, (2,), np.float32), "o": gym.spaces.Box(0.0, 1.0, (3,), np.float32)}
        )
        self.action_space = gym.spaces.Dict({"x": gym.spaces.Discrete(2), "o": gym.spaces.Discrete(3)})

    def _obs(self, agent):
        obs = super()._obs(agent)
        return obs if agent == "x" else np.append(obs, 0.5).astype(np.float32)


def test_per_agent_spaces_give_each_policy_its_own_model_and_spec_spaces_win():
    import gymnasium as gym

    with PPO(config=ma_config(PPO, DifferentSpaces, {"pol_x", "pol_o"}, by_player)) as trainer:
        assert trainer.get_policy("pol_x").observation_space.shape == (2,)
        assert trainer.get_policy("pol_o").observation_space.shape == (3,)
        assert trainer.get_policy("pol_o").action_space == gym.spaces.Discrete(3)
        result = trainer.train()
        assert result["policy_reward_mean"] == {"pol_x": 16.0, "pol_o": -4.0}
    wide = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
    policies = {"pol_x": PolicySpec(observation_space=wide), "pol_o": None}
    with PPO(config=ma_config(PPO, DifferentSpaces, policies, by_player)) as trainer:
        assert trainer.get_policy("pol_x").observation_space == wide


# -- the edges of the multi-agent API ---------------------------------------------------------------
def test_truncateds_without_all_is_refused_like_terminateds_without_it_also_unchecked():
    cfg = ma_config(PPO, NoAllInTruncateds, {"p"}, None, disable_env_checking=True)
    with PPO(config=cfg) as trainer:
        with pytest.raises(EnvError, match=r"env 'NoAllInTruncateds' \(worker 0, env 0\) breaks the multi-agent env "
                                           r"API: step: truncateds has no '__all__' key"):
            trainer.train()


def only_a(agent_id, episode=None, worker=None, **kwargs):
    return {"a": "p"}[agent_id]  # fails for any other agent: "watcher" must never be mapped


def test_rewards_of_an_agent_that_never_observes_count_for_the_episode_and_no_policy(caplog):
    cfg = ma_config(PPO, Bystander, {"p"}, only_a, fragment=6)
    with PPO(config=cfg) as trainer, caplog.at_level("WARNING", logger="rltune.trainers.sampling._agent_rows"):
        result = trainer.workers.local_worker.sample()
        assert [e.episode_reward for e in result.episodes] == [33.0, 33.0]  # a's 3 and watcher's 30
        assert [e.agent_rewards for e in result.episodes] == [[("a", "p", 3.0)]] * 2
        assert trainer.algorithm.postprocess(result)["p"][REWARDS].tolist() == [1.0] * 6
        assert trainer.train()["policy_reward_mean"] == {"p": 3.0}
    warnings = [r.getMessage() for r in caplog.records if "watcher" in r.getMessage()]
    assert len(warnings) == 1 and "got rewards but no observation" in warnings[0]


def test_an_agent_that_observes_again_after_it_was_done_is_an_env_error():
    cfg = ma_config(PPO, Respawning, {"p"}, None, fragment=8, disable_env_checking=True)
    with PPO(config=cfg) as trainer:
        with pytest.raises(EnvError, match=r"env 'Respawning' \(worker 0, env 0\), step 3 of an episode: agent 'a' has an "
                                           r"observation, but it was done \(terminated or truncated\) at step 2: an agent "
                                           r"that is done may not act again in the same episode"):
            trainer.workers.local_worker.sample()
