"""The trial side of the tracking tests: a real short PPO training on CartPole logged through a TrialTracker.

Imported by the tests (in-process, local store) and run as a script in a
separate process (against an MLflow server)::

    python _trial_side.py '{"run_id": ..., "tracking_uri": ..., "trial_dir": ..., "out": "summary.json"}'

No relative imports: the file must run as a script too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rltune.callbacks import DefaultCallbacks

ITERATIONS = 4
KEEP_CHECKPOINTS = 1
PPO_CONFIG = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "num_envs_per_worker": 4,
    "rollout_fragment_length": 32,
    "train_batch_size": 128,  # 4 envs x 32 steps: one round per iteration
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 2,
    "lr": 1e-3,
    "model": {"fcnet_hiddens": [32, 32]},
    "seed": 0,
}


class PoleAngle(DefaultCallbacks):
    """Mean absolute pole angle of each episode as custom metric ``pole_angle``."""

    def on_episode_start(self, *, episode, **kwargs) -> None:
        episode.user_data["angles"] = [abs(float(episode.last_observation()[2]))]

    def on_episode_step(self, *, episode, **kwargs) -> None:
        episode.user_data["angles"].append(abs(float(episode.last_observation()[2])))

    def on_episode_end(self, *, episode, **kwargs) -> None:
        episode.custom_metrics["pole_angle"] = float(np.mean(episode.user_data["angles"]))


def probe_observations(n: int = 16) -> np.ndarray:
    """Fixed CartPole observations (float32, the env's dtype) to compare the logged model with the trainer."""
    rng = np.random.default_rng(123)
    return (rng.uniform(-0.2, 0.2, size=(n, 4))).astype(np.float32)


def run_complete_trial(tracker: Any, trial_dir: str | Path) -> dict[str, Any]:
    """Train PPO for ITERATIONS iterations, logging everything a COMPLETE trial logs; a summary for the checks.

    Every iteration: ``log_result`` and a checkpoint (``log_checkpoint``, keep
    KEEP_CHECKPOINTS), then ``params.json``/``result.json``, the learning
    curve and the policy model.
    """
    from rltune._trial_files import json_safe
    from rltune.trainers import PPO

    trial_dir = Path(trial_dir)
    trial_dir.mkdir(parents=True, exist_ok=True)
    trainer = PPO(config={**PPO_CONFIG, "callbacks": PoleAngle}, results_dir=str(trial_dir))
    results = []
    checkpoints = []
    try:
        (trial_dir / "params.json").write_text(json.dumps(json_safe(PPO_CONFIG), indent=2))
        with open(trial_dir / "result.json", "w") as lines:
            for _ in range(ITERATIONS):
                result = trainer.train()
                results.append(result)
                lines.write(json.dumps(json_safe({k: v for k, v in result.items() if k != "hist_stats"})) + "\n")
                tracker.log_result(result)
                path = trainer.save(trial_dir / f"checkpoint_{trainer.iteration:06d}")
                checkpoints.append((Path(path).name, result["episode_reward_mean"]))
                tracker.log_checkpoint(path)
        tracker.log_files(trial_dir / "params.json", trial_dir / "result.json")
        tracker.log_learning_curve()
        model_uri = tracker.log_policy_model(trainer)
        probe = probe_observations()
        expected_actions = [int(trainer.compute_single_action(o)) for o in probe]
    finally:
        trainer.stop()
    return {
        "iterations": ITERATIONS,
        "model_uri": model_uri,
        "expected_actions": expected_actions,
        "checkpoints": checkpoints,
        "custom_metric_keys": sorted(results[-1]["custom_metrics"]),
        "last_result": {"episode_reward_mean": results[-1]["episode_reward_mean"],
                        "timesteps_total": results[-1]["timesteps_total"]},
        "unrecorded": list(tracker.unrecorded),
    }


def main(argv: list[str]) -> int:
    from rltune.tracking import TrialTracker

    args = json.loads(argv[1])
    tracker = TrialTracker(args["run_id"], args["tracking_uri"], keep_checkpoints_num=KEEP_CHECKPOINTS)
    summary = run_complete_trial(tracker, args["trial_dir"])
    Path(args["out"]).write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
