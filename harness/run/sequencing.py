"""A run's trial sequence: which trial is attempted next, and when the run stops or pauses.

Why a module of its own: a run's trials are attempted in two ways, one after another on this process's arm
(`run.engine.RunEngine`) or many at once on the workers of a `--workers` run, collected in trial order by the
driver (`app.parallel.runs.ParallelRun`); the scoresheet, the evidence and every pause must be the same either
way. So the sequence is written once, here, over an `AttemptMaker` that says how one attempt is made and
recorded: the first pending trial in protocol order next, a void that does not pause tried again in its place, a
void whose kind pauses the run raises `RunPaused` once it is recorded, `--max-trials` attempts at most, the
stopping rule obeyed (`Scoresheet.pending_trials` is empty once it is met), an emergency stop between trials
(and after the last one) a pause, a full disk a pause before the next trial (or when a write is refused),
and an operator's abort handed back to the maker to leave the arm safe.
"""

from __future__ import annotations

import logging
from typing import NoReturn, Protocol

from harness.errors import RunPaused, no_room
from harness.models.evidence_audit import evidence_folder_name
from harness.models.protocol import Protocol as EvalProtocol
from harness.models.protocol import Trial
from harness.models.scoresheet import Scoresheet
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import Void, VoidKind
from harness.run.disk_room import TrialRoom

log = logging.getLogger(__name__)


class SequenceObserver(Protocol):
    """What the sequence tells the front end about each attempt, and asks it between trials."""

    def trial_started(self, trial: Trial, attempt: int, done: int, total: int) -> None: ...
    def trial_scored(self, attempt: Attempt) -> None: ...
    def wait_if_paused(self) -> bool:
        """Called between trials: block while paused; False ends the run (aborted while paused)."""
        ...


class AttemptMaker(Protocol):
    """How one attempt is made and recorded: on this process's arm, or collected from a `--workers` run's
    workers."""

    def attempt(self, trial: Trial, number: int) -> tuple[Attempt, Void | None]:
        """Make attempt `number` at `trial` and append it to the scoresheet; returns it and the void that decides
        whether the run pauses (None when it was scored)."""
        ...

    def emergency_stopped(self) -> bool:
        """The emergency stop was pressed and no attempt is in flight that it would void: the run pauses here."""
        ...

    def abort(self) -> NoReturn:
        """The operator aborted: leave the arm where it is safe, then raise `RunPaused` (an operator abort)."""
        ...


class TrialSequence:
    """The pending trials of one locked scoresheet, attempted in order until done, paused or `max_attempts`
    attempts were recorded (None: no limit)."""

    def __init__(self, protocol: EvalProtocol, sheet: Scoresheet, observer: SequenceObserver, maker: AttemptMaker,
                 room: TrialRoom, max_attempts: int | None = None) -> None:
        self.protocol = protocol
        self.sheet = sheet
        self.observer = observer
        self.maker = maker
        self.room = room
        self.max_attempts = max_attempts

    def run(self) -> int:
        """Attempt pending trials; returns how many attempts were recorded. Raises `RunPaused` where the run
        pauses (the attempt that paused it recorded first)."""
        recorded = 0
        total = self._total()
        while self.sheet.pending_trials():
            self._pause_if_stopped()   # stopped between trials: nothing in flight to void
            if self.max_attempts is not None and recorded >= self.max_attempts:
                break
            self._check_between_trials()
            index = self.sheet.pending_trials()[0]
            attempt, void = self._attempt(self.protocol.trial(index), total)
            recorded += 1
            self.observer.trial_scored(attempt)
            if void is not None and void.kind is VoidKind.OPERATOR_ABORT:
                self.maker.abort()
            if void is not None and void.kind.pauses_run:
                log.info("run paused: %s", void.reason)
                raise RunPaused(void)
        self._pause_if_stopped()   # after the last trial was recorded: nothing voided, but it was stopped
        return recorded

    def _pause_if_stopped(self) -> None:
        """The emergency stop was pressed with no attempt in flight: the run pauses here."""
        if self.maker.emergency_stopped():
            raise RunPaused(Void(VoidKind.EMERGENCY_STOP))

    def _total(self) -> int:
        """The trials this run will attempt, for progress and time left: a --max-trials run stops short."""
        pending = len(self.sheet.pending_trials())
        limit = self.max_attempts
        return self.sheet.locked.trial_count - pending + (min(pending, limit) if limit is not None else pending)

    def _check_between_trials(self) -> None:
        """Before the next trial: an abort while paused, or an emergency stop pressed while the run waited on its
        pause, ends the run; so does a disk that has no room for the next trial's evidence."""
        if not self.observer.wait_if_paused():
            self.maker.abort()
        self._pause_if_stopped()   # pressed while the run waited on its pause
        short = self.room.shortfall()
        if short is not None:   # the next trial's evidence would not fit: nothing started, nothing lost
            raise RunPaused(short)

    def _attempt(self, trial: Trial, total: int) -> tuple[Attempt, Void | None]:
        """One recorded attempt at `trial`; a write refused for want of room pauses the run, saying whether the
        attempt in flight was recorded before the refusal."""
        number = self.sheet.next_attempt_number(trial.index)
        done = self.sheet.locked.trial_count - len(self.sheet.pending_trials())
        self.observer.trial_started(trial, number, done, total)
        records = len(self.sheet.attempts)
        try:
            attempt, void = self.maker.attempt(trial, number)
        except Exception as exc:
            errno = no_room(exc)
            if errno is None:
                raise
            raise RunPaused(self.room.refused(errno, getattr(exc, "filename", None),
                                              in_flight_recorded=len(self.sheet.attempts) > records)) from exc
        self.room.recorded(self.room.folder / evidence_folder_name(attempt.trial_index, attempt.attempt))
        return attempt, void
