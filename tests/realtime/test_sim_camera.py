"""Simulated cameras through LeRobot's camera API: frames of the world `emulate-bus --sim` drives,
delivered to `HarnessSimCamera` (type `harness_sim`), with the faults a real camera has."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lerobot.cameras.utils import make_cameras_from_configs
from lerobot.utils.errors import DeviceNotConnectedError

from harness.emulator.scenario import default_scenario, open_rig
from harness.sim.config_sim_camera import HarnessSimCameraConfig
from harness.sim.sim_camera import HarnessSimCamera
from tests.helpers import wait_until

pytestmark = pytest.mark.desk   # each test serves the simulated arm's cameras (tests/conftest.py)


def _camera(socket: Path, name: str = "top", width: int = 320, height: int = 240) -> HarnessSimCamera:
    camera = HarnessSimCamera(HarnessSimCameraConfig(camera=name, socket_path=str(socket), width=width,
                                                     height=height, fps=30))
    camera.connect()
    return camera


def _changed(a: np.ndarray, b: np.ndarray) -> float:
    """The share of pixels that differ by more than sensor noise."""
    return float((np.abs(a.astype(int) - b.astype(int)).max(axis=2) > 40).mean())


def _settled(camera: HarnessSimCamera) -> tuple[np.ndarray] | None:
    """(a frame of a still scene,) when the next one shows the same picture up to noise, else None: a
    frame drawn while the arm was moving may still be on its way after the servos stopped."""
    frame = camera.read()
    return (frame,) if _changed(frame, camera.read()) < 0.001 else None


def _frames_stopped(camera: HarnessSimCamera) -> bool:
    try:
        camera.async_read(timeout_ms=100)
    except TimeoutError:
        return True
    return False


@pytest.mark.slow
def test_frames_arrive_through_lerobots_camera_factory(tmp_path: Path) -> None:
    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket):
        configs = {"top": HarnessSimCameraConfig(camera="top", socket_path=str(socket), width=320, height=240),
                   "wrist": HarnessSimCameraConfig(camera="wrist", socket_path=str(socket), width=160, height=120)}
        cameras = make_cameras_from_configs(configs)
        assert all(isinstance(c, HarnessSimCamera) for c in cameras.values())
        for camera in cameras.values():
            camera.connect()
        top, wrist = cameras["top"].async_read(timeout_ms=2000), cameras["wrist"].async_read(timeout_ms=2000)
        assert top.shape == (240, 320, 3) and wrist.shape == (120, 160, 3) and top.dtype == np.uint8
        assert top.std() > 10    # a scene, not a blank
        # async_read never hands back the frame it returned already: it waits for a newer one. (Not "newer than the
        # latest sequence seen": a frame may arrive between the two reads, and that one is then returned at once.)
        assert cameras["top"].async_read(timeout_ms=2000) is not top
        for camera in cameras.values():
            camera.disconnect()
        assert not cameras["top"].is_connected


@pytest.mark.slow
def test_the_top_camera_sees_the_arm_the_servos_move(tmp_path: Path) -> None:
    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        for name in ("shoulder_lift", "elbow_flex", "wrist_flex"):
            rig.move(name, 0.0)
        rig.wait()
        camera = _camera(socket)
        (before,) = wait_until(lambda: _settled(camera), 5.0, "a still picture of the arm at rest")
        rig.move("shoulder_pan", 60.0, speed_deg_s=240)
        rig.wait()
        (after,) = wait_until(lambda: _settled(camera), 5.0, "a still picture of the arm swung")
        assert _changed(after, before) > 0.005     # the arm swung through the picture
        camera.disconnect()


@pytest.mark.slow
def test_frozen_black_and_dropout_faults_look_as_they_do_on_a_real_camera(tmp_path: Path) -> None:
    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        camera = _camera(socket)
        assert not np.array_equal(camera.read(), camera.read())    # sensor noise: live frames differ

        rig.camera("top", "frozen")
        camera.read()
        assert np.array_equal(camera.read(), camera.read())        # the same picture, over and over

        rig.camera("top", "black")
        camera.read()
        assert camera.read().max() == 0

        rig.camera("top", "dropout")
        # frames already on their way when the cable was pulled may still arrive; then none does
        wait_until(lambda: _frames_stopped(camera), 5.0, "frames stopping after the cable was pulled")
        with pytest.raises(TimeoutError):
            camera.async_read(timeout_ms=300)
        with pytest.raises(TimeoutError):
            camera.read_latest(max_age_ms=200)   # what LeRobot's SO101Follower.get_observation calls

        rig.camera("top", "ok")
        assert camera.async_read(timeout_ms=2000).max() > 0
        camera.disconnect()


def test_connecting_without_an_emulator_says_what_to_start(tmp_path: Path) -> None:
    camera = HarnessSimCamera(HarnessSimCameraConfig(socket_path=str(tmp_path / "none.sock")))
    with pytest.raises(ConnectionError, match="start `harness emulate-bus --sim`"):
        camera.connect()
    assert not camera.is_connected


@pytest.mark.slow
def test_so101_follower_observes_both_simulated_cameras(tmp_path: Path) -> None:
    from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

    from harness.robots.so101 import REPO_CALIBRATION

    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        config = SO101FollowerConfig(port=rig.port, id="emulated_follower", calibration_dir=REPO_CALIBRATION, cameras={
            "top": HarnessSimCameraConfig(camera="top", socket_path=str(socket), width=320, height=240),
            "wrist": HarnessSimCameraConfig(camera="wrist", socket_path=str(socket), width=320, height=240)})
        robot = SO101Follower(config)
        assert robot.observation_features["top"] == (240, 320, 3)
        robot.connect()
        observation = robot.get_observation()
        assert observation["top"].shape == observation["wrist"].shape == (240, 320, 3)
        assert {f"{n}.pos" for n in ("shoulder_pan", "gripper")} <= set(observation)
        robot.disconnect()


@pytest.mark.slow
def test_lerobot_discovers_the_camera_plugin() -> None:
    code = ("from lerobot.utils.import_utils import register_third_party_plugins; register_third_party_plugins(); "
            "from lerobot.cameras.configs import CameraConfig; print(CameraConfig.get_choice_class('harness_sim'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HarnessSimCameraConfig" in out.stdout, out.stderr[-2000:]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_the_cameras_draw_in_a_process_of_their_own_that_ends_with_the_rig(tmp_path: Path) -> None:
    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        assert rig.frames is not None
        pid = rig.frames.pid
        assert pid != os.getpid() and _alive(pid)
        camera = _camera(socket)
        assert camera.read().std() > 10
        camera.disconnect()
    assert not _alive(pid)
    assert not socket.exists()


@pytest.mark.slow
def test_the_cameras_go_when_the_emulator_is_killed(tmp_path: Path, harness_cli) -> None:
    socket = tmp_path / "cams.sock"
    emulator = harness_cli.popen(["emulate-bus", "--sim", "--camera-socket", str(socket)], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert emulator.stdout is not None
        for line in emulator.stdout:
            if line.startswith("Simulated cameras on"):
                break
        children = Path(f"/proc/{emulator.pid}/task/{emulator.pid}/children").read_text().split()
        renderers = [int(c) for c in children if b"harness.sim.frame_render" in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert len(renderers) == 1
        camera = _camera(socket)
        camera.read()
        emulator.send_signal(signal.SIGKILL)      # no clean-up of its own: the lifeline must do it
        emulator.wait(timeout=10)
        wait_until(lambda: not _alive(renderers[0]), 10, "the renderer ending with the emulator")
        assert not socket.exists()
        with pytest.raises((TimeoutError, DeviceNotConnectedError)):
            camera.async_read(timeout_ms=500)
    finally:
        emulator.kill()
        emulator.wait()


@pytest.mark.parametrize("kind", ["a regular file", "a dangling link", "a missing folder", "too long a path"])
def test_a_camera_socket_path_no_camera_can_be_served_at_is_refused_and_left_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    from harness.cli import main

    path = tmp_path / "cams.sock"
    if kind == "a regular file":
        path.write_text("someone's notes")
    elif kind == "a dangling link":
        path.symlink_to(tmp_path / "elsewhere")
    elif kind == "a missing folder":
        path = tmp_path / "no-such-folder" / "cams.sock"
    else:
        path = tmp_path / ("x" * 120 + ".sock")
    code = main(["emulate-bus", "--sim", "--camera-socket", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "--camera-socket" in err[0] and str(path) in err[0]
    if kind == "a regular file":
        assert path.read_text() == "someone's notes"
    if kind == "a dangling link":
        assert path.is_symlink()


class SlowClock:
    """The follower's clock for its camera grace: each look advances it by `step` s, so how long the grace lasts is
    counted in looks, not in wall time (a loaded machine cannot make these tests fail or pass by itself)."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def _follower_with_a_stale_top_camera(rig, socket: Path, clock: SlowClock):
    from lerobot.robots.so_follower import SO101FollowerConfig

    from harness.robots.so101 import REPO_CALIBRATION, BusCheckedSO101Follower

    config = SO101FollowerConfig(port=rig.port, id="emulated_follower", calibration_dir=REPO_CALIBRATION, cameras={
        "top": HarnessSimCameraConfig(camera="top", socket_path=str(socket), width=160, height=120)})
    robot = BusCheckedSO101Follower(config, now=clock)
    robot.connect()
    rig.camera("top", "dropout")
    top = robot.cameras["top"]
    wait_until(lambda: _frames_stopped(top), 5.0, "frames stopping after the cable was pulled")
    wait_until(lambda: _too_old(top), 5.0, "the newest frame older than LeRobot's 500 ms")
    return robot


