"""How each part of a run is made from settings: the policy, and the robot behind its safety guard.

`Parts` bundles these factories so a caller (a test, a future GUI) can substitute one of them
through the constructor instead of patching a module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError, HarnessInputError, RunPaused, ServoBusFault
from harness.models.protocol import Protocol
from harness.models.taxonomy import Void, VoidKind
from harness.policies.base import EvalPolicy
from harness.run.safety import GuardedRobot


def make_policy(ref: str, protocol: Protocol, settings: dict[str, Any], device: str | None,
                robot: str = "sim") -> EvalPolicy:
    """A built-in policy by name, or a LeRobot checkpoint folder; `robot` (the locked one) decides whether an
    asynchronous client's queue runs in simulated time (sim) or in wall time beside a paced arm."""
    from harness.policies.scripted import ExpertPolicy, ReplayPolicy

    if ref == "expert":
        return ExpertPolicy()
    if ref == "replay":
        return ReplayPolicy()
    from harness.policies.lerobot_policy import LeRobotPolicy

    try:
        inference = settings.get("inference") or {}
        engine = inference.get("engine", "sync")
        if engine == "async":   # LeRobot's policy server runs it; the server is asked to load it now
            from harness.policies.async_connect import connect_async_policy
            from harness.policies.async_policy import AsyncSettings
            from harness.run.clock import MonotonicClock

            return connect_async_policy(ref, protocol.task, AsyncSettings.from_record(inference), protocol.fps,
                                        settings.get("rename_map") or {}, device,
                                        wall_clock=None if robot == "sim" else MonotonicClock().now)
        if engine == "rtc":   # LeRobot's Real-Time Chunking, locked settings: simulated time, or a paced arm's
            from harness.policies.rtc_policy import RtcSettings
            from harness.run.clock import MonotonicClock

            rtc = RtcSettings.from_record(inference) if "execution_horizon" in inference else None
            return LeRobotPolicy(ref, task=protocol.task, device=device, rename_map=settings.get("rename_map") or {},
                                 engine=engine, rtc=rtc, fps=protocol.fps, latency_ms=settings.get("latency_ms"),
                                 wall_clock=None if robot == "sim" else MonotonicClock().now)
        return LeRobotPolicy(ref, task=protocol.task, device=device, rename_map=settings.get("rename_map") or {},
                             engine=engine)
    except HarnessError:
        raise
    except Exception as exc:   # a corrupt config.json or weights file is bad input, found before anything is locked
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        raise HarnessInputError(ref, None, f"cannot load this policy ({type(exc).__name__}: {detail})") from None


def make_sim_robot(protocol: Protocol, policy: EvalPolicy, realtime: bool,
                   latency_ms: float | str | None = None) -> GuardedRobot:
    """The simulated SO-101 in the protocol's scene, rendering the cameras the policy reads; `latency_ms`
    (milliseconds or "measured") turns on its latency model, None keeps lock-step."""
    from harness.sim.config_sim_so101 import SimSO101Config
    from harness.sim.scene import SceneGeometry
    from harness.sim.sim_so101 import SimSO101
    from harness.sim.world import SimWorld

    scene = protocol.scene
    geometry = SceneGeometry(bowl_xy=(scene.bowl_xy_cm[0] / 100, scene.bowl_xy_cm[1] / 100),
                             bowl_rim_diameter=scene.bowl_diameter_cm / 100, cube_edge=scene.cube_edge_cm / 100)
    world = SimWorld(geometry, control_fps=protocol.fps)
    width, height = getattr(policy, "image_size", None) or (640, 480)
    config = SimSO101Config(id="harness_sim", render_cameras=list(policy.camera_keys), camera_width=width,
                            camera_height=height, fps=protocol.fps, realtime=realtime, latency_ms=latency_ms)
    robot = SimSO101(config, world=world)
    robot.connect()
    return GuardedRobot(robot, release=robot.disable_torque)


def make_real_robot(settings: dict[str, Any], protocol: Protocol) -> GuardedRobot:
    """LeRobot's SO-101 follower on the re-locking bus; torque goes off through its bus."""
    from harness.robots.so101 import make_so101_follower

    port = settings.get("port")
    if not port:
        raise HarnessInputError(None, "--port", "a real arm needs --port (e.g. /dev/ttyACM0 or COM4)")
    robot = make_so101_follower(port, settings.get("cameras") or {}, fps=protocol.fps,
                                robot_id=settings.get("robot_id") or "harness_follower")
    try:
        robot.connect()
    except ServoBusFault as fault:   # torque already released where servos answer; nothing ran yet
        kind = VoidKind.ARM_POWER_CYCLED if fault.reset else VoidKind.ROBOT_IO_ERROR
        raise RunPaused(Void(kind, fault.detail)) from fault
    locks = robot.eeprom_locks
    return GuardedRobot(robot, release=robot.release_torque, check_ready=robot.check_ready,
                        connect_checks=[locks] if locks is not None else [])


@dataclass(frozen=True)
class Parts:
    """The factories `prepare_run` uses; each can be replaced through the constructor."""

    policy: Callable[[str, Protocol, dict[str, Any], str | None, str], EvalPolicy] = make_policy
    sim_robot: Callable[[Protocol, EvalPolicy, bool], GuardedRobot] = make_sim_robot
    real_robot: Callable[[dict[str, Any], Protocol], GuardedRobot] = make_real_robot
    # (front end, operator scores) -> the engine's observer; None: the front end's own (`harness rehearse`
    # puts its scripted or console-driven operator here)
    observer: Callable[[Any, bool], Any] | None = None
