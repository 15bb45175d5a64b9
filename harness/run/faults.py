"""What a robot failing mid-trial raises, and the void it becomes: the trial's sequencing and the control loop
both turn a robot's failure into a void, never into a lost trial."""

from __future__ import annotations

from harness.errors import CameraRenderFailed, CameraStale, RobotFault, ServoBusFault, StartPoseMissed
from harness.models.taxonomy import Void, VoidKind

# What LeRobot's buses and cameras raise when hardware stops answering mid-trial.
ROBOT_IO_ERRORS = (ConnectionError, TimeoutError, OSError)
ROBOT_FAULTS = (*ROBOT_IO_ERRORS, RobotFault)   # ... and what a robot of ours raises, typed (`ServoBusFault`)


def robot_fault_void(exc: BaseException) -> Void:
    """The void for a robot that failed mid-trial, its kind from the error's type (never its text)."""
    if isinstance(exc, ServoBusFault):
        return Void(VoidKind.ARM_POWER_CYCLED if exc.reset else VoidKind.ROBOT_IO_ERROR, exc.detail)
    if isinstance(exc, CameraRenderFailed | CameraStale):
        return Void(VoidKind.CAMERA_DROPOUT, exc.detail)
    if isinstance(exc, StartPoseMissed):
        return Void(VoidKind.ARM_NOT_AT_START_POSE, exc.detail)
    first_line = (str(exc).strip().splitlines() or [""])[0][:160]
    return Void(VoidKind.ROBOT_IO_ERROR, f"{type(exc).__name__}: {first_line}")
