"""The collection journal and dataset checkpoints: what makes `harness collect` resumable.

LeRobot's writer keeps its parquet files open until `finalize()` and appends each episode's
video to the previous one's file, so a kill between finalizes leaves files that cannot be read.
What it does guarantee is that a dataset reopened with `LeRobotDataset.resume` writes every new
episode into new files. So a collection finalizes and reopens every few accepted episodes (a
checkpoint), records which files existed and copies the few metadata files LeRobot rewrites in
place (info.json, stats.json, tasks.parquet). A rerun after a kill deletes what came after the
last checkpoint and restores those copies: the dataset is exactly the checkpointed one again.

The journal (one JSON object per line, flushed and fsynced) lives beside the dataset in
`<dataset>.collect/`, never inside it, so the dataset folder stays a plain LeRobot dataset.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError

REWRITTEN_IN_PLACE = ("meta/info.json", "meta/stats.json", "meta/tasks.parquet")
APPEND_ONLY_DIRS = ("data", "videos", "meta/episodes", "images")


def state_dir(root: Path) -> Path:
    return root.with_name(root.name + ".collect")


@dataclass
class Journal:
    """Every attempt, checkpoint and rollback of one collection, in order."""

    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def open(cls, path: Path) -> Journal:
        """Read an existing journal; a torn last line (killed mid-write) is cut off."""
        journal = cls(path)
        if not path.exists():
            return journal
        raw = path.read_bytes()
        good = 0
        for line in raw.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                journal.records.append(json.loads(line))
            except json.JSONDecodeError:
                break
            good += len(line)
        if good < len(raw):
            with path.open("r+b") as handle:
                handle.truncate(good)
        return journal

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.records.append(record)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    @property
    def header(self) -> dict[str, Any] | None:
        headers = self.of_kind("header")
        return headers[0] if headers else None

    @property
    def last_checkpoint(self) -> dict[str, Any] | None:
        checkpoints = self.of_kind("checkpoint")
        return checkpoints[-1] if checkpoints else None

    def attempts(self) -> list[dict[str, Any]]:
        return self.of_kind("attempt")

    def lost_attempts(self) -> set[int]:
        return {n for r in self.of_kind("rollback") for n in r["lost_attempts"]}

    def next_attempt_number(self) -> int:
        return max((r["attempt"] for r in self.attempts()), default=0) + 1


def _tracked_files(root: Path) -> list[str]:
    files = []
    for folder in APPEND_ONLY_DIRS:
        base = root / folder
        if base.is_dir():
            files += [str(p.relative_to(root)) for p in base.rglob("*") if p.is_file()]
    return sorted(files)


def take_snapshot(root: Path, episodes: int) -> str:
    """Record the finalized dataset's files and copy what LeRobot rewrites; returns the
    snapshot's folder name (relative to the state folder)."""
    name = f"checkpoint-{episodes:06d}"
    target = state_dir(root) / name
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for rel in REWRITTEN_IN_PLACE:
        if (root / rel).is_file():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, tmp / rel)
    (tmp / "files.json").write_text(json.dumps(_tracked_files(root)))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return name


def roll_back(root: Path, snapshot: str) -> list[str]:
    """Make the dataset exactly the checkpointed one again; returns the files removed."""
    source = state_dir(root) / snapshot
    try:
        keep = set(json.loads((source / "files.json").read_text()))
    except (OSError, ValueError) as exc:
        raise HarnessInputError(source, "files.json", f"checkpoint unreadable ({exc}); cannot resume") from None
    removed = [rel for rel in _tracked_files(root) if rel not in keep]
    for rel in removed:
        (root / rel).unlink()
    for rel in REWRITTEN_IN_PLACE:
        if (source / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / rel, root / rel)
        else:
            (root / rel).unlink(missing_ok=True)
    shutil.rmtree(root / "images", ignore_errors=True)
    return removed


def drop_old_snapshots(root: Path, keep: str) -> None:
    for path in state_dir(root).glob("checkpoint-*"):
        if path.name != keep:
            shutil.rmtree(path, ignore_errors=True)
