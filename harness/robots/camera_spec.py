"""A camera as the robot's settings name it: `SOURCE[@WxH][,fps=N][,fourcc=CODE]`.

`SOURCE` is an OpenCV index (`0`) or device path (`/dev/video2`), or `sim[:SOCKET]` for the simulated
camera served by `harness emulate-bus --sim`. A real camera's size, frame rate and pixel format are
what the camera must deliver: a USB camera at 1280x720 often reaches 30 fps only in MJPG (raw YUYV fills
the bus first), and a policy trained at one size sees another after LeRobot resizes. The spec is kept as
text in the scoresheet's settings (`--camera top=0@1280x720,fps=30,fourcc=MJPG`, or the protocol's
`run.cameras`), and parsed here, before anything connects, so a typo is refused in one line. No LeRobot
import: `harness run` checks its flags before loading anything heavy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import HarnessInputError
from harness.models.frame_size import SIZE_PATTERN, parse_size

DEFAULT_SIZE = (640, 480)
MAX_SIZE = (7680, 4320)
MAX_FPS = 240
_FOURCC = re.compile(r"[A-Za-z0-9 ]{4}")


@dataclass(frozen=True)
class CameraSpec:
    """One camera: where it is, the frame size and pixel format asked of it, and its frame rate
    (None: the protocol's control rate)."""

    source: str
    width: int = DEFAULT_SIZE[0]
    height: int = DEFAULT_SIZE[1]
    fps: int | None = None
    fourcc: str | None = None

    @property
    def simulated(self) -> bool:
        return self.source == "sim" or self.source.startswith("sim:")

    @property
    def socket(self) -> str | None:
        """The simulated camera's socket path, None for the default one (or a real camera)."""
        if not self.source.startswith("sim:"):
            return None
        return self.source.removeprefix("sim:") or None


def parse_camera_spec(text: str, field: str = "--camera") -> CameraSpec:
    """`SOURCE[@WxH][,fps=N][,fourcc=CODE]` as a `CameraSpec`; `HarnessInputError` on `field` otherwise."""
    head, *options = text.split(",")
    source, at, size = head.rpartition("@")
    if not at or not SIZE_PATTERN.fullmatch(size):
        source, size = head, ""
    if not source:
        raise HarnessInputError(None, field, f"'{text}': no camera source (an index such as 0, a device path, "
                                             "or sim)")
    width, height = DEFAULT_SIZE
    if size:
        width, height = parse_size(size)
        if not (1 <= width <= MAX_SIZE[0] and 1 <= height <= MAX_SIZE[1]):
            raise HarnessInputError(None, field, f"'{text}': size {width}x{height} is not within 1x1 .. "
                                                 f"{MAX_SIZE[0]}x{MAX_SIZE[1]}")
    values: dict[str, str] = {}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq or key not in ("fps", "fourcc") or key in values:
            raise HarnessInputError(None, field, f"'{text}': '{option}' is not fps=N or fourcc=CODE (once each), "
                                                 "e.g. 0@1280x720,fps=30,fourcc=MJPG")
        values[key] = value
    fps = None
    if "fps" in values:
        if not values["fps"].isdigit() or not 1 <= int(values["fps"]) <= MAX_FPS:
            raise HarnessInputError(None, field, f"'{text}': fps={values['fps']} is not a whole number within "
                                                 f"1..{MAX_FPS}")
        fps = int(values["fps"])
    fourcc = values.get("fourcc")
    if fourcc is not None and not _FOURCC.fullmatch(fourcc):
        raise HarnessInputError(None, field, f"'{text}': fourcc={fourcc} is not a four-character code "
                                             "(MJPG, YUYV, ...)")
    spec = CameraSpec(source, width, height, fps, fourcc)
    if spec.simulated and fourcc is not None:
        raise HarnessInputError(None, field, f"'{text}': a simulated camera has no pixel format (fourcc)")
    return spec
