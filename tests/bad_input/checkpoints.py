"""``rltune rollout`` of checkpoint directories that are missing, empty, corrupt or of another format."""

from __future__ import annotations

import json
import shutil

from .harness import Case, Context


def _copy(ctx: Context, name: str) -> str:
    target = ctx.tmp / name
    shutil.copytree(ctx.checkpoint, target)
    return str(target)


def _metadata(ctx: Context, name: str, text: str) -> None:
    (ctx.tmp / name / "rltune_checkpoint.json").write_text(text)


def _empty(ctx: Context) -> None:
    (ctx.tmp / "empty").mkdir()


def _corrupt_json(ctx: Context) -> None:
    _copy(ctx, "corrupt")
    _metadata(ctx, "corrupt", "{not json")


def _no_version(ctx: Context) -> None:
    _copy(ctx, "noversion")
    _metadata(ctx, "noversion", json.dumps({"algorithm": "PPO"}))


def _future_version(ctx: Context) -> None:
    _copy(ctx, "future")
    meta = json.loads((ctx.checkpoint / "rltune_checkpoint.json").read_text())
    _metadata(ctx, "future", json.dumps({**meta, "format_version": 99}))


def _list_metadata(ctx: Context) -> None:
    _copy(ctx, "listmeta")
    _metadata(ctx, "listmeta", "[1, 2]")


def _empty_trial(ctx: Context) -> None:
    (ctx.tmp / "trial_without_checkpoints").mkdir()
    (ctx.tmp / "trial_without_checkpoints" / "params.json").write_text("{}")


def _binary_metadata(ctx: Context) -> None:
    _copy(ctx, "binary")
    (ctx.tmp / "binary" / "rltune_checkpoint.json").write_bytes(b"\xff\xfe\x00garbage")


CASES: list[Case] = [
    Case("checkpoint missing", "checkpoint '{tmp}/nope' does not exist", ("rollout", "{tmp}/nope")),
    Case("checkpoint is a file", "is not a directory", ("rollout", "{afile}")),
    Case("checkpoint empty dir", "'{tmp}/empty' is not an rltune checkpoint: rltune_checkpoint.json is missing",
         ("rollout", "{tmp}/empty"), setup=_empty),
    Case("checkpoint corrupt json", "rltune_checkpoint.json is corrupt", ("rollout", "{tmp}/corrupt"), setup=_corrupt_json),
    Case("checkpoint binary metadata", "rltune_checkpoint.json is corrupt", ("rollout", "{tmp}/binary"),
         setup=_binary_metadata),
    Case("checkpoint no format version", "rltune_checkpoint.json has no format_version", ("rollout", "{tmp}/noversion"),
         setup=_no_version),
    Case("checkpoint metadata a list", "rltune_checkpoint.json has no format_version", ("rollout", "{tmp}/listmeta"),
         setup=_list_metadata),
    Case("checkpoint future version", "has format version 99, this rltune reads version 1", ("rollout", "{tmp}/future"),
         setup=_future_version),
    Case("trial dir without checkpoints", "is not an rltune checkpoint", ("rollout", "{tmp}/trial_without_checkpoints"),
         setup=_empty_trial),
]
