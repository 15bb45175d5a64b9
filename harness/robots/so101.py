"""The real SO-101 follower: LeRobot's `SO101Follower`, with its bus swapped for the re-locking one."""

from __future__ import annotations

from pathlib import Path

from lerobot.cameras.opencv import OpenCVCameraConfig
from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

from harness.bus.relocking_bus import RelockingFeetechBus

REPO_CALIBRATION = Path(__file__).resolve().parents[2] / "calibration"


def make_so101_follower(port: str, cameras: dict[str, str], fps: int = 30, robot_id: str = "harness_follower",
                        calibration_dir: Path | None = None, max_relative_target: float | None = 10.0) -> SO101Follower:
    """`cameras` maps a name to an OpenCV index (`"0"`) or a device path (`"/dev/video2"`)."""
    camera_configs = {
        name: OpenCVCameraConfig(index_or_path=int(src) if src.isdigit() else Path(src), fps=fps, width=640,
                                 height=480)
        for name, src in cameras.items()
    }
    config = SO101FollowerConfig(port=port, id=robot_id, cameras=camera_configs,
                                 calibration_dir=calibration_dir or REPO_CALIBRATION,
                                 max_relative_target=max_relative_target)
    robot = SO101Follower(config)
    stock = robot.bus
    robot.bus = RelockingFeetechBus(port=stock.port, motors=stock.motors, calibration=stock.calibration)
    return robot
