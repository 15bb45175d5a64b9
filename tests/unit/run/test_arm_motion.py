"""`run.arm_motion`: the arm's moves outside the policy, on a manual clock (nothing sleeps)."""

from __future__ import annotations

import itertools
import os

import pytest

from harness.errors import PoseMiss, StartPoseMissed
from harness.models.protocol import JOINT_NAMES
from harness.realtime import realtime_thread
from harness.run.arm_motion import JAWS_OPEN, ArmMotion
from harness.run.clock import ManualClock
from harness.run.safety import GuardedRobot
from tests.unit.run.test_loop_timing import SlowRobot

POSE = {"shoulder_pan": 10.0, "shoulder_lift": -60.0, "elbow_flex": 60.0, "wrist_flex": 70.0, "wrist_roll": -5.0,
        "gripper": 20.0}


class Recorded(SlowRobot):
    """A robot that keeps every command, and answers `check_ready` from a script of problems."""

    def __init__(self, clock: ManualClock, problems_until: float = 0.0) -> None:
        super().__init__(clock, 0.002, lambda call: None)
        self.sent: list[dict[str, float]] = []
        self.problems_until = problems_until

    def send_action(self, action):
        self.sent.append(dict(action))
        return super().send_action(action)

    def check_ready(self, pose) -> list[PoseMiss]:
        return [PoseMiss("elbow_flex", 30.0, pose["elbow_flex"])] if self.clock.now() < self.problems_until else []


class HoldsACube(Recorded):
    """An arm whose jaws hold a cube: the gripper stops 8 short of closing to its start pose until it is commanded
    open (and the cube falls), or for good when the cube is wedged."""

    def __init__(self, clock: ManualClock, wedged: bool = False) -> None:
        super().__init__(clock)
        self.held, self.wedged = True, wedged

    def send_action(self, action):
        if action["gripper.pos"] >= JAWS_OPEN and not self.wedged:
            self.held = False
        return super().send_action(action)

    def check_ready(self, pose) -> list[PoseMiss]:
        return [PoseMiss("gripper", pose["gripper"] + 8.0, pose["gripper"])] if self.held else []


def _motion(robot: Recorded, clock: ManualClock, paced: bool) -> ArmMotion:
    guard = GuardedRobot(robot, release=robot.disable_torque, check_ready=robot.check_ready)
    return ArmMotion(guard, 30, clock, paced)


@pytest.mark.parametrize("paced", [True, False], ids=["real-arm", "lock-step"])
def test_the_start_pose_is_reached_smoothly_at_the_control_rate(paced: bool) -> None:
    clock = ManualClock()
    robot = Recorded(clock)
    _motion(robot, clock, paced).move_to(POSE, 2.0)
    assert len(robot.sent) == 60   # two seconds at 30 Hz
    assert robot.sent[-1] == {f"{n}.pos": POSE[n] for n in JOINT_NAMES}
    pan = [step["shoulder_pan.pos"] for step in robot.sent]
    assert all(b >= a for a, b in itertools.pairwise(pan))   # never back
    assert pan[0] < 0.01 * POSE["shoulder_pan"] and pan[-1] - pan[-2] < 0.01 * POSE["shoulder_pan"]   # eased
    # paced: each step holds the period (one read of 1 ms first); lock-step: only the I/O's own time
    assert clock.now() == pytest.approx(0.001 + 2.0 if paced else 0.001 + 60 * 0.001)


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="POSIX real-time scheduling only")
@pytest.mark.parametrize("paced", [True, False], ids=["real-arm", "lock-step"])
def test_a_real_arms_move_runs_at_the_control_loops_priority_and_gives_it_back(paced: bool) -> None:
    """On a busy machine a normal thread woke late for each step, and the move to the start pose took 1.3-1.5 s
    of its planned 1.17 s before the first cube prompt (issue 40): a real arm's move runs as the episode's loop
    does (`harness.realtime`), a lock-step simulator's is left alone."""
    clock = ManualClock()
    robot = Recorded(clock)
    seen = []
    send = robot.send_action

    def noting(action):
        seen.append(os.sched_getscheduler(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0))
        return send(action)

    robot.send_action = noting
    before = os.sched_getscheduler(0)
    with realtime_thread() as allowed:
        pass
    _motion(robot, clock, paced).move_to(POSE, 0.5)
    if paced and not allowed.realtime:
        pytest.skip(f"this OS refuses real-time priority here ({allowed.why_not})")
    assert set(seen) == ({os.SCHED_FIFO} if paced else {before})
    assert os.sched_getscheduler(0) == before


def test_an_arm_that_settles_late_passes_and_one_that_never_does_is_a_fault() -> None:
    clock = ManualClock()
    _motion(Recorded(clock, problems_until=0.5), clock, paced=True).verify_start_pose(POSE, settle_s=1.0)
    assert 0.5 <= clock.now() <= 0.55
    clock = ManualClock()
    with pytest.raises(StartPoseMissed, match=r"did not reach its start pose: elbow_flex at 30\.0, start pose 60\.0"):
        _motion(Recorded(clock, problems_until=99), clock, paced=True).verify_start_pose(POSE, settle_s=1.0)
    assert clock.now() == pytest.approx(1.0, abs=0.06)


def test_a_cube_left_in_the_jaws_is_let_go_and_the_arm_goes_back_to_its_start_pose() -> None:
    """A policy that grasped and never released leaves the cube in the jaws; the nearly closed start pose then
    stops on it. Voiding the next trial for that cost a void per resume (issue 43's gap runs)."""
    clock = ManualClock()
    robot = HoldsACube(clock)
    assert _motion(robot, clock, paced=True).reach_start_pose(POSE, 0.5) is True
    grippers = [step["gripper.pos"] for step in robot.sent]
    assert max(grippers) == pytest.approx(JAWS_OPEN)                 # opened once, wide
    assert robot.sent[-1] == {f"{n}.pos": POSE[n] for n in JOINT_NAMES}   # and back at the start pose
    assert not robot.held


def test_a_cube_wedged_in_the_jaws_is_a_fault_that_says_so_with_the_jaws_left_open() -> None:
    clock = ManualClock()
    robot = HoldsACube(clock, wedged=True)
    with pytest.raises(StartPoseMissed, match="something is between the jaws") as missed:
        _motion(robot, clock, paced=True).reach_start_pose(POSE, 0.5)
    assert missed.value.jaws_blocked
    assert robot.sent[-1]["gripper.pos"] == pytest.approx(JAWS_OPEN)   # open, for a person to take it out


def test_an_arm_that_misses_its_pose_elsewhere_is_a_fault_and_the_jaws_stay_as_they_were() -> None:
    clock = ManualClock()
    robot = Recorded(clock, problems_until=99)
    with pytest.raises(StartPoseMissed, match="elbow_flex") as missed:
        _motion(robot, clock, paced=True).reach_start_pose(POSE, 0.5)
    assert not missed.value.jaws_blocked
    assert max(step["gripper.pos"] for step in robot.sent) == pytest.approx(POSE["gripper"])


def test_holding_still_commands_where_the_arm_is() -> None:
    clock = ManualClock()
    robot = Recorded(clock)
    robot.position.update({"gripper.pos": 33.0, "elbow_flex.pos": 12.5})
    _motion(robot, clock, paced=True).hold_still()
    assert robot.sent == [{**{f"{n}.pos": 0.0 for n in JOINT_NAMES}, "gripper.pos": 33.0, "elbow_flex.pos": 12.5}]
