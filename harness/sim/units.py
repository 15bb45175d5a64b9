"""LeRobot so101_follower units <-> simulator radians.

LeRobot (use_degrees=True) reports body joints in degrees with 0 at the middle
of the calibrated range, which is also where the Menagerie model puts its joint
zero, so body joints map by a plain degrees/radians conversion. The gripper is
reported 0..100 over its calibrated range; here that range is the model's joint
limits, 0 = closed. Signs follow the so101-nexus adapter; they are not verified
against a calibrated physical arm (check one known pose before trusting them).
"""

from __future__ import annotations

import math

from harness.models.protocol import JOINT_NAMES

BODY_JOINTS: tuple[str, ...] = JOINT_NAMES[:5]
# The gripper servo's Present_Load (0.1 % of full torque, signed), reported beside the joint positions by both
# the simulated arm and the real one. Not one of the robot's `observation_features`: datasets and policies keep
# the follower's six-number state, and the evidence recorder keeps this for failure anatomy.
GRIPPER_LOAD_KEY = "gripper.load"
GRIPPER_CLOSED_RAD = -0.17453
GRIPPER_OPEN_RAD = 1.74533

# Joint limits in LeRobot units, from the model's ranges; targets are clamped to these.
JOINT_LIMITS: dict[str, tuple[float, float]] = {
    "shoulder_pan": (-110.0, 110.0),
    "shoulder_lift": (-100.0, 100.0),
    "elbow_flex": (-96.8, 96.8),
    "wrist_flex": (-95.0, 95.0),
    "wrist_roll": (-157.2, 157.2),
    "gripper": (0.0, 100.0),
}


def to_sim(name: str, value: float) -> float:
    if name == "gripper":
        return GRIPPER_CLOSED_RAD + (value / 100.0) * (GRIPPER_OPEN_RAD - GRIPPER_CLOSED_RAD)
    return math.radians(value)


def from_sim(name: str, radians: float) -> float:
    if name == "gripper":
        return 100.0 * (radians - GRIPPER_CLOSED_RAD) / (GRIPPER_OPEN_RAD - GRIPPER_CLOSED_RAD)
    return math.degrees(radians)


def clamp_to_limits(name: str, value: float) -> float:
    low, high = JOINT_LIMITS[name]
    return min(max(value, low), high)
