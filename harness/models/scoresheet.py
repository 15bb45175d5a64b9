"""Scoresheets: a locked header decided before the first trial, then an audited list of attempts.

On disk (YAML, `harness.storage.journal` has the byte layout):

    format: harness.scoresheet/2
    locked:   task, success_definition, taxonomy, trial_count, trials,
              protocol_file, protocol_sha256, policy, robot, stopping_rule,
              then (sheets locked since they existed) latency_ms, inference, for a
              blind comparison `comparison` (arms, seed, schedule, test, sealed mapping),
              and for a simulated arm render_profile
    lock:     sha256 (over the canonical JSON of `locked`), field_sha256 (one per
              locked field, so a refusal can name the field), locked_at
    settings: unlocked run settings (cameras, port, rename map) used by --resume
    records:  attempts and measurements, one appended JSON line each, each carrying
              chain_sha256 = sha256(previous chain + canonical record), starting from
              the lock hash (attempts and measurements are two chains)

A record is appended and fsync'd (constant cost, however long the sheet), and named in the
`<sheet>.chain` witness, which catches a sheet whose last attempts were deleted, and in the progress
witness in the user's state folder (`harness.storage.progress`), which catches both files restored
from an earlier copy. Only one
process writes a sheet at a time (`harness.storage.lock`). Format-1 sheets (the whole file
rewritten per attempt) still load; the first write converts them, hashes unchanged.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.errors import HarnessInputError, StaleRunError
from harness.models.locked import LockedBlock, LockedInference
from harness.models.protocol import Protocol, file_sha256
from harness.models.render_profile import LEGACY_PROFILE, RenderProfile
from harness.models.run_settings import BuiltinPolicy, InferenceEngine, Latency, RobotKind, RunSettings
from harness.models.sheet_comparison import SheetComparison
from harness.models.sheet_records import Attempt, AttemptChain, PlacementMeasurement, Unblinding, rescored
from harness.models.taxonomy import Label, locked_labels
from harness.stats.estimates import wilson_interval
from harness.storage import journal
from harness.storage.lock import WriterLock

FORMAT = journal.FORMAT
LOCKED_FIELDS: tuple[str, ...] = (
    "task",
    "success_definition",
    "taxonomy",
    "trial_count",
    "trials",
    "protocol_file",
    "protocol_sha256",
    "policy",
    "robot",
    "stopping_rule",
)
# Locked when a sheet is made, absent from sheets made before they existed: a field is hashed when
# present, so an older file's lock hashes exactly as it did.
OPTIONAL_LOCKED_FIELDS: tuple[str, ...] = (
    "latency_ms",         # the latency model: milliseconds, "measured", {step_ms, chunk_ms}, or null (lock-step)
    "inference",          # the inference engine: {"engine": "sync" | "rtc" | "async", ...}
    "comparison",         # a blind comparison: arms, seed, schedule, test, sealed mapping (`LockedComparison`)
    "render_profile",     # simulated arm: how the policy's frames are drawn (harness.models.render_profile)
    "rehearsal",          # a rehearsal on the emulated arm: {"gap": {knob: value}} (absent: not a rehearsal)
    "twin_of",            # a twin sheet: {"real_sheet": path, "real_lock_sha256": hash} (absent: not a twin)
    "journal",            # {"format": 2, "id": random}: the format it is written in (never read as format 1), and
                          # an id that makes its lock hash its own (the key of its progress witness)
)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def sha256_of(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def policy_fingerprint(policy_ref: str) -> str:
    """A built-in policy's name, or a hash over every file of a checkpoint folder.

    Hashing the files (not the folder's name or mtime) is what lets resume notice
    a retrained checkpoint saved over the old one.
    """
    path = Path(policy_ref)
    if BuiltinPolicy.named(policy_ref) is not None or not path.exists():   # a built-in's name means the built-in,
        return f"builtin:{policy_ref}"                                     # even beside a folder so named (./expert)
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def run_latency(locked: LockedBlock, settings: RunSettings) -> Latency:
    """The latency model a run uses: locked (with the inference engine: both or neither), or, for a sheet
    locked before they were, its settings."""
    return locked.latency_ms if locked.inference is not None else settings.latency_ms


def run_inference(locked: LockedBlock) -> LockedInference:
    """The inference engine a run uses, with its settings: locked, or LeRobot's synchronous one (the only one
    before the engine was locked)."""
    return locked.inference if locked.inference is not None else LockedInference(engine=InferenceEngine.SYNC)


class Scoresheet:
    """A locked scoresheet bound to its file. All mutation goes through `add_attempt` and `supersede`.

    `locked` is the typed view of the locked block; `locked_data` is that block exactly as it was
    hashed and is written back, so a file from an older version keeps verifying.

    `chain` knows which attempt records count (`records`, `attempts` and `superseded` are its lists);
    `comparison` is a blind comparison's schedule and tests over them.
    """

    def __init__(self, path: Path, locked: dict[str, Any], lock: dict[str, Any],
                 settings: RunSettings, attempts: list[Attempt],
                 measurements: list[PlacementMeasurement] | None = None,
                 stored: journal.Contents | None = None, unblindings: list[Unblinding] | None = None) -> None:
        self.path = path
        self.locked_data = locked
        self.locked = LockedBlock.model_validate(locked)
        self.lock = lock
        self.settings = settings
        self.chain = AttemptChain()
        self.comparison = SheetComparison(self.locked, self.chain.final)
        self.measurements = measurements or []
        self.unblindings = unblindings or []
        self.stored = stored
        self.writer: WriterLock | None = None
        self._trial_set = {t.index for t in self.locked.trials}
        for position, attempt in enumerate(attempts):
            problem = self.chain.problem(attempt)
            if problem:
                raise StaleRunError(path, f"attempts[{position}].supersedes", problem)
            self.chain.add(attempt)

    @property
    def records(self) -> list[Attempt]:
        """The attempt chain as written: append-only, every re-scored original kept."""
        return self.chain.records

    @property
    def attempts(self) -> list[Attempt]:
        """What counts: each attempt's latest record, in the place of its first one."""
        return self.chain.attempts

    @property
    def superseded(self) -> list[Attempt]:
        """Records replaced by a re-score (kept in the file, not counted)."""
        return self.chain.superseded

    # --- the one writer ----------------------------------------------------
    def hold_writer_lock(self, lock: WriterLock | None = None, command: str | None = None) -> WriterLock:
        """Take (or adopt) this sheet's writer lock for as long as the caller keeps writing.

        Without it, each append takes the lock for its own duration; holding it for a whole
        run is what makes a second run or a `measure` during the run refused at its start.
        """
        if lock is not None and lock.held:
            self.writer = lock   # adopted: whoever acquired it releases it
        else:
            self.writer = (lock or WriterLock(self.path, command)).acquire()
        return self.writer

    # --- queries -----------------------------------------------------------
    @property
    def latency_ms(self) -> Latency:
        return run_latency(self.locked, self.settings)

    @property
    def inference(self) -> LockedInference:
        return run_inference(self.locked)

    @property
    def render_profile(self) -> RenderProfile:
        """The profile the simulated arm draws the policy's frames with; a sheet locked before profiles existed
        was drawn with the legacy one."""
        return self.locked.render_profile or LEGACY_PROFILE

    @property
    def inference_engine(self) -> InferenceEngine:
        return self.inference.engine

    @property
    def trial_indices(self) -> list[int]:
        return [t.index for t in self.locked.trials]

    def final_attempt(self, trial_index: int) -> Attempt | None:
        return self.chain.final(trial_index)

    def pending_trials(self) -> list[int]:
        """Trials without a final (non-void) outcome, in protocol order; none once the
        pre-registered stopping rule is met."""
        if self.stopped_by_rule() is not None:
            return []
        return [i for i in self.trial_indices if self.final_attempt(i) is None]

    def stopped_by_rule(self) -> str | None:
        """Why the locked stopping rule ended the run early, or None. Derived, never stored."""
        rule = self.locked.stopping_rule
        if rule.kind == "sequential" and self.locked.comparison is not None:
            return self.comparison.decided()
        if rule.kind != "wilson_width" or rule.max_width is None:
            return None
        scored = self.scored_attempts()
        if len(scored) < rule.min_trials or len(scored) >= len(self.trial_indices):
            return None
        k = sum(1 for a in scored if a.label is Label.SUCCESS)
        low, high = wilson_interval(k, len(scored))
        if high - low <= rule.max_width:
            return (f"95% Wilson interval {high - low:.3f} wide after {len(scored)} trials "
                    f"(rule: at most {rule.max_width} after at least {rule.min_trials})")
        return None

    def scored_attempts(self) -> list[Attempt]:
        return [a for a in self.attempts if a.label is not Label.VOID]

    def next_attempt_number(self, trial_index: int) -> int:
        return 1 + self.chain.tries(trial_index)

    @property
    def complete(self) -> bool:
        return not self.pending_trials()

    @property
    def still_blind(self) -> bool:
        """A blind comparison whose arms are still sealed: not ended and no unblinding record in the chain. While
        it is, a run withholds each trial's timing (it would name the slower arm); after `report --unblind` the
        arms are named anyway, so nothing is left to withhold."""
        return self.locked.blind_comparison and not self.unblindings and not self.complete

    # --- mutation ----------------------------------------------------------
    def add_attempt(self, attempt: Attempt) -> Attempt:
        if attempt.trial_index not in self._trial_set:
            raise HarnessInputError(self.path, "trial_index", f"{attempt.trial_index} is not in the locked trial list")
        if self.final_attempt(attempt.trial_index) is not None:
            raise HarnessInputError(self.path, "trial_index", f"trial {attempt.trial_index} is already scored")
        if attempt.supersedes is not None:
            raise HarnessInputError(self.path, "supersedes", "a re-score is recorded with `supersede`")
        return self._add_record(attempt)

    def supersede(self, original: Attempt, label: Label, note: str | None = None,
                  void_reason: str | None = None) -> Attempt:
        """Re-score a recorded attempt (the operator's undo): a new record of the same attempt with the new
        label, naming the record it replaces by its chain hash. The original stays in the file and the chain;
        only the latest record of an attempt counts. Refused once the trial has been tried again."""
        return self._add_record(rescored(original, Label(label), note, void_reason, at=now_iso()))

    def _add_record(self, attempt: Attempt) -> Attempt:
        problem = self.chain.problem(attempt)
        if problem:
            raise HarnessInputError(self.path, "supersedes" if attempt.supersedes else "attempt", problem)
        chained = _chained(attempt, self.records[-1].chain_sha256 if self.records else self.lock["sha256"])
        self._append([("attempt", chained, len(self.records) + 1)])
        self.chain.add(chained)
        return chained

    def add_measurement(self, measurement: PlacementMeasurement) -> PlacementMeasurement:
        return self.add_measurements([measurement])[0]

    def add_measurements(self, measurements: list[PlacementMeasurement]) -> list[PlacementMeasurement]:
        """Record several measurements with one write (what one `harness measure` command does)."""
        recorded = {(a.trial_index, a.attempt) for a in self.records}
        previous = self.measurements[-1].chain_sha256 if self.measurements else self.lock["sha256"]
        chained = []
        for measurement in measurements:
            if (measurement.trial_index, measurement.attempt) not in recorded:
                raise HarnessInputError(self.path, "measurements", f"trial {measurement.trial_index} attempt "
                                                                   f"{measurement.attempt} is not recorded")
            chained.append(_chained(measurement, previous))
            previous = chained[-1].chain_sha256
        start = len(self.measurements)
        self._append([("measurement", m, start + i + 1) for i, m in enumerate(chained)])
        self.measurements.extend(chained)
        return chained

    def add_unblinding(self, at: str, note: str) -> Unblinding:
        """Record that a blind comparison's arms were revealed while it was open, in the sheet's own chain."""
        previous = self.unblindings[-1].chain_sha256 if self.unblindings else self.lock["sha256"]
        record = _chained(Unblinding(at=at, scored_trials=len(self.scored_attempts()), note=note), previous)
        self._append([("unblinding", record, len(self.unblindings) + 1)])
        self.unblindings.append(record)
        return record

    def _writer(self) -> WriterLock:
        """The writer lock this sheet holds (a run's, held to its end), else one taken for this write."""
        return self.writer if self.writer is not None and self.writer.held else WriterLock(self.path)

    def _append(self, entries: list[tuple[str, BaseModel, int]]) -> None:
        """Make records durable under the writer lock: appended when possible, else the file rewritten."""
        if not entries:
            return
        with self._writer():
            raws = [(kind, record.model_dump(mode="json"), count) for kind, record, count in entries]
            if self.stored is None or not self.stored.canonical or self.stored.format != FORMAT:
                records = self._all_records() + [(kind, raw) for kind, raw, _ in raws]
                seen = self.stored.progress_seen if self.stored is not None else 0
                self.stored = journal.write_all(self.path, self._header(), records, seen)
            else:
                journal.append(self.path, self.stored, raws)

    def placement_error(self, attempt: Attempt) -> float | None:
        """The simulator's true error when there is one, else the latest pixel measurement."""
        if attempt.placement_error_cm is not None:
            return attempt.placement_error_cm
        for m in reversed(self.measurements):
            if (m.trial_index, m.attempt) == (attempt.trial_index, attempt.attempt):
                return m.placement_error_cm
        return None

    def changed_on_disk(self) -> bool:
        """Whether the file (or its witness) is not what this object read or wrote last, or a new
        sheet's file has appeared: checked after taking the writer lock, before trusting a read."""
        if self.stored is None:
            return self.path.exists()
        witness = journal.witness_path(self.path)
        try:
            size = self.path.stat().st_size
            witness_size = witness.stat().st_size if witness.exists() else 0
        except OSError:
            return True
        return size != self.stored.size or (self.stored.format == FORMAT and witness_size != self.stored.witness_size)

    def create(self) -> Scoresheet:
        """Write a new sheet (under the writer lock); refuses to replace an existing one."""
        with self._writer():
            if self.path.exists() or self.path.is_symlink():
                raise HarnessInputError(self.path, None, "a scoresheet already exists here; use --resume")
            self.save()
        return self

    def _header(self) -> dict[str, Any]:
        return {"format": FORMAT, "locked": self.locked_data, "lock": self.lock, "settings": self.settings.stored()}

    def save(self) -> None:
        """Rewrite the whole sheet and its witness atomically (creation and format conversion only)."""
        self.stored = journal.write_all(self.path, self._header(), self._all_records())

    def _all_records(self) -> list[tuple[str, dict[str, Any]]]:
        """Every record, by kind, as the file holds them (each kind's chain in its own order)."""
        records = [("attempt", a.model_dump(mode="json")) for a in self.records]
        records += [("measurement", m.model_dump(mode="json")) for m in self.measurements]
        records += [("unblinding", u.model_dump(mode="json")) for u in self.unblindings]
        return records

    def to_yaml(self) -> str:
        records = self._all_records()
        body = journal.header_bytes(self._header()) + b"".join(journal.record_line(k, r) for k, r in records)
        return body.decode()


