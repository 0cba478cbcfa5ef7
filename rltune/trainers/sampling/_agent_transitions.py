"""One policy's transitions of a sampling fragment, and their grouping into agent trajectories.

The bookkeeping half of :mod:`rltune.trainers.sampling._agent_rows`: rows as
the policy computed them, transitions as row numbers with summed rewards,
trajectories as lists of transitions, and the packing of trajectories of
different lengths into the time-major ``[T, K]`` columns that one
postprocessing call takes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rltune.trainers.sampling._sample_batch import (
    ACTIONS,
    NEW_OBS,
    OBS,
    REWARDS,
    TERMINATEDS,
    TRUNCATEDS,
    SampleBatch,
)

TrajectoryKey = tuple[int, int, Any]  # (env index, episode number in that env, agent id)
INFOS = "infos"
_NO_INFO: dict[str, Any] = {}  # the info of a transition the env gave none (shared: read only)


class Transitions:
    """One policy's transitions of a fragment, and the agent trajectory each belongs to.

    What the policy computed is kept per step as it came (one chunk of rows
    per forward pass); a transition holds its row number, its summed reward
    and, once complete, its next observation and end flags. Columns are
    built once, at the fragment's end.
    """

    __slots__ = ("chunks", "num_rows", "rows", "rewards", "closes", "trajectories")

    def __init__(self) -> None:
        self.chunks: list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = []
        self.num_rows = 0
        self.rows: list[int] = []
        self.rewards: list[float] = []
        # transition -> (next obs or None for its own obs, terminated, truncated, the env's info for the agent)
        self.closes: dict[int, tuple[np.ndarray | None, bool, bool, Any]] = {}
        self.trajectories: dict[TrajectoryKey, list[int]] = {}

    def add_chunk(self, obs: np.ndarray, actions: np.ndarray, extras: dict[str, np.ndarray]) -> int:
        """Rows of one forward pass; returns the row number of its first."""
        first = self.num_rows
        self.chunks.append((obs, actions, extras))
        self.num_rows += len(obs)
        return first

    def open(self, key: TrajectoryKey, row: int, reward: float = 0.0) -> int:
        """A new transition (the agent acted on ``row``); returns its index."""
        tid = len(self.rows)
        self.rows.append(row)
        self.rewards.append(reward)
        trajectory = self.trajectories.get(key)
        if trajectory is None:
            self.trajectories[key] = [tid]
        else:
            trajectory.append(tid)
        return tid

    def open_rows(self, keys: list[TrajectoryKey], first_row: int) -> int:
        """New transitions, ``keys[k]``'s acting on row ``first_row + k``; returns the first's index (the others follow)."""
        first = len(self.rows)
        self.rows.extend(range(first_row, first_row + len(keys)))
        self.rewards.extend([0.0] * len(keys))
        trajectories = self.trajectories
        for tid, key in enumerate(keys, first):
            trajectory = trajectories.get(key)
            if trajectory is None:
                trajectories[key] = [tid]
            else:
                trajectory.append(tid)
        return first

    def close(self, tid: int, new_obs: np.ndarray | None, terminated: bool, truncated: bool, info: Any = _NO_INFO) -> None:
        """The agent observed again (``new_obs``, with the env's ``info`` for it), or left or its episode ended (None: its own obs stands in)."""
        self.closes[tid] = (new_obs, terminated, truncated, info)

    def drop_episode(self, env_index: int, number: int) -> None:
        """Forget the trajectories of episode ``number`` of env ``env_index`` (dropped: nan_policy); their rows stay, unused."""
        for key in [k for k in self.trajectories if k[:2] == (env_index, number)]:
            del self.trajectories[key]

    def computed(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Every row of the fragment: (obs, actions, extras), concatenated."""
        obs = np.concatenate([c[0] for c in self.chunks])
        actions = np.concatenate([c[1] for c in self.chunks])
        extras = {name: np.concatenate([c[2][name] for c in self.chunks]) for name in self.chunks[0][2]}
        return obs, actions, extras

    def columns(self, computed: tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Every transition as flat column arrays (open ones as if cut, with their own obs as next obs)."""
        obs_rows, action_rows, extra_rows = computed
        rows = np.asarray(self.rows, dtype=np.int64)
        obs = obs_rows[rows]
        new_obs = obs.copy()
        terminateds = np.zeros(len(rows), dtype=bool)
        truncateds = np.zeros(len(rows), dtype=bool)
        closes = self.closes
        infos = np.fromiter((closes[tid][3] if tid in closes else _NO_INFO for tid in range(len(rows))), dtype=object, count=len(rows))
        if self.closes:
            tids = np.fromiter(self.closes, dtype=np.int64, count=len(self.closes))
            closes = list(self.closes.values())
            terminateds[tids] = [c[1] for c in closes]
            truncateds[tids] = [c[2] for c in closes]
            observed = [(tid, c[0]) for tid, c in self.closes.items() if c[0] is not None]
            if observed:  # rows of one preprocessor: one shape (np.array gathers them faster than np.stack)
                new_obs[[t for t, _ in observed]] = np.array([o for _, o in observed])
        columns = {
            OBS: obs,
            ACTIONS: action_rows[rows],
            REWARDS: np.asarray(self.rewards, dtype=np.float32),
            NEW_OBS: new_obs,
            TERMINATEDS: terminateds,
            TRUNCATEDS: truncateds,
            INFOS: infos,
        }
        for name, values in extra_rows.items():
            columns[name] = values[rows]
        return columns

    def closed_trajectories(self) -> dict[TrajectoryKey, list[int]]:
        """Each trajectory's complete transitions, in time order (an open one is always last)."""
        out = {}
        for key, tids in self.trajectories.items():
            done = tids if tids[-1] in self.closes else tids[:-1]
            if done:
                out[key] = done
        return out


def pack_trajectories(lengths: list[int]) -> tuple[np.ndarray, list[list[int]]]:
    """Place trajectories end to end into as few columns of the longest one's length as first-fit finds.

    Returns ``(slots, columns)``: ``columns[c]`` lists the trajectories in
    column ``c`` in order; ``slots`` is ``[T, C]`` of (trajectory, step)
    row numbers into the concatenation of all trajectories, -1 for padding.
    """
    order = sorted(range(len(lengths)), key=lambda k: -lengths[k])
    height = lengths[order[0]]
    columns: list[list[int]] = []
    used: list[int] = []
    for k in order:
        for c, filled in enumerate(used):
            if filled + lengths[k] <= height:
                columns[c].append(k)
                used[c] += lengths[k]
                break
        else:
            columns.append([k])
            used.append(lengths[k])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    slots = np.full((height, len(columns)), -1, dtype=np.int64)
    for c, members in enumerate(columns):
        row = 0
        for k in members:
            slots[row:row + lengths[k], c] = np.arange(starts[k], starts[k] + lengths[k])
            row += lengths[k]
    return slots, columns



def in_trajectory_order(
    columns: SampleBatch, trajectories: dict[TrajectoryKey, list[int]]
) -> tuple[SampleBatch, list[TrajectoryKey], list[int]]:
    """Columns reordered trajectory after trajectory, each one's last step marked truncated if the fragment cut it."""
    keys = list(trajectories)
    order = np.concatenate([trajectories[k] for k in keys])
    flat = {name: column[order] for name, column in columns.items()}
    lengths = [len(trajectories[k]) for k in keys]
    ends = np.cumsum(lengths) - 1
    cut = ~(flat[TERMINATEDS][ends] | flat[TRUNCATEDS][ends])
    flat[TRUNCATEDS][ends[cut]] = True  # bootstrap from the next obs, as at a single-agent fragment's end
    return flat, keys, lengths
