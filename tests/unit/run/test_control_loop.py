"""`run.control_loop`: one episode's steps, timing, pacing and the ways it ends, on a manual clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.errors import EmergencyStopped, PolicyFailed
from harness.models.protocol import load_protocol
from harness.models.taxonomy import VoidKind
from harness.run.arm_motion import ArmMotion
from harness.run.clock import ManualClock
from harness.run.control_loop import ControlLoop, EpisodeOutcome, LoopSettings
from harness.run.evidence import EvidenceRecorder, VideoMode
from harness.run.safety import GuardedRobot
from tests.helpers import REPO
from tests.unit.run.test_loop_timing import CostlyPolicy, PersonStage, Scorer, SlowRobot, _live


class Failing(SlowRobot):
    """A robot whose `fail_at`-th observation raises `error`."""

    def __init__(self, clock: ManualClock, error: BaseException | None = None, fail_at: int = 0) -> None:
        super().__init__(clock, 0.004, _live)
        self.error, self.fail_at, self.sent = error, fail_at, 0

    def get_observation(self):
        if self.error is not None and self.calls + 1 == self.fail_at:
            raise self.error
        return super().get_observation()

    def send_action(self, action):
        self.sent += 1
        return super().send_action(action)


class StopsAt(Scorer):
    def __init__(self, step: int) -> None:
        super().__init__()
        self.at, self.steps = step, 0

    def step(self, step, timing) -> None:
        self.steps = step + 1

    def stop_requested(self) -> bool:
        return self.steps >= self.at


def _episode(tmp_path: Path, robot: SlowRobot, policy, observer=None, seconds: float = 1.0,
             paced: bool = True) -> tuple[EpisodeOutcome, ControlLoop, Scorer]:
    clock = robot.clock
    protocol = load_protocol(REPO / "tests" / "data" / "small.yaml").model_copy(
        update={"episode_time_limit_s": seconds})
    observer = observer or Scorer()
    guard = GuardedRobot(robot, release=robot.disable_torque)
    loop = ControlLoop(protocol, guard, policy, PersonStage(), observer, clock,
                       LoopSettings(paced=paced, evidence_cameras=[]), ArmMotion(guard, protocol.fps, clock, paced))
    recorder = EvidenceRecorder(tmp_path / "trial", [], lambda cam, w, h: None, protocol.fps, video=VideoMode.NONE)
    return loop.run(protocol.trials[0], recorder), loop, observer


def test_a_paced_episode_runs_to_its_time_limit_and_its_statistics_say_what_happened(tmp_path) -> None:
    clock = ManualClock()
    policy = CostlyPolicy(clock, [0.040] + [0.005] * 9)   # every tenth step late (a chunk refilled)
    episode, loop, _ = _episode(tmp_path, SlowRobot(clock, 0.004, _live), policy)
    assert episode.steps == 30 and episode.void is None and not episode.stopped_by_operator
    assert episode.missed == 3 and episode.realtime is not None   # asked for real-time priority when paced
    assert clock.now() == pytest.approx(27 / 30 + 3 * 0.044, abs=1e-6)   # on-time steps padded to the period
    stats = loop.stats(episode)
    assert stats.steps == 30 and stats.missed_deadlines == 3 and stats.target_fps == 30.0
    assert stats.policy_latency_ms_p50 == pytest.approx(5.0) and stats.policy_latency_ms_max == pytest.approx(40.0)
    assert stats.robot_io_ms_p50 == pytest.approx(4.0)
    assert stats.obs_to_action_clock == "wall" and stats.obs_to_action_ms_max == pytest.approx(44.0)
    assert stats.queue_underruns == 3   # steps whose observation-to-action time overran the period


def test_lock_step_never_sleeps(tmp_path) -> None:
    clock = ManualClock()
    episode, _, _ = _episode(tmp_path, SlowRobot(clock, 0.004, _live), CostlyPolicy(clock, [0.005]), paced=False)
    assert episode.steps == 30 and clock.slept == 0.0 and episode.realtime is None


@pytest.mark.parametrize(("error", "kind"), [(EmergencyStopped("stop key"), VoidKind.EMERGENCY_STOP),
                                             (TimeoutError("no status packet"), VoidKind.ROBOT_IO_ERROR),
                                             (ConnectionError("port gone"), VoidKind.ROBOT_IO_ERROR)])
def test_a_robot_that_fails_mid_episode_ends_it_as_a_void_not_an_error(tmp_path, error, kind) -> None:
    clock = ManualClock()
    robot = Failing(clock, error, fail_at=11)
    episode, _, observer = _episode(tmp_path, robot, CostlyPolicy(clock, [0.005]))
    assert episode.steps == 10 and episode.void is not None and episode.void.kind is kind
    if kind is VoidKind.ROBOT_IO_ERROR:
        assert type(error).__name__ in episode.void.reason and observer.warnings   # the operator is told
    assert robot.sent == 10   # nothing commanded after the failure


def test_the_policys_own_failure_is_raised_not_voided(tmp_path) -> None:
    class Broken(CostlyPolicy):
        def select_action(self, observation):
            raise OSError("checkpoint file vanished")

    clock = ManualClock()
    with pytest.raises(PolicyFailed, match="the policy raised OSError in trial 1: checkpoint file vanished"):
        _episode(tmp_path, SlowRobot(clock, 0.004, _live), Broken(clock, [0.0]))


def test_the_operators_abort_ends_the_episode_at_the_step_it_lands(tmp_path) -> None:
    clock = ManualClock()
    episode, _, _ = _episode(tmp_path, SlowRobot(clock, 0.004, _live), CostlyPolicy(clock, [0.005]),
                             observer=StopsAt(7))
    assert episode.stopped_by_operator and episode.void is None and episode.steps == 7


def test_a_frozen_camera_ends_the_episode_as_a_dropout_and_the_arm_holds(tmp_path) -> None:
    clock = ManualClock()
    frozen = np.zeros((48, 64, 3), dtype=np.uint8)
    robot = SlowRobot(clock, 0.004, lambda call: _live(call) if call < 5 else frozen)
    episode, _, _ = _episode(tmp_path, robot, CostlyPolicy(clock, [0.005]), seconds=5.0)
    assert episode.void is not None and episode.void.kind is VoidKind.CAMERA_DROPOUT
    assert episode.steps < 150
