"""Two trainers of two algorithms on one multi-agent env, each training its own policy (RLlib's two-trainers workflow).

The env is four independent CartPoles (``make_multi_agent("CartPole-v1")``,
agents 0-3); agents 0 and 2 act with ``ppo_policy``, agents 1 and 3 with
``dqn_policy``. Both trainers hold both policies (the same
``multiagent.policies``): the PPO trainer trains ``ppo_policy`` and only
acts with ``dqn_policy`` (a ``DQNPolicy`` it hosts: built from DQN's config,
never trained there); the DQN trainer the other way round. After each
iteration each trainer copies the other's trained weights, so both sample
with the latest of both policies::

    ppo.set_weights(dqn.get_weights(["dqn_policy"]))
    dqn.set_weights(ppo.get_weights(["ppo_policy"]))

A policy's ``config`` in its ``PolicySpec`` is what both trainers build it
with (the model's layers must be the same on both sides for the weights to
fit). Run it (about a minute)::

    python examples/multi_agent_two_trainers.py

It prints each policy's mean episode reward per iteration (CartPole's best
is 500).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from rltune.env import make_multi_agent
from rltune.trainers import DQN, PPO, DQNPolicy, PolicySpec, PPOPolicy

MultiAgentCartPole = make_multi_agent("CartPole-v1")

MODEL = {"fcnet_hiddens": [64, 64]}
POLICIES = {
    "ppo_policy": PolicySpec(PPOPolicy, config={"model": MODEL}),
    "dqn_policy": PolicySpec(DQNPolicy, config={"model": MODEL, "hiddens": [64]}),
}


def map_agents(agent_id: int, *args: Any, **kwargs: Any) -> str:
    """Even agents act with ``ppo_policy``, odd ones with ``dqn_policy``."""
    return "ppo_policy" if agent_id % 2 == 0 else "dqn_policy"


def configs(seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """The PPO trainer's and the DQN trainer's configs: the same env and policies, each training its own."""
    common = {
        "env": MultiAgentCartPole,
        "env_config": {"num_agents": 4},
        "seed": seed,
        "num_workers": 0,
    }
    ppo = {
        **common,
        "multiagent": {"policies": POLICIES, "policy_mapping_fn": map_agents, "policies_to_train": ["ppo_policy"]},
        "train_batch_size": 1000,
        "rollout_fragment_length": 250,
        "sgd_minibatch_size": 250,
        "num_sgd_iter": 10,
        "lr": 1e-3,
        "gamma": 0.99,
    }
    dqn = {
        **common,
        "multiagent": {"policies": POLICIES, "policy_mapping_fn": map_agents, "policies_to_train": ["dqn_policy"]},
        "lr": 1e-3,
        "gamma": 0.99,
        "n_step": 3,
        "learning_starts": 500,
        "target_network_update_freq": 500,
        "min_sample_timesteps_per_iteration": 1000,
    }
    return ppo, dqn


def train(iterations: int = 20, seed: int = 0, *, verbose: bool = True, results_dir: str | None = None) -> dict[str, Any]:
    """Train both trainers ``iterations`` times, swapping weights after each; the last results and weights."""
    start = time.perf_counter()
    ppo_config, dqn_config = configs(seed)
    results_dir = results_dir or "/tmp/rltune_examples"
    with PPO(config=ppo_config, results_dir=results_dir) as ppo, DQN(config=dqn_config, results_dir=results_dir) as dqn:
        for _ in range(iterations):
            dqn_result = dqn.train()
            ppo_result = ppo.train()
            ppo.set_weights(dqn.get_weights(["dqn_policy"]))  # the DQN trainer's policy, acting in the PPO trainer
            dqn.set_weights(ppo.get_weights(["ppo_policy"]))
            if verbose:
                rewards = ppo_result["policy_reward_mean"]
                print(f"iteration {ppo_result['training_iteration']:>3}: ppo_policy {rewards.get('ppo_policy', 0):6.1f}, "
                      f"dqn_policy {dqn_result['policy_reward_mean'].get('dqn_policy', 0):6.1f} (mean episode reward)")
        return {
            "ppo_result": ppo_result,
            "dqn_result": dqn_result,
            "weights": {"ppo": ppo.get_weights(), "dqn": dqn.get_weights()},
            "seconds": time.perf_counter() - start,
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run = train(args.iterations, args.seed)
    print(f"done in {run['seconds']:.1f} s")
