"""A trial in its own process: started with ``subprocess``, driven over a socket by the orchestrator.

The orchestrator (:mod:`rltune.orchestrator._trial_host`) starts
``python -c "...; trial_entry(fd)"`` with a connected socket, sends
``sys.path`` and a cloudpickled :class:`~rltune._ipc.TrialInit` (the trainable,
its config, the trial directory, the checkpoint to restore). The trial then sends, in order
(the messages of :mod:`rltune._ipc`):

- ``Result(result)`` after every iteration, and waits for
  ``Continue(want_checkpoint)``, ``Stop(reason, want_checkpoint)`` or (PBT)
  ``Exploit(checkpoint, config)``: restore another trial's checkpoint and
  train on with the new config (:func:`exploit_into`);
- ``CheckpointSaved(path, iteration)`` when a checkpoint is committed;
- ``Done()`` when the trainable returns or was stopped, or
  ``Failed(traceback, kind)`` when it raised (``kind``: the disk error
  behind it, e.g. ``"no_space"``); then it exits.

A crash (segfault, ``os._exit``) ends the process without ``Done``: the
orchestrator sees the socket close and the exit code. Subprocess rather
than multiprocessing: the user's script is never re-imported, so it needs
no ``if __name__ == "__main__"`` guard. The trial ignores SIGINT (the
orchestrator turns Ctrl-C into a "stop with checkpoint" decision) and dies
with the orchestrator, SIGKILLed or not (:mod:`rltune._parent_death`, armed
by :func:`rltune._ipc.spawn`); its rollout workers die with it in turn.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import traceback
from typing import Any

from rltune._disk import disk_kind
from rltune._imports import import_object
from rltune._ipc import Channel, ChannelClosed, Done, Exploit, Failed, TrialInit
from rltune.env._shipping import install_env_registrations
from rltune.orchestrator import _reporter
from rltune.orchestrator._child import receive_init
from rltune.orchestrator._reporter import Reporter, TrialStopped, truncate_results


def trial_entry(fd: int) -> None:
    """Entry point of a trial process: read sys.path and the init payload, run the trainable, report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn, payload = receive_init(fd)
    try:
        import cloudpickle

        init = cloudpickle.loads(payload)
    except BaseException:
        _send(conn, Failed("the trial could not be unpickled:\n" + traceback.format_exc()))
        os._exit(1)
    if not isinstance(init, TrialInit):
        _send(conn, Failed(f"the trial's init payload is a {type(init).__name__}, not a rltune._ipc.TrialInit"))
        os._exit(1)
    code = run(conn, init)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(conn: Channel | None, init: TrialInit) -> int:
    """Run one trial attempt; the exit status of the process (0: done or stopped, 1: the trainable raised).

    A failure is sent as ``Failed`` with its traceback and, when a disk error
    caused it (a full disk, a read-only one), its kind (:func:`rltune._disk.disk_kind`).
    """
    if init.seed_group is not None:  # seeds_per_trial: this process runs the seeds and reports their aggregate
        from rltune.orchestrator._seed_group import run_group

        return run_group(conn, init)
    restore = init.restore
    start_iteration = int(init.start_iteration or 0)
    try:
        truncate_results(init.trial_dir, start_iteration if restore else 0)
        reporter = Reporter(
            conn,
            trial_dir=init.trial_dir,
            trial_number=init.trial_number,
            seed=init.seed,
            restored_checkpoint=restore,
            start_iteration=start_iteration if restore else 0,
            checkpoint_freq=init.checkpoint_freq,
            keep_checkpoints_num=init.keep_checkpoints_num,
            observers=_observers(init),
            config=init.config,
        )
    except BaseException as exc:
        _send(conn, Failed(traceback.format_exc(), disk_kind(exc)))
        return 1
    _reporter._current = reporter
    _seed_everything(init.seed)
    try:
        install_env_registrations(init.env_registrations or {})
        if init.kind == "trainer":
            run_trainer(init.ref, init.config, reporter)
        else:
            fn = import_object(init.ref, "run") if isinstance(init.ref, str) else init.ref
            final = fn(init.config, reporter) if _takes_reporter(fn) else fn(init.config)
            if isinstance(final, dict):  # a returned dict is the last result (Ray's function API)
                reporter(**final)
    except TrialStopped:
        pass
    except BaseException as exc:
        _send(conn, Failed(traceback.format_exc(), disk_kind(exc)))
        _close(reporter)
        return 1
    try:
        reporter.close()
    except BaseException as exc:  # result.json's last flush, a TensorBoard file: on a full disk too
        _send(conn, Failed(traceback.format_exc(), disk_kind(exc)))
        return 1
    _send(conn, Done())
    return 0


