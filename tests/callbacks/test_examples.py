"""The curriculum and callback examples and the curriculum study file: consistent, and doing what they say.

The full example runs take seconds to a minute; these tests check their
parts on tiny budgets (the study file is trained until its last phase).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from rltune.orchestrator._train_file import load_train_file
from rltune.trainers import PPO

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def examples(monkeypatch):
    """The examples package, importable as from the repository root (as `rltune train -f` sees it)."""
    monkeypatch.syspath_prepend(str(REPO))
    import examples.callbacks_pole_angle as pole_angle
    import examples.curriculum as curriculum

    return curriculum, pole_angle


def reach_probability(length: int, max_steps: int) -> float:
    """Exact probability that a uniform random walk from cell 0 (wall at 0) reaches ``length`` within ``max_steps``."""
    p = np.zeros(length + 1)
    p[0] = 1.0
    for _ in range(max_steps):
        q = np.zeros_like(p)
        q[length] = p[length]  # absorbed at the goal
        for cell in range(length):
            q[max(cell - 1, 0)] += p[cell] / 2
            q[cell + 1] += p[cell] / 2
        p = q
    return float(p[length])


def test_corridor_is_sparse_truncated_and_takes_a_new_length_at_reset(examples):
    curriculum, _ = examples
    env = curriculum.Corridor({"length": 3, "max_length": 20})
    obs, info = env.reset(seed=0)
    assert info == {"length": 3} and env.observation_space.contains(obs)
    steps = [env.step(a) for a in (1, 0, 1, 1)]
    assert [s[1:4] for s in steps] == [(0.0, False, False)] * 4
    assert env.step(1)[1:4] == (1.0, True, False)  # cell 3 after 5 steps: 1 - 1 + 1 + 1 + 1
    env.reset()
    assert [env.step(0)[1:4] for _ in range(6)][-1] == (0.0, False, True)  # cut after 2 steps per cell
    env.set_task(5)
    assert (env.get_task(), env.length) == (5, 3)  # takes effect at the next reset
    assert env.reset()[1] == {"length": 5}
    with pytest.raises(ValueError, match="corridor length"):
        env.set_task(21)


def test_random_walk_rarely_reaches_the_end_of_the_longest_corridor(examples):
    """The docstring's numbers: about 25% for 4 cells, about 0.2% for 20 cells (2 steps per cell)."""
    curriculum, _ = examples
    assert reach_probability(4, 8) == pytest.approx(0.25, abs=0.01)
    assert reach_probability(curriculum.MAX_LENGTH, 2 * curriculum.MAX_LENGTH) == pytest.approx(0.002, abs=0.0005)


def test_study_file_matches_the_example_and_reaches_the_last_phase(examples, tmp_path):
    curriculum, _ = examples
    path = REPO / "studies" / "curriculum-corridor.yaml"
    spec = load_train_file(path)  # a valid `rltune train -f` file
    assert (spec.run, spec.env, spec.curriculum) == ("PPO", "examples.curriculum:Corridor", curriculum.CURRICULUM)
    study = yaml.safe_load(path.read_text())
    assert study["curriculum"] == curriculum.CURRICULUM
    assert study["config"] == {
        **{k: v for k, v in curriculum.CONFIG.items() if k != "env"},
        "callbacks": "examples.curriculum:CorridorLength",
        "seed": 0,
    }
    # What `rltune train -f` builds from it: the top-level curriculum goes into the config.
    config = {**study["config"], "env": study["env"], "curriculum": study["curriculum"]}
    with PPO(config=config, results_dir=tmp_path) as trainer:
        results = [trainer.train() for _ in range(12)]
        assert trainer.get_tasks() == {(0, v): curriculum.MAX_LENGTH for v in range(8)}
    assert [r["curriculum_task"] for r in results][:2] == [4, 4]
    assert results[-1]["curriculum_phase"] == len(curriculum.CURRICULUM["phases"]) - 1
    assert results[-1]["curriculum_task"] == curriculum.MAX_LENGTH
    metrics = results[-1]["custom_metrics"]
    assert 4 <= metrics["corridor_length_min"] <= metrics["corridor_length_max"] == curriculum.MAX_LENGTH


def test_pole_angle_callbacks_report_the_mean_absolute_angle(examples, tmp_path, capsys):
    _, pole_angle = examples
    config = {**pole_angle.CONFIG, "num_workers": 0, "rollout_fragment_length": 32, "train_batch_size": 256}
    with PPO(config=config, results_dir=tmp_path) as trainer:
        result = trainer.train()
    metrics = result["custom_metrics"]
    # CartPole ends an episode when |angle| > 0.2095 rad: every episode's mean lies below that.
    assert 0 < metrics["pole_angle_min"] <= metrics["pole_angle_mean"] <= metrics["pole_angle_max"] < 0.2095
    assert f"iteration  1: {result['episodes_this_iter']:>3} episodes" in capsys.readouterr().out


def test_automatic_curriculum_example_and_its_study(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(REPO))
    from examples import curriculum_auto as auto
    from rltune.orchestrator._spec import load_study_file

    plan = load_study_file(REPO / "studies" / "curriculum-auto-corridor.yaml")
    assert {p.name for p in plan.space.params} == {"curriculum.fast_alpha", "curriculum.slow_alpha", "curriculum.epsilon"}
    assert plan.config["env"] == "examples.curriculum_auto:LengthCorridor"
    run = auto.train_until_solved("plr", 0, max_steps=1024, verbose=False, results_dir=str(tmp_path))
    assert run["iterations"] == 2 and set(run["task_probs"]) == {str(length) for length in auto.LONG_LENGTHS}
