"""A `--workers` run's driver (`app.parallel.runs.ParallelRun`) sequences its workers' attempts with a serial run's
own `run.sequencing.TrialSequence`: in-process, with scripted workers whose trials finish out of order, the
scoresheet is the serial run's, a pausing void pauses at the same place with later results unrecorded, and
`--max-trials` with a void retried cannot leave the driver waiting on a trial it never started."""

from __future__ import annotations

import io
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import NoReturn

import pytest

from harness.app.parallel.runs import ParallelRun
from harness.app.parallel.workers import TrialResult
from harness.errors import RunPaused
from harness.models.protocol import Trial, load_protocol
from harness.models.scoresheet import Scoresheet, load_scoresheet
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import Label, Void, VoidKind
from harness.run.disk_room import TrialRoom
from harness.run.sequencing import TrialSequence
from harness.run.terminal import TerminalObserver
from tests.helpers import fake_attempt, locked_sheet

Script = dict[tuple[int, int], Void | None]   # (trial, attempt) -> its void; absent: a success


def _result(index: int, number: int, script: Script) -> TrialResult:
    void = script.get((index, number))
    label = Label.VOID if void is not None else Label.SUCCESS
    attempt = fake_attempt(index, number, label, void_reason=void.reason if void is not None else None)
    return TrialResult(index, attempt, void, None)


class Worker:
    """A worker running the script's outcomes. Its `late` attempts finish only once the other worker has been
    handed a later trial, so the driver holds results that came in out of trial order."""

    def __init__(self, name: str, script: Script, late: frozenset[tuple[int, int]] = frozenset()) -> None:
        self.name, self.script, self.late = name, script, late
        self.worker = self   # `LocalWorker.worker`: what the stop key reaches
        self.ran: list[tuple[int, int]] = []
        self.held: list[tuple[Future[TrialResult], int, int]] = []
        self.peer: Worker | None = None
        self.stopped = False

    def submit(self, index: int, number: int) -> Future[TrialResult]:
        self.ran.append((index, number))
        future: Future[TrialResult] = Future()
        if (index, number) in self.late:
            self.held.append((future, index, number))
        else:
            future.set_result(_result(index, number, self.script))
        if self.peer is not None:
            self.peer.finish_held()
        return future

    def finish_held(self) -> None:
        held, self.held = self.held, []
        for future, index, number in held:
            stop = {(index, number): Void(VoidKind.EMERGENCY_STOP)} if self.stopped else {}
            future.set_result(_result(index, number, {**self.script, **stop}))

    def shut_gate(self) -> None:
        self.stopped = True

    def emergency_stop(self) -> None:
        self.stopped = True
        self.finish_held()   # the trial in flight comes back void


class RayWorkers:
    """The Ray workers of the run: `worker`, ready at once."""

    def __init__(self, worker: Worker) -> None:
        self.pending = [worker]

    def newly_ready(self, wait_s: float = 0.0) -> list[Worker]:
        ready, self.pending = self.pending, []
        return ready

    def emergency_stop(self) -> None:
        for worker in self.pending:
            worker.emergency_stop()


class StopAfter(TerminalObserver):
    """Plain mode's observer; presses the stop key once trial `at` is recorded."""

    def __init__(self, at: int | None = None) -> None:
        super().__init__(operator_scores=False, out=io.StringIO())
        self.at = at
        self.run: ParallelRun | None = None

    def trial_scored(self, attempt: Attempt) -> None:
        super().trial_scored(attempt)
        if attempt.trial_index == self.at and self.run is not None:
            self.run.emergency_stop()


def _parallel(tmp_path: Path, script: Script, max_attempts: int | None = None, observer: StopAfter | None = None,
              late: frozenset[tuple[int, int]] = frozenset({(1, 1)})) -> tuple[ParallelRun, Worker, Worker]:
    """`--workers 2`: the driver's own worker, whose `late` attempts finish after Ray's next trial, and one Ray
    worker, ready at once."""
    sheet = locked_sheet(tmp_path)
    local, ray = Worker("driver", script, late), Worker("ray-1", script)
    ray.peer = local
    run = ParallelRun(load_protocol(tmp_path / "small.yaml"), sheet, observer or StopAfter(),
                      local, RayWorkers(ray), tmp_path / "runs", max_attempts)  # type: ignore[arg-type]
    if observer is not None:
        observer.run = run
    return run, local, ray


class SerialMaker:
    """A serial run's attempts, one after another, with the script's outcomes."""

    def __init__(self, sheet: Scoresheet, script: Script) -> None:
        self.sheet, self.script = sheet, script

    def attempt(self, trial: Trial, number: int) -> tuple[Attempt, Void | None]:
        result = _result(trial.index, number, self.script)
        return self.sheet.add_attempt(result.attempt), result.void

    def emergency_stopped(self) -> bool:
        return False

    def abort(self) -> NoReturn:
        raise RunPaused(Void(VoidKind.OPERATOR_ABORT))


