"""Files in the layout and with the key names of RLlib's tuned examples run as written, and learn.

The files are written here, in RLlib's layout (the experiment name as the
top key, run, env, stop, config) and with its names of several Ray versions;
their budgets are small (CartPole to a modest reward, a few seconds each).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from rltune.orchestrator._spec import load_study_file
from rltune.orchestrator.cli import main

# Ray 2.10+: env runners, epochs, minibatches, the new stack's switches and result names.
PPO_NEW_STACK = """
cartpole-ppo:
    env: CartPole-v1
    run: PPO
    stop:
        env_runners/episode_return_mean: 80
        num_env_steps_sampled_lifetime: 40000
    config:
        framework: torch
        enable_rl_module_and_learner: true
        enable_env_runner_and_connector_v2: true
        num_env_runners: 0
        num_envs_per_env_runner: 8
        rollout_fragment_length: auto
        train_batch_size_per_learner: 256
        minibatch_size: 256
        num_epochs: 20
        lambda: 0.8
        gamma: 0.98
        lr: 0.001
        use_kl_loss: false
        vf_loss_coeff: 0.5
        vf_clip_param: null
        grad_clip: 0.5
        torch_compile_learner: false
        seed: 0
        model:
            fcnet_hiddens: [64, 64]
"""

# Ray 0.8-1.x: use_pytorch, the top-level vf_share_layers, a gym v0 id, whole episodes, sampler_results.
PPO_CLASSIC = """
cartpole-ppo-torch:
    env: CartPole-v0
    run: PPO
    stop:
        sampler_results/episode_reward_mean: 80
        timesteps_total: 40000
    config:
        use_pytorch: true
        eager: false
        num_workers: 0
        num_envs_per_worker: 8
        batch_mode: complete_episodes
        rollout_fragment_length: 32
        train_batch_size: 256
        sgd_minibatch_size: 256
        num_sgd_iter: 20
        lambda: 0.8
        gamma: 0.98
        lr: 0.001
        kl_coeff: 0.0
        vf_share_layers: false
        vf_loss_coeff: 0.5
        vf_clip_param: null
        grad_clip: 0.5
        torch_compile_learner: false
        seed: 0
        model:
            fcnet_hiddens: [64, 64]
"""

# DQN with tf (runs on torch), n-step returns, RLlib's buffer type and learning-start names.
DQN_FILE = """
cartpole-dqn:
    env: CartPole-v1
    run: DQN
    stop:
        episode_return_mean: 40
        timesteps_total: 15000
    config:
        framework: tf
        eager_tracing: true
        n_step: 3
        gamma: 0.99
        lr: 0.001
        num_steps_sampled_before_learning_starts: 500
        replay_buffer_config:
            type: MultiAgentReplayBuffer
            capacity: 20000
        train_batch_size_per_learner: 32
        training_intensity: 8
        target_network_update_freq: 250
        exploration_config:
            type: EpsilonGreedy
            epsilon_timesteps: 4000
            final_epsilon: 0.05
        min_sample_timesteps_per_iteration: 1000
        torch_compile_learner: false
        seed: 0
        model:
            fcnet_hiddens: [64, 64]
            fcnet_activation: relu
"""

# Pendulum with gym's old id, whole episodes and the API-stack switches of Ray 2.3-2.6: accepted and run.
PENDULUM = """
pendulum-ppo:
    env: Pendulum-v0
    run: PPO
    stop:
        timesteps_total: 800
    config:
        framework: tf
        enable_connectors: true
        _enable_rl_module_api: true
        _enable_learner_api: false
        train_batch_size: 400
        vf_clip_param: 10.0
        num_workers: 0
        num_envs_per_worker: 2
        batch_mode: complete_episodes
        lambda: 0.1
        gamma: 0.95
        lr: 0.0003
        sgd_minibatch_size: 64
        num_sgd_iter: 2
        seed: 42
        model:
            fcnet_hiddens: [16]
