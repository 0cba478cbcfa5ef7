"""SIGKILL at random moments of a real study, then ``--resume``: every trial complete once, MLflow agreeing with Optuna.

A study of small multi-agent PPO trials (observation filter MeanStdFilter,
one rollout worker each, MLflow tracking on, a checkpoint every iteration)
runs as ``rltune tune`` processes. At seeded random moments the test kills
(SIGKILL) a rollout worker, a trial process or the orchestrator itself, found
through ``/proc`` as the orchestrator's descendants, and starts
``rltune tune --resume`` after each orchestrator kill, until the study ends.
Then Optuna, the trial directories and MLflow must tell one story: every grid
point COMPLETE exactly once at its stop criterion, every iteration once,
checkpoints intact, one MLflow run per trial with Optuna's state, params and
reported values: at each step the value of the trial's last run of it
(``result.json``), in Optuna and as MLflow's latest.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

pytestmark = pytest.mark.tracked

RLTUNE = Path(sys.executable).parent / "rltune"
TESTS = Path(__file__).parent.parent
ITERATIONS = 8
SEED = int(os.environ.get("RLTUNE_FAULT_SEED", "23"))  # another to replay another sequence of kills
KILLS = ["orchestrator"] * 4 + ["worker"] * 5 + ["trial"] * 3  # shuffled with SEED
WAIT_S = 120.0  # the longest any one thing the test waits for may take (a loaded 2-core machine)

ENVS = '''
import time

import gymnasium as gym

from rltune.env import make_multi_agent
from trainers.multi_agent_envs import TurnGame

STEP_S = 0.004  # an iteration (64 steps) lasts long enough to be killed in


class SlowTurnGame(TurnGame):
    def step(self, action_dict):
        time.sleep(STEP_S)
        return super().step(action_dict)


class SlowCartPole(gym.Wrapper):
    def step(self, action):
        time.sleep(STEP_S)
        return super().step(action)


TwoCartPoles = make_multi_agent(lambda config: SlowCartPole(gym.make("CartPole-v1")))


def by_side(agent_id, episode=None, worker=None, **kwargs):
    return "first" if agent_id in ("x", 0) else "second"
'''

STUDY = f"""
name: faults
run: PPO
metric: episode_reward_mean
mode: max
stop: {{training_iteration: {ITERATIONS}}}
search_alg: grid
checkpoint_freq: 1
max_failures: 30            # each rollout worker or trial process killed is a failure of its trial
config:
  env: {{grid_search: ["fault_envs:SlowTurnGame", "fault_envs:TwoCartPoles"]}}
  env_config: {{num_agents: 2}}
  recreate_failed_workers: {{grid_search: [true, false]}}
  multiagent:
    policies: [first, second]
    policy_mapping_fn: fault_envs:by_side
  observation_filter: MeanStdFilter
  num_workers: 1
  rollout_fragment_length: 64
  train_batch_size: 64
  sgd_minibatch_size: 32
  num_sgd_iter: 1
  model: {{fcnet_hiddens: [16]}}
"""
GRID = sorted((env, recreate) for env in ("fault_envs:SlowTurnGame", "fault_envs:TwoCartPoles")
              for recreate in (True, False))


# -- processes, through /proc -------------------------------------------------------------------
def _processes() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, command line)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        found[int(entry)] = (ppid, cmdline)
    return found


def _descendants(root: int, marker: str) -> list[int]:
    """The live descendants of ``root`` whose command line holds ``marker``."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        if marker in procs[pid][1]:
            out.append(pid)
    return sorted(out)


MARKERS = {"worker": "rltune.trainers.sampling._remote", "trial": "rltune.orchestrator._trial_process"}


