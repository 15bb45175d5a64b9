"""The 30 Hz loop, deadline accounting and dropout detection, on a manual clock: nothing sleeps."""

from __future__ import annotations

import numpy as np
import pytest

from harness.models.protocol import JOINT_NAMES, load_protocol
from harness.policies.base import BasePolicy
from harness.run.camera_watch import CameraWatch, DropoutPolicy
from harness.run.clock import ManualClock
from harness.run.engine import RunEngine, RunOptions, ScoreDecision
from harness.run.safety import GuardedRobot
from tests.helpers import locked_sheet


class SlowRobot:
    """A robot whose I/O costs a fixed time on the injected clock; frames come from a script."""

    def __init__(self, clock: ManualClock, io_s: float, frames) -> None:
        self.clock, self.io_s, self.frames, self.calls = clock, io_s, frames, 0
        self.position = {f"{n}.pos": 0.0 for n in JOINT_NAMES}
        self.is_connected, self.torque_enabled = True, True

    def disable_torque(self) -> None:
        self.torque_enabled = False

    def get_observation(self):
        self.clock.advance(self.io_s / 2)
        self.calls += 1
        return {**self.position, "top": self.frames(self.calls)}

    def send_action(self, action):
        self.clock.advance(self.io_s / 2)
        self.position.update(action)
        return action


class CostlyPolicy(BasePolicy):
    name = "costly"
    camera_keys = ("top",)

    def __init__(self, clock: ManualClock, costs_s: list[float]) -> None:
        self.clock, self.costs, self.i = clock, costs_s, 0

    def reset(self, context) -> None:
        self.i = 0

    def select_action(self, observation):
        self.clock.advance(self.costs[self.i % len(self.costs)])
        self.i += 1
        return {k: v for k, v in observation.items() if k.endswith(".pos")}

    def close(self) -> None:
        pass


class PersonStage:
    world = None

    def place_cube(self, trial, attempt) -> None:
        pass

    def on_step(self, trial, step) -> None:
        pass

    def observed(self, observation) -> None:
        pass

    def frame(self, camera, width, height):
        return None

    def finished(self) -> bool:
        return False

    def verdict(self):
        return None

    def may_freeze_camera(self, trial) -> bool:
        return True

    def attempt_fields(self, label=None) -> dict:
        return {}


class Scorer:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def trial_started(self, *a) -> None: ...
    def phase(self, name) -> None: ...
    def step(self, step, timing) -> None: ...
    def trial_scored(self, attempt) -> None: ...
    def stop_requested(self) -> bool:
        return False

    def wait_if_paused(self) -> bool:
        return True

    def warn(self, message) -> None:
        self.warnings.append(message)

    def score(self, trial, verdict, void):
        return ScoreDecision("void", void) if void else ScoreDecision("no_grasp")


def _live(call: int) -> np.ndarray:
    rng = np.random.default_rng(call)
    return rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)


def _engine(tmp_path, clock, robot, policy, seconds=1.0) -> tuple[RunEngine, Scorer]:
    sheet = locked_sheet(tmp_path)
    protocol = load_protocol(tmp_path / "small.yaml").model_copy(update={"episode_time_limit_s": seconds})
    scorer = Scorer()
    options = RunOptions(runs_dir=tmp_path / "runs", paced=True, video=False, evidence_cameras=[],
                         start_pose_s=0.0, max_attempts=1)
    guard = GuardedRobot(robot, release=robot.disable_torque)
    return RunEngine(protocol, sheet, guard, policy, PersonStage(), scorer, clock, options), scorer


def test_paced_loop_holds_30hz_and_counts_missed_deadlines(tmp_path) -> None:
    clock = ManualClock()
    # every 10th inference takes 40 ms (a chunked policy refilling its queue), the rest 5 ms
    policy = CostlyPolicy(clock, [0.040] + [0.005] * 9)
    engine, _ = _engine(tmp_path, clock, SlowRobot(clock, 0.004, _live), policy, seconds=1.0)
    engine.run()
    attempt = engine.sheet.attempts[0]
    assert attempt.loop.steps == 30
    assert attempt.loop.missed_deadlines == 3
    assert attempt.loop.policy_latency_ms_max == pytest.approx(40.0)
    assert attempt.loop.policy_latency_ms_p50 == pytest.approx(5.0)
    assert attempt.loop.robot_io_ms_p50 == pytest.approx(4.0)
    # start pose: one read (2 ms) and one paced step; then 27 on-time steps of 33.3 ms and
    # 3 late ones of 44 ms, after which the loop does not sleep
    assert clock.now() == pytest.approx(0.002 + 1 / 30 + 27 / 30 + 3 * 0.044, abs=1e-6)