def _close(reporter: Reporter) -> None:
    """Close the reporter of a trial that failed; its own error would hide the first one."""
    try:
        reporter.close()
    except BaseException:  # noqa: BLE001 - the failure is reported already
        pass


def _observers(init: TrialInit) -> list[Any]:
    """The reporter's observers: the TensorBoard writer when asked (imported only then: it imports numpy)."""
    if not init.tensorboard:
        return []
    from rltune.orchestrator._tensorboard import open_trial_writer

    return [open_trial_writer(init.trial_dir)]


def run_trainer(ref: Any, config: dict[str, Any], reporter: Reporter) -> None:
    """A rltune Trainer (a name or class) as a function trainable: build it and run :func:`train_loop`."""
    from rltune.trainers import get_trainer_class

    cls = get_trainer_class(ref) if isinstance(ref, str) else ref
    train_loop(cls(config=config, results_dir=str(reporter.trial_dir)), reporter)


def train_loop(trainer: Any, reporter: Reporter) -> None:
    """The loop of a Trainer's trial: train, report, checkpoint when due or asked; stops the trainer at the end.

    One loop for a study's trial process and ``rltune train`` alike: they
    differ only in the reporter's ``decide`` (the orchestrator's answer, or
    :class:`rltune.orchestrator._trial.LocalDecider`). It ends by raising
    :class:`TrialStopped` (after the checkpoint the stop asked for) or the
    trainer's error.
    """
    try:
        trainer.logdir = reporter.trial_dir
        if reporter.restored_checkpoint:
            trainer.restore(reporter.restored_checkpoint)
        while True:
            result = trainer.train()
            try:
                reporter(**result)
            except TrialStopped as stop:
                if stop.checkpoint:
                    reporter.save_trainer(trainer)
                raise
            if reporter.should_checkpoint:
                reporter.save_trainer(trainer)
            exploit = reporter.take_exploit()
            if exploit is not None:
                trainer = exploit_into(trainer, exploit, reporter)
                reporter.go_on_from(trainer.iteration)
                reporter.save_trainer(trainer)  # what a resume or retry starts from, and a source for others
    finally:
        trainer.stop()


def exploit_into(trainer: Any, exploit: Exploit, reporter: Reporter) -> Any:
    """PBT's exploit: a trainer of the new config, restored from the other trial's checkpoint (the old one stopped).

    The restore brings weights, optimizer state, observation filters,
    exploration and callback state, counters; the config is the new one's,
    so its explored hyperparameters apply (not the checkpoint's: ray#62173).
    A checkpoint that cannot be restored raises here (the trial fails and
    is retried or recorded, the study goes on).
    """
    new = type(trainer)(config=exploit.config, results_dir=str(reporter.trial_dir))
    try:
        new.logdir = reporter.trial_dir
        new.restore(exploit.checkpoint)
    except BaseException:
        new.stop()
        raise
    trainer.stop()
    return new


def _takes_reporter(fn: Any) -> bool:
    import inspect

    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return True
    return len(params) >= 2


def _seed_everything(seed: int | None) -> None:
    """Seed Python's RNG, and numpy's and torch's global RNGs when the trainable imported them."""
    if seed is None:
        return
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def _send(conn: Channel | None, message: Done | Failed) -> None:
    if conn is None:
        return
    try:
        conn.send(message)
    except ChannelClosed:
        pass