# -- the study as processes ---------------------------------------------------------------------
class Study:
    """``rltune tune`` on the study file: started, resumed, killed; its progress read from the trial directories."""

    def __init__(self, tmp_path: Path) -> None:
        (tmp_path / "fault_envs.py").write_text(ENVS)
        (tmp_path / "faults.yaml").write_text(STUDY)
        self.cwd = tmp_path
        self.results = tmp_path / "results"
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(TESTS)]),
                        MLFLOW_DISABLE_TELEMETRY="true")
        self.env.pop("RLTUNE_TRACKING", None)  # tracking on (the test is marked tracked)
        self.env.pop("MLFLOW_TRACKING_URI", None)
        self.proc: subprocess.Popen | None = None
        self.log = tmp_path / "orchestrators.log"
        self.starts = 0
        self.t0 = time.monotonic()
        from mlflow import MlflowClient

        # the store made here (MLflow's migrations take 10 s or more): else the first tracking process makes it at
        # nice 19 while trials run, and each later one (after a kill) waits for that one
        self.results.mkdir()
        MlflowClient(self.tracking_uri).search_experiments()

    @property
    def tracking_uri(self) -> str:
        return f"sqlite:///{self.results / 'mlflow.db'}"

    def note(self, text: str) -> None:
        with open(self.log, "a") as log:
            log.write(f"--- {time.monotonic() - self.t0:6.1f} s: {text} ---\n")

    def start(self) -> None:
        """Start ``rltune tune`` (``--resume`` after the first); the one before must have been killed or exited 0."""
        if self.proc is not None:
            assert self.proc.wait() in (0, -signal.SIGKILL), self.output()
        args = [str(RLTUNE), "tune", "faults.yaml", "--results-dir", str(self.results), "--max-concurrent", "2",
                "--quiet", *(["--resume"] if self.starts else [])]
        self.note(f"start {self.starts}")
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(args, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def results_count(self) -> int:
        return sum(len(p.read_text().splitlines()) for p in self.results.glob("faults/trial_*/result.json"))

    def wait_for(self, what: str, ready, timeout: float = WAIT_S) -> bool:
        """Wait until ``ready()``; False if the orchestrator ended first; fail after ``timeout`` s saying for what."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return True
            if not self.running():
                return False
            time.sleep(0.05)
        raise AssertionError(f"waited {timeout:.0f} s for {what}; the orchestrators' output:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text()[-6000:]

    def finish(self) -> None:
        """Wait for the running orchestrator (or a resumed one) to end the study; it must exit 0."""
        if not self.running():
            self.start()
        self.note("waiting for the study to end")
        try:
            code = self.proc.wait(timeout=4 * WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the study did not end in {4 * WAIT_S:.0f} s:\n{self.output()}") from None
        self.note(f"the study ended: exit {code}")
        assert code == 0, self.output()


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def _run_with_kills(study: Study, rng: random.Random) -> list[str]:
    """Start the study and carry out KILLS in a seeded order at seeded moments; the kills done, in order.

    Each kill waits for 0-2 new results since the last one (so kills spread
    over the study, and every resume makes progress), then a random 0-1 s.
    """
    done: list[str] = []
    study.start()
    kills = list(KILLS)
    rng.shuffle(kills)
    for kind in kills:
        target = study.results_count() + rng.randint(0 if kind != "orchestrator" else 1, 2)
        found: list[int] = []

        def ready() -> bool:
            if study.results_count() < target:
                return False
            found[:] = [study.proc.pid] if kind == "orchestrator" else _descendants(study.proc.pid, MARKERS[kind])
            return bool(found)

        if not study.wait_for(f"{target} results and a {kind} process", ready):
            break  # the study ended
        time.sleep(rng.uniform(0.0, 1.0))
        victim = rng.choice(found)
        if not _kill(victim):
            continue
        done.append(kind)
        study.note(f"killed {kind} {victim}")
        if kind == "orchestrator":
            study.proc.wait(timeout=30)
            study.start()
    return done


# -- what must hold at the end ------------------------------------------------------------------
def _check_optuna(trials: list[optuna.trial.FrozenTrial]) -> None:
    states = [(t.number, t.state.name) for t in trials]
    assert len(trials) == len(GRID) and all(s == "COMPLETE" for _, s in states), states
    assert sorted((t.params["env"], t.params["recreate_failed_workers"]) for t in trials) == GRID
    for t in trials:
        last = t.user_attrs["last_result"]
        assert last["training_iteration"] == ITERATIONS, (t.number, last["training_iteration"])
        assert t.value == last["episode_reward_mean"], t.number
        assert sorted(t.intermediate_values) == list(range(1, ITERATIONS + 1)), t.number


def _check_trial_dirs(study_dir: Path, trials: list[optuna.trial.FrozenTrial]) -> None:
    from rltune._trial_files import list_checkpoints
    from rltune.trainers.checkpoints._checkpoint import read_trainer_state

    assert sorted(p.name for p in study_dir.glob("trial_*")) == [f"trial_{t.number:05d}" for t in trials]
    for t in trials:
        trial_dir = study_dir / f"trial_{t.number:05d}"
        results = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
        assert [r["training_iteration"] for r in results] == list(range(1, ITERATIONS + 1)), t.number
        assert results[-1]["episode_reward_mean"] == t.value, t.number
        checkpoints = list_checkpoints(trial_dir)
        assert [i for i, _ in checkpoints] == list(range(1, ITERATIONS + 1)), t.number
        assert t.user_attrs["checkpoint"] == str(checkpoints[-1][1])
        state = read_trainer_state(checkpoints[-1][1], "PPO")  # checksums verified
        assert state.iteration == ITERATIONS
        assert {pid: s.count > 0 for pid, s in state.observation_filters.items()} == {"first": True, "second": True}
        assert not [p.name for p in trial_dir.iterdir() if p.name.startswith(".")], "leftover temporary copies"


def _check_mlflow(results: Path, trials: list[optuna.trial.FrozenTrial]) -> None:
    from mlflow import MlflowClient
    from mlflow_history import latest_by_step

    from rltune.tracking._keys import flatten_params

    client = MlflowClient(f"sqlite:///{results / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("faults")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("rltune.role") == "study"]
    assert [p.info.status for p in parents] == ["FINISHED"]
    nested = [r for r in runs if r.data.tags.get("rltune.role") == "trial"]
    numbers = sorted(int(r.data.tags["rltune.trial"]) for r in nested)
    assert numbers == sorted(t.number for t in trials), "one MLflow run per Optuna trial, none twice"
    by_number = {int(r.data.tags["rltune.trial"]): r for r in nested}
    on_file = {t.number: {r["training_iteration"]: r["episode_reward_mean"] for r in map(
        json.loads, (results / "faults" / f"trial_{t.number:05d}" / "result.json").open())} for t in trials}
    for t in trials:
        run = by_number[t.number]
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert (run.info.status, run.data.tags["rltune.state"]) == ("FINISHED", "COMPLETE"), t.number
        expected = flatten_params({**t.params, "seed": t.user_attrs["seed"]})
        assert {k: run.data.params.get(k) for k in expected} == expected, t.number
        steps = latest_by_step(client, run.info.run_id, "training_iteration")
        assert steps == {i: float(i) for i in range(1, ITERATIONS + 1)}, t.number
        # a step run again after a restore (logged again, later) has the re-run's value in all three
        values = latest_by_step(client, run.info.run_id, "episode_reward_mean")
        assert values == t.intermediate_values == on_file[t.number], t.number


def test_sigkill_of_workers_trials_and_the_orchestrator_then_resume_completes_every_trial_once(tmp_path):
    study = Study(tmp_path)
    rng = random.Random(SEED)
    try:
        done = _run_with_kills(study, rng)
        study.finish()
    finally:
        if study.running():
            study.proc.kill()
    assert len(done) >= 10, (done, study.output())
    from rltune.orchestrator._listing import load_study

    optuna_study, _ = load_study(study.results / "faults")
    trials = optuna_study.get_trials()
    _check_optuna(trials)
    _check_trial_dirs(study.results / "faults", trials)
    _check_mlflow(study.results, trials)