def _serial(folder: Path, script: Script, max_attempts: int | None = None) -> Scoresheet:
    folder.mkdir()
    sheet = locked_sheet(folder)
    sequence = TrialSequence(load_protocol(folder / "small.yaml"), sheet, StopAfter(), SerialMaker(sheet, script),
                             TrialRoom(folder / "runs", sheet.path), max_attempts)
    sequence.run()
    return sheet


def _serial_sheet(folder: Path) -> Scoresheet:
    return load_scoresheet(folder / "sheet.yaml")


def _records(sheet: Scoresheet) -> list[tuple[int, int, str, str | None]]:
    return [(a.trial_index, a.attempt, a.label.value, a.void_reason) for a in sheet.attempts]


def _run_with_deadline(run: ParallelRun) -> int:
    """`run.run()`, failing the test (not hanging it) where the driver waits on a trial no worker runs."""
    outcome: list[int | BaseException] = []

    def target() -> None:
        try:
            outcome.append(run.run())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert outcome, "the driver never finished: it waits on a trial it never handed to a worker"
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def test_results_that_finish_out_of_order_are_recorded_as_a_serial_run_records_them(tmp_path) -> None:
    script: Script = {(2, 1): Void(VoidKind.OPERATOR_VOID, "cube knocked")}   # a void that does not pause
    run, local, ray = _parallel(tmp_path, script)
    assert _run_with_deadline(run) == 4
    serial = _serial(tmp_path / "serial", script)
    assert _records(run.sheet) == _records(serial) == [
        (1, 1, "success", None), (2, 1, "void", "cube knocked"), (2, 2, "success", None),
        (3, 1, "success", None)]
    assert (2, 1) in ray.ran and (1, 1) in local.ran   # trial 2 finished on Ray while trial 1 was still running
    assert run.recorded == 4 and sum(run.ran_by.values()) == 4


def test_a_pausing_void_pauses_where_a_serial_run_would_with_later_results_unrecorded(tmp_path) -> None:
    script: Script = {(2, 1): Void(VoidKind.ROBOT_IO_ERROR, "servo 3")}
    run, local, ray = _parallel(tmp_path, script)
    with pytest.raises(RunPaused) as paused:
        run.run()
    assert paused.value.void.kind is VoidKind.ROBOT_IO_ERROR
    with pytest.raises(RunPaused):
        _serial(tmp_path / "serial", script)
    assert _records(run.sheet) == _records(_serial_sheet(tmp_path / "serial")) == [
        (1, 1, "success", None), (2, 1, "void", "robot I/O error: servo 3")]
    assert (3, 1) in local.ran + ray.ran   # run ahead of the pause, and dropped: a resume runs it again
    assert run.sheet.pending_trials() == [2, 3]


def test_max_trials_with_a_void_retried_runs_the_trial_again_rather_than_waiting_for_it(tmp_path) -> None:
    """Two attempts allowed, both handed out at once (trials 1 and 2); trial 1 is voided and must run again:
    the driver used to count trial 2's unrecorded result against the limit and never started trial 1 again."""
    script: Script = {(1, 1): Void(VoidKind.OPERATOR_VOID, "cube knocked")}
    run, local, ray = _parallel(tmp_path, script, max_attempts=2)
    assert _run_with_deadline(run) == 2
    assert sorted(local.ran + ray.ran) == [(1, 1), (1, 2), (2, 1)]   # trial 3 never started: no attempt left for it
    assert _records(run.sheet) == _records(_serial(tmp_path / "serial", script, max_attempts=2)) == [
        (1, 1, "void", "cube knocked"), (1, 2, "success", None)]
    assert run.sheet.pending_trials() == [2, 3]


def test_the_stop_key_voids_the_trial_in_flight_and_pauses_the_run(tmp_path) -> None:
    observer = StopAfter(at=1)
    run, local, ray = _parallel(tmp_path, {}, observer=observer, late=frozenset({(1, 1), (3, 1)}))
    with pytest.raises(RunPaused) as paused:
        _run_with_deadline(run)
    assert paused.value.void.kind is VoidKind.EMERGENCY_STOP
    recorded = _records(run.sheet)
    assert recorded[0] == (1, 1, "success", None)
    # trial 2 finished on Ray before the stop and is recorded; trial 3, in flight on the driver's worker when
    # the stop came, comes back an emergency-stop void; nothing is started after it
    assert [r[:3] for r in recorded[1:]] == [(2, 1, "success"), (3, 1, "void")]
    assert recorded[-1][3].startswith(VoidKind.EMERGENCY_STOP.value)
    assert len(local.ran) + len(ray.ran) == 3