def _chain_hash(record: BaseModel, previous: str) -> str:
    body = record.model_dump(mode="json", exclude={"chain_sha256"})
    return sha256_of({"prev": previous, "record": body})


def _chained[R: BaseModel](record: R, previous: str) -> R:
    """The record with its link in the hash chain: any later edit of it, or of one before it, shows."""
    return record.model_copy(update={"chain_sha256": _chain_hash(record, previous)})


def _verified_chain[R: (Attempt, PlacementMeasurement, Unblinding)](
        path: Path, section: str, raws: list[Any], model: type[R], start: str,
        bodies: list[bytes | None] | None = None) -> list[R]:
    """Validate each record and check its link in the chain.

    `bodies`: each record's canonical bytes as they lie on disk (format 2 as written), so a link
    is checked without encoding the record again; otherwise (a sheet reformatted by a YAML
    tool, format 1) the link is checked over the validated model, as format 1 always did.
    """
    records = []
    previous = start
    for position, raw in enumerate(raws):
        body = bodies[position] if bodies else None
        if not isinstance(raw, dict):
            raise HarnessInputError(path, f"{section}[{position}]", "not a mapping")
        try:
            record = model.model_validate(raw)
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise HarnessInputError(path, f"{section}[{position}].{field}", first["msg"]) from None
        expected = journal.link_sha256(previous, body) if body is not None else _chain_hash(record, previous)
        if record.chain_sha256 != expected:
            raise StaleRunError(path, f"{section}[{position}]", "changed after it was recorded (edited by hand?)")
        previous = expected
        records.append(record)
    return records


