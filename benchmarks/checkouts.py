"""Running the harness of another checkout (a `git worktree` at the "before" commit) from a benchmark.

Before/after figures are only comparable when each run really imports its own tree: `python -P` keeps the
current folder off `sys.path`, and the import is checked before anything is timed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def checkout_env(label: str, code: Path) -> dict[str, str]:
    """The environment in which `python -P -m harness.cli ...` runs `code`'s harness; exits naming `label` if
    that is not the harness it imports."""
    env = dict(os.environ, PYTHONPATH=str(code))
    imported = subprocess.run([sys.executable, "-P", "-c", "import harness; print(harness.__file__)"], env=env,
                              capture_output=True, text=True, check=True).stdout.strip()
    if not imported.startswith(str(code)):
        sys.exit(f"{label}: PYTHONPATH={code} imports {imported}, not that checkout's harness")
    return env
