"""Builders shared by tests: a locked scoresheet over the small protocol, fake attempts."""

from __future__ import annotations

from pathlib import Path

from harness.models.protocol import load_protocol
from harness.models.scoresheet import Attempt, Scoresheet, attempt_from_label, build_locked, lock_scoresheet

REPO = Path(__file__).resolve().parents[1]


def small_protocol_copy(folder: Path) -> Path:
    path = folder / "small.yaml"
    path.write_text((REPO / "tests" / "data" / "small.yaml").read_text())
    return path


def locked_sheet(folder: Path, policy: str = "expert") -> Scoresheet:
    protocol_path = small_protocol_copy(folder)
    protocol = load_protocol(protocol_path)
    locked = build_locked(protocol, protocol_path, policy, "sim")
    return lock_scoresheet(folder / "sheet.yaml", locked, {"cameras": {}})


def fake_attempt(trial: int, attempt: int, label: str, **extra) -> Attempt:
    fields = {"trial_index": trial, "attempt": attempt, "started_at": "2026-11-30T10:00:00.000+00:00",
              "ended_at": "2026-11-30T10:00:07.000+00:00", "duration_s": 7.0, **extra}
    return attempt_from_label(label, **fields)
