"""What a run's evidence folders prove about its scoresheet: every attempt that left a folder was recorded.

Why: a sheet and its `.chain` restored together from an earlier copy agree with each other; the run's
own evidence (`runs/<sheet>/trial-NNN-aK/`, one folder per attempt that reached its episode, renamed into
place just before the attempt is recorded) outlives the restore and names the attempts the copy lost.

Once an attempt is recorded, its folder gets `recorded.json` naming the record's chain hash, so a folder
that says it was recorded proves its record existed: a sheet without that record was rolled back, or
re-hashed (the record it names is gone), and one attempt rolled back is caught too, without the progress
witness (`harness.storage.progress`). A folder holds no marker when its run was killed just after the
record, before the marker: its record is then in the sheet.

One folder without its record (and without a marker) is the one legitimate crash case: a run killed
between renaming the folder into place and recording the attempt. It is then the next attempt of a trial
still pending, and the resume that runs that attempt again moves it aside as `trial-NNN-aK.unrecorded-N`
(never deleted). Any other folder without a record (two or more, or one a later record has passed) means
the sheet lost records: it is refused, naming the folder. An attempt recorded without a folder is fine
(a void before the episode, such as a robot fault at the start pose, writes none).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.errors import StaleRunError
from harness.models.scoresheet import Scoresheet
from harness.models.sheet_records import Attempt
from harness.storage.atomic import write_bytes_atomic

FOLDER = re.compile(r"trial-(\d{3,})-a(\d+)")
RECORDED_FILE = "recorded.json"


def mark_recorded(folder: Path, attempt: Attempt) -> None:
    """Say in the attempt's evidence folder that it was recorded, once it is (an attempt a Ray worker
    finished unrecorded has no chain hash yet: its driver marks it)."""
    if attempt.chain_sha256 and folder.is_dir():
        record = {"trial_index": attempt.trial_index, "attempt": attempt.attempt, "chain_sha256": attempt.chain_sha256}
        write_bytes_atomic(folder / RECORDED_FILE, json.dumps(record).encode() + b"\n", durable=False)


def _marked_chain(folder: Path) -> str | None:
    """The chain hash a folder's marker names (None: no marker, or one that cannot be read)."""
    try:
        value = json.loads((folder / RECORDED_FILE).read_bytes()).get("chain_sha256")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def evidence_folder_name(trial_index: int, attempt: int) -> str:
    """The one spelling of an attempt's evidence folder (the engine, Ray workers and this audit use it)."""
    return f"trial-{trial_index:03d}-a{attempt}"


def evidence_folders(sheet: Scoresheet, candidates: list[Path]) -> list[Path]:
    """Where this sheet's evidence is: the run folders the caller names (a run's `runs_dir/<sheet stem>`), and
    those its recorded attempts' artifacts name (a report run from elsewhere than the run's folder finds them)."""
    found = list(dict.fromkeys(candidates))
    for attempt in sheet.records:
        for value in attempt.artifacts.values():
            trial_folder = Path(value).parent
            if FOLDER.fullmatch(trial_folder.name) and trial_folder.parent not in found:
                found.append(trial_folder.parent)
    return [folder for folder in found if folder.is_dir()]


def check_evidence(sheet: Scoresheet, candidates: list[Path]) -> None:
    """Refuse a sheet whose evidence folders name attempts it does not record, beyond the one crash case."""
    recorded = {(a.trial_index, a.attempt) for a in sheet.records}
    chains = {a.chain_sha256 for a in sheet.records}
    for folder in evidence_folders(sheet, candidates):
        missing = []
        for entry in folder.iterdir():
            match = FOLDER.fullmatch(entry.name)
            if not match or not entry.is_dir():
                continue
            marked = _marked_chain(entry)
            if marked is not None and marked not in chains:
                raise StaleRunError(sheet.path, "records", f"{entry / RECORDED_FILE} names record {marked[:12]}, "
                                    "which the scoresheet does not hold: the sheet was rolled back or rewritten")
            if (int(match[1]), int(match[2])) not in recorded:
                missing.append((int(match[1]), int(match[2]), entry))
        if not missing:
            continue
        missing.sort()
        if len(missing) == 1:
            trial, attempt, _ = missing[0]
            if (trial in sheet.trial_indices and sheet.final_attempt(trial) is None
                    and attempt == sheet.next_attempt_number(trial)):
                continue   # a run killed between renaming the folder and recording: the resume runs it again
        trial, attempt, entry = missing[0]
        more = f" and {len(missing) - 1} more attempt folders" if len(missing) > 1 else ""
        raise StaleRunError(sheet.path, "records", f"trial {trial} attempt {attempt} left its evidence in {entry}"
                            f"{more}, but the scoresheet has no record of it: the sheet was rolled back or cut short")