def build_locked(protocol: Protocol, protocol_path: Path, policy_ref: str, robot: RobotKind | str,
                 optional: dict[str, Any] | None = None, fingerprint: str | None = None) -> dict[str, Any]:
    """`optional`: values for `OPTIONAL_LOCKED_FIELDS` (the latency model, the inference engine);
    `fingerprint`: the policy's, when the caller resolved it (a Hub id's commit), else a local folder's."""
    unknown = sorted(set(optional or {}) - set(OPTIONAL_LOCKED_FIELDS))
    if unknown:
        raise ValueError(f"not an optional locked field: {unknown[0]}")
    return {
        "task": protocol.task,
        "success_definition": protocol.success_definition,
        "taxonomy": locked_labels(protocol.failure_taxonomy),   # its version's labels: comparable across versions
        "trial_count": len(protocol.trials),
        "trials": [t.model_dump(mode="json") for t in protocol.trials],
        "protocol_file": str(protocol_path),
        "protocol_sha256": file_sha256(protocol_path),
        "policy": {"ref": policy_ref, "fingerprint": fingerprint or policy_fingerprint(policy_ref)},
        "robot": RobotKind(robot).value,
        "stopping_rule": protocol.stopping_rule.model_dump(mode="json"),
        **{name: (optional or {})[name] for name in OPTIONAL_LOCKED_FIELDS if name in (optional or {})},
    }


