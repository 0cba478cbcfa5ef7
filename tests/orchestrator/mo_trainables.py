"""Function trainables for the multi-objective tests: each reports its config's values, step by step."""

from __future__ import annotations

import time


def objectives(config, reporter):
    """``steps`` iterations of ``reward = a * step``, ``cost = b * step`` (b defaults to a) and ``kl = kl`` (``nan_at``: reward NaN then).

    With ``wait_s``, each iteration after the first sleeps that long (so that other trials get ahead).
    """
    for step in range(1, config.get("steps", 3) + 1):
        if step > 1:
            time.sleep(config.get("wait_s", 0.0))
        reward = float("nan") if step == config.get("nan_at") else config["a"] * step
        reporter(reward=reward, cost=(config.get("b") or config["a"]) * step, kl=config.get("kl", 0.0))
