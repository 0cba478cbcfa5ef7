"""A run's metric as its latest values per step, the way MLflow ranks them (a step run again is logged again)."""

from __future__ import annotations

from typing import Any


def latest_by_step(client: Any, run_id: str, key: str) -> dict[int, float]:
    """``{step: value}`` of ``key``'s latest entry (by timestamp) at each step of the run.

    Two entries of one step with one timestamp would leave MLflow to rank
    them by value: a step logged again must be logged later.
    """
    latest: dict[int, tuple[int, float]] = {}
    for m in client.get_metric_history(run_id, key):
        held = latest.get(m.step)
        assert held is None or held[0] != m.timestamp, f"{key} at step {m.step}: two values at one timestamp"
        if held is None or m.timestamp > held[0]:
            latest[m.step] = (m.timestamp, m.value)
    return {step: value for step, (_, value) in sorted(latest.items())}
