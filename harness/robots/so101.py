"""The real SO-101 follower: LeRobot's `SO101Follower`, with its bus swapped for the re-locking one,
and every bus failure turned into one typed fault that names the servos concerned.

A servo that stops answering, or a power cycle (the servos come back with torque off and the arm
sags), must stop the run the same way wherever it happens: at connect, during the start-pose move,
in the episode or at release. LeRobot raises `ConnectionError` or `RuntimeError` with text only a
person can read; this class asks the bus which servos are silent or reset, and raises
`ServoBusFault` with their names. Before every motion it checks that every servo still holds
torque, so a power cycle is caught before the next goal is written, not after the arm has fallen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lerobot.cameras.configs import CameraConfig
from lerobot.cameras.opencv import OpenCVCameraConfig
from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

from harness.bus.relocking_bus import EepromLocks, RelockingFeetechBus
from harness.errors import CameraStale, HarnessInputError, PoseMiss, RobotFault, ServoBusFault
from harness.robots.camera_spec import parse_camera_spec
from harness.sim.units import GRIPPER_LOAD_KEY

REPO_CALIBRATION = Path(__file__).resolve().parents[2] / "calibration"
BUS_ERRORS = (ConnectionError, RuntimeError, OSError)   # what LeRobot's bus, scservo and pyserial raise
log = logging.getLogger(__name__)


SAGGED = 5.0    # LeRobot units (degrees; gripper 0-100): below this a drift is not worth mentioning
# How long a camera may go without a fresh frame before the trial is a camera dropout: the harness's own dropout
# budget (`DropoutPolicy.max_bad_s`), not LeRobot's 500 ms, which fails the whole observation at once.
CAMERA_GRACE_S = 1.0
CAMERA_RETRY_S = 0.01


PROTECTIONS = {0x01: "input voltage", 0x02: "magnetic encoder", 0x04: "overheat", 0x08: "over-current",
               0x20: "overload"}   # Status (65) bits, as scservo_sdk names them


def _protections(status: int) -> str:
    return ", ".join(name for bit, name in PROTECTIONS.items() if status & bit) or f"status 0x{status:02x}"


def _names(servos: tuple[str, ...]) -> str:
    return "all six servos" if len(servos) == 6 else ", ".join(servos)


class _StaleFrames(RobotFault):
    """A camera's newest frame was too old for LeRobot's read: worth reading again, within the grace (kept inside
    `get_observation`, which turns it into `CameraStale` once the grace is spent)."""

    def __init__(self, cameras: tuple[str, ...]) -> None:
        self.cameras = cameras
        super().__init__(f"stale frames from {', '.join(cameras)}")


class BusCheckedSO101Follower(SO101Follower):
    """`SO101Follower` whose bus failures arrive as `ServoBusFault`, with a torque check before motion.

    `now` and `sleep` time the cameras' grace (the monotonic clock and `time.sleep` on a desk)."""

    bus: RelockingFeetechBus   # LeRobot's own bus, replaced at construction

    def __init__(self, config: SO101FollowerConfig, now: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(config)
        self.now, self.sleep = now, sleep
        stock = self.bus
        self.bus = RelockingFeetechBus(port=stock.port, motors=stock.motors, calibration=stock.calibration)
        self.last_goal: dict[str, float] = {}

    @property
    def eeprom_locks(self) -> EepromLocks | None:
        """Each servo's Lock as read at connect (None before connect): a warning, not a fault."""
        return self.bus.locks_at_connect

    # --- who is silent, who was reset -------------------------------------------------------------
    def silent_servos(self) -> tuple[str, ...]:
        """Servos that do not answer a ping (each tried three times); all of them if the port is closed."""
        if not self.bus.is_connected:
            return tuple(self.bus.motors)
        return tuple(name for name, m in self.bus.motors.items() if not self._answers(m.id))

    def _answers(self, motor_id: int) -> bool:
        try:
            return self.bus.ping(motor_id, num_retry=2) is not None
        except (*BUS_ERRORS, IndexError):   # the adapter is gone, or scservo_sdk misread a garbled reply
            return False

    def torque_lost(self) -> tuple[tuple[str, ...], dict[str, str]]:
        """Servos whose torque is off although the arm is in use: (reset by a power cycle, {tripped: which
        protection}). A protection that released torque leaves its bit in Status; a power cycle clears it."""
        off = self._torque_off(list(self.bus.motors))
        if off:     # a late reply to an earlier question can pass for an answer: ask again before concluding
            off = self._torque_off(off)
        if not off:
            return (), {}
        self._drop_stale_replies()
        status = self.bus.sync_read("Status", off, normalize=False, num_retry=2)
        tripped = {name: _protections(status[name]) for name in off if status.get(name)}
        return tuple(name for name in off if name not in tripped), tripped

    def _torque_off(self, motors: list[str]) -> list[str]:
        self._drop_stale_replies()
        torque = self.bus.sync_read("Torque_Enable", motors, normalize=False, num_retry=2)
        return [name for name, value in torque.items() if not value]

    def _drop_stale_replies(self) -> None:
        """scservo resyncs on the next `FF FF` and never clears its input: a reply that came after its
        timeout would be read as the answer to the next question."""
        self.bus.serial.reset_input_buffer()

    def _torque_fault(self, where: str) -> ServoBusFault | None:
        reset, tripped = self.torque_lost()
        if reset:
            return ServoBusFault(self._reset_detail(where, reset), reset=reset, tripped=tuple(tripped))
        if tripped:
            which = "; ".join(f"{name} ({why})" for name, why in tripped.items())
            return ServoBusFault(f"{where}: torque released by the servo's own protection: {which}; check for a "
                                 "jam, an overload or the supply voltage", tripped=tuple(tripped))
        return None

    def _fault(self, where: str, exc: BaseException, torque_expected: bool = True) -> ServoBusFault:
        """`torque_expected` False where torque off is normal (during LeRobot's connect, which configures the
        servos with torque released): there it says nothing about a power cycle, and the bus error is the news."""
        silent = self.silent_servos()
        try:
            torque = None if silent or not torque_expected else self._torque_fault(where)
        except BUS_ERRORS:
            torque = None
        if torque is not None:
            return torque
        if silent:
            cables = "its cable" if len(silent) == 1 else "their cables"
            detail = (f"{where}: no answer from {_names(silent)} ({type(exc).__name__}); check {cables} "
                      "and the arm's power")
        else:
            first = (str(exc).strip().splitlines() or [""])[0][:160]
            detail = f"{where}: {type(exc).__name__}: {first}"
        return ServoBusFault(detail, silent=silent)

    def _reset_detail(self, where: str, reset: tuple[str, ...]) -> str:
        moved = ""
        try:
            present = self.bus.sync_read("Present_Position", num_retry=2)
            drift = {n: abs(present[n] - self.last_goal[n]) for n in present if n in self.last_goal}
            worst = max(drift, key=lambda name: drift[name], default=None)
            if worst is not None and drift[worst] > SAGGED:
                moved = f"; {worst} sagged {drift[worst]:.0f} from its last target"
        except BUS_ERRORS:
            pass
        return f"{where}: {_names(reset)} came back with torque off{moved}; check the power supply and its connector"

    # --- LeRobot's robot interface, with faults typed -----------------------------------------------
    def connect(self, calibrate: bool = True) -> None:
        try:
            super().connect(calibrate)
        except BUS_ERRORS as exc:
            fault = self._fault("at connect", exc, torque_expected=False)
            self.release_after_failure()
            hint = f"; run `harness fix-ids --port {self.config.port}` to find out why" if fault.silent else ""
            raise ServoBusFault(fault.detail + hint, silent=fault.silent, reset=fault.reset) from exc

    def release_after_failure(self) -> None:
        """Torque off on whatever answers, locks, port and cameras closed: nothing left holding."""
        if self.bus.is_connected:
            self.bus.disconnect(disable_torque=True)
        for cam in self.cameras.values():
            if cam.is_connected:
                cam.disconnect()

    def get_observation(self) -> dict[str, Any]:
        """LeRobot's observation, plus the gripper servo's Present_Load (`GRIPPER_LOAD_KEY`, 0.1 % of full
        torque): what tells a gripper squeezing a cube from one that reached an empty command (failure anatomy).
        Signed in the direction of LeRobot's units (negative: pushing towards closed), the servo's own sign turned
        where the calibration inverts the gripper (`drive_mode`), as the simulated arm reports it. One more short
        read on the bus, the gripper's alone (2 bytes)."""
        started = self.now()
        while True:
            try:
                return self._observe()
            except _StaleFrames as stale:
                waited = self.now() - started
                if waited >= CAMERA_GRACE_S:
                    raise CameraStale(stale.cameras, waited) from None
                self.sleep(CAMERA_RETRY_S)

    def _observe(self) -> dict[str, Any]:
        try:
            observation = super().get_observation()
            # retried as LeRobot retries the positions just read: one lost reply is noise on the line, not a fault
            raw = float(self.bus.read("Present_Load", "gripper", normalize=False,
                                      num_retry=self.config.num_read_retries))
            inverted = bool(self.calibration.get("gripper") and self.calibration["gripper"].drive_mode)
            observation[GRIPPER_LOAD_KEY] = -raw if inverted else raw
            return observation
        except BUS_ERRORS as exc:
            if isinstance(exc, TimeoutError) and (stale := self._stale_cameras()):
                raise _StaleFrames(stale) from exc
            fault = self._fault("reading the arm", exc)
            if not (fault.silent or fault.reset or fault.tripped):
                raise                # every servo answers with torque on: a camera, not the bus
            raise fault from exc

    def _stale_cameras(self) -> tuple[str, ...]:
        """The cameras whose newest frame LeRobot's read refuses as too old (its `TimeoutError`)."""
        stale = []
        for name, camera in self.cameras.items():
            try:
                camera.read_latest()
            except TimeoutError:
                stale.append(name)
            except (RuntimeError, OSError):
                continue   # not a stale frame: the observation's own error says what
        return tuple(stale)

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        try:
            fault = self._torque_fault("before moving")
        except BUS_ERRORS as exc:
            raise self._fault("before moving", exc) from exc
        if fault is not None:
            raise fault
        try:
            sent = super().send_action(action)
        except BUS_ERRORS as exc:
            raise self._fault("moving", exc) from exc
        self.last_goal = {key.removesuffix(".pos"): float(v) for key, v in sent.items()}
        return sent

    def check_ready(self, pose: dict[str, float], tolerance: float = 5.0) -> list[PoseMiss]:
        """Before a person is asked to place a cube: every servo answers, holds torque and sits at `pose`
        (LeRobot units); returns the joints that do not sit there, empty when ready. A bus failure raises
        `ServoBusFault`."""
        observation = self.get_observation()
        try:
            fault = self._torque_fault("checking the arm")
        except BUS_ERRORS as exc:
            raise self._fault("checking the arm", exc) from exc
        if fault is not None:
            raise fault
        return [PoseMiss(name, float(observation[f"{name}.pos"]), target)
                for name, target in pose.items()
                if f"{name}.pos" in observation and abs(observation[f"{name}.pos"] - target) > tolerance]

    def release_torque(self) -> tuple[str, ...]:
        """Torque off on every servo that answers; the names of those that did not."""
        if not self.bus.is_connected:
            return ()
        return self.bus.release_torque()


def camera_config(name: str, source: str, fps: int) -> CameraConfig:
    """`source`: `SOURCE[@WxH][,fps=N][,fourcc=CODE]` (`camera_spec.py`): an OpenCV index (`"0"`) or device path
    (`"/dev/video2"`) at that size, frame rate (default `fps`, the control rate) and pixel format, or
    `sim[:SOCKET]` for the simulated camera of that name served by `harness emulate-bus --sim` (LeRobot
    camera type `harness_sim`). Sizes default to 640x480."""
    spec = parse_camera_spec(source)
    if spec.simulated:
        from harness.sim.config_sim_camera import HarnessSimCameraConfig, default_socket_path

        try:
            socket_path = spec.socket or str(default_socket_path())
        except ValueError as exc:
            raise HarnessInputError(None, "--camera", f"{name}={source}: {exc}") from None
        return HarnessSimCameraConfig(camera=name, socket_path=socket_path, fps=spec.fps or fps, width=spec.width,
                                      height=spec.height)
    where = int(spec.source) if spec.source.isdigit() else Path(spec.source)
    return OpenCVCameraConfig(index_or_path=where, fps=spec.fps or fps, width=spec.width, height=spec.height,
                              fourcc=spec.fourcc)


def calibration_location(robot_id: str, calibration_dir: Path | None) -> tuple[str, Path]:
    """An id names `calibration/<id>.json`, or LeRobot's own calibration folder when the repository has no
    such file (where `lerobot-calibrate` writes); a path to a `.json` file names that file."""
    if robot_id.endswith(".json"):
        path = Path(robot_id).expanduser()
        return path.stem, path.parent
    if calibration_dir is not None:
        return robot_id, calibration_dir
    if (REPO_CALIBRATION / f"{robot_id}.json").exists():
        return robot_id, REPO_CALIBRATION
    from lerobot.utils.constants import HF_LEROBOT_CALIBRATION

    return robot_id, HF_LEROBOT_CALIBRATION / "robots" / "so_follower"


def make_so101_follower(port: str, cameras: dict[str, str], fps: int = 30, robot_id: str = "harness_follower",
                        calibration_dir: Path | None = None,
                        max_relative_target: float | None = 10.0) -> BusCheckedSO101Follower:
    """`cameras` maps a name to a source (see `camera_config`)."""
    camera_configs = {name: camera_config(name, src, fps) for name, src in cameras.items()}
    robot_id, calibration_dir = calibration_location(robot_id, calibration_dir)
    config = SO101FollowerConfig(port=port, id=robot_id, cameras=camera_configs, calibration_dir=calibration_dir,
                                 max_relative_target=max_relative_target)
    return BusCheckedSO101Follower(config)

