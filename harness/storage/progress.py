"""A scoresheet's progress witness, kept in the user's state directory: what a restored sheet cannot match.

Why outside the sheet's folder: the `.chain` beside a sheet catches records cut from the sheet alone, but a
user who restores the sheet *and* its `.chain` from an earlier copy (a `cp` before the run, a file-history
restore) gets two files that agree with each other, and the decision or the bad trials they held are gone.
This witness lives in `state_dir()/progress/<key>.log`, which no project restore touches, and grows with
every append: a sheet whose records are fewer than, or differ from, what it names was rolled back.

One file per sheet, keyed by the sheet's lock (`key`): sheets locked since the witness existed lock a
random id (`locked.journal`), so the lock hash alone names one sheet; an older sheet's key adds its
`locked_at`, since two sheets of one protocol and policy lock the same fields. Lines, appended with one
write and one fsync each:

    format 2                      # written once: the sheet's journal format (a format-1 read is refused)
    attempt 7 <chain_sha256>      # as the .chain's lines: kind, count in its chain, the chain hash
    repair 12 <when>              # `harness sheet repair-chain` rebuilt the .chain at 12 records

Order under a kill: the record is made durable, then its `.chain` line, then its line here. A reader
reads this file first, then the `.chain`, then the sheet, so it may find the sheet one append ahead of
this witness (a writer killed in between), which is accepted and written on the next append; never the
reverse. A witness missing altogether (a new machine, a deleted state folder, a sheet older than the
witness) is not an error: the sheet is then checked by its `.chain` and its evidence folders only, and
its next append here writes the witness afresh from the sheet's own verified records.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError, StaleRunError
from harness.storage.atomic import fsync_folder
from harness.storage.state_dir import state_dir

HEX = frozenset("0123456789abcdef")


def key(locked: dict[str, Any], lock: dict[str, Any]) -> str:
    """The sheet's witness name: its lock hash (unique once the lock holds a random id), else hash and time."""
    if isinstance(locked.get("journal"), dict):
        return str(lock.get("sha256"))
    return hashlib.sha256(f"{lock.get('sha256')}|{lock.get('locked_at')}".encode()).hexdigest()


def witness_file(name: str) -> Path:
    return state_dir() / "progress" / f"{name}.log"


@dataclass
class Progress:
    """What the witness names: the journal format and every record's (kind, count, chain hash), in order."""

    path: Path
    format: int | None = None
    entries: list[tuple[str, int, str]] = field(default_factory=list)
    repairs: int = 0


def read(name: str) -> Progress | None:
    """The witness for this key, None when there is none on this machine."""
    path = witness_file(name)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    progress = Progress(path)
    complete = raw[: raw.rfind(b"\n") + 1]   # a torn last line was never acknowledged: a kill mid-append
    for number, line in enumerate(complete.decode("ascii", errors="replace").splitlines(), start=1):
        parts = line.split(" ")
        if len(parts) == 2 and parts[0] == "format" and parts[1].isdigit():
            progress.format = int(parts[1])
        elif len(parts) == 3 and parts[0] == "repair" and parts[1].isdigit():
            progress.repairs += 1
        elif len(parts) == 3 and parts[0].isidentifier() and parts[1].isdigit() and len(parts[2]) == 64 \
                and set(parts[2]) <= HEX:   # a record: its kind is whatever the journal appends (journal.KINDS)
            progress.entries.append((parts[0], int(parts[1]), parts[2]))
        else:
            raise StaleRunError(path, f"line {number}", "not a progress witness line (edited by hand?); it guards "
                                                        "the sheet against rollbacks: see docs/scoresheet.md")
    return progress


def check(progress: Progress, records: list[tuple[str, str]], sheet: Path, one_append: Callable[[list[str]], bool],
          *, lagging_ok: bool = False) -> int:
    """Compare the sheet's records (kind, chain hash, in file order) with the witness; returns how many it
    names. Refused: fewer records than it names (rolled back or cut short), a record that differs from its
    line (replaced by another history), or records beyond it that `one_append` (the journal's rule) says a
    killed writer cannot have left (unless `lagging_ok`)."""
    counts: Counter[str] = Counter()
    named = len(progress.entries)
    if named > len(records):
        lost = named - len(records)
        raise StaleRunError(sheet, "records", f"{lost} recorded {'entry is' if lost == 1 else 'entries are'} missing "
                            f"(the progress witness {progress.path} names {named}, the sheet holds {len(records)}): "
                            "the scoresheet was rolled back to an earlier copy or cut short")
    for position, (kind, count, chain) in enumerate(progress.entries):
        counts[kind] += 1
        if records[position] != (kind, chain) or count != counts[kind]:
            raise StaleRunError(sheet, f"records[{position}]", f"is not the record the progress witness "
                                f"{progress.path} names (line {position + 1}): the scoresheet was replaced")
    beyond = [kind for kind, _ in records[named:]]
    if not lagging_ok and not one_append(beyond):
        raise StaleRunError(sheet, "records", f"{len(beyond)} records were appended where the progress witness "
                            f"{progress.path} did not see them (it names {named}); if that is right, run "
                            "`harness sheet repair-chain` to witness them")
    return named


def lines_for(records: list[tuple[str, str]], start: int) -> list[bytes]:
    """Witness lines for records[start:] (kind, chain hash, in file order), counted in their chains."""
    counts: Counter[str] = Counter()
    lines = []
    for position, (kind, chain) in enumerate(records):
        counts[kind] += 1
        if position >= start:
            lines.append(f"{kind} {counts[kind]} {chain}\n".encode())
    return lines


def append(name: str, lines: list[bytes], journal_format: int) -> None:
    """Append lines (one write, one fsync), the format line first when the witness is new."""
    path = witness_file(name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        created = not path.exists()
        if created:
            lines = [f"format {journal_format}\n".encode(), *lines]
        if not lines:
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        with os.fdopen(fd, "r+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 256))
            tail = handle.read()
            handle.seek(size - len(tail) + tail.rfind(b"\n") + 1)   # a torn last line (a kill) is cut off
            handle.truncate()
            handle.write(b"".join(lines))
            handle.flush()
            os.fsync(handle.fileno())
        if created:
            fsync_folder(path.parent)
    except OSError as exc:
        raise HarnessInputError(path, None, f"cannot write the progress witness: {exc.strerror or exc}") from None


def repair_line(count: int) -> bytes:
    return f"repair {count} {datetime.now(UTC).isoformat(timespec='seconds')}\n".encode()
