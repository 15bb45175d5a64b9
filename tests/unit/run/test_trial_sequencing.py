"""`run.engine.RunEngine`'s own job, trial sequencing and voids, on a manual clock with a scripted operator: which
trial runs next, when the run stops or pauses, what a void records, and torque off on every way out."""

from __future__ import annotations

import pytest

from harness.errors import RunPaused
from harness.models.protocol import load_protocol
from harness.models.taxonomy import Label, VoidKind
from harness.run.clock import ManualClock
from harness.run.engine import RunEngine, RunOptions, ScoreDecision
from harness.run.safety import GuardedRobot
from tests.helpers import locked_sheet
from tests.unit.run.test_loop_timing import CostlyPolicy, PersonStage, Scorer, SlowRobot, _live


class FailsInTrial(SlowRobot):
    """A robot whose bus times out on the `at`-th observation."""

    def __init__(self, clock: ManualClock, at: int) -> None:
        super().__init__(clock, 0.004, _live)
        self.at = at

    def get_observation(self):
        if self.calls + 1 == self.at:
            self.calls += 1
            raise TimeoutError("no status packet from servo 3")
        return super().get_observation()


class Voids(Scorer):
    """Voids the first trial in its own words, scores the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def score(self, trial, verdict, void):
        self.asked += 1
        if void is not None:
            return ScoreDecision(Label.VOID, void)
        return ScoreDecision(Label.VOID, note="cube knocked before the start") if self.asked == 1 else \
            ScoreDecision(Label.NO_GRASP)


def _engine(tmp_path, robot, observer, max_attempts=None) -> RunEngine:
    clock = robot.clock
    sheet = locked_sheet(tmp_path)
    protocol = load_protocol(tmp_path / "small.yaml").model_copy(update={"episode_time_limit_s": 0.5})
    options = RunOptions(runs_dir=tmp_path / "runs", paced=True, video=False, evidence_cameras=[], start_pose_s=0.1,
                         max_attempts=max_attempts)
    guard = GuardedRobot(robot, release=robot.disable_torque)
    return RunEngine(protocol, sheet, guard, CostlyPolicy(clock, [0.005]), PersonStage(), observer, clock, options)


def test_trials_run_in_order_and_max_attempts_stops_a_resumable_run(tmp_path) -> None:
    robot = SlowRobot(ManualClock(), 0.004, _live)
    engine = _engine(tmp_path, robot, Scorer(), max_attempts=2)
    assert engine.run() == 2
    assert [(a.trial_index, a.attempt, a.label) for a in engine.sheet.attempts] == [(1, 1, "no_grasp"),
                                                                                    (2, 1, "no_grasp")]
    assert engine.sheet.pending_trials() == [3] and robot.torque_enabled is False


def test_an_operators_void_is_recorded_and_the_trial_is_run_again_without_pausing(tmp_path) -> None:
    robot = SlowRobot(ManualClock(), 0.004, _live)
    engine = _engine(tmp_path, robot, Voids())
    assert engine.run() == 4   # trial 1 twice (voided, then scored), then trials 2 and 3
    attempts = [(a.trial_index, a.attempt, a.label) for a in engine.sheet.attempts]
    assert attempts == [(1, 1, "void"), (1, 2, "no_grasp"), (2, 1, "no_grasp"), (3, 1, "no_grasp")]
    assert engine.sheet.attempts[0].void_reason.startswith(VoidKind.OPERATOR_VOID.value)


def test_a_robot_fault_mid_trial_is_a_void_that_pauses_the_run_with_torque_off(tmp_path) -> None:
    clock = ManualClock()
    robot = FailsInTrial(clock, at=5)   # the bus times out early in the first trial
    engine = _engine(tmp_path, robot, Scorer())
    with pytest.raises(RunPaused) as paused:
        engine.run()
    assert paused.value.void.kind is VoidKind.ROBOT_IO_ERROR and "servo 3" in paused.value.void.reason
    (attempt,) = engine.sheet.attempts
    assert attempt.trial_index == 1 and attempt.label == "void" and robot.torque_enabled is False
    assert engine.sheet.pending_trials() == [1, 2, 3]   # the resume retries it
