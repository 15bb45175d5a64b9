"""Emulated servos whose shaft is the MuJoCo arm's joint: LeRobot's real `SO101Follower`, talking
bytes to the emulator, then moves the simulated SO-101, as it would move the real one.

The raw encoder of each servo is fixed to its joint by the arm's assembly: `assembly` maps raw
ticks to LeRobot units the way `calibration/emulated_follower.json` does (no homing offset), so a
client using that file sees the simulator's own units. The servo then applies whatever
Homing_Offset and position limits LeRobot writes, exactly as on the real arm, so
`lerobot-calibrate` produces a new, working calibration.

Each joint is driven by its servo while torque is on (to the clamped goal), by the operator's
hand while torque is off and a hand holds it, and otherwise by nothing: the actuator is switched
off and the joint falls under gravity, as a real arm does. The physics advances in real time
with the emulator's clock; Present_Position, Present_Load (from the actuator's force) and the
other sensors are read back from the joints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from harness.emulator.servos import TICKS, Faults, Servo, ServoChain
from harness.models.protocol import JOINT_NAMES
from harness.sim.units import from_sim, to_sim
from harness.sim.world import SimWorld, actuator_loads

LEROBOT_MAX_RES = TICKS - 1  # LeRobot's degrees use 360 / 4095 per tick
MAX_STEPS_PER_TICK = 30


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
    return (ticks - cal.middle) * 360.0 / LEROBOT_MAX_RES


def units_to_ticks(name: str, value: float, cal: JointCalibration) -> float:
    if name == "gripper":
        return cal.range_min + value / 100.0 * (cal.range_max - cal.range_min)
    return cal.middle + value * LEROBOT_MAX_RES / 360.0


class SimCoupledChain(ServoChain):
    def __init__(self, servos: list[Servo], world: SimWorld, calibration: dict[str, JointCalibration],
                 faults: Faults | None = None, gain: float = 1.0, backlash_deg: float = 0.0) -> None:
        """`gain` (times the model's position gain and torque limit) and `backlash_deg` (play either way in each
        joint's gears) are reality-gap knobs (`models.reality_gap`): 1 and 0 are the twin's servos."""
        super().__init__(servos, faults)
        self.gain_scale = gain
        self.backlash_rad = math.radians(backlash_deg)
        self._geared: list[float | None] = [None] * len(JOINT_NAMES)   # where the gears leave each joint's target
        for servo in servos:
            servo.load_protection = False   # the MuJoCo actuators' force cap is not the servo's torque limit
        self.world = world
        self.calibration = calibration
        self._pending_s = 0.0
        model = world.model
        self._actuators = [model.actuator(name).id for name in JOINT_NAMES]
        self._gain = model.actuator_gainprm[self._actuators, 0].copy()
        self._bias = model.actuator_biasprm[self._actuators, 1:3].copy()
        if gain != 1.0:   # a weaker (or stronger) servo: its stiffness and its torque limit alike
            model.actuator_forcerange[self._actuators] *= gain
        self._sync_from_world(0.0)

    def joint_degrees(self) -> dict[str, float]:
        """The arm's joint angles (degrees, 0 at mid-range), as the hand and the console use them."""
        q = self.world.joint_positions_rad()
        return {name: math.degrees(float(q[i])) for i, name in enumerate(JOINT_NAMES)}

    def tick(self, dt: float) -> None:
        self._pending_s += dt
        physics_dt = self.world.model.opt.timestep
        steps = int(self._pending_s / physics_dt)
        if steps == 0:
            return
        self._pending_s -= steps * physics_dt
        steps = min(steps, MAX_STEPS_PER_TICK)  # a starved thread drops time rather than lurching
        elapsed = steps * physics_dt
        held = self.hand.advance(elapsed, self.joint_degrees())
        present = self.world.joint_positions_rad()
        for i, name in enumerate(JOINT_NAMES):
            servo = self.servo(name)
            if servo.torque_enabled:
                target = present[i] if servo.jammed else self._through_gears(i, to_sim(
                    name, ticks_to_units(name, servo.raw_goal(), self.calibration[name])))
            elif name in held:
                target = math.radians(held[name])
            else:
                target = None
            self._drive(i, target)
        for _ in range(steps):
            mujoco.mj_step(self.world.model, self.world.data)
        self._sync_from_world(elapsed)

    def _through_gears(self, index: int, target_rad: float) -> float:
        """Backlash: the joint follows the motor only once the motor has taken up the play, so a reversal moves
        the joint `backlash` later than the command (a play operator); without backlash the target itself."""
        if self.backlash_rad <= 0.0:
            return target_rad
        geared = self._geared[index]
        if geared is None:
            geared = target_rad
        elif target_rad > geared + self.backlash_rad:
            geared = target_rad - self.backlash_rad
        elif target_rad < geared - self.backlash_rad:
            geared = target_rad + self.backlash_rad
        self._geared[index] = geared
        return geared

    def _drive(self, index: int, target_rad: float | None) -> None:
        """Position-control joint `index` toward `target_rad`, or switch its actuator off (limp)."""
        model, actuator = self.world.model, self._actuators[index]
        on = target_rad is not None
        model.actuator_gainprm[actuator, 0] = self._gain[index] * self.gain_scale if on else 0.0
        model.actuator_biasprm[actuator, 1:3] = self._bias[index] * self.gain_scale if on else 0.0
        self.world.data.ctrl[actuator] = target_rad if on else 0.0

    def _sync_from_world(self, elapsed: float) -> None:
        q = self.world.joint_positions_rad()
        loads = actuator_loads(self.world.model, self.world.data.actuator_force, np.asarray(self._actuators))
        for i, name in enumerate(JOINT_NAMES):
            servo = self.servo(name)
            ticks = float(np.clip(units_to_ticks(name, from_sim(name, float(q[i])), self.calibration[name]),
                                  0, TICKS - 1))
            servo.velocity = (ticks - servo.position) / elapsed if elapsed > 0 else 0.0
            servo.position = ticks
            if servo.torque_enabled:
                servo.load = 1000.0 if servo.jammed else float(loads[i])
            else:
                servo.load = 0.0
            servo.sense(elapsed)


def so101_servos() -> list[Servo]:
    return [Servo(name, i + 1) for i, name in enumerate(JOINT_NAMES)]
