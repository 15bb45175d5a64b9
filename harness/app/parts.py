"""How each part of a run is made from settings: the policy, and the robot behind its safety guard.

`Parts` bundles these factories so a caller (a test, a future GUI) can substitute one of them
through the constructor instead of patching a module.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError, HarnessInputError, RunPaused, ServoBusFault
from harness.models.locked import LockedInference
from harness.models.protocol import Protocol
from harness.models.render_profile import LEGACY_PROFILE, RenderProfile
from harness.models.run_settings import BuiltinPolicy, ChunkLatency, InferenceEngine, Latency, RobotKind, RunSettings
from harness.models.taxonomy import Void, VoidKind
from harness.policies.base import EvalPolicy
from harness.run.safety import GuardedRobot


class RayWorkerPool(typing.Protocol):
    """A sweep's Ray workers as a run borrows them (`app.parallel.workers.WorkerPool`, which builds its runs from
    these parts: named here by what a run calls, so this module does not import it back)."""

    def take(self, count: int) -> list[Any]: ...

    def give_back(self, actors: list[Any]) -> None: ...

    def close(self, closing: list[Any] | None = None, timeout_s: float = ...) -> None: ...


def make_policy(ref: str, protocol: Protocol, settings: RunSettings, device: str | None,
                robot: RobotKind = RobotKind.SIM, inference: LockedInference | None = None) -> EvalPolicy:
    """A built-in policy by name, or a LeRobot checkpoint folder run by the locked inference engine (None:
    LeRobot's synchronous one); `robot` (the locked one) decides whether an asynchronous client's queue runs
    in simulated time (sim) or in wall time beside a paced arm."""
    from harness.policies.scripted import ExpertPolicy, ReplayPolicy

    builtin = BuiltinPolicy.named(ref)
    if builtin is BuiltinPolicy.EXPERT:
        return ExpertPolicy()
    if builtin is BuiltinPolicy.REPLAY:
        return ReplayPolicy()
    from harness.policies.hub import checkpoint_folder
    from harness.policies.lerobot_policy import LeRobotPolicy

    ref = checkpoint_folder(ref)   # a Hub id (locked runs pass it at its locked commit): its cached snapshot
    inference = inference or LockedInference(engine=InferenceEngine.SYNC)
    engine = inference.engine
    try:
        if engine is InferenceEngine.ASYNC:   # LeRobot's policy server runs it; the server is asked to load it now
            from harness.policies.inference.async_connect import connect_async_policy
            from harness.policies.inference.async_policy import AsyncSettings
            from harness.run.clock import MonotonicClock

            queue = AsyncSettings.from_record(inference.model_dump())
            return connect_async_policy(ref, protocol.task, queue, protocol.fps, settings.rename_map, device,
                                        wall_clock=None if RobotKind(robot).simulated else MonotonicClock().now)
        if engine is InferenceEngine.RTC:   # LeRobot's Real-Time Chunking: simulated time, or a paced arm's
            from harness.policies.inference.rtc_policy import RtcSettings
            from harness.run.clock import MonotonicClock

            rtc = RtcSettings.from_record(inference.model_dump()) if inference.execution_horizon is not None else None
            latency = settings.latency_ms
            if isinstance(latency, ChunkLatency):   # refused when the sheet was made: RTC's arm never waits for one
                raise HarnessInputError(None, "--latency-chunk-ms", "not with --inference rtc")
            return LeRobotPolicy(ref, task=protocol.task, device=device, rename_map=settings.rename_map,
                                 engine=engine, rtc=rtc, fps=protocol.fps, latency_ms=latency,
                                 wall_clock=None if RobotKind(robot).simulated else MonotonicClock().now)
        return LeRobotPolicy(ref, task=protocol.task, device=device, rename_map=settings.rename_map, engine=engine)
    except HarnessError:
        raise
    except Exception as exc:   # a corrupt config.json or weights file is bad input, found before anything is locked
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        raise HarnessInputError(ref, None, f"cannot load this policy ({type(exc).__name__}: {detail})") from None


def sim_camera_size(protocol: Protocol, cameras: Sequence[str]) -> tuple[int, int] | None:
    """(width, height) the protocol's `run.cameras` gives the policy's cameras as simulated ones (`sim@WxH`),
    None where it names none of them: the simulated arm renders at the size the policy was trained at, unless
    the protocol says otherwise. A twin says otherwise (`app.twin`): its arm renders at the size the real run's
    cameras delivered, since a policy fed 640x480 frames on the arm computed on those, whatever its training
    size."""
    from harness.robots.camera_spec import parse_camera_spec

    sizes = set()
    for name in cameras:
        source = protocol.run.cameras.get(name)
        if source is None:
            continue
        spec = parse_camera_spec(source, f"run.cameras.{name}")
        if spec.simulated:
            sizes.add((spec.width, spec.height))
    if len(sizes) > 1:
        raise HarnessInputError(None, "run.cameras", f"the simulated cameras render at one size, not "
                                                     f"{', '.join(f'{w}x{h}' for w, h in sorted(sizes))}")
    return next(iter(sizes), None)


def sim_world(protocol: Protocol, render_profile: RenderProfile) -> Any:
    """A new simulated table laid out as the protocol's scene says (a `SimWorld`), drawing with `render_profile`."""
    from harness.sim.scene import SceneGeometry
    from harness.sim.world import SimWorld

    scene = protocol.scene
    geometry = SceneGeometry(bowl_xy=(scene.bowl_xy_cm[0] / 100, scene.bowl_xy_cm[1] / 100),
                             bowl_rim_diameter=scene.bowl_diameter_cm / 100, cube_edge=scene.cube_edge_cm / 100)
    return SimWorld(geometry, control_fps=protocol.fps, render_profile=render_profile)


def make_sim_robot(protocol: Protocol, policy: EvalPolicy, realtime: bool,
                   latency_ms: Latency = None,
                   render_profile: RenderProfile = LEGACY_PROFILE, world: Any = None) -> GuardedRobot:
    """The simulated SO-101 in the protocol's scene, rendering the cameras the policy reads (and only those) with
    `render_profile`'s meshes; `latency_ms` (milliseconds, "measured" or a `ChunkLatency`) turns on its latency
    model, None keeps lock-step. `world`: one kept from an earlier run (`app.worker_cache`), else a new one."""
    from harness.sim.config_sim_so101 import SimSO101Config
    from harness.sim.sim_so101 import SimSO101

    if world is None:
        world = sim_world(protocol, render_profile)
    width, height = sim_camera_size(protocol, policy.camera_keys) or policy.image_size or (640, 480)
    config = SimSO101Config(id="harness_sim", render_cameras=list(policy.camera_keys), camera_width=width,
                            camera_height=height, fps=protocol.fps, realtime=realtime,
                            latency_ms=latency_ms.model_dump() if isinstance(latency_ms, ChunkLatency) else latency_ms)
    robot = SimSO101(config, world=world)
    robot.connect()
    return GuardedRobot(robot, release=robot.disable_torque, simulated=robot)


def make_real_robot(settings: RunSettings, protocol: Protocol) -> GuardedRobot:
    """LeRobot's SO-101 follower on the re-locking bus; torque goes off through its bus."""
    from harness.bus.ports import check_port
    from harness.robots.so101 import make_so101_follower

    port = check_port(settings.port)   # missing or not here: one line naming the serial ports there are
    robot = make_so101_follower(port, settings.cameras, fps=protocol.fps,
                                robot_id=settings.robot_id or "harness_follower")
    try:
        robot.connect()
    except ServoBusFault as fault:   # torque already released where servos answer; nothing ran yet
        kind = VoidKind.ARM_POWER_CYCLED if fault.reset else VoidKind.ROBOT_IO_ERROR
        raise RunPaused(Void(kind, fault.detail)) from fault
    return guard_follower(robot)


def guard_follower(robot: Any) -> GuardedRobot:
    """A connected `BusCheckedSO101Follower` as the run guards it: torque off through its bus, its start-pose
    check, its EEPROM-lock warning."""
    locks = robot.eeprom_locks
    return GuardedRobot(robot, release=robot.release_torque, check_ready=robot.check_ready,
                        connect_checks=[locks] if locks is not None else [])


@dataclass(frozen=True)
class Parts:
    """The factories `prepare_run` uses; each can be replaced through the constructor."""

    policy: Callable[[str, Protocol, RunSettings, str | None, RobotKind, LockedInference | None], EvalPolicy] = \
        make_policy
    sim_robot: Callable[[Protocol, EvalPolicy, bool], GuardedRobot] = make_sim_robot
    real_robot: Callable[[RunSettings, Protocol], GuardedRobot] = make_real_robot
    # (front end, operator scores) -> the engine's observer; None: the front end's own (`harness rehearse`
    # puts its scripted or console-driven operator here)
    observer: Callable[[Any, bool], Any] | None = None
    # `harness rehearse`: the emulated arm's simulator. Only there may the built-in expert run on an so101 sheet,
    # planning from the emulated cube's true pose (a real arm has no such truth); None everywhere else.
    emulated_truth: Any | None = None
    # a sweep's Ray workers, kept from cell to cell (`app.parallel.workers`); None: a `--workers` run starts
    # its own and ends them with it
    ray_workers: RayWorkerPool | None = None
