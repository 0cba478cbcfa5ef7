"""The runnable examples that go with the orchestrator: they run and do what they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_custom_env_example_learns_even_without_a_main_guard(tmp_path):
    """Rollout workers start with subprocess, so a script without ``if __name__ == "__main__"`` works too."""
    source = (REPO / "examples" / "custom_env.py").read_text()
    guard = 'if __name__ == "__main__":'
    assert guard in source
    script = tmp_path / "custom_env_no_guard.py"
    script.write_text(source.replace(guard, "if True:  # no guard"))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "2 rollout worker processes" in proc.stdout
    assert proc.stdout.count("deterministic mean return: 0.60") == 2
    assert proc.stdout.rstrip().endswith("learned the corridor")


def test_tune_function_example_runs_and_resumes(tmp_path):
    """A script with no ``__main__`` guard: trials are subprocesses; the second run resumes with nothing to do."""
    script = REPO / "examples" / "tune_function.py"
    env = {**__import__("os").environ, "TMPDIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
            for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert "states: {'COMPLETE': " in proc.stdout and "'PRUNED'" in proc.stdout
    assert runs[0].stdout.splitlines()[-4:] == runs[1].stdout.splitlines()[-4:]  # the same study, nothing re-run
    assert "started" not in runs[1].stdout


def test_the_multi_agent_study_file_tunes_the_learners_lr_and_its_checkpoint_rolls_out(tmp_path, capsys, monkeypatch):
    """studies/multi-agent-rps.yaml on a tiny budget; then `rltune rollout` of its best checkpoint, per policy."""
    from rltune.orchestrator.cli import main

    monkeypatch.syspath_prepend(str(REPO))  # the study imports its env, heuristic and mapping from examples/
    tiny = '{"num_envs_per_worker": 2, "train_batch_size": 80, "sgd_minibatch_size": 40}'  # 2 envs x 40 turns
    code = main(["tune", str(REPO / "studies" / "multi-agent-rps.yaml"), "--results-dir", str(tmp_path), "--quiet",
                 "--no-tracking", "--n-trials", "1", "--stop", '{"training_iteration": 2}',
                 "--config", tiny])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count(" COMPLETE after 2 iterations policy_reward_mean/learner=") == 1
    assert "best params: multiagent.policies.learner.config.lr=" in out
    best = out.split("best checkpoint: ")[1].split()[0]

    assert main(["rollout", best, "--episodes", "4"]) == 2  # a checkpoint never runs the function it names
    err = capsys.readouterr().err
    assert "config key 'multiagent.policy_mapping_fn' is 'examples.multi_agent_pettingzoo:map_players'" in err
    mapping = '{"multiagent": {"policy_mapping_fn": "examples.multi_agent_pettingzoo:map_players"}}'
    assert f"--config '{mapping}'" in err  # the hint gives the flag to copy

    assert main(["rollout", best, "--episodes", "4", "--config", mapping]) == 0
    out = capsys.readouterr().out
    per_policy = dict(re.findall(r"^policy_reward_mean/(\w+): (-?\d+\.\d+) over 4 agent episodes \(min ", out, re.M))
    assert set(per_policy) == {"learner", "rock_lover"}, out
    learner = float(per_policy["learner"])
    assert float(per_policy["rock_lover"]) == -learner and -10.0 <= learner <= 10.0  # zero-sum, 10 rounds
    assert "episode_reward_mean: 0.000 over 4 deterministic episodes" in out  # the players' sum
