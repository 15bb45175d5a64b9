"""LeRobot camera config for the simulated cameras (camera type `harness_sim`).

Kept free of MuJoCo so LeRobot's tools can parse `--robot.cameras` cheaply; the frames come from
`harness emulate-bus --sim`, which renders the same MuJoCo world its servos drive and serves the
frames on a local Unix socket (`socket_path`).
"""

from __future__ import annotations

import getpass
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lerobot.cameras.configs import CameraConfig, ColorMode

SIM_CAMERAS = ("top", "wrist")


def default_socket_path() -> Path:
    """Where `emulate-bus --sim` serves camera frames unless told otherwise (one per user; the user's name
    where the OS has no numeric uid, as Windows)."""
    user = os.getuid() if hasattr(os, "getuid") else getpass.getuser()
    return Path(tempfile.gettempdir()) / f"harness-sim-cameras-{user}.sock"


@CameraConfig.register_subclass("harness_sim")
@dataclass(kw_only=True)
class HarnessSimCameraConfig(CameraConfig):
    camera: str = "top"
    socket_path: str = field(default_factory=lambda: str(default_socket_path()))
    color_mode: ColorMode = ColorMode.RGB
    warmup_s: float = 2.0

    def __post_init__(self) -> None:
        if self.camera not in SIM_CAMERAS:
            raise ValueError(f"camera must be one of {list(SIM_CAMERAS)}, got {self.camera!r}")
        self.fps = self.fps or 30
        self.width = self.width or 640
        self.height = self.height or 480
        self.color_mode = ColorMode(self.color_mode)