def hashed_fields(locked: dict[str, Any]) -> list[str]:
    """The locked fields a lock hashes one by one: every required one, and the optional ones present."""
    return [*LOCKED_FIELDS, *(name for name in OPTIONAL_LOCKED_FIELDS if name in locked)]


def lock_scoresheet(path: Path, locked: dict[str, Any], settings: RunSettings | dict[str, Any]) -> Scoresheet:
    """Create and write a new scoresheet; refuses to overwrite an existing one."""
    return new_scoresheet(path, locked, settings).create()


def new_scoresheet(path: Path, locked: dict[str, Any], settings: RunSettings | dict[str, Any]) -> Scoresheet:
    """A locked scoresheet not yet on disk: `create()` writes it once every check has passed, so
    a run refused for bad input or an arm that never connected leaves nothing behind."""
    if path.exists() or path.is_symlink():
        raise HarnessInputError(path, None, "a scoresheet already exists here; use --resume or another --scoresheet")
    locked = {**locked, "journal": {"format": journal.FORMAT_NUMBER, "id": uuid.uuid4().hex}}
    lock = {
        "sha256": sha256_of(locked),
        "field_sha256": {name: sha256_of(locked[name]) for name in hashed_fields(locked)},
        "locked_at": now_iso(),
    }
    return Scoresheet(path, locked, lock, RunSettings.model_validate(settings), [])


