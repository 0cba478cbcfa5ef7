"""A tuned-example file's settings for RLlib 2.60 (Ray's current names and API stacks); stop keys for both libraries.

Imports neither library (PyYAML only): the benchmark's parent uses it to
print how RLlib is configured, and the RLlib child (in RLlib's own venv) to
build the algorithm. rltune needs none of this: it runs the files as written.

The RLlib side of a file is "the same hyperparameters through Ray 2.60's
config API", on the API stack the file was written for:

- files that switch the new stack on (``enable_rl_module_and_learner``) run
  on it, the model block as a ``DefaultModelConfig``;
- the others predate it (RLlib itself marks them old-API-stack), and Ray
  2.60 still runs its old stack when asked with
  ``.api_stack(enable_rl_module_and_learner=False,
  enable_env_runner_and_connector_v2=False)``.

Older names are renamed to 2.60's, each rename listed in ``changes`` (so the
README can say exactly what RLlib ran). ``AlgorithmConfig.update_from_dict``
accepts some old names and silently ignores others (``num_sgd_iter`` leaves
``num_epochs`` at its default), so the child checks afterwards that every key
took its value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# Classic (Ray 0.8-2.9) config names and Ray 2.60's.
RENAMES = {
    "num_workers": "num_env_runners",
    "num_envs_per_worker": "num_envs_per_env_runner",
    "num_sgd_iter": "num_epochs",
    "sgd_minibatch_size": "minibatch_size",
}
NEW_STACK_SWITCHES = ("enable_rl_module_and_learner", "enable_env_runner_and_connector_v2")
# Switches of stacks between the old and the new one (Ray 2.3-2.9): the old stack here.
DROPPED = ("enable_connectors", "_enable_rl_module_api", "_enable_learner_api", "eager_tracing")
# Old-stack DQN in Ray 2.60 has no valid default buffer (its default, episode replay, is the new stack's); RLlib's
# classic default, the one its error message suggests, is prioritized replay with these settings.
CLASSIC_DQN_REPLAY = {
    "type": "MultiAgentPrioritizedReplayBuffer",
    "capacity": 50000,
    "prioritized_replay_alpha": 0.6,
    "prioritized_replay_beta": 0.4,
    "prioritized_replay_eps": 1e-6,
}

REWARD_KEYS = (
    "episode_reward_mean",
    "episode_return_mean",
    "sampler_results/episode_reward_mean",
    "env_runners/episode_return_mean",
    "evaluation/env_runners/episode_return_mean",
)
STEP_KEYS = ("timesteps_total", "num_env_steps_sampled_lifetime")
# A stop key's name in Ray 2.60's results (both stacks).
RLLIB_STOP_KEYS = {
    **{key: "env_runners/episode_return_mean" for key in REWARD_KEYS if not key.startswith("evaluation")},
    "evaluation/env_runners/episode_return_mean": "evaluation/env_runners/episode_return_mean",
    **{key: "num_env_steps_sampled_lifetime" for key in STEP_KEYS},
    "training_iteration": "training_iteration",
}


def read_tuned_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """The experiment's name and its fields (run, env, stop, config) of a file in RLlib's layout."""
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError(f"{path}: expected one experiment under one top-level key")
    ((name, body),) = data.items()
    return name, body


def reward_stop(stop: dict[str, float]) -> tuple[str, float]:
    """The stop criterion on the mean return: its key and value (every file here has exactly one)."""
    rewards = [(key, value) for key, value in stop.items() if key in REWARD_KEYS]
    if len(rewards) != 1:
        raise ValueError(f"expected one reward stop key among {REWARD_KEYS}, got {sorted(stop)}")
    return rewards[0]


def rllib_setup(body: dict[str, Any]) -> dict[str, Any]:
    """How RLlib 2.60 runs the file: algorithm, stack, env, config (2.60 names), model, stop and the changes made.

    ``changes`` lists every difference from the file as written, in words.
    """
    config = dict(body.get("config") or {})
    algo, env = body["run"], body.get("env", config.pop("env", None))
    changes: list[str] = []
    new_stack = bool(config.get("enable_rl_module_and_learner"))
    for key in NEW_STACK_SWITCHES:
        config.pop(key, None)
    dropped = [key for key in DROPPED if config.pop(key, None) is not None]
    if dropped:
        changes.append(f"{', '.join(dropped)}: dropped (switches of Ray 2.3-2.9's interim stacks)")
    framework = config.pop("framework", None)
    if config.pop("use_pytorch", None) is False or framework in ("tf", "tf2", "tfe"):
        changes.append(f"framework {framework or 'tf (use_pytorch: false)'} -> torch (TensorFlow is not installed)")
    model = dict(config.pop("model", None) or {})
    if "vf_share_layers" in config:
        model["vf_share_layers"] = config.pop("vf_share_layers")
        changes.append("vf_share_layers (top level) -> model.vf_share_layers")
    for old, new in RENAMES.items():
        if old in config:
            config[new] = config.pop(old)
            changes.append(f"{old} -> {new}")
    if algo == "DQN" and not new_stack and "replay_buffer_config" not in config:
        config["replay_buffer_config"] = dict(CLASSIC_DQN_REPLAY)
        changes.append(
            "replay_buffer_config: RLlib's classic default, prioritized (alpha 0.6, beta 0.4; capacity 50000), "
            "set explicitly: Ray 2.60's old stack has no valid default buffer"
        )
    stop = {}
    for key, value in (body.get("stop") or {}).items():
        if key not in RLLIB_STOP_KEYS:
            raise ValueError(f"stop key {key!r}: no Ray 2.60 result key known for it")
        stop[RLLIB_STOP_KEYS[key]] = value
        if RLLIB_STOP_KEYS[key] != key:
            changes.append(f"stop {key} -> {RLLIB_STOP_KEYS[key]}")
    return {
        "algo": algo,
        "stack": "new" if new_stack else "old",
        "env": env,
        "config": config,
        "model": model,
        "stop": stop,
        "changes": changes,
    }


def lookup(result: dict[str, Any], key: str) -> Any:
    """``result[key]``, a ``/`` in the key going one level down (Tune's stop keys); None if missing."""
    value: Any = result
    for part in key.split("/"):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value
