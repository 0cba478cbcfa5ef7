"""Run one bad-input case against a copy of a recorded results dir and classify the outcome.

A case is refused *clearly* when the CLI exits 2 with one ``error:`` line
(no traceback) containing the expected text, or the Python API raises an
:class:`~rltune.errors.RLTuneError` containing it, without noise (pydantic's
"Value error, " prefix, the same "(got ...)" said twice). The other outcomes are
``unclear`` (refused, but the message does not name the field), ``traceback``
(an exception that is not rltune's), ``accepted`` (the input was taken) and
``hang`` (more than the time limit).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

OUTCOMES = ("clear", "unclear", "traceback", "accepted", "hang")
TINY_PPO = {"train_batch_size": 200, "rollout_fragment_length": 50, "sgd_minibatch_size": 100, "num_sgd_iter": 2,
            "model": {"fcnet_hiddens": [16]}}
BASE_STUDY = "run: orchestrator.trainables:counter\nmetric: score\nstop: {training_iteration: 2}\nconfig: {steps: 2}\n"


@dataclass
class Context:
    """Paths a case may name; ``results`` is a fresh copy of the recorded results dir."""

    results: Path
    tmp: Path
    afile: Path  # a regular file, where a directory is expected
    study_file: Path  # a valid study file (a function trainable, 2 iterations)
    trial: Path  # the recorded PPO trial dir
    checkpoint: Path  # its checkpoint

    def fill(self, text: str) -> str:
        for key in ("results", "tmp", "afile", "study_file", "trial", "checkpoint"):
            text = text.replace("{" + key + "}", str(getattr(self, key)))
        return text


@dataclass(frozen=True)
class Case:
    """One bad input: CLI ``argv`` or an API call, and the text expected (placeholders as in :meth:`Context.fill`)."""

    id: str
    expect: str
    argv: tuple[str, ...] = ()
    call: Callable[[Context], Any] | None = None
    setup: Callable[[Context], Any] | None = None  # may return a cleanup, called once the case ran
    files: dict[str, str] = field(default_factory=dict)  # name under ctx.tmp -> text (placeholders filled)


def study_case(id: str, text: str, expect: str, *flags: str, results_flag: bool = True) -> Case:
    """``rltune tune FILE`` of a study file holding ``text`` (``--results-dir`` would override its results_dir)."""
    results = ("--results-dir", "{results}") if results_flag else ()
    return Case(id, expect, ("tune", "{tmp}/study.yaml", *results, "--quiet", *flags), files={"study.yaml": text})


def train_file_case(id: str, text: str, expect: str, *flags: str, results_flag: bool = True) -> Case:
    """``rltune train -f FILE`` of a train file holding ``text``."""
    results = ("--results-dir", "{results}") if results_flag else ()
    return Case(id, expect, ("train", "-f", "{tmp}/train.yaml", *results, *flags), files={"train.yaml": text})


@dataclass
class Outcome:
    kind: str  # one of OUTCOMES
    detail: str


def build_recorded(root: Path) -> Context:
    """A results dir with one finished study ('base', 2 trials) and one PPO trial with a checkpoint ('trained')."""
    from rltune import tune
    from rltune.orchestrator.cli import main

    results = root / "recorded"
    tune.run("orchestrator.trainables:counter", config={"steps": 2, "x": tune.grid_search([1, 2])}, metric="score",
             name="base", results_dir=str(results), verbose=0, tracking=False)
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["train", "--run", "PPO", "--env", "CartPole-v1", "--config", json.dumps(TINY_PPO), "--results-dir",
                     str(results), "--name", "trained", "--stop", '{"training_iteration": 1}', "--checkpoint-at-end"])
    assert code == 0, "could not train the recorded checkpoint"
    return context_for(results, root / "scratch")


def context_for(results: Path, tmp: Path) -> Context:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "afile").write_text("not a directory\n")
    (tmp / "fresh.yaml").write_text(BASE_STUDY)  # not "base": a taken name would hide an accepted case
    trial = results / "trained"
    checkpoint = sorted(trial.glob("checkpoint_*"))[-1]
    return Context(results, tmp, tmp / "afile", tmp / "fresh.yaml", trial, checkpoint)


def copy_context(recorded: Context, where: Path) -> Context:
    """A per-case copy of the recorded results dir (and fresh scratch files)."""
    results = where / "results"
    shutil.copytree(recorded.results, results)
    return context_for(results, where / "tmp")


def digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root``, by relative path."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def changed(before: dict[str, str], root: Path) -> list[str]:
    """The files of ``before`` that are missing or differ now."""
    after = digest(root)
    return [path for path, sha in before.items() if after.get(path) != sha]


class _Hang(Exception):
    pass


def run_case(case: Case, ctx: Context, *, timeout_s: float | None = None) -> Outcome:
    """Run ``case`` in this process; ``timeout_s`` (SIGALRM, main thread only) turns a hang into an outcome."""
    for name, text in case.files.items():
        (ctx.tmp / name).write_text(ctx.fill(text))
    cleanup = case.setup(ctx) if case.setup is not None else None
    if timeout_s:
        def alarm(signum: int, frame: Any) -> None:
            raise _Hang()

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return _run(case, ctx)
    except _Hang:
        return Outcome("hang", f"still running after {timeout_s}s")
    finally:
        if timeout_s:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        if callable(cleanup):
            cleanup()


def read_only_dir(name: str, study: str | None = None) -> Callable[[Context], Callable[[], None]]:
    """A case's setup: ``{tmp}/<name>`` made read-only (a read-only bind mount, see tests/mounts.py), holding a
    copy of the recorded study ``study`` if given; it returns the cleanup (the unmount)."""
    def setup(ctx: Context) -> Callable[[], None]:
        from mounts import read_only

        path = ctx.tmp / name
        if study is not None:
            shutil.copytree(ctx.results / study, path / study)
        mounted = read_only(path)
        mounted.__enter__()
        return lambda: mounted.__exit__(None, None, None)
    return setup


def _run(case: Case, ctx: Context) -> Outcome:
    from rltune.errors import RLTuneError
    from rltune.orchestrator.cli import main

    expect = ctx.fill(case.expect)
    if case.call is not None:
        try:
            case.call(ctx)
        except RLTuneError as exc:
            return Outcome("clear" if _clear(expect, str(exc)) else "unclear", f"{type(exc).__name__}: {exc}")
        except _Hang:
            raise
        except Exception as exc:  # noqa: BLE001 - classified, not hidden
            return Outcome("traceback", f"{type(exc).__name__}: {exc}")
        return Outcome("accepted", "returned without an error")
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([ctx.fill(a) for a in case.argv])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    except _Hang:
        raise
    except BaseException as exc:  # noqa: BLE001 - a traceback the user would see
        return Outcome("traceback", f"{type(exc).__name__}: {exc}")
    text = err.getvalue()
    if code == 0:
        return Outcome("accepted", f"exit 0: {out.getvalue()[-300:]}")
    if code != 2 or "Traceback" in text or text.count("error:") != 1:
        return Outcome("traceback" if "Traceback" in text else "unclear", f"exit {code}: {text[-500:]}")
    return Outcome("clear" if _clear(expect, text) else "unclear", text.strip())


_REPEATED_GOT = re.compile(r"(\(got [^()]*\))\s*\1")


def _clear(expect: str, message: str) -> bool:
    return expect in message and "Value error, " not in message and not _REPEATED_GOT.search(message)
