"""Per-run scratch folders in the temporary folder, removed when the run ends and, if the run was
killed, at the next start of any `harness` command.

Why: a run's workers, rehearsals and emulators need temporary files (a worker's evidence before it is
shipped back, the rehearsal's desk, the simulated cameras' socket, Ray's session). Each gets a folder
of its own (so any number of runs, emulators and rehearsals can run at once on one machine), named
`harness-<kind>-<pid>-<random>`, holding an `owner` file with the pid and start time of the process that
made it. A folder whose owner is no longer running (the pid is gone or now names a younger process)
is left over from a killed run, and `remove_orphans` deletes it; one still owned is never touched. The pid
is in the name too because a process killed between making the folder and writing its owner file (a Ray
worker the reaper kills as it starts) leaves a folder with no owner file: its name still says whose it was.

Every `harness` command also makes its process's temporary folder a scratch folder of its own
(`own_temporary_folder`: `tempfile.tempdir` and TMPDIR, which its children inherit), because libraries
leave files behind there: LeRobot's `PreTrainedConfig.from_pretrained` writes a `tmp*.json` on every
policy load and never removes it. A program that calls the harness itself (`harness.evaluate`) keeps its own
temporary folder, so each such load runs inside `library_files_removed`, which removes what was written.
Scratch folders themselves are made in the machine's
temporary folder (`SYSTEM_ROOT`), where the next start looks. A folder that will hold Unix sockets (Ray's
session) needs a short path (`socket_root`): where that temporary folder is too long (a cluster job's TMPDIR,
macOS's /var/folders/...), it is made in /tmp instead, which the next start searches as well.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import multiprocessing.util
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil

PREFIX = "harness-"


def _system_root() -> Path:
    """The machine's temporary folder, also in a child of a `harness` process (whose TMPDIR is its parent's
    scratch folder): scratch folders stay side by side there, where the next start looks, and Unix socket
    paths in them (Ray's, the cameras') stay short."""
    root = Path(tempfile.gettempdir())
    while root.name.startswith(PREFIX) and root.parent != root:
        root = root.parent
    return root


SYSTEM_ROOT = _system_root()
SHORT_ROOT = Path("/tmp")   # where socket folders go when SYSTEM_ROOT is too long for them
UNIX_SOCKET_PATH_MAX = 107   # Linux's sockaddr_un path (108 bytes) less its terminating NUL
OWNER = "owner"
START_SLACK_S = 1.0   # a process's start time, as two reads of it may differ


def _start_time(pid: int) -> float | None:
    """When the running process `pid` started; None when none runs. A zombie has ended: where nothing reaps
    orphans (a container whose first process is not an init), a killed run's workers stay zombies for good."""
    try:
        process = psutil.Process(pid)
        return None if process.status() == psutil.STATUS_ZOMBIE else process.create_time()
    except psutil.Error:
        return None


def _roots() -> list[Path]:
    """Where scratch folders are made, hence looked for: the machine's temporary folder, and /tmp."""
    return [SYSTEM_ROOT] + ([SHORT_ROOT] if SHORT_ROOT != SYSTEM_ROOT and SHORT_ROOT.is_dir() else [])


def socket_root(kind: str, room: int, system_root: Path | None = None) -> Path | None:
    """Where a scratch folder of `kind` fits Unix sockets lying `room` characters below it: the machine's
    temporary folder, else /tmp; None when neither does (a caller says so in one line rather than letting a
    library fail on a path it cannot bind)."""
    name = f"/{PREFIX}{kind}-{os.getpid():07d}-xxxxxxxx"
    for root in (system_root or SYSTEM_ROOT, SHORT_ROOT):
        if len(str(root)) + len(name) + room <= UNIX_SOCKET_PATH_MAX and root.is_dir() and os.access(root, os.W_OK):
            return root
    return None


