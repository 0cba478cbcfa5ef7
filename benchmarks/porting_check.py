"""Porting check: RLlib's own example scripts of one Ray release, ported by renaming imports only, run on rltune.

The scripts come from the ``ray`` wheel on PyPI (``pip download ray==VERSION
--no-deps``; default 2.7.2, the last release whose ``rllib/examples/`` use the
classic API stack). The whole ``rllib/examples/`` tree is extracted as the
package ``rllib_examples`` (the scripts import its ``env/``, ``models/`` and
``policy/`` modules), and every file is ported by :func:`port`, which
rewrites import statements and nothing else, as ``docs/porting-from-rllib.md``
tells a user to:

- ``ray.rllib.examples.X`` -> ``rllib_examples.X`` (the examples' own modules);
- ``ray.rllib.X`` -> ``rltune.X`` and ``ray.X`` -> ``rltune.X``;
- ``import ray`` -> ``import rltune as ray`` (so ``ray.init()`` reads as written).

Each top-level script then runs in its own process, with the small-budget
flags its argparse declares (``--stop-iters``, ``--stop-timesteps``,
``--framework torch``; nothing else is passed), under a timeout. A script
that exits 0 runs; for one that does not, the table gives the first problem:
the exception its traceback ends with.

    .venv/bin/python benchmarks/porting_check.py --markdown           # all scripts, ~15 minutes
    .venv/bin/python benchmarks/porting_check.py --only custom_env,multi_agent_cartpole
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

RAY_VERSION = "2.7.2"
PACKAGE = "rllib_examples"
# What a small run passes, when the script's argparse declares the flag (RLlib's examples' usual flags).
BUDGET_FLAGS = {"--stop-iters": "2", "--stop-timesteps": "2000", "--framework": "torch", "--num-cpus": "2"}


# -- porting -------------------------------------------------------------------------------------
_FROM = re.compile(r"^(\s*from\s+)(ray(?:\.[\w.]+)?)(\s+import\b)", re.MULTILINE)
_IMPORT = re.compile(r"^(\s*import\s+)(.+)$", re.MULTILINE)


def rename_module(name: str) -> str:
    """One dotted module path as the port renames it (``ray.rllib.X`` -> ``rltune.X``, ``ray.X`` -> ``rltune.X``)."""
    if name == "ray.rllib.examples" or name.startswith("ray.rllib.examples."):
        return PACKAGE + name[len("ray.rllib.examples"):]
    if name == "ray.rllib" or name.startswith("ray.rllib."):
        return "rltune" + name[len("ray.rllib"):]
    if name == "ray" or name.startswith("ray."):
        return "rltune" + name[len("ray"):]
    return name


def _rename_import_list(names: str) -> str:
    """``import a.b as c, ray`` with each ray module renamed; a bare ``ray`` is bound to rltune as ``ray``."""
    comment = ""
    if "#" in names:
        names, comment = names.split("#", 1)
        comment = "  #" + comment
    parts = []
    for item in names.split(","):
        module, _, alias = item.strip().partition(" as ")
        new = rename_module(module.strip())
        if new == module.strip():
            parts.append(item.strip())
        elif alias:
            parts.append(f"{new} as {alias.strip()}")
        elif "." not in module:  # import ray -> import rltune as ray
            parts.append(f"{new} as {module.strip()}")
        else:  # import ray.rllib.x: the name bound is ray; bind rltune's module under the same dotted use
            parts.append(new)
    return ", ".join(parts) + comment


def port(source: str) -> str:
    """``source`` with its import statements renamed (see the module's doc); nothing else changes."""
    source = _FROM.sub(lambda m: m.group(1) + rename_module(m.group(2)) + m.group(3), source)
    return _IMPORT.sub(lambda m: m.group(1) + _rename_import_list(m.group(2)), source)


# -- the scripts -----------------------------------------------------------------------------------
def wheel(version: str, cache: Path) -> Path:
    """The ``ray`` wheel of ``version`` (downloaded into ``cache`` once)."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"ray-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", f"ray=={version}", "--no-deps", "-q", "-d", str(cache)],
                       check=True)
        found = sorted(cache.glob(f"ray-{version}-*.whl"))
    return found[0]


def extract(wheel_path: Path, into: Path) -> list[str]:
    """The ported ``rllib/examples`` tree as package ``rllib_examples`` under ``into``; the top-level scripts' names."""
    prefix = "ray/rllib/examples/"
    scripts = []
    with zipfile.ZipFile(wheel_path) as archive:
        for name in archive.namelist():
            if not name.startswith(prefix) or not name.endswith(".py"):
                continue
            relative = name[len(prefix):]
            target = into / PACKAGE / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(port(archive.read(name).decode("utf-8")))
            if "/" not in relative and relative != "__init__.py":
                scripts.append(relative[:-3])
    for directory in (into / PACKAGE).rglob("*"):  # the wheel's sub-packages may lack an __init__
        if directory.is_dir() and not (directory / "__init__.py").exists():
            (directory / "__init__.py").write_text("")
    return sorted(scripts)


# The first problem's owner, by pattern (first match): which issue's feature a failing script waits for.
OWNERS = (
    (r"rltune\.models|rltune\.core|model\.(dim|conv_|use_lstm|use_attention|custom_model|lstm_|attention_)|"
     r"custom_model|view_requirement|_disable_preprocessor_api|PPOConfig\.training\(\) \(\d+ problems\)",
     "models (custom, recurrent, attention, vision)"),
    (r"rltune\.offline|offline|convert_ma_batch_to_sample_batch|saving_experiences|rltune\._private|input_",
     "external envs and offline data"),
    (r"tf_policy|tf_model|\.tf\b|TFPolicy|keras|eager", "TensorFlow (rltune runs PyTorch only)"),
    (r"rltune\.algorithms\.(?!ppo\b|dqn\b|callbacks\b)|unknown algorithm|rltune\.algorithms import \w+|"
     r"cannot import name '(sac|pg|impala|apex\w*|r2d2|qmix\w*)'",
     "more algorithms (PG, SAC, IMPALA, ...)"),
    (r"render_env|remote_worker_envs|attribute 'remote'|evaluation\.metrics|min_time_s_per_iteration|rltune\.execution|"
     r"policy_template|postprocessing|Logger|filter|ENV_STATE|VectorEnv|rltune\.env\.utils|unity3d",
     "other RLlib / Ray APIs (not in this issue)"),
    (r"get_best_checkpoint|No module named '(?!rltune|rllib_examples)|cannot import name '\w+' from '(?!rltune)|DeprecationWarning|"
     r"rllib_examples\.simulators|No module named 'rllib'",
     "outside rltune (the script's own dependency, or broken in Ray itself)"),
)


def owner(problem: str) -> str:
    """Whose feature a script's first problem is (:data:`OWNERS`); this issue's when nothing else matches."""
    for pattern, name in OWNERS:
        if re.search(pattern, problem):
            return name
    return "this issue (RLlib / Ray Tune 2.x script API)"


def budget_args(source: str) -> list[str]:
    """The small-budget flags this script's argparse declares."""
    args = []
    for flag, value in BUDGET_FLAGS.items():
        if re.search(rf"""["']{re.escape(flag)}["']""", source):
            args += [flag, value]
    return args


def first_problem(stderr: str) -> str:
    """The exception a traceback ends with (its last ``Type: message`` line, and the line after one that ends
    with ``:``, where rltune lists the problems), shortened."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    for k in range(len(lines) - 1, -1, -1):
        line = lines[k].strip()
        if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt|Warning)\b", line) or line.startswith("rltune."):
            if line.endswith(":") and k + 1 < len(lines):
                line = f"{line} {lines[k + 1].strip()}"
            return line[:300]
    return (lines[-1].strip()[:300] if lines else "no output")


def run_script(root: Path, name: str, timeout: float) -> dict[str, object]:
    """Run one ported script from ``root``; its outcome."""
    path = root / PACKAGE / f"{name}.py"
    args = budget_args(path.read_text())
    pythonpath = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=pythonpath, RLTUNE_RESULTS_DIR=str(root / "results"), PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(path), *args], cwd=root, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"script": name, "args": args, "status": "timeout", "problem": f"still running after {timeout:.0f} s",
                "seconds": timeout}
    seconds = time.perf_counter() - start
    if proc.returncode == 0:
        return {"script": name, "args": args, "status": "runs", "problem": "", "seconds": seconds}
    return {"script": name, "args": args, "status": "fails", "problem": first_problem(proc.stderr), "seconds": seconds}


def print_table(outcomes: list[dict[str, object]], ray_version: str, *, markdown: bool) -> None:
    """How many run, and (``markdown``) the table: each script, whether it runs, its first problem and its owner."""
    runs = sum(o["status"] == "runs" for o in outcomes)
    print(f"\n{runs} of {len(outcomes)} of ray {ray_version}'s rllib/examples scripts run on rltune, ported by "
          "renaming imports only")
    if not markdown:
        return
    print("\n| script | runs | first problem | waits for |\n| --- | --- | --- | --- |")
    for o in outcomes:
        problem = str(o["problem"]).replace("|", "\\|")
        waits = "" if o["status"] == "runs" else owner(str(o["problem"]))
        print(f"| `{o['script']}.py` | {'yes' if o['status'] == 'runs' else 'no'} | {problem} | {waits} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ray-version", default=RAY_VERSION)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rltune_ray_wheels",
                        help="where the ray wheel is downloaded (once)")
    parser.add_argument("--only", help="comma-separated script names (without .py)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per script (default 300)")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--json", type=Path, help="write the outcomes as JSON")
    parser.add_argument("--from-json", type=Path, help="print the table of a run's JSON (no script runs)")
    args = parser.parse_args()
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        print_table(saved["outcomes"], saved["ray_version"], markdown=True)
        return 0

    with tempfile.TemporaryDirectory(prefix="rltune_porting_") as tmp:
        root = Path(tmp)
        scripts = extract(wheel(args.ray_version, args.cache), root)
        if args.only:
            wanted = [s.strip() for s in args.only.split(",")]
            unknown = sorted(set(wanted) - set(scripts))
            if unknown:
                parser.error(f"--only: no such script in ray {args.ray_version}'s rllib/examples: {', '.join(unknown)}")
            scripts = wanted
        outcomes = []
        for k, name in enumerate(scripts, 1):
            outcome = run_script(root, name, args.timeout)
            outcomes.append(outcome)
            print(f"[{k:2}/{len(scripts)} {outcome['seconds']:5.0f}s] {name}: {outcome['status']} {outcome['problem']}",
                  flush=True)
    print_table(outcomes, args.ray_version, markdown=args.markdown)
    if args.json:
        args.json.write_text(json.dumps({"ray_version": args.ray_version, "outcomes": outcomes}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
