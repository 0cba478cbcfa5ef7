"""exploration_config: each type changes actions as specified; which algorithm takes which; RLlib's old keys."""

from __future__ import annotations

import logging

import gymnasium as gym
import numpy as np
import pytest
import torch

from rltune.errors import ConfigError
from rltune.trainers import DQN, PPO
from rltune.trainers.algorithms._dqn import DQNSettings, DQNLearner, DQNPolicy
from rltune.trainers.algorithms._ppo import PPOSettings, PPOPolicy
from rltune.trainers.sampling._sample_batch import ACTIONS, NEW_OBS, OBS, REWARDS, TERMINATEDS, TRUNCATEDS
from trainers.multi_agent_envs import TurnGame

OBS_SPACE = gym.spaces.Box(-1, 1, (2,), np.float32)


def _fixed_q_policy(q: list[float], exploration: dict, **config) -> DQNPolicy:
    """A DQN policy whose Q-values are ``q`` for every observation (a linear layer with zero weights and bias q)."""
    cfg = DQNSettings.model_validate(
        {"model": {"fcnet_hiddens": []}, "hiddens": [], "dueling": False, "exploration_config": exploration, **config}
    )
    policy = DQNPolicy(OBS_SPACE, gym.spaces.Discrete(len(q)), cfg, seed=0)
    with torch.no_grad():
        policy.model.advantage_head.weight.zero_()
        policy.model.advantage_head.bias.copy_(torch.tensor(q))
    policy.weights_changed()
    return policy


def _frequencies(policy, calls: int = 50, rows: int = 200, explore: bool = True) -> np.ndarray:
    obs = np.random.default_rng(1).uniform(-1, 1, (rows, 2)).astype(np.float32)
    actions = np.concatenate([policy.compute_actions(obs, explore=explore)[0] for _ in range(calls)])
    return np.bincount(actions, minlength=int(policy.action_space.n))


