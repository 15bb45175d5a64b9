"""A real arm's cameras as the robot's settings name them: size, frame rate and pixel format reach
LeRobot's OpenCV camera config; a spec that cannot be met is refused before anything is locked."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import HarnessInputError
from harness.robots.camera_spec import CameraSpec, parse_camera_spec
from tests.helpers import small_protocol_copy


def test_an_opencv_camera_gets_the_size_rate_and_format_its_settings_ask_for() -> None:
    from lerobot.cameras.opencv import OpenCVCameraConfig

    from harness.robots.so101 import make_so101_follower

    robot = make_so101_follower("/dev/harness-no-such-port", {"top": "0@1280x720,fps=60,fourcc=MJPG",
                                                              "wrist": "/dev/video2"}, fps=30)
    top, wrist = robot.config.cameras["top"], robot.config.cameras["wrist"]
    assert isinstance(top, OpenCVCameraConfig) and isinstance(wrist, OpenCVCameraConfig)
    assert (top.index_or_path, top.width, top.height, top.fps, top.fourcc) == (0, 1280, 720, 60, "MJPG")
    # nothing asked: 640x480 at the protocol's control rate, the format the camera offers first
    assert (wrist.index_or_path, wrist.width, wrist.height, wrist.fps, wrist.fourcc) == (
        Path("/dev/video2"), 640, 480, 30, None)


def test_a_simulated_camera_keeps_its_socket_and_size() -> None:
    from harness.robots.so101 import camera_config

    config = camera_config("top", "sim:/tmp/cams.sock@128x96", 30)
    assert (config.socket_path, config.width, config.height, config.fps) == ("/tmp/cams.sock", 128, 96, 30)
    assert parse_camera_spec("sim@320x240,fps=15") == CameraSpec("sim", 320, 240, 15)


@pytest.mark.parametrize(("spec", "problem"), [
    ("0@1280x720,fps=abc", "fps=abc is not a whole number"),
    ("0@1280x720,fps=0", "fps=0 is not a whole number within 1..240"),
    ("0,fourcc=MJPEG", "fourcc=MJPEG is not a four-character code"),
    ("0,fps=30,fps=60", "'fps=60' is not fps=N or fourcc=CODE (once each)"),
    ("0,size=1280x720", "'size=1280x720' is not fps=N or fourcc=CODE"),
    ("0@99999x720", "size 99999x720 is not within"),
    ("@640x480", "no camera source"),
    ("sim,fourcc=MJPG", "a simulated camera has no pixel format"),
])
def test_a_camera_spec_that_cannot_be_met_is_refused_naming_the_flag(spec: str, problem: str) -> None:
    with pytest.raises(HarnessInputError) as refused:
        parse_camera_spec(spec)
    assert refused.value.field == "--camera" and problem in refused.value.problem


def test_harness_run_refuses_a_bad_camera_before_locking_anything(workdir: Path, capsys) -> None:
    protocol = small_protocol_copy(workdir)
    code = main(["run", str(protocol), "--robot", "so101", "--port", "/dev/harness-no-such-port", "--headless",
                 "--policy", "expert", "--camera", "top=0@1280x720,fourcc=MJPEG"])
    assert code == 2
    assert "--camera: '0@1280x720,fourcc=MJPEG': fourcc=MJPEG is not a four-character code" in capsys.readouterr().err
    assert not (workdir / "scoresheets").exists() and not (workdir / "runs").exists()
