"""What the examples share: a check that an optional extra is installed, before anything runs.

An example that needs an extra calls, in its ``if __name__ == "__main__":`` block::

    from _extras import require_extra   # this file: a script's own directory is on Python's path
    require_extra("pettingzoo", modules=("pettingzoo", "pygame"))

Without the extra the script ends at once with one line naming the command
that installs it (exit status 1), not with a traceback from deep inside a
rollout worker.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence


def require_extra(extra: str, modules: Sequence[str]) -> None:
    """Exit with status 1 and one line saying ``pip install -e '.[EXTRA]'`` when a module of ``modules`` is missing."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        script = sys.argv[0] or "this example"
        sys.exit(f"{script} needs rltune's '{extra}' extra ({', '.join(missing)} not installed): "
                 f"pip install -e '.[{extra}]' (from the repository root)")
