"""The user's state directory: where harness keeps what must outlive, and stay apart from, a project folder.

Why a folder of its own: a witness that sits beside a scoresheet is restored with it (a `cp`, a file-history
restore, `git checkout`), so it cannot prove the sheet was rolled back. What lives here is written by harness
only, on this machine, for this user: the progress witnesses of every scoresheet (`harness.storage.progress`)
and keys the user keeps. One definition, shared by every module that keeps state there.

`HARNESS_STATE_DIR` names it outright (the tests set it to a temporary folder); otherwise
`$XDG_STATE_HOME/harness`, else `~/.local/state/harness` (the XDG default), on Windows
`%LOCALAPPDATA%\\harness`.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "HARNESS_STATE_DIR"


def state_dir() -> Path:
    """The user's harness state folder (not created here: a reader must not write)."""
    named = os.environ.get(STATE_DIR_ENV)
    if named:
        return Path(named)
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg:
        return Path(xdg) / "harness"
    local = os.environ.get("LOCALAPPDATA") if os.name == "nt" else None
    if local:
        return Path(local) / "harness"
    return Path.home() / ".local" / "state" / "harness"