def make(kind: str, remove_at_exit: bool = True, root: Path | None = None) -> Path:
    """A new scratch folder `harness-<kind>-<pid>-XXXXXXXX` owned by this process (and removed when it exits
    normally, unless told otherwise), in the machine's temporary folder or `root` (one of `_roots`)."""
    pid = os.getpid()
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{pid}-", dir=root or SYSTEM_ROOT))
    (folder / OWNER).write_text(json.dumps({"pid": pid, "started": _start_time(pid)}))
    if remove_at_exit:
        atexit.register(remove, folder)
    return folder


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def owner_alive(folder: Path) -> bool | None:
    """Whether the process that made `folder` still runs; None when that cannot be told (not a scratch
    folder, or one whose owner file its still running maker is writing)."""
    try:
        owner = json.loads((folder / OWNER).read_text())
        pid, started = int(owner["pid"]), owner["started"]
    except (OSError, ValueError, KeyError, TypeError):
        named = _pid_in_name(folder)
        return False if named is not None and _start_time(named) is None else None
    now = _start_time(pid)
    if now is None:
        return False
    return started is None or abs(now - float(started)) <= START_SLACK_S


def _pid_in_name(folder: Path) -> int | None:
    """The maker's pid from a `harness-<kind>-<pid>-<random>` name (mkdtemp's random part has no dash)."""
    parts = folder.name.rsplit("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def scratch_folders(kind: str | None = None, root: Path | None = None) -> list[Path]:
    """This user's scratch folders (of one kind, or all) in `root`, else wherever they are made (`_roots`)."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    pattern = f"{PREFIX}{kind}-*" if kind else f"{PREFIX}*"
    found = []
    for where in [root] if root else _roots():
        with contextlib.suppress(OSError):
            for path in where.glob(pattern):
                with contextlib.suppress(OSError):
                    if path.is_dir() and not path.is_symlink() and uid in (None, path.stat().st_uid):
                        found.append(path)
    return sorted(found)


def remove_orphans(root: Path | None = None) -> list[Path]:
    """Delete the scratch folders whose owner is gone (killed runs); return them."""
    removed = []
    for folder in scratch_folders(root=root):
        if owner_alive(folder) is False:
            remove(folder)
            removed.append(folder)
    return removed


def live_folders(kind: str) -> list[Path]:
    """This user's scratch folders of `kind` whose owners still run (say, the emulators serving cameras)."""
    return [folder for folder in scratch_folders(kind) if owner_alive(folder)]


_process_folder: Path | None = None


def own_temporary_folder() -> Path:
    """This process's temporary folder, and its children's, a scratch folder of its own (made once)."""
    global _process_folder
    if _process_folder is None:
        _process_folder = make("tmp", remove_at_exit=False)
        # Removed by multiprocessing's exit handler, after its own temporary folder (made in this one, and
        # removed at priority -100): removed first, it left that handler a FileNotFoundError traceback to print.
        multiprocessing.util.Finalize(None, remove, args=(_process_folder,), exitpriority=-1000)
        os.environ["TMPDIR"] = str(_process_folder)
        tempfile.tempdir = str(_process_folder)
    return _process_folder


_redirect = threading.Lock()


@contextlib.contextmanager
def library_files_removed() -> Iterator[None]:
    """Point Python's temporary folder at a scratch folder for the block and delete it after, so that a library
    call that leaves files there (LeRobot's `PreTrainedConfig.from_pretrained`) leaves nothing behind, in a
    `harness` command and in a program that calls the harness alike. A scratch folder rather than a plain one: a
    process killed inside the block leaves an orphan the next `harness` start removes. Only `tempfile`'s
    module setting moves, under a lock, for as long as the block: children and the environment are untouched."""
    with _redirect:
        folder = make("lib", remove_at_exit=False)
        previous = tempfile.tempdir
        tempfile.tempdir = str(folder)
        try:
            yield
        finally:
            tempfile.tempdir = previous
            remove(folder)
