"""``rltune rollout`` of checkpoint directories that are missing, empty, corrupt or of another format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

from .harness import Case, Context


def _copy(ctx: Context, name: str, source: str | None = None) -> str:
    target = ctx.tmp / name
    shutil.copytree(ctx.tmp / source if source else ctx.checkpoint, target)
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


def _edited(name: str, edit: Callable[[dict], None], *, reseal: bool = True,
            source: str | None = None) -> Callable[[Context], None]:
    """A copy of the checkpoint (or of ``source`` under ctx.tmp) whose metadata ``edit`` changes; ``reseal``: its
    checksum recomputed to match."""

    def setup(ctx: Context) -> None:
        from rltune.trainers.checkpoints import _checkpoint as ckpt

        _copy(ctx, name, source)
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


PLANTED = "rltune_census_planted"  # a module planted beside the checkpoint; never imported (it would write a file)
UNTRUSTED = f"is '{PLANTED}:Thing', whose module '{PLANTED}' is neither imported in this process nor trusted"


def _planted(name: str, edit: Callable[[dict], None]) -> Callable[[Context], None]:
    """``_edited`` with a module ``PLANTED`` written into the checkpoint directory and its parent."""
    edited = _edited(name, edit)

    def setup(ctx: Context) -> None:
        edited(ctx)
        for where in (ctx.tmp, ctx.tmp / name):
            (where / f"{PLANTED}.py").write_text(f"open({str(ctx.tmp / 'IMPORTED')!r}, 'w').close()\n"
                                                 "import gymnasium\nclass Thing(gymnasium.Env): pass\n")

    return setup


def _meta(**changes: Any) -> Callable[[dict], None]:
    def edit(meta: dict) -> None:
        meta.update(changes)

    return edit


def _with_key(key: str, call: Callable[[Context], Any]) -> Callable[[Context], Any]:
    """``call`` with $RLTUNE_CHECKPOINT_KEY set to ``key`` (put back after)."""
    import os

    def run(ctx: Context) -> Any:
        before = os.environ.get("RLTUNE_CHECKPOINT_KEY")
        os.environ["RLTUNE_CHECKPOINT_KEY"] = key
        try:
            return call(ctx)
        finally:
            if before is None:
                del os.environ["RLTUNE_CHECKPOINT_KEY"]
            else:
                os.environ["RLTUNE_CHECKPOINT_KEY"] = before

    return run


def _open(name: str) -> Callable[[Context], Any]:
    def call(ctx: Context) -> Any:
        from rltune.trainers import Trainer

        Trainer.from_checkpoint(ctx.tmp / name, results_dir=ctx.tmp).stop()

    return call


def _signed_then_edited(ctx: Context) -> None:
    """A checkpoint signed with key 'team' ('signed'), and a copy edited with its checksum recomputed, as by someone
    without the key ('signed_edited')."""
    from rltune.trainers import Trainer

    with Trainer.from_checkpoint(ctx.checkpoint, results_dir=ctx.tmp) as trainer:
        _with_key("team", lambda ctx: trainer.save(ctx.tmp / "signed"))(ctx)
    _edited("signed_edited", _config(gamma=0.5), source="signed")(ctx)


def _multi_agent_into_single(ctx: Context) -> None:
    from rltune.trainers import PPO
    from trainers.multi_agent_envs import TurnGame

    tiny = {"train_batch_size": 16, "rollout_fragment_length": 8, "sgd_minibatch_size": 8, "model": {"fcnet_hiddens": [8]}}
    policies = {"pol_x", "pol_o"}
    multiagent = {"policies": policies, "policy_mapping_fn": _by_player}
    with PPO(config={"env": TurnGame, "multiagent": multiagent, **tiny}, results_dir=ctx.tmp) as ma:
        path = ma.save(ctx.tmp / "multi")
    with PPO(config={"env": "CartPole-v1", **tiny}, results_dir=ctx.tmp) as single:
        single.restore(path)


def _by_player(agent_id: str, *args: Any, **kwargs: Any) -> str:
    return f"pol_{agent_id}"


def _flipped_byte(ctx: Context) -> None:
    path = Path(_copy(ctx, "flipped")) / "state.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _nan_weights(ctx: Context) -> None:
    """A NaN in a weight tensor of state.pt, checksums recomputed as whoever edits the files would."""
    import torch

    from rltune.trainers.checkpoints import _checkpoint as ckpt

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
    # -- opening a checkpoint imports nothing it names by itself (issue 23) --------------------------------
    Case("checkpoint env a planted module", f"config key 'env' {UNTRUSTED}", ("rollout", "{tmp}/plantenv"),
         setup=_planted("plantenv", _config(env=f"{PLANTED}:Thing"))),
    Case("checkpoint callbacks a planted module", f"config key 'callbacks' {UNTRUSTED}", ("rollout", "{tmp}/plantcb"),
         setup=_planted("plantcb", _config(callbacks=f"{PLANTED}:Thing"))),
    Case("checkpoint evaluation env a planted module", f"config key 'evaluation_config.env' {UNTRUSTED}",
         ("rollout", "{tmp}/planteval"), setup=_planted("planteval", _config(evaluation_config={"env": f"{PLANTED}:Thing"}))),
    Case("checkpoint policy_class a planted module", f"config key 'multiagent.policies.p0.policy_class' {UNTRUSTED}",
         ("rollout", "{tmp}/plantpol"),
         setup=_planted("plantpol", _config(multiagent={"policies": {"p0": {"policy_class": f"{PLANTED}:Thing"}}}))),
    Case("checkpoint algorithm a planted module", f"metadata field 'algorithm' {UNTRUSTED}", ("rollout", "{tmp}/plantalgo"),
         setup=_planted("plantalgo", _meta(algorithm=f"{PLANTED}:Thing"))),
    Case("checkpoint env names an unimported stdlib module", "whose module 'this' is neither imported",
         ("rollout", "{tmp}/this"), setup=_edited("this", _config(env="this:Env"))),
    Case("checkpoint RLlib alias policy_mapping_fn", "saved config: policy_mapping_fn", ("rollout", "{tmp}/alias"),
         setup=_edited("alias", _config(policy_mapping_fn=f"{PLANTED}:Thing"))),
    Case("checkpoint RLlib alias policies without multiagent", f"config key 'multiagent.policies.p0.policy_class' {UNTRUSTED}",
         ("rollout", "{tmp}/alias2"), setup=_edited("alias2", lambda meta: (
             meta["config"].pop("multiagent"), meta["config"].update(policies={"p0": {"policy_class": f"{PLANTED}:Thing"}})))),
    Case("rollout --trust not a module name", "invalid --trust: 'a b' is not a module or package name",
         ("rollout", "{checkpoint}", "--trust", "a b")),
    Case("checkpoint unsigned with a key set", "is not signed; RLTUNE_CHECKPOINT_KEY is set",
         call=_with_key("team", lambda ctx: _open("unsigned")(ctx)), setup=lambda ctx: _copy(ctx, "unsigned")),
    Case("checkpoint signed then edited", "signed with another key or edited by someone without the key",
         call=_with_key("team", _open("signed_edited")), setup=_signed_then_edited),
    Case("checkpoint signed with another key", "signed with another key",
         call=_with_key("other", _open("signed")), setup=_signed_then_edited),
    Case("multi-agent checkpoint into a single-agent trainer", "of a multi-agent config; this PPO is single-agent",
         call=_multi_agent_into_single),
    Case("checkpoint NaN weights (resealed)", "policy 'default_policy', weight tensor 'pi_head.bias' holds NaN or inf",
         ("rollout", "{tmp}/nanweights"), setup=_nan_weights),
    Case("rollout --env override unknown", "NoSuchEnv-v0", ("rollout", "{checkpoint}", "--env", "NoSuchEnv-v0")),
    Case("rollout --config override bad key", "lrr", ("rollout", "{checkpoint}", "--config", '{"lrr": 1}')),
]
