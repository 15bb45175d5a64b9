"""Defaults for new protocols: the task and start pose of the source pick-and-place setup."""

from __future__ import annotations

DEFAULT_TASK = "Pick up the cube and place it in the bowl."
DEFAULT_SUCCESS = (
    "Autonomous grasp of the cube, lift, and release so that the cube comes to rest inside the bowl. "
    "Pushes, knocks and human help are not successes."
)
# LeRobot so101_follower units: degrees for the body joints, 0..100 for the gripper.
DEFAULT_START_POSE: dict[str, float] = {
    "shoulder_pan": 0.0,
    "shoulder_lift": -60.0,
    "elbow_flex": 60.0,
    "wrist_flex": 70.0,
    "wrist_roll": 0.0,
    "gripper": 10.0,
}
