"""Bad flags of ``rltune train``, ``tune``, ``rollout``, ``studies`` and ``show``."""

from __future__ import annotations

import json

from .harness import TINY_PPO, Case

TRAIN = ("train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir", "{results}",
         "--stop", '{"training_iteration": 1}')
TINY = json.dumps(TINY_PPO)
TUNE = ("tune", "{study_file}", "--results-dir", "{results}", "--quiet")


def train(id: str, expect: str, *flags: str) -> Case:
    return Case(id, expect, (*TRAIN, *flags))


def train_config(id: str, expect: str, config: str) -> Case:
    return Case(id, expect, (*TRAIN, "--config", config))


def tune(id: str, expect: str, *flags: str) -> Case:
    return Case(id, expect, (*TUNE, *flags))


CASES: list[Case] = [
    # -- rltune train: names and paths --------------------------------------------------------------
    train("train name escapes", "name: must be letters, digits", "--name", "../../x"),
    train("train name absolute", "name: must be letters, digits", "--name", "/tmp/x"),
    train("train name slash", "name: must be letters, digits", "--name", "a/b"),
    train("train name dotdot", "name: must be letters, digits", "--name", ".."),
    train("train name hidden", "name: must be letters, digits", "--name", ".x"),
    train("train name newline", "name: must be letters, digits", "--name", "a\nb"),
    train("train name NUL", "name: must not contain a NUL byte", "--name", "a\x00b"),
    train("train name empty", "name: must be letters, digits", "--name", ""),
    train("train name too long", "at most 128 characters", "--name", "n" * 129),
    train("train name space", "name: must be letters, digits", "--name", "my run"),
    train("train results_dir a file", "results_dir: '{afile}' is a file, not a directory", "--results-dir", "{afile}"),
    train("train results_dir under a file", "which is a file, not a directory", "--results-dir", "{afile}/x"),
    train("train results_dir NUL", "results_dir: must not contain a NUL byte", "--results-dir", "/tmp/a\x00b"),
    # -- rltune train: numbers --------------------------------------------------------------------
    train_config("train config Infinity", "lr: Input should be a finite number", '{"lr": Infinity}'),
    train_config("train config NaN", "lr: Input should be a finite number", '{"lr": NaN}'),
    train_config("train config -Infinity gamma", "gamma: Input should be a finite number", '{"gamma": -Infinity}'),
    train_config("train config bool int", "train_batch_size: a bool is not a number", '{"train_batch_size": true}'),
    train_config("train config bool float", "lr: a bool is not a number", '{"lr": true}'),
    train_config("train config nested inf", "model.fcnet_hiddens.0", '{"model": {"fcnet_hiddens": [Infinity]}}'),
    train_config("train config nested bool", "model.fcnet_hiddens", '{"model": {"fcnet_hiddens": [false]}}'),
    train_config("train config schedule nan", "lr_schedule.0.1", '{"lr_schedule": [[0, NaN]]}'),
    train_config("train config seed huge", "seed: Unable to parse input string as an integer", '{"seed": 1e30}'),
    train_config("train config seed bool", "seed: a bool is not a number", '{"seed": true}'),
    train_config("train config num_gpus inf", "num_gpus: Input should be a finite number", '{"num_gpus": Infinity}'),
    train_config("train config unknown key", "lr_: unknown key; did you mean 'lr'?", '{"lr_": 0.1}'),
    train_config("train config deep", "invalid --config: not valid JSON: nested too deeply", "[" * 100_000),
    train_config("train config not object", "invalid --config: must be a JSON object", "[1]"),
    train_config("train config malformed", "invalid --config: not valid JSON", '{"lr": 0.1,}'),
    train_config("train config search entry", "search-space entries make a study", '{"lr": {"choice": [0.1, 0.2]}}'),
    Case("train stop Infinity", "timesteps_total: the value must be a finite number",
         ("train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir", "{results}", "--stop", '{"timesteps_total": Infinity}')),
    Case("train stop NaN", "timesteps_total: the value must be a finite number",
         ("train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir", "{results}", "--stop", '{"timesteps_total": NaN}')),
    Case("train stop string", "timesteps_total: the value must be a number",
         ("train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir", "{results}", "--stop", '{"timesteps_total": "x"}')),
    Case("train stop negative training_iteration", "invalid --stop: training_iteration: must be > 0, but got -1",
         ("train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir", "{results}", "--stop", '{"training_iteration": -1}')),
    train("train steps zero", "invalid --steps: must be >= 1, but got 0", "--steps", "0"),
    train("train steps text", "argument --steps: invalid int value", "--steps", "many"),
    train("train steps and stop timesteps", "invalid --steps: the stop criteria have timesteps_total", "--steps", "5",
          "--stop", '{"timesteps_total": 9}'),
    train("train local_dir a file", "results_dir: '{afile}' is a file, not a directory", "--local-dir", "{afile}"),
    Case("train stop not object", "invalid --stop: must be a JSON object",
         ("train", "--run", "PPO", "--env", "CartPole-v1", "--results-dir", "{results}", "--stop", "5")),
    train("train checkpoint-freq negative", "invalid --checkpoint-freq: must be >= 0", "--checkpoint-freq", "-1"),
    train("train checkpoint-freq fraction", "argument --checkpoint-freq: invalid int value", "--checkpoint-freq", "1.5"),
    train("train log-level", "argument --log-level: invalid choice", "--log-level", "LOUD"),
    train("train unknown flag", "unrecognized arguments: --stopp", "--stopp", "{}"),
    Case("train unknown algorithm", "unknown algorithm 'PPOO'", ("train", "--run", "PPOO", "--env", "CartPole-v1",
                                                                 "--results-dir", "{results}")),
    Case("train no env", "no env given", ("train", "--run", "PPO", "--results-dir", "{results}")),
    Case("train missing file", "the file does not exist", ("train", "-f", "{tmp}/nope.yaml", "--results-dir", "{results}")),
    # -- rltune tune ---------------------------------------------------------------------------------
    tune("tune n-trials zero", "invalid --n-trials: must be >= 1", "--n-trials", "0"),
    tune("tune n-trials 10**30", "n_trials: Input should be less than or equal to 100000", "--n-trials", "1" + "0" * 30),
    tune("tune num-samples zero", "invalid --num-samples: must be >= 1", "--num-samples", "0"),
    tune("tune num-samples 10**30", "num_samples: Input should be less than or equal to 100000", "--num-samples", "1" + "0" * 30),
    tune("tune n-jobs zero", "invalid --n-jobs: must be >= 1", "--n-jobs", "0"),
    tune("tune max-concurrent zero", "invalid --max-concurrent: must be >= 1", "--max-concurrent", "0"),
    tune("tune timeout inf", "invalid --timeout: must be a finite number > 0", "--timeout", "inf"),
    tune("tune timeout nan", "invalid --timeout: must be a finite number > 0", "--timeout", "nan"),
    tune("tune timeout negative", "invalid --timeout: must be a finite number > 0", "--timeout", "-5"),
    tune("tune timeout text", "argument --timeout: invalid float value", "--timeout", "soon"),
    tune("tune n-trials text", "argument --n-trials: invalid int value", "--n-trials", "many"),
    tune("tune name escapes", "name: must be letters, digits", "--name", "../x"),
    tune("tune name hidden", "name: must be letters, digits", "--name", ".x"),
    tune("tune name newline", "name: must be letters, digits", "--name", "x\ny"),
    tune("tune name NUL", "name: must not contain a NUL byte", "--name", "x\x00y"),
    Case("tune results_dir a file", "results_dir: '{afile}' is a file, not a directory",
         ("tune", "{study_file}", "--results-dir", "{afile}", "--quiet")),
    tune("tune storage NUL", "storage: must not contain a NUL byte", "--storage", "sqlite:///x\x00y"),
    tune("tune stop Infinity", "stop.score: the value must be a finite number", "--stop", '{"score": Infinity}'),
    tune("tune stop NaN", "stop.score: the value must be a finite number", "--stop", '{"score": NaN}'),
    tune("tune stop negative time_total_s", "stop.time_total_s: must be > 0, but got -5", "--stop", '{"time_total_s": -5}'),
    tune("tune stop malformed", "invalid --stop: not valid JSON", "--stop", "{score: 1}"),
    tune("tune config search NaN", "config.x.uniform: needs [low, high]", "--config", '{"x": {"uniform": [NaN, 1]}}'),
    tune("tune config not object", "invalid --config: must be a JSON object", "--config", '"x"'),
    tune("tune config deep", "invalid --config: not valid JSON: nested too deeply", "--config", '{"a": ' + "[" * 100_000),
    tune("tune unknown flag", "unrecognized arguments: --n-trialz", "--n-trialz", "3"),
    # -- rltune rollout / studies / show ---------------------------------------------------------------
    Case("rollout episodes zero", "invalid --episodes: must be >= 1", ("rollout", "{trial}", "--episodes", "0")),
    Case("rollout steps negative", "invalid --steps: must be >= 1", ("rollout", "{trial}", "--steps", "-3")),
    Case("rollout episodes text", "argument --episodes: invalid int value", ("rollout", "{trial}", "--episodes", "x")),
    Case("rollout config Infinity", "lr: Input should be a finite number",
         ("rollout", "{trial}", "--episodes", "1", "--config", '{"lr": Infinity}')),
    Case("rollout config not object", "invalid --config: must be a JSON object", ("rollout", "{trial}", "--config", "[]")),
    Case("rollout run other algorithm", "invalid --run: is 'DQN', but", ("rollout", "{trial}", "--run", "DQN")),
    Case("rollout out missing dir", "invalid --out: the directory of", ("rollout", "{trial}", "--out", "{tmp}/no/r.jsonl")),
    Case("rollout out a directory", "invalid --out: '{tmp}' is a directory", ("rollout", "{trial}", "--out", "{tmp}")),
    Case("rollout save-info alone", "invalid --save-info: writes the steps' info dicts", ("rollout", "{trial}", "--save-info")),
    Case("studies results_dir a file", "results_dir: '{afile}' is a file, not a directory",
         ("studies", "--results-dir", "{afile}")),
    Case("show results_dir a file", "results_dir: '{afile}' is a file, not a directory",
         ("show", "base", "--results-dir", "{afile}")),
    Case("show unknown study", "no study 'nope'", ("show", "nope", "--results-dir", "{results}")),
    Case("no command", "the following arguments are required: COMMAND", ()),
    Case("unknown command", "argument COMMAND: invalid choice: 'trian'", ("trian",)),
]