def test_a_policy_too_slow_for_the_rate_is_reported(tmp_path) -> None:
    clock = ManualClock()
    engine, scorer = _engine(tmp_path, clock, SlowRobot(clock, 0.002, _live), CostlyPolicy(clock, [0.25]), 0.5)
    engine.run()
    assert any("cannot keep 30 Hz" in w for w in scorer.warnings)
    assert engine.sheet.attempts[0].loop.missed_deadlines == 15


def test_a_frozen_camera_voids_the_trial_after_the_threshold(tmp_path) -> None:
    clock = ManualClock()
    frozen_after = 20
    frames = lambda call: _live(min(call, frozen_after))  # noqa: E731
    engine, _ = _engine(tmp_path, clock, SlowRobot(clock, 0.002, frames), CostlyPolicy(clock, [0.005]), 5.0)
    from harness.errors import RunPaused

    with pytest.raises(RunPaused, match="repeated the same frame"):
        engine.run()
    attempt = engine.sheet.attempts[0]
    assert attempt.outcome == "void"
    # frozen from the 20th observation (step 18 after the start-pose read); void once 1 s (30 steps) has passed
    assert attempt.loop.steps == pytest.approx(19 + 30, abs=1)


@pytest.mark.parametrize(
    ("frame", "why"),
    [(None, "no frame"), (np.zeros((48, 64, 3), np.uint8), "black")],
)
def test_camera_watch_reasons(frame, why) -> None:
    watch = CameraWatch(["wrist"], DropoutPolicy(max_bad_s=0.5))
    watch.see("wrist", _live(1), 0.0)
    for i in range(1, 20):
        watch.see("wrist", frame, i / 30)
        if i / 30 < 1 / 30 + 0.5 - 1e-9:
            assert watch.dropout(i / 30) is None
    reason = watch.dropout(19 / 30)
    assert reason is not None and why in reason and "wrist" in reason


def test_camera_watch_recovers_when_frames_come_back() -> None:
    watch = CameraWatch(["top"], DropoutPolicy(max_bad_s=0.5))
    for i in range(10):
        watch.see("top", None, i / 30)
    watch.see("top", _live(3), 10 / 30)
    assert watch.dropout(40 / 30) is None


class ReachingPolicy(CostlyPolicy):
    """Asks the base to turn 10 degrees from the first step on; its first inference (a chunk) is slow."""

    def select_action(self, observation):
        action = super().select_action(observation)
        return {**action, "shoulder_pan.pos": 10.0}


def test_a_real_arms_trajectory_is_dated_by_when_each_step_really_ran(tmp_path) -> None:
    """A synchronous chunk computed in 0.8 s holds a real arm still for 0.8 s. Dated on the schedule (step / fps),
    its trajectory said the arm first moved at 0.07 s, while the twin, whose simulated clock is charged the
    latency, said 0.9 s (issue 43): anatomy dates events by these times."""
    import pandas as pd

    clock = ManualClock()
    policy = ReachingPolicy(clock, [0.8] + [0.005] * 9)
    engine, _ = _engine(tmp_path, clock, SlowRobot(clock, 0.004, _live), policy, seconds=1.0)
    engine.run()
    attempt = engine.sheet.attempts[0]
    rows = pd.read_parquet(tmp_path / attempt.artifacts["trajectory.parquet"])
    assert rows["t"].iloc[0] == pytest.approx(0.0, abs=0.01)
    assert rows["t"].iloc[1] == pytest.approx(0.806, abs=0.01)            # after the 0.8 s chunk, not at 1/30 s
    assert rows["t"].is_monotonic_increasing
    assert attempt.anatomy.first_motion_s == pytest.approx(0.806, abs=0.01)
    # where the loop keeps up, the rows keep their schedule
    assert np.diff(rows["t"].iloc[2:10]) == pytest.approx(np.full(7, 1 / 30), abs=1e-6)