def load_scoresheet(path: str | Path) -> Scoresheet:
    """Load and verify: format, lock hash per field, the attempt chain, and its witnesses."""
    return _load(Path(path))


def repair_chain(path: Path, audit: Callable[[Scoresheet], None]) -> int:
    """`harness sheet repair-chain`: verify every record's own hash chain (and what `audit` checks: the run's
    evidence), then rebuild the `.chain` from them and record the repair in the progress witness, under the
    writer lock; returns the records witnessed."""
    with WriterLock(path, "harness sheet repair-chain"):
        audit(_load(path, repair=True))   # the records' own chains, the lock and the progress witness verified
        contents = journal.read(path, repair=True)
        journal.rebuild_witness(path, contents)
        return len(contents.records)


def _load(path: Path, repair: bool = False) -> Scoresheet:
    stored = journal.read(path, repair=repair)
    data = stored.header
    locked, lock = data["locked"], data["lock"]
    field_hashes = lock.get("field_sha256") or {}
    for name in LOCKED_FIELDS:
        if name not in locked:
            raise StaleRunError(path, f"locked.{name}", "missing from a locked scoresheet")
    for name in OPTIONAL_LOCKED_FIELDS:
        if name not in locked and name in field_hashes:
            raise StaleRunError(path, f"locked.{name}", "removed after the scoresheet was locked")
    for name in hashed_fields(locked):
        if sha256_of(locked[name]) != field_hashes.get(name):
            raise StaleRunError(path, f"locked.{name}", "changed after the scoresheet was locked (edited by hand?)")
    unknown = sorted(set(locked) - set(LOCKED_FIELDS) - set(OPTIONAL_LOCKED_FIELDS))
    if unknown:
        raise StaleRunError(path, f"locked.{unknown[0]}", "added after the scoresheet was locked")
    if sha256_of(locked) != lock.get("sha256") or sha256_of(field_hashes) != sha256_of(
        {n: sha256_of(locked[n]) for n in hashed_fields(locked)}
    ):
        raise StaleRunError(path, "lock.sha256", "does not match the locked fields")
    if not isinstance(locked.get("trials"), list) or not all(isinstance(t, dict) and "index" in t
                                                              for t in locked["trials"]):
        raise HarnessInputError(path, "locked.trials", "not a list of trials")
    try:
        LockedBlock.model_validate(locked)
    except ValidationError as err:
        first = err.errors()[0]
        raise HarnessInputError(path, "locked." + ".".join(str(p) for p in first["loc"]), first["msg"]) from None
    def chain_of[R: (Attempt, PlacementMeasurement, Unblinding)](kind: str, model: type[R]) -> list[R]:
        picked = [i for i, (k, _) in enumerate(stored.records) if k == kind]
        bodies = [stored.bodies[i] for i in picked] if stored.bodies else None
        return _verified_chain(path, f"{kind}s", [stored.records[i][1] for i in picked], model, lock["sha256"], bodies)

    attempts = chain_of("attempt", Attempt)
    measurements = chain_of("measurement", PlacementMeasurement)
    unblindings = chain_of("unblinding", Unblinding)
    stored.records, stored.bodies = [], []   # the models are the record now; `stored` only locates the tail
    raw_settings = data.get("settings") or {}
    if not isinstance(raw_settings, dict):
        raise HarnessInputError(path, "settings", "not a mapping")
    try:
        settings = RunSettings.model_validate(raw_settings)
    except ValidationError as err:
        first = err.errors()[0]
        raise HarnessInputError(path, "settings." + ".".join(str(p) for p in first["loc"]), first["msg"]) from None
    return Scoresheet(path, locked, lock, settings, attempts, measurements, stored, unblindings)


