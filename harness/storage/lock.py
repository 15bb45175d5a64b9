"""One writer per scoresheet: an OS file lock, and a record of who holds it.

Why an OS lock (`filelock`: `flock` on Linux and macOS, `msvcrt.locking` on Windows) rather than
a lock file created with O_EXCL: the operating system drops the lock the moment its process
dies, SIGKILL and power-cut reboots included, so a dead run can never keep a sheet locked and
no guess about pid reuse decides whether a lock is stale. `filelock` is the maintained,
cross-platform wrapper that pip, virtualenv and the Hugging Face hub already rely on.

The OS lock cannot say who holds it, so the holder writes a small JSON record beside it (pid,
host, since, command) once it has the lock, and removes it on release. A contender that is
refused reads that record to name the holder. A record found by a process that *got* the lock
was left by a holder that died without releasing: that is a stale lock, and it is taken over
(the takeover is reported, never silent). The one case refused despite getting the OS lock is a
record naming a process on this host that is still alive: that means the file system does not
honour the lock, and two writers would corrupt the sheet.

The lock is keyed on the resolved real path, so a sheet reached through a symlink (or a runs folder
that is one) meets the lock its real name holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import filelock
import psutil

from harness.errors import HarnessInputError
from harness.storage.atomic import write_text_atomic


class WriterBusy(HarnessInputError):
    """Another process is writing this scoresheet (or its runs folder)."""


@dataclass(frozen=True)
class Holder:
    pid: int
    host: str
    since: str
    command: str

    def describe(self) -> str:
        return f"{self.command} (pid {self.pid} on {self.host}, since {self.since})"

    def alive_here(self) -> bool:
        """True when this record names a live process on this host that started before `since`."""
        if self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        try:
            started = datetime.fromtimestamp(psutil.Process(self.pid).create_time(), UTC)
        except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
            return False
        try:
            return started <= datetime.fromisoformat(self.since) + timedelta(seconds=1)
        except ValueError:
            return True


def _missing_folders(folder: Path) -> list[Path]:
    """The folders `mkdir(parents=True)` would create for `folder`, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _this_command() -> str:
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return " ".join([name, *sys.argv[1:2]]) if name == "harness" else name


class WriterLock:
    """Exclusive, non-blocking lock on `target` (a scoresheet file or a runs folder).

    Re-entrant within one object (nested `with` is fine); a second object, thread or process
    is refused at once with `WriterBusy` naming the holder, never left waiting.
    """

    def __init__(self, target: str | Path, command: str | None = None, *, folder: bool = False) -> None:
        self.target = Path(target)
        # Keyed on the real file: a symlink, `..` or a second spelling of the same sheet or folder must meet
        # the same lock, or a second writer walks around it (the lock file would sit beside the link).
        real = self.target.resolve()
        base = real / ".harness" if folder else real.with_name(f".{real.name}")
        self.lock_path = Path(f"{base}.lock")
        self.holder_path = Path(f"{base}.holder")
        self.command = command or _this_command()
        self.took_over: Holder | None = None
        self._lock = filelock.FileLock(self.lock_path, timeout=0, thread_local=False)
        self._depth = 0
        self._made: list[Path] = []

    @property
    def held(self) -> bool:
        return self._depth > 0

    def read_holder(self) -> Holder | None:
        try:
            data = json.loads(self.holder_path.read_text())
            return Holder(int(data["pid"]), str(data["host"]), str(data["since"]), str(data["command"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def acquire(self) -> WriterLock:
        if self._depth:
            self._depth += 1
            return self
        try:
            self._made = _missing_folders(self.lock_path.parent)
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        except filelock.Timeout:
            self._tidy()
            holder = self.read_holder()
            who = holder.describe() if holder else "another process"
            raise WriterBusy(self.target, None, f"in use by {who}; wait for it to finish or stop it") from None
        except OSError as exc:
            self._tidy()
            where = self.lock_path if self.lock_path.parent.is_dir() else self.lock_path.parent
            raise HarnessInputError(where, None, f"cannot lock: {exc.strerror or exc}") from None
        previous = self.read_holder()
        if previous is not None and previous.alive_here():
            self._lock.release()
            self._tidy()
            raise WriterBusy(self.target, None, f"in use by {previous.describe()}, and this file system does not "
                                                "enforce file locks; wait for it to finish")
        self.took_over = previous
        since = datetime.now(UTC).isoformat(timespec="milliseconds")
        me = Holder(os.getpid(), socket.gethostname(), since, self.command)
        try:
            write_text_atomic(self.holder_path, json.dumps(asdict(me)))
        except (OSError, HarnessInputError) as exc:
            self._unlink_and_release()
            problem = exc.problem if isinstance(exc, HarnessInputError) else f"cannot write: {exc.strerror or exc}"
            raise HarnessInputError(self.holder_path, None, problem) from None
        self._depth = 1
        return self

    def release(self) -> None:
        if not self._depth:
            return
        self._depth -= 1
        if self._depth:
            return
        self.holder_path.unlink(missing_ok=True)
        self._unlink_and_release()

    def _unlink_and_release(self) -> None:
        """Remove the lock file while still holding it, then unlock: nothing is left beside the sheet.
        A contender that opened the old file before the unlink finds it unlinked once it gets the lock,
        and `filelock` (4.x) then tries again on the new one, so two holders cannot arise."""
        try:
            with contextlib.suppress(OSError):
                self.lock_path.unlink()
        finally:
            self._lock.release()
            self._tidy()

    def _tidy(self) -> None:
        """Folders this lock created (`scoresheets/`, `runs/<sheet>/`) go again when they are still empty."""
        for folder in self._made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        self._made = []

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()
