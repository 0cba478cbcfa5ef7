"""Trainer callbacks for the PBT study tests (imported by the trial processes by name)."""

from rltune.callbacks import DefaultCallbacks


class FailingMember(DefaultCallbacks):
    """Trial 1 raises from its third iteration on: an errored PBT member (its seed may be another's after an exploit)."""

    def on_train_result(self, *, trainer, result, **kwargs):
        if str(trainer.logdir).endswith("trial_00001") and result["training_iteration"] >= 3:
            raise RuntimeError("member 1 errors")


class RankedMembers(DefaultCallbacks):
    """The study's metric ``member_rank``: trial 0 always ranks on top, so trial 1 exploits it by its second
    interval, whatever order the members reach each interval in (warm-started members run in step)."""

    def on_train_result(self, *, trainer, result, **kwargs):
        result["member_rank"] = 1.0 if str(trainer.logdir).endswith("trial_00000") else 0.0


class SlowRankedMembers(RankedMembers):
    """:class:`RankedMembers` whose iterations take a second: a member outlasts another worker's start-up, so each
    of two workers takes one member (one worker would otherwise run both, one after the other)."""

    def on_train_result(self, *, trainer, result, **kwargs):
        import time

        super().on_train_result(trainer=trainer, result=result, **kwargs)
        time.sleep(1.0)


class KillOrchestratorAfterExploit(RankedMembers):
    """Once a trial of the study has exploited another (its trial dir holds ``exploited``), SIGKILL the orchestrator.

    ``kill -9`` of the study while its population is mid-schedule; the marker
    ``killed`` (in the results dir) makes it happen once.
    """

    def on_train_result(self, *, trainer, result, **kwargs):
        import os
        import signal
        import time
        from pathlib import Path

        trial_dir = Path(trainer.logdir)
        super().on_train_result(trainer=trainer, result=result, **kwargs)
        marker = trial_dir.parent / "killed"
        seen = trial_dir / "configs.txt"
        lrs = set(seen.read_text().split()) if seen.exists() else set()
        lrs.add(repr(trainer.config["lr"]))
        seen.write_text("\n".join(sorted(lrs)))
        if len(lrs) > 1 and not marker.exists() and result["training_iteration"] >= 2:
            marker.write_text("x")
            from .trainables import orchestrator_pid  # past the warm template, if any

            os.kill(orchestrator_pid(), signal.SIGKILL)
            time.sleep(5)  # the trial process exits when it sees its parent gone


class UnevenRankedMembers(RankedMembers):
    """:class:`RankedMembers` whose trial 2 takes 0.3 s more per iteration than the others, each result stamped with
    its wall time (``wall``): the synchronous PBT test reads who trained on before whom."""

    def on_train_result(self, *, trainer, result, **kwargs):
        import time

        super().on_train_result(trainer=trainer, result=result, **kwargs)
        if str(trainer.logdir).endswith("trial_00002"):
            time.sleep(0.3)
        result["wall"] = time.time()


class OvertakingMember(RankedMembers):
    """:class:`RankedMembers` until iteration 5, when trial 1 (which exploited trial 0 by then) takes the top:
    the study's best is a member that went through exploits."""

    def on_train_result(self, *, trainer, result, **kwargs):
        super().on_train_result(trainer=trainer, result=result, **kwargs)
        if str(trainer.logdir).endswith("trial_00001") and result["training_iteration"] >= 5:
            result["member_rank"] = 2.0


class SlowFailingMember(SlowRankedMembers):
    """:class:`SlowRankedMembers` whose trial 1 raises at its third iteration: an errored member of a shared study."""

    def on_train_result(self, *, trainer, result, **kwargs):
        super().on_train_result(trainer=trainer, result=result, **kwargs)
        if str(trainer.logdir).endswith("trial_00001") and result["training_iteration"] >= 3:
            raise RuntimeError("member 1 errors")
