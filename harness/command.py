"""How a printed hint names the `harness` command, so that what it says works when typed.

Why: `scripts/setup` installs harness into the repository's `.venv`, and a user who has not activated it has no
`harness` on their PATH: a hint saying "Report: harness report ..." then fails with "command not found". A hint
names `harness` where that is the command their shell finds (this installation's), and otherwise the path of the
console script beside the running interpreter (`.venv/bin/harness` from the repository), which works either way.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def harness_command() -> str:
    """`harness`, or the path that runs this installation's harness where the shell would not find it."""
    here = Path(sys.executable).parent / ("harness.exe" if os.name == "nt" else "harness")
    found = shutil.which("harness")
    if not here.exists():   # run some other way (python -m harness.cli, a test's interpreter): say the plain name
        return "harness"
    if found is not None and Path(found).resolve() == here.resolve():
        return "harness"
    try:
        shown = here.relative_to(Path.cwd())
    except ValueError:
        shown = here
    return shlex.quote(str(shown))
