"""Room on disk for the next trial: a full disk pauses a run, it does not end it in a traceback.

Why: a trial writes its evidence folder (final frames, trajectory, state; videos for failures) and then its
record in the scoresheet. When the disk (or the user's quota, or a file-size limit) refuses one of those
writes, the trial in flight cannot be kept, but every trial scored before it is on disk and the run can go on
once there is room. So the engine asks here before each trial whether the largest trial folder this run has
written so far still fits, and turns a write refused for want of room (`harness.errors.no_room`) into a
`RunPaused` whose void (`VoidKind.DISK_FULL`) names the folder, the room left there and the room a trial needs;
the CLI adds how to resume. Free space is read through a function the engine is given (`RunOptions`), so a
test can stand in for a disk.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from harness.models.taxonomy import Void, VoidKind
from harness.storage.safe_yaml import size_text

# The scoresheet's record of one attempt, with room to spare (a record is a few kB, its chain line 150 bytes).
RECORD_BYTES = 64 * 1024

FreeBytes = Callable[[Path], int]


def free_bytes(folder: Path) -> int:
    """Bytes free to this user on the filesystem that holds `folder` (or would: its nearest existing parent)."""
    probe = folder.absolute()
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def folder_bytes(folder: Path) -> int:
    """What the files directly in `folder` take (a trial folder holds no folders); 0 when it is gone."""
    try:
        return sum(entry.stat().st_size for entry in os.scandir(folder) if entry.is_file(follow_symlinks=False))
    except OSError:
        return 0


class TrialRoom:
    """The room a run's next trial needs: the largest trial folder in its runs folder (this run's or an earlier
    session's of the same sheet) and a record, measured once and then after every trial the engine records."""

    def __init__(self, folder: Path, sheet: Path, free: FreeBytes = free_bytes) -> None:
        self.folder = folder
        self.sheet = sheet
        self.free = free
        self.largest: int | None = None

    def _measure_all(self) -> int:
        sizes = [folder_bytes(trial) for trial in self.folder.glob("trial-*")] if self.folder.is_dir() else []
        return max(sizes, default=0)

    def recorded(self, trial_folder: Path) -> None:
        """A trial was recorded: its folder may be the largest yet."""
        if self.largest is not None:
            self.largest = max(self.largest, folder_bytes(trial_folder))

    def needed(self) -> int:
        if self.largest is None:
            self.largest = self._measure_all()
        return self.largest + RECORD_BYTES

    def _needs_text(self) -> str:
        needed = self.needed()   # measured first: a refused write may come before any shortfall check
        if self.largest:
            return (f"a trial of this run needs about {size_text(needed)} (its largest folder so far, and "
                    "its record)")
        return f"a trial needs room for its evidence and {size_text(RECORD_BYTES)} for its record"

    def shortfall(self) -> Void | None:
        """Before a trial: the void that pauses the run when the next trial cannot fit (None when it can, or
        when no trial has been measured yet: then only a refused write can tell)."""
        needed = self.needed()
        if not self.largest:
            return None
        for where, wanted in ((self.folder, needed), (self.sheet.parent, RECORD_BYTES)):
            left = self.free(where)
            if left < wanted:
                return Void(VoidKind.DISK_FULL, f"{where}: {size_text(left)} free, and {self._needs_text()}; "
                                                "nothing was started: free some space there")
        return None

    def refused(self, number: int, filename: str | None, in_flight_recorded: bool = False) -> Void:
        """The void for a write refused with error `number` (a full disk, a quota, a file-size limit); the trial
        in flight was recorded when only what follows its record failed (its folder's `recorded.json`)."""
        where = Path(filename).parent if filename else self.folder
        kept = ("every trial so far is recorded" if in_flight_recorded
                else "the trial in flight was not recorded, every trial before it is")
        return Void(VoidKind.DISK_FULL, f"{where}: {os.strerror(number)}, {size_text(self.free(where))} free, and "
                                        f"{self._needs_text()}; {kept}: free some space there")