class Drift(StrEnum):
    """What no longer matches what a scoresheet locked: its numbers describe the old version."""

    PROTOCOL_CHANGED = "the protocol file changed since the sheet was locked"
    PROTOCOL_MISSING = "the protocol file is not where the sheet was locked (cannot check it)"
    CHECKPOINT_CHANGED = "the checkpoint's files changed since the sheet was locked"
    CHECKPOINT_MISSING = "the checkpoint folder is not where the sheet was locked (cannot check it)"


def drift(sheet: Scoresheet, fingerprint_of: Callable[[str], str] = policy_fingerprint) -> list[Drift]:
    """Compare the protocol file and checkpoint on disk now with the hashes the sheet locked;
    `fingerprint_of` fingerprints a policy reference now (a Hub id: from the cache, never downloading)."""
    found = []
    protocol = Path(sheet.locked.protocol_file)
    if not protocol.is_file():
        found.append(Drift.PROTOCOL_MISSING)
    elif file_sha256(protocol) != sheet.locked.protocol_sha256:
        found.append(Drift.PROTOCOL_CHANGED)
    locked_policy = sheet.locked.policy
    if sheet.locked.comparison is not None:   # each arm's checkpoint is sealed; checked when revealed
        return found
    if not locked_policy.fingerprint.startswith("builtin:"):
        try:
            now: str | None = fingerprint_of(locked_policy.ref)
        except HarnessInputError:   # a Hub id no longer in the cache
            now = None
        if now is None or now.startswith("builtin:"):   # a folder that is gone fingerprints as a name
            found.append(Drift.CHECKPOINT_MISSING)
        elif now != locked_policy.fingerprint:
            found.append(Drift.CHECKPOINT_CHANGED)
    return found


def check_resumable(sheet: Scoresheet, protocol_path: Path, policy_ref: str | None,
                    fingerprint_of: Callable[[str], str] = policy_fingerprint) -> None:
    """Refuse to resume when the protocol file or policy checkpoint differs from what was locked (a Hub
    policy: its cached revision moved to another commit)."""
    if sheet.locked.comparison is not None:
        raise StaleRunError(sheet.path, "--policy", "this scoresheet is a blind comparison: resume it with the same "
                                                    "set of --policy flags (in any order)")
    if file_sha256(protocol_path) != sheet.locked.protocol_sha256:
        raise StaleRunError(
            protocol_path, "protocol_sha256",
            f"the protocol changed since {sheet.path} was locked; restore it or start a new scoresheet",
        )
    ref = policy_ref or sheet.locked.policy.ref
    if ref != sheet.locked.policy.ref:
        raise StaleRunError(sheet.path, "policy.ref", f"locked to '{sheet.locked.policy.ref}', not '{ref}'")
    now = fingerprint_of(ref)
    if now != sheet.locked.policy.fingerprint:
        what = (f"the Hub revision moved to {now.rsplit('@', 1)[-1][:12]} (locked: "
                f"{sheet.locked.policy.fingerprint.rsplit('@', 1)[-1][:12]})" if now.startswith("hub:")
                else "the checkpoint's files changed")
        raise StaleRunError(ref, "policy.fingerprint", f"{what} since {sheet.path} was locked")