"""


def write(tmp_path: Path, text: str, name: str = "tuned.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def train(tmp_path: Path, capsys, text: str) -> tuple[int, str, str, Path]:
    path = write(tmp_path, text)
    code = main(["train", "-f", str(path), "--results-dir", str(tmp_path / "results")])
    out, err = capsys.readouterr()
    (trial,) = (tmp_path / "results").iterdir()
    return code, out, err, trial


def results_of(trial: Path) -> list[dict]:
    return [json.loads(line) for line in (trial / "result.json").read_text().splitlines()]


@pytest.mark.parametrize(
    "text, key, reward",
    [
        (PPO_NEW_STACK, "env_runners/episode_return_mean", 80),
        (PPO_CLASSIC, "sampler_results/episode_reward_mean", 80),
        (DQN_FILE, "episode_return_mean", 40),
    ],
    ids=["ppo-new-stack", "ppo-classic", "dqn"],
)
def test_tuned_files_run_as_written_and_learn(tmp_path, capsys, text, key, reward):
    code, out, err, trial = train(tmp_path, capsys, text)
    assert code == 0, err
    assert f"stopped: {key} = " in out, out[-2000:]  # the reward was reached, not the step budget
    results = results_of(trial)
    first, last = results[0]["episode_reward_mean"], results[-1]["episode_reward_mean"]
    assert first < 30 <= reward <= last  # from a random policy's return to the file's reward


def test_a_pendulum_file_of_old_gym_ids_and_switches_runs_on_gymnasium(tmp_path, capsys):
    code, out, err, trial = train(tmp_path, capsys, PENDULUM)
    assert code == 0, err
    params = json.loads((trial / "params.json").read_text())
    assert (params["env"], params["framework"], params["batch_mode"]) == ("Pendulum-v1", "torch", "complete_episodes")
    results = results_of(trial)
    assert all(r["timesteps_this_iter"] % 200 == 0 for r in results)  # whole Pendulum episodes of 200 steps
    assert results[-1]["timesteps_total"] >= 800


SEARCH = """
cartpole-ppo-grid:
    env: CartPole-v1
    run: PPO
    num_samples: {num_samples}
    local_dir: {results}
    metric: env_runners/episode_return_mean
    stop:
        sampler_results/episode_reward_mean: 1000
        training_iteration: 1
    config:
        framework: tf
        num_env_runners: 0
        train_batch_size: 64
        rollout_fragment_length: 64
        minibatch_size: 64
        num_epochs: {num_epochs}
        model:
            fcnet_hiddens: [8]
"""


@pytest.mark.parametrize(
    "num_samples, num_epochs, entry",
    [(1, "{grid_search: [1, 2]}", "config.num_epochs (grid_search)"), (3, "1", "num_samples: 3 runs")],
)
def test_train_says_a_file_with_a_search_space_is_a_study(tmp_path, capsys, num_samples, num_epochs, entry):
    path = write(tmp_path, SEARCH.format(num_samples=num_samples, num_epochs=num_epochs, results=tmp_path))
    assert main(["train", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert entry in err and f"run it with 'rltune tune {path}'" in err
    assert not list(tmp_path.glob("*/result.json"))  # nothing ran


def test_tune_runs_a_file_in_rllibs_layout(tmp_path, capsys):
    path = write(tmp_path, SEARCH.format(num_samples=1, num_epochs="{grid_search: [1, 2]}", results=tmp_path / "r"))
    code = main(["tune", str(path), "--quiet", "--no-tracking", "--n-jobs", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    study = tmp_path / "r" / "cartpole-ppo-grid"  # local_dir is the results dir; the top key names the study
    assert (study / "study.json").exists()
    trials = sorted(p for p in study.iterdir() if p.is_dir() and (p / "params.json").exists())
    assert sorted(json.loads((t / "params.json").read_text())["params"]["num_sgd_iter"] for t in trials) == [1, 2]
    for t in trials:  # the metric, in RLlib's new spelling, is in every result
        (result,) = results_of(t)
        assert result["env_runners"]["episode_return_mean"] == result["episode_reward_mean"]


def test_a_study_plans_in_rltunes_names(tmp_path):
    text = SEARCH.format(num_samples=2, num_epochs="{grid_search: [1, 2]}", results=tmp_path)
    text = text.replace("CartPole-v1", "Pendulum-v0").replace("num_env_runners: 0", "num_env_runners: 3\n"
                                                                 "        num_cpus_per_env_runner: 0.5")
    plan = load_study_file(write(tmp_path, text))
    assert plan.spec.results_dir == str(tmp_path)
    assert plan.config["env"] == "Pendulum-v1" and plan.config["framework"] == "torch"
    assert plan.config["num_sgd_iter"] == {"grid_search": [1, 2]} and "num_epochs" not in plan.config
    assert [p.name for p in plan.space.params] == ["num_sgd_iter"]
    assert plan.total_trials == 4
    assert plan.cpus_per_trial(plan.config) == 3  # 1 for the trainer + 3 workers x 0.5


def test_a_study_file_giving_an_alias_and_its_key_names_both_and_the_line(tmp_path):
    text = SEARCH.format(num_samples=1, num_epochs="2", results=tmp_path) + "        num_sgd_iter: 3\n"
    with pytest.raises(Exception) as info:
        load_study_file(write(tmp_path, text))
    message = str(info.value)
    line = text.splitlines().index("        num_epochs: 2") + 1
    assert f"line {line}: config.num_epochs: the same setting as num_sgd_iter" in message
    assert "num_epochs=2 and num_sgd_iter=3" in message
