"""Emergency stop and abort through the run engine on the simulated arm: torque off, nothing lost."""

from __future__ import annotations

import io
import threading

import pytest

import harness.sim  # noqa: F401
from harness.errors import EmergencyStopped, RunPaused
from harness.models.protocol import load_protocol
from harness.models.taxonomy import VoidKind
from harness.policies.scripted import ExpertPolicy
from harness.run.clock import MonotonicClock
from harness.run.engine import RunEngine, RunOptions
from harness.run.safety import GuardedRobot
from harness.run.stages import SimStage
from harness.run.terminal import TerminalObserver
from harness.sim.config_sim_so101 import SimSO101Config
from harness.sim.sim_so101 import SimSO101
from tests.helpers import locked_sheet

pytestmark = pytest.mark.slow  # every test here runs the simulated arm through whole trials


class KeyAt(TerminalObserver):
    """Presses a key (a callback) at a given step of a given trial."""

    def __init__(self, trial: int, step: int, press) -> None:
        super().__init__(operator_scores=False, out=io.StringIO())
        self.at, self.press, self.trial, self.aborted = (trial, step), press, 0, False

    def trial_started(self, trial, attempt, done, total) -> None:
        self.trial = trial.index

    def step(self, step, timing) -> None:
        if (self.trial, step) == self.at:
            self.press(self)

    def stop_requested(self) -> bool:
        return self.aborted


def _engine(tmp_path, observer):
    sheet = locked_sheet(tmp_path)
    protocol = load_protocol(tmp_path / "small.yaml")
    robot = SimSO101(SimSO101Config(render_cameras=[]))
    robot.connect()
    guard = GuardedRobot(robot, release=robot.disable_torque, simulated=robot)
    options = RunOptions(runs_dir=tmp_path / "runs", video=False)
    engine = RunEngine(protocol, sheet, guard, ExpertPolicy(), SimStage(robot.world, protocol), observer,
                       MonotonicClock(), options)
    return engine, guard, robot


def test_emergency_stop_mid_trial_releases_torque_and_voids_the_trial(tmp_path) -> None:
    observer = KeyAt(2, 40, lambda obs: guard.emergency_stop())
    engine, guard, robot = _engine(tmp_path, observer)
    with pytest.raises(RunPaused, match="emergency stop"):
        engine.run()
    assert robot.torque_enabled is False
    assert [(a.trial_index, a.outcome, a.void_reason) for a in engine.sheet.attempts] == [
        (1, "success", None), (2, "void", VoidKind.EMERGENCY_STOP.value)]
    with pytest.raises(EmergencyStopped):
        guard.send_action({"gripper.pos": 50.0})


def test_emergency_stop_from_another_thread_takes_effect_within_a_step(tmp_path) -> None:
    engine, guard, robot = _engine(tmp_path, KeyAt(0, 0, lambda obs: None))
    at_press: dict[str, float | bool] = {}

    def press() -> None:
        guard.emergency_stop()
        # after the call returns: torque is off and no motion command can follow
        at_press.update(torque=robot.torque_enabled, sim_time=robot.world.time)

    presser = threading.Timer(0.5, press)
    presser.start()
    with pytest.raises(RunPaused, match="emergency stop"):
        engine.run()
    presser.join()
    assert at_press["torque"] is False
    assert robot.world.time == at_press["sim_time"], "the simulated arm never moved after the stop"
    assert robot.torque_enabled is False
    # wherever it landed (start-pose move or mid-trial), nothing but the e-stop void is unfinished
    assert all(a.outcome == "success" or a.void_reason == VoidKind.EMERGENCY_STOP for a in engine.sheet.attempts)


def test_abort_voids_the_trial_in_flight_returns_to_the_start_pose_and_pauses_resumably(tmp_path) -> None:
    def abort(obs: KeyAt) -> None:
        obs.aborted = True

    engine, _, robot = _engine(tmp_path, KeyAt(2, 40, abort))
    with pytest.raises(RunPaused) as paused:
        engine.run()
    assert paused.value.void.kind is VoidKind.OPERATOR_ABORT and paused.value.exit_code == 3
    assert [(a.trial_index, a.void_reason) for a in engine.sheet.attempts] == [
        (1, None), (2, VoidKind.OPERATOR_ABORT.value)]
    assert engine.sheet.pending_trials() == [2, 3]
    assert robot.torque_enabled is False, "the engine releases torque itself when the run ends"
    pose = robot.present_position()
    assert all(abs(pose[f"{name}.pos"] - value) < 3.0
               for name, value in engine.protocol.start_pose.items() if name != "gripper")


class FlakyBus:
    """The simulated arm whose servo bus stops answering at one step, as a loose cable does."""

    def __init__(self, robot, fail_at_call: int) -> None:
        self.robot, self.fail_at, self.calls = robot, fail_at_call, 0

    def __getattr__(self, name):
        return getattr(self.robot, name)

    def send_action(self, action):
        self.calls += 1
        if self.calls == self.fail_at:
            raise ConnectionError("Failed to sync write 'Goal_Position' on ids=[1, 2, 3, 4, 5, 6] after 1 tries. "
                                  "[TxRxResult] There is no status packet!")
        return self.robot.send_action(action)


def test_a_bus_error_voids_the_trial_pauses_the_run_and_releases_torque(tmp_path) -> None:
    sheet = locked_sheet(tmp_path)
    protocol = load_protocol(tmp_path / "small.yaml")
    robot = SimSO101(SimSO101Config(render_cameras=[]))
    robot.connect()
    guard = GuardedRobot(FlakyBus(robot, fail_at_call=400), release=robot.disable_torque, simulated=robot)  # in trial 2
    observer = KeyAt(0, 0, lambda obs: None)
    engine = RunEngine(protocol, sheet, guard, ExpertPolicy(), SimStage(robot.world, protocol), observer,
                       MonotonicClock(), RunOptions(runs_dir=tmp_path / "runs", video=False))
    with pytest.raises(RunPaused, match="robot I/O error: ConnectionError") as paused:
        engine.run()
    assert paused.value.void.kind is VoidKind.ROBOT_IO_ERROR
    assert robot.torque_enabled is False, "the engine releases torque itself when the run pauses"
    assert [(a.trial_index, a.outcome) for a in sheet.attempts] == [(1, "success"), (2, "void")]
    assert "There is no status packet" in sheet.attempts[1].void_reason
    assert sheet.pending_trials() == [2, 3]
