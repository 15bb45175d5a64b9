"""The arm's motions outside the policy: to the start pose (smoothly, at the control rate, paced on a real
arm), the check that it got there, and holding still where it is when a trial faults."""

from __future__ import annotations

import numpy as np

from harness.errors import RobotFault
from harness.models.protocol import JOINT_NAMES
from harness.run.clock import Clock
from harness.run.safety import GuardedRobot


class ArmMotion:
    """Motions of one guarded arm at `fps`; `paced` sleeps on `clock` to hold the rate (a real arm), a
    lock-step simulator moves as fast as it can."""

    def __init__(self, robot: GuardedRobot, fps: int, clock: Clock, paced: bool) -> None:
        self.robot = robot
        self.fps = fps
        self.clock = clock
        self.paced = paced
        self.period = 1.0 / fps

    def move_to(self, pose: dict[str, float], seconds: float) -> None:
        """Interpolate smoothly from the present position to `pose` (LeRobot units)."""
        present = self.robot.get_observation()
        start = np.array([present[f"{n}.pos"] for n in JOINT_NAMES])
        goal = np.array([pose[n] for n in JOINT_NAMES])
        steps = max(1, round(seconds * self.fps))
        for i in range(1, steps + 1):
            s = i / steps
            s = s * s * (3 - 2 * s)
            target = start + s * (goal - start)
            t0 = self.clock.now()
            self.robot.send_action({f"{n}.pos": float(v) for n, v in zip(JOINT_NAMES, target, strict=True)})
            if self.paced:
                self.clock.sleep(t0 + self.period - self.clock.now())

    def verify_start_pose(self, pose: dict[str, float], settle_s: float = 1.0) -> None:
        """Before anyone is asked to place a cube: the arm answers, holds torque and sits at its start pose
        (a power cycle during the move leaves a joint far from it)."""
        deadline = self.clock.now() + settle_s
        while problems := self.robot.check_ready(pose):
            if self.clock.now() >= deadline:
                raise RobotFault("the arm did not reach its start pose: " + "; ".join(problems))
            self.clock.sleep(0.05)

    def hold_still(self) -> None:
        """Command the present position, so a faulted trial leaves the arm where it is."""
        present = self.robot.get_observation()
        self.robot.send_action({f"{n}.pos": present[f"{n}.pos"] for n in JOINT_NAMES})
