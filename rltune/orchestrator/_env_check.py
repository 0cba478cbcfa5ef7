"""A study's env, built and checked once before its first trial, in a short-lived child process.

An unknown env id, a module that is missing or fails on import, a creator
that raises, or an env that breaks the gymnasium API would otherwise fail
every trial of the study. :func:`check_study_envs` builds one env of each
distinct ``(env, env_config)`` the study's search space can produce (each
value of a grid / choice of envs) with the trainer's own code
(``rltune.env._build.build_env``, gymnasium's env checker unless
``disable_env_checking``) and raises the error a trial would have hit.
A multi-agent env is also checked against the config's ``multiagent``
block as a rollout worker checks it: policies configured for it (and none
for a single-agent env), each of its agents mapped to one of them when an
episode starts, each with its spaces.

The child process (like a trial's) keeps the user's env code out of the
orchestrator: an env that segfaults or hangs cannot take the study down.
Registrations made in the user's process (``register_env``,
``gymnasium.register``) travel with it, as they do to trials.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from rltune._ipc import ChannelClosed, Done, EnvCheckFailed
from rltune.env._shipping import collect_env_registrations, install_env_registrations
from rltune.errors import ConfigError, EnvError, RLTuneError
from rltune.orchestrator._child import receive_init, send_init, spawn

CHECK_TIMEOUT_S = 300.0  # building and checking every env of the study
ENV_KEYS = ("env", "env_config", "disable_env_checking", "multiagent")


def env_candidates(plan: Any) -> list[dict[str, Any]]:
    """Each distinct env setup of the study: ``env``, ``env_config``, ``check`` and ``when`` (for messages)."""
    from rltune.orchestrator._search_space import representative_configs

    found: dict[str, dict[str, Any]] = {}
    for param, config in representative_configs(plan.config, plan.space):
        env = config.get("env")
        env_config = config.get("env_config") or {}
        check = not config.get("disable_env_checking", False)
        multiagent = _agents_of(config.get("multiagent"))
        key = json.dumps([repr(env), env_config, check, sorted(multiagent["policies"]),
                          repr(multiagent["policy_mapping_fn"]), multiagent["observation_fn"] is None],
                         sort_keys=True, default=repr)
        if key in found:
            continue
        when = ""
        if param is not None and param.split(".")[0] in ENV_KEYS:
            node: Any = config
            for part in param.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            when = f"config.{param} = {node!r}"
        found[key] = {"env": env, "env_config": env_config if isinstance(env_config, dict) else {},
                      "check": check, "when": when, "multiagent": multiagent}
    return list(found.values())


def _agents_of(block: Any) -> dict[str, Any]:
    """What the env check needs of a (validated) ``multiagent`` block: the policies, the mapping and observation functions."""
    block = block if isinstance(block, dict) else {}
    policies = block.get("policies") or {}
    if not isinstance(policies, dict):
        policies = {pid: None for pid in policies}
    return {"policies": policies, "policy_mapping_fn": block.get("policy_mapping_fn"), "observation_fn": block.get("observation_fn")}


def check_study_envs(plan: Any, *, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Build and check each env of a trainer study once; raise :class:`ConfigError` or :class:`EnvError` as a trial would."""
    import cloudpickle

    candidates = env_candidates(plan)
    if not candidates:
        return
    registrations = collect_env_registrations(*(c["env"] for c in candidates))
    for c in candidates:
        try:
            cloudpickle.dumps([c, registrations.get(c["env"]) if isinstance(c["env"], str) else None])
        except Exception as exc:  # an env creator holding a lock or a socket: the trials could not get it either
            raise ConfigError(f"env {c['env']!r} cannot be sent to the trial processes ({type(exc).__name__}: "
                              f"{exc}); register a creator that builds what it needs itself", where="env") from None
    payload = cloudpickle.dumps({"candidates": candidates, "registrations": registrations})
    with tempfile.TemporaryFile() as out:
        proc, conn = spawn("rltune.orchestrator._env_check:check_entry", stdout=out)
        send_init(conn, payload)
        answer: Done | EnvCheckFailed | str = "timeout"
        try:
            if conn.poll(timeout_s):
                answer = conn.receive()
        except ChannelClosed:
            answer = "crashed"
        finally:
            conn.close()
            if proc.poll() is None and answer == "timeout":
                proc.kill()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.seek(0)
        tail = out.read().decode(errors="replace").strip().splitlines()[-5:]
    _raise_for(answer, candidates, proc.returncode, tail, timeout_s)