def _too_old(camera: HarnessSimCamera) -> bool:
    try:
        camera.read_latest()
    except TimeoutError:
        return True
    return False


@pytest.mark.slow
def test_a_camera_hiccup_shorter_than_the_grace_is_waited_out_not_a_fault(tmp_path: Path) -> None:
    """LeRobot's observation refuses a frame over 500 ms old and fails whole; a USB camera's hiccup of that length
    paused runs as a robot I/O error (and the emulated camera under CI's load). The harness waits for a fresh
    frame for its own dropout budget (1 s) before calling it a camera dropout."""
    import threading

    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        robot = _follower_with_a_stale_top_camera(rig, socket, SlowClock(step=0.0001))
        try:
            threading.Timer(0.3, rig.camera, ("top", "ok")).start()   # the cable back in
            observation = robot.get_observation()
        finally:
            robot.disconnect()
    assert observation["top"].shape == (120, 160, 3) and observation["top"].max() > 0
    assert "gripper.load" in observation


@pytest.mark.slow
def test_a_camera_stale_past_the_grace_is_a_camera_dropout_naming_it(tmp_path: Path) -> None:
    from harness.errors import CameraStale
    from harness.models.taxonomy import VoidKind
    from harness.run.faults import robot_fault_void

    socket = tmp_path / "cams.sock"
    with open_rig(default_scenario(), sim=True, camera_socket=socket) as rig:
        robot = _follower_with_a_stale_top_camera(rig, socket, SlowClock(step=0.1))
        try:
            with pytest.raises(CameraStale) as stale:
                robot.get_observation()
        finally:
            robot.disconnect()
    assert stale.value.cameras == ("top",)
    void = robot_fault_void(stale.value)
    assert void.kind is VoidKind.CAMERA_DROPOUT and void.reason.startswith("camera dropout: top: no fresh frame for 1.")
