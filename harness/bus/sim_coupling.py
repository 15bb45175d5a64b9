"""Emulated servos whose shaft is the MuJoCo arm's joint: LeRobot's real `SO101Follower`, talking
bytes to the emulator, then moves the simulated SO-101, as it would move the real one.

Goal positions (ticks) become joint targets through the same calibration LeRobot applies (degrees
about the middle of each calibrated range; 0..100 over the gripper's range), the physics advances
in real time with the emulator's clock, and Present_Position is read back from the joints.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from harness.bus import protocol as p
from harness.bus.emulator import Faults, Servo, ServoChain
from harness.models.protocol import JOINT_NAMES
from harness.sim.units import from_sim, to_sim

TICKS = 4096


@dataclass(frozen=True)
class JointCalibration:
    range_min: int
    range_max: int

    @property
    def middle(self) -> float:
        return (self.range_min + self.range_max) / 2


def ticks_to_units(name: str, ticks: float, cal: JointCalibration) -> float:
    if name == "gripper":
        return 100.0 * (ticks - cal.range_min) / (cal.range_max - cal.range_min)
    return (ticks - cal.middle) * 360.0 / TICKS


def units_to_ticks(name: str, value: float, cal: JointCalibration) -> float:
    if name == "gripper":
        return cal.range_min + value / 100.0 * (cal.range_max - cal.range_min)
    return cal.middle + value * TICKS / 360.0


class SimCoupledChain(ServoChain):
    def __init__(self, servos: list[Servo], world: object, calibration: dict[str, JointCalibration],
                 faults: Faults | None = None) -> None:
        super().__init__(servos, faults)
        self.world = world
        self.calibration = calibration
        self._pending_s = 0.0
        self._sync_from_world()

    def tick(self, dt: float) -> None:
        self._pending_s += dt
        physics_dt = self.world.model.opt.timestep
        steps = int(self._pending_s / physics_dt)
        if steps == 0:
            return
        self._pending_s -= steps * physics_dt
        present = self.world.joint_positions_rad()
        targets = present.copy()
        for i, name in enumerate(JOINT_NAMES):
            servo = self.servo(name)
            if servo.torque_enabled:
                goal = int.from_bytes(servo.ram[p.ADDR_GOAL_POSITION:p.ADDR_GOAL_POSITION + 2], "little") & 0x7FFF
                targets[i] = to_sim(name, ticks_to_units(name, goal, self.calibration[name]))
        self.world.data.ctrl[:] = targets
        for _ in range(min(steps, 30)):
            mujoco.mj_step(self.world.model, self.world.data)
        self._sync_from_world()

    def _sync_from_world(self) -> None:
        q = self.world.joint_positions_rad()
        for i, name in enumerate(JOINT_NAMES):
            ticks = units_to_ticks(name, from_sim(name, float(q[i])), self.calibration[name])
            self.servo(name).position = float(np.clip(ticks, 0, TICKS - 1))


def so101_servos() -> list[Servo]:
    return [Servo(name, i + 1) for i, name in enumerate(JOINT_NAMES)]
