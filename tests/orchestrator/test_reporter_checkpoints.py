"""Function trainables' checkpoints (Reporter.checkpoint_dir): replaced atomically, crash leftovers recovered."""

from __future__ import annotations

import os

from rltune import _atomic_dir
from rltune.orchestrator._reporter import Reporter, latest_checkpoint


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_checkpoint_dir_replaces_atomically_and_recovers_what_a_crash_left(tmp_path):
    reporter = Reporter(None, trial_dir=tmp_path)
    try:
        reporter(score=1.0)
        with reporter.checkpoint_dir() as d:
            open(os.path.join(d, "state"), "w").write("first")
            latest_checkpoint(tmp_path)  # a scan while this process writes: its directory is left alone
            assert os.path.isdir(d)
        with reporter.checkpoint_dir() as d:  # the same iteration again: replaces the first
            open(os.path.join(d, "state"), "w").write("second")
        final = tmp_path / "checkpoint_000001"
        assert (final / "state").read_text() == "second"
        assert sorted(os.listdir(tmp_path)) == ["checkpoint_000001", "result.json"]

        # What a writer killed between its two renames leaves (where no atomic swap exists): nothing under the name.
        pid = _dead_pid()
        os.rename(final, tmp_path / f".checkpoint_000001.old-{_atomic_dir._HOST}-{pid}-0123abcd")
        (tmp_path / f".checkpoint_000001.tmp-{_atomic_dir._HOST}-{pid}-4567abcd").mkdir()
        assert latest_checkpoint(tmp_path) == (1, str(final))
        assert (final / "state").read_text() == "second"
        assert sorted(os.listdir(tmp_path)) == ["checkpoint_000001", "result.json"]
    finally:
        reporter.close()


def test_a_result_observer_lacking_close_is_refused_when_the_reporter_is_made(tmp_path):
    """A result observer is checked when registered, not when the trial's end first calls its close()."""
    import pytest

    class ResultOnly:
        def result(self, result):
            pass

    with pytest.raises(TypeError, match=r"ResultOnly cannot be a result observer: it lacks close"):
        Reporter(None, trial_dir=tmp_path, observers=[ResultOnly()])
