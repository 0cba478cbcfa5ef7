"""A recurrent policy that learned the memory task, sampled on a remote worker and evaluated greedily (evaluation's sampler)."""

from __future__ import annotations

from .test_recurrent_memory import CONFIG, EPISODE_LEN, GRUPPO, RepeatPastEnv


def test_evaluation_and_remote_workers_run_a_recurrent_policy_that_learned_the_task():
    config = {**CONFIG, "num_workers": 1, "num_envs_per_worker": 4, "evaluation_interval": 12, "evaluation_duration": 4}
    trainer = GRUPPO(config=config, env=RepeatPastEnv)
    try:
        for _ in range(12):
            result = trainer.train()
        best = EPISODE_LEN - 3  # the steps that name a symbol seen 3 steps before
        assert result["episode_reward_mean"] > 0.7 * best  # sampled (exploring) on the remote worker
        assert result["evaluation"]["episode_reward_mean"] > 0.8 * best  # greedy, in the evaluation's envs
    finally:
        trainer.stop()
