"""``rltune rollout`` of checkpoint directories that are missing, empty, corrupt or of another format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

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


def _edited(name: str, edit: Callable[[dict], None], *, reseal: bool = True) -> Callable[[Context], None]:
    """A copy of the checkpoint whose metadata ``edit`` changes; ``reseal``: its checksum recomputed to match."""

    def setup(ctx: Context) -> None:
        from rltune.trainers import _checkpoint as ckpt

        _copy(ctx, name)
        meta_file = ctx.tmp / name / "rltune_checkpoint.json"
        meta = json.loads(meta_file.read_text())
        edit(meta)
        if reseal:
            meta["metadata_sha256"] = ckpt.metadata_checksum(meta)
        meta_file.write_text(json.dumps(meta))

    return setup


def _config(**changes: Any) -> Callable[[dict], None]:
    def edit(meta: dict) -> None:
        meta["config"].update(changes)

    return edit


def _flipped_byte(ctx: Context) -> None:
    path = Path(_copy(ctx, "flipped")) / "state.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _nan_weights(ctx: Context) -> None:
    """A NaN in a weight tensor of state.pt, checksums recomputed as whoever edits the files would."""
    import torch

    from rltune.trainers import _checkpoint as ckpt

    path = Path(_copy(ctx, "nanweights"))
    state = torch.load(path / "state.pt", weights_only=True)
    state["policies"]["default_policy"]["pi_head.bias"][0] = float("nan")
    torch.save(state, path / "state.pt")
    meta = json.loads((path / "rltune_checkpoint.json").read_text())
    meta["checksums"]["state.pt"] = ckpt._sha256(path / "state.pt")
    meta["metadata_sha256"] = ckpt.metadata_checksum(meta)
    (path / "rltune_checkpoint.json").write_text(json.dumps(meta))


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
    Case("checkpoint future version", "has format version 99, this rltune reads versions 1, 2", ("rollout", "{tmp}/future"),
         setup=_future_version),
    Case("trial dir without checkpoints", "is not an rltune checkpoint", ("rollout", "{tmp}/trial_without_checkpoints"),
         setup=_empty_trial),
    # -- a checkpoint is data: it may name only envs and callbacks of the expected kinds --------------
    Case("checkpoint env names Popen", "config key 'env' is 'subprocess:Popen'", ("rollout", "{tmp}/popen"),
         setup=_edited("popen", _config(env="subprocess:Popen", env_config={"args": ["true"]}))),
    Case("checkpoint env names a function", "config key 'env'", ("rollout", "{tmp}/envfn"),
         setup=_edited("envfn", _config(env="os.path:join"))),
    Case("checkpoint callbacks name os.system", "config key 'callbacks'", ("rollout", "{tmp}/cbsystem"),
         setup=_edited("cbsystem", _config(callbacks="os:system"))),
    Case("checkpoint env_task_fn", "env_task_fn", ("rollout", "{tmp}/taskfn"),
         setup=_edited("taskfn", _config(env_task_fn="os:system"))),
    Case("checkpoint evaluation callbacks", "callbacks", ("rollout", "{tmp}/evalcb"),
         setup=_edited("evalcb", _config(evaluation_config={"callbacks": "os:system"}))),
    Case("checkpoint edited without its checksum", "checksum", ("rollout", "{tmp}/unsealed"),
         setup=_edited("unsealed", _config(gamma=0.5), reseal=False)),
    Case("checkpoint flipped byte in state.pt", "state.pt", ("rollout", "{tmp}/flipped"), setup=_flipped_byte),
    Case("checkpoint v2 without checksums", "checksum", ("rollout", "{tmp}/nochecksums"),
         setup=_edited("nochecksums", lambda meta: meta.pop("checksums"))),
    Case("checkpoint NaN weights (resealed)", "policy 'default_policy', weight tensor 'pi_head.bias' holds NaN or inf",
         ("rollout", "{tmp}/nanweights"), setup=_nan_weights),
    Case("rollout --env override unknown", "NoSuchEnv-v0", ("rollout", "{checkpoint}", "--env", "NoSuchEnv-v0")),
    Case("rollout --config override bad key", "lrr", ("rollout", "{checkpoint}", "--config", '{"lrr": 1}')),
]
