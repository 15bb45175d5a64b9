"""LeRobot camera config for the simulated cameras (camera type `harness_sim`).

Kept free of MuJoCo so LeRobot's tools can parse `--robot.cameras` cheaply; the frames come from
`harness emulate-bus --sim`, which renders the same MuJoCo world its servos drive and serves the
frames on a local Unix socket (`socket_path`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from lerobot.cameras.configs import CameraConfig, ColorMode

SIM_CAMERAS = ("top", "wrist")


EMULATOR_SCRATCH = "emulator"   # `emulate-bus --sim` serves its cameras in a scratch folder of this kind
SOCKET_NAME = "cameras.sock"


def new_socket_path() -> Path:
    """A socket path of its own for an emulator starting now: any number of emulators run at once."""
    from harness.scratch import make

    return make(EMULATOR_SCRATCH) / SOCKET_NAME


def default_socket_path() -> Path:
    """The cameras of the one `emulate-bus --sim` of this user that is running, when no socket is named.
    No emulator: a path where nothing serves (connecting says to start one); several: a ValueError naming
    their sockets, since which one was meant cannot be guessed."""
    from harness.scratch import live_folders

    serving = [folder / SOCKET_NAME for folder in live_folders(EMULATOR_SCRATCH) if (folder / SOCKET_NAME).exists()]
    if len(serving) > 1:
        raise ValueError(f"{len(serving)} emulate-bus --sim serve cameras ({', '.join(map(str, serving))}); "
                         f"name one (socket_path, or sim:SOCKET)")
    return serving[0] if serving else Path(tempfile.gettempdir()) / f"harness-{EMULATOR_SCRATCH}-none" / SOCKET_NAME


@CameraConfig.register_subclass("harness_sim")
@dataclass(kw_only=True)
class HarnessSimCameraConfig(CameraConfig):
    camera: str = "top"
    socket_path: str = ""   # "": the one running emulator's (`default_socket_path`)
    color_mode: ColorMode = ColorMode.RGB
    warmup_s: float = 2.0

    def __post_init__(self) -> None:
        if self.camera not in SIM_CAMERAS:
            raise ValueError(f"camera must be one of {list(SIM_CAMERAS)}, got {self.camera!r}")
        # fps, width, height: fields of LeRobot's `CameraConfig`, which mypy does not analyse (no types there)
        self.fps = self.fps or 30   # type: ignore[has-type]
        self.width = self.width or 640   # type: ignore[has-type]
        self.height = self.height or 480   # type: ignore[has-type]
        self.color_mode = ColorMode(self.color_mode)
        self.socket_path = self.socket_path or str(default_socket_path())