def _raise_for(answer: Done | EnvCheckFailed | str, candidates: list[dict[str, Any]], code: int | None,
               tail: list[str], timeout_s: float) -> None:
    """Raise what the child's ``answer`` says (or ``"timeout"``, ``"crashed"``: it said nothing)."""
    env = candidates[0]["env"]
    if isinstance(answer, Done):
        return
    if answer == "timeout":
        raise EnvError(f"building and checking env {env!r} took longer than {timeout_s:g} s (before the study's "
                       "first trial): does its constructor or reset() hang?")
    if not isinstance(answer, EnvCheckFailed):  # "crashed"
        output = ("; its last output: " + " | ".join(tail)) if tail else ""
        raise EnvError(f"the process that builds env {env!r} before the study's first trial died (exit code "
                       f"{code}) without a word: a crash in the env's code?{output}")
    kind, when, problems = answer.kind, answer.when, answer.problems
    suffix = f" (when {when})" if when else ""
    if kind == "ConfigError":
        raise ConfigError([f"{p}{suffix}" for p in problems], where=answer.where)
    raise EnvError(f"{problems[0]}{suffix}")


def check_entry(fd: int) -> None:
    """The child process: read ``sys.path`` and the candidates, build and check each env, answer, exit."""
    conn, payload = receive_init(fd)
    answer: Done | EnvCheckFailed = Done()
    try:
        import cloudpickle

        init = cloudpickle.loads(payload)
        install_env_registrations(init["registrations"])
        for candidate in init["candidates"]:
            problem = _build_one(candidate)
            if problem is not None:
                answer = EnvCheckFailed(problem[0], candidate["when"], problem[1], *problem[2:])
                break
    except BaseException as exc:  # noqa: BLE001 - e.g. a creator pickled by value that does not unpickle here
        answer = EnvCheckFailed("EnvError", "", [f"the env could not be sent to a trial process "
                                                 f"({type(exc).__name__}: {exc})"])
    try:
        conn.send(answer)
    except ChannelClosed:
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _build_one(candidate: dict[str, Any]) -> tuple[str, list[str]] | tuple[str, list[str], str] | None:
    """Build (and check) one env as a rollout worker does; ``(error kind, problems[, where])`` or None if it works."""
    from rltune.env._build import build_env
    from rltune.env._registry import resolve_env
    from rltune.trainers import EnvContext

    try:
        spec = resolve_env(candidate["env"])
        env = build_env(spec, EnvContext(candidate["env_config"], worker_index=0), check=candidate["check"])
    except ConfigError as exc:
        return "ConfigError", exc.problems
    except RLTuneError as exc:
        return "EnvError", [str(exc)]
    except Exception as exc:  # noqa: BLE001 - the env's own reset/step raised inside the checker
        return "EnvError", [f"env {candidate['env']!r} raised while it was built and checked: {type(exc).__name__}: {exc}"]
    try:
        return _check_agents(env, spec.name, candidate["multiagent"])
    finally:
        try:
            env.close()
        except Exception:  # noqa: BLE001 - closing is not what this checks
            pass


def _check_agents(env: Any, name: str, multiagent: dict[str, Any]) -> tuple[str, list[str], str] | None:
    """The env's kind and agents against the ``multiagent`` block, with the rollout worker's own checks."""
    from rltune.trainers.policies._default_policy import default_policy_specs, runs_multi_agent, shared_spaces_problem
    from rltune.trainers.policies._policy_spec import PolicyMapping, env_kind_problem, parse_policies, policy_spaces_from_env

    try:
        specs = parse_policies(multiagent["policies"])
        problem = env_kind_problem(env, bool(specs), name)
        if not specs and runs_multi_agent(env, False):  # every agent acts with one shared default_policy
            problem = shared_spaces_problem(env, name)
            specs = default_policy_specs()
        if problem:
            return "ConfigError", [problem], "config"
        if specs:
            mapping = PolicyMapping(multiagent["policy_mapping_fn"], list(specs))
            # observations rewritten by an observation_fn need not fit (the sampler checks what it returns)
            policy_spaces_from_env(env, specs, mapping, None, name, observations=multiagent["observation_fn"] is None)
    except ConfigError as exc:
        return "ConfigError", exc.problems, "config"
    except RLTuneError as exc:
        return "EnvError", [str(exc)], "env"
    except Exception as exc:  # noqa: BLE001 - the user's mapping function or the env's spaces raised
        return "EnvError", [f"env {name!r}: checking its agents against multiagent raised {type(exc).__name__}: {exc}"], "env"
    return None