def _chi_square(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = counts.sum() * probs
    return float(((counts - expected) ** 2 / expected).sum())


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


# -- SoftQ, StochasticSampling, Random, EpsilonGreedy (DQN) ------------------------------------------
def test_softq_action_frequencies_follow_the_softmax_of_q_over_the_temperature():
    q = np.array([1.0, 2.0, 0.0, 1.5])
    policy = _fixed_q_policy(q.tolist(), {"type": "SoftQ", "temperature": 0.5})
    counts = _frequencies(policy)  # 10,000 actions
    # chi-square with 3 degrees of freedom: 16.3 is its 0.999 quantile
    assert _chi_square(counts, _softmax(q / 0.5)) < 16.3, counts
    assert _chi_square(counts, _softmax(q)) > 100  # the temperature matters: temperature 1 is far off
    assert _frequencies(policy, calls=2, explore=False).tolist() == [0, 400, 0, 0]  # greedy without exploration


def test_dqn_stochastic_sampling_is_uniform_for_random_timesteps_then_samples_softmax_q():
    q = np.array([3.0, 0.0])
    policy = _fixed_q_policy(q.tolist(), {"type": "StochasticSampling", "random_timesteps": 4000})
    counts = _frequencies(policy, calls=20)  # timesteps 0..3999
    assert _chi_square(counts, np.array([0.5, 0.5])) < 10.8, counts  # 1 dof, 0.999 quantile
    assert policy.global_timestep == 4000
    counts = _frequencies(policy, calls=20)
    assert _chi_square(counts, _softmax(q)) < 10.8, counts


def test_random_exploration_is_uniform_while_exploring_and_greedy_otherwise():
    policy = _fixed_q_policy([0.0, 5.0, 1.0], {"type": "Random"})
    assert _chi_square(_frequencies(policy, calls=20), np.full(3, 1 / 3)) < 13.8  # 2 dof
    assert _frequencies(policy, calls=1, explore=False).tolist() == [0, 200, 0]


def test_epsilon_greedy_holds_initial_epsilon_through_the_warmup_then_anneals():
    policy = _fixed_q_policy([0.0, 1.0], {"initial_epsilon": 1.0, "final_epsilon": 0.0, "epsilon_timesteps": 100,
                                           "warmup_timesteps": 50})
    for timestep, expected in [(0, 1.0), (50, 1.0), (100, 0.5), (150, 0.0), (10_000, 0.0)]:
        policy.set_global_timestep(timestep)
        assert policy.epsilon == pytest.approx(expected)
    policy.set_global_timestep(100)
    counts = _frequencies(policy, calls=1, rows=10)  # timesteps 100..109: epsilon 0.5 .. 0.41
    assert counts.sum() == 10


# -- ParameterNoise ----------------------------------------------------------------------------------
PARAMETER_NOISE = {"type": "ParameterNoise", "random_timesteps": 0, "initial_stddev": 0.5,
                   "sub_exploration": {"initial_epsilon": 0.0, "final_epsilon": 0.0}}


def _param_noise_policy(**exploration) -> DQNPolicy:
    cfg = DQNSettings.model_validate({"model": {"fcnet_hiddens": [16]}, "hiddens": [16],
                                    "exploration_config": {**PARAMETER_NOISE, **exploration}})
    return DQNPolicy(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(3), cfg, seed=0)


def test_parameter_noise_acts_greedily_on_perturbed_weights_and_leaves_the_models_weights_alone():
    policy = _param_noise_policy()
    assert policy.model.advantage_hidden[0].norm is not None  # RLlib adds LayerNorm to the head for it
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    obs = np.random.default_rng(0).normal(size=(300, 4)).astype(np.float32)
    explored, _ = policy.compute_actions(obs, explore=True)
    # The perturbed net, computed here in torch from the weights and the stored noise (of stddev 0.5): its argmax is the action.
    exploration = policy.exploration
    perturbed = {k: v + torch.from_numpy(exploration.noise[k]) if k in exploration.noise else v for k, v in before.items()}
    assert {"body.0.weight", "advantage_hidden.0.linear.weight", "value_head.bias"} <= set(exploration.noise)
    assert not any("norm" in k for k in exploration.noise)  # layer norms are not perturbed
    assert np.std(exploration.noise["advantage_hidden.0.linear.weight"]) == pytest.approx(0.5, rel=0.1)
    with torch.no_grad():
        q = torch.func.functional_call(policy.model, perturbed, (torch.from_numpy(obs),))
    np.testing.assert_array_equal(explored, q.argmax(1).numpy())
    greedy, _ = policy.compute_actions(obs, explore=False)
    assert (greedy != explored).mean() > 0.05  # the noise changes the actions through the weights
    for key, value in policy.model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_parameter_noise_stddev_adapts_to_the_action_distance_and_noise_is_redrawn_after_an_episode_end():
    rng = np.random.default_rng(0)
    steps = 8
    batch = {OBS: rng.normal(size=(steps, 1, 4)).astype(np.float32), NEW_OBS: rng.normal(size=(steps, 1, 4)).astype(np.float32),
             ACTIONS: np.zeros((steps, 1), np.int64), REWARDS: np.ones((steps, 1), np.float32),
             TERMINATEDS: np.zeros((steps, 1), bool), TRUNCATEDS: np.zeros((steps, 1), bool)}
    # RLlib's sub-exploration: random for random_timesteps (0), then epsilon 0.01: a target KL of about 0.005.
    for stddev, adapted in [(1e-5, 1e-5 * 1.01), (10.0, 10.0 / 1.01)]:  # near-identical actions: grow; far off: shrink
        policy = _param_noise_policy(sub_exploration=None, initial_stddev=stddev)
        policy.set_global_timestep(100)
        exploration = policy.exploration
        noise = exploration.noise
        policy.on_fragment(dict(batch))  # the acting side adapts its noise to what it collected
        assert exploration.stddev == pytest.approx(adapted)
        assert exploration.noise is noise  # no episode ended: the same perturbation
    policy.on_fragment(dict(batch, **{TERMINATEDS: np.eye(steps, 1, dtype=bool)}))
    # An episode ended: new noise, of the adapted stddev.
    assert exploration.noise is not noise
    assert np.std(exploration.noise["body.0.weight"]) == pytest.approx(10.0 / 1.01 / 1.01, rel=0.15)


def test_parameter_noise_training_updates_the_unperturbed_weights():
    config = {"model": {"fcnet_hiddens": [16]}, "hiddens": [16], "exploration_config": PARAMETER_NOISE,
              "rollout_fragment_length": 8, "train_batch_size": 8, "learning_starts": 0,
              "min_sample_timesteps_per_iteration": 64, "seed": 0}
    seen = []
    original = DQNLearner.update

    def spy(learner, batch, **kwargs):
        entry = {k: v.clone() for k, v in learner.policy.model.state_dict().items()}
        stats = original(learner, batch, **kwargs)
        seen.append((entry, {k: v.clone() for k, v in learner.policy.model.state_dict().items()}))
        return stats

    DQNLearner.update = spy
    try:
        with DQN(config=config, env="CartPole-v1") as trainer:
            trainer.train()
            stats = trainer.train()["info"]["learner"]["default_policy"]
    finally:
        DQNLearner.update = original
    assert len(seen) == 16 and "cur_stddev" in stats
    # Sampling with the perturbed copy between two updates leaves the model's weights exactly as the learner left them.
    for (_, after), (entry, _) in zip(seen, seen[1:]):
        for key in after:
            assert torch.equal(after[key], entry[key]), key


# -- PPO: StochasticSampling's random phase, Random ----------------------------------------------------
def _ppo_policy(space: gym.Space, exploration: dict) -> PPOPolicy:
    cfg = PPOSettings.model_validate({"model": {"fcnet_hiddens": [8]}, "exploration_config": exploration})
    policy = PPOPolicy(OBS_SPACE, space, cfg, seed=0)
    if isinstance(space, gym.spaces.Discrete):
        with torch.no_grad():
            policy.model.pi_head.bias.copy_(torch.tensor([6.0, 0.0, 0.0]))  # a policy that almost always picks 0
        policy.weights_changed()
    return policy


def test_ppo_acts_uniformly_for_random_timesteps_with_the_uniform_log_probability_then_samples_its_policy():
    policy = _ppo_policy(gym.spaces.Discrete(3), {"random_timesteps": 3000})
    obs = np.zeros((100, 2), np.float32)
    phase = [policy.compute_actions(obs, explore=True) for _ in range(30)]
    counts = np.bincount(np.concatenate([a for a, _ in phase]), minlength=3)
    assert _chi_square(counts, np.full(3, 1 / 3)) < 13.8, counts
    np.testing.assert_allclose(np.concatenate([x["action_logp"] for _, x in phase]), np.log(1 / 3), rtol=1e-6)
    actions, extras = policy.compute_actions(obs, explore=True)
    assert (actions == 0).mean() > 0.9 and extras["action_logp"].max() > np.log(0.9)


def test_ppo_random_exploration_on_a_box_samples_within_the_bounds():
    policy = _ppo_policy(gym.spaces.Box(-2.0, 2.0, (1,), np.float32), {"type": "Random"})
    actions, extras = policy.compute_actions(np.zeros((4000, 2), np.float32), explore=True)
    assert actions.shape == (4000, 1) and actions.min() >= -2.0 and actions.max() <= 2.0
    assert abs(actions.std() - 4 / np.sqrt(12)) < 0.05
    np.testing.assert_allclose(extras["action_logp"], -np.log(4.0), rtol=1e-6)
    deterministic, _ = policy.compute_actions(np.zeros((3, 2), np.float32), explore=False)
    assert np.allclose(deterministic, deterministic[0])


# -- which types each algorithm takes, old names, per-policy overrides ----------------------------------
@pytest.mark.parametrize(
    "trainer_cls, exploration, message",
    [
        (DQN, {"type": "GaussianNoise"}, "type 'GaussianNoise' adds noise to the actions of a deterministic continuous-action policy"),
        (DQN, {"type": "OrnsteinUhlenbeckNoise"}, "(DDPG, TD3), an algorithm rltune does not have yet; DQN takes EpsilonGreedy"),
        (PPO, {"type": "GaussianNoise"}, "PPO explores continuous actions by sampling its Gaussian: StochasticSampling"),
        (PPO, {"type": "EpsilonGreedy"}, "type 'EpsilonGreedy' acts on Q-values (DQN); PPO takes StochasticSampling, Random"),
        (PPO, {"type": "SoftQ", "temperature": 2.0}, "type 'SoftQ' acts on Q-values (DQN)"),
        (DQN, {"type": "Curiosity"}, "an RLlib exploration rltune does not support yet"),
        (DQN, {"type": "SoftQ", "epsilon_timesteps": 5}, "epsilon_timesteps: not a key of SoftQ (SoftQ takes temperature)"),
        (DQN, {"type": "EpsilonGready"}, "unknown type 'EpsilonGready'; did you mean 'EpsilonGreedy'?"),
        (DQN, {"type": "SoftQ", "temperature": 0}, "temperature: Input should be greater than 0"),
    ],
)
def test_exploration_types_an_algorithm_cannot_use_are_one_clear_error(trainer_cls, exploration, message):
    with pytest.raises(ConfigError) as info:
        trainer_cls(config={"exploration_config": exploration}, env="CartPole-v1")
    assert str(info.value).count("\n") == 0 and "exploration_config: " in str(info.value)
    assert message in str(info.value)


def test_dqn_refuses_distributional_atoms_and_noisy_with_parameter_noise():
    with pytest.raises(ConfigError, match=r"num_atoms: distributional DQN \(C51, num_atoms > 1\) is not built in rltune yet"):
        DQN(config={"num_atoms": 51}, env="CartPole-v1")
    with pytest.raises(ConfigError, match="type ParameterNoise and noisy: true both perturb the Q-net"):
        DQN(config={"noisy": True, "exploration_config": {"type": "ParameterNoise"}}, env="CartPole-v1")


def test_rllibs_old_exploration_keys_map_onto_exploration_config_with_a_note(caplog):
    with caplog.at_level(logging.WARNING, logger="rltune.trainers.policies._exploration"):
        cfg = DQN.validate({"exploration_fraction": 0.1, "schedule_max_timesteps": 50_000, "exploration_final_eps": 0.01})
    assert cfg.exploration_config.model_dump() == {"type": "EpsilonGreedy", "initial_epsilon": 1.0, "final_epsilon": 0.01,
                                                   "epsilon_timesteps": 5000, "warmup_timesteps": 0}
    assert "exploration_fraction" in caplog.text and "write that instead" in caplog.text
    assert DQN.validate({"soft_q": True, "softmax_temp": 0.3}).exploration_config.temperature == 0.3
    assert DQN.validate({"parameter_noise": True}).exploration_config.type == "ParameterNoise"
    assert DQN.validate({"exploration": {"type": "Random"}}).exploration_config.type == "Random"
    with pytest.raises(ConfigError, match="given together with RLlib's old exploration keys"):
        DQN.validate({"exploration_final_eps": 0.01, "exploration_config": {"final_epsilon": 0.05}})


def test_per_policy_exploration_configs_override_the_trainers():
    policies = {
        "pol_x": {"config": {"exploration_config": {"type": "SoftQ", "temperature": 0.2}}},
        "pol_o": {"config": {"exploration_config": {"final_epsilon": 0.3}}},  # the same type: merged key by key
    }
    config = {"env": TurnGame, "model": {"fcnet_hiddens": [8]}, "hiddens": [8],
              "exploration_config": {"epsilon_timesteps": 777},
              "multiagent": {"policies": policies, "policy_mapping_fn": lambda agent_id, *a, **k: f"pol_{agent_id}"}}
    with DQN(config=config) as trainer:
        x, o = trainer.get_policy("pol_x"), trainer.get_policy("pol_o")
        assert type(x.exploration).__name__ == "SoftQ" and x.exploration.temperature == 0.2
        assert o.config.exploration_config.final_epsilon == 0.3 and o.config.exploration_config.epsilon_timesteps == 777
        assert trainer.train()["timesteps_total"] > 0
