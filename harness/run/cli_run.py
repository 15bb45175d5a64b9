"""`harness run`: resolve settings, lock or resume the scoresheet, build robot and policy, run.

Torque is released on every way out: normal end, exception, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError
from harness.models.protocol import Protocol, load_protocol
from harness.models.scoresheet import (
    Scoresheet,
    build_locked,
    check_resumable,
    load_scoresheet,
    lock_scoresheet,
)
from harness.reports.summary import format_summary, summarize
from harness.run.safety import EmergencyStopped, GuardedRobot

EXIT_PAUSED = 3
BUILTIN_POLICIES = ("expert", "replay")


def _slug(policy_ref: str) -> str:
    name = Path(policy_ref.rstrip("/")).name or policy_ref
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _find_sheet(protocol_path: Path, args: argparse.Namespace, policy_ref: str | None) -> Path | None:
    if args.scoresheet:
        return Path(args.scoresheet)
    folder = Path("scoresheets")
    if policy_ref:
        return folder / f"{protocol_path.stem}-{_slug(policy_ref)}.yaml"
    candidates = sorted(folder.glob(f"{protocol_path.stem}-*.yaml"))
    if len(candidates) > 1:
        names = ", ".join(str(c) for c in candidates)
        raise HarnessInputError(protocol_path, "--policy", f"several runs of this protocol ({names}); name one")
    return candidates[0] if candidates else None


def _parse_cameras(items: list[str]) -> dict[str, str]:
    cameras = {}
    for item in items:
        name, sep, source = item.partition("=")
        if not sep or not name or not source:
            raise HarnessInputError(None, "--camera", f"'{item}' is not NAME=SOURCE (e.g. top=0)")
        cameras[name] = source
    return cameras


def resolve_sheet(args: argparse.Namespace, protocol: Protocol, protocol_path: Path) -> Scoresheet:
    """Lock a new scoresheet, or load and check the one to resume."""
    policy_flag = args.policy
    path = _find_sheet(protocol_path, args, policy_flag or (None if args.resume else protocol.run.policy))
    if path is not None and path.exists():
        if not args.resume:
            raise HarnessInputError(path, None, "this run already has a scoresheet; add --resume to continue it")
        sheet = load_scoresheet(path)
        check_resumable(sheet, protocol_path, policy_flag)
        if args.robot and args.robot != sheet.locked["robot"]:
            raise HarnessInputError(path, "robot", f"locked to '{sheet.locked['robot']}', not '{args.robot}'")
        return sheet
    policy_ref = policy_flag or protocol.run.policy
    robot = args.robot or protocol.run.robot
    if not policy_ref:
        raise HarnessInputError(protocol_path, "run.policy", "no policy: pass --policy PATH|expert|replay")
    if not robot:
        raise HarnessInputError(protocol_path, "run.robot", "no robot: pass --robot sim|so101")
    if policy_ref not in BUILTIN_POLICIES and not Path(policy_ref).is_dir():
        raise HarnessInputError(None, "--policy", f"'{policy_ref}' is neither a built-in policy nor a folder")
    path = path or Path("scoresheets") / f"{protocol_path.stem}-{_slug(policy_ref)}.yaml"
    settings = {
        "port": args.port or protocol.run.port,
        "cameras": _parse_cameras(args.camera) or dict(protocol.run.cameras),
        "rename_map": json.loads(args.rename_map) if args.rename_map else dict(protocol.run.rename_map),
    }
    return lock_scoresheet(path, build_locked(protocol, protocol_path, policy_ref, robot), settings)


def _make_policy(ref: str, protocol: Protocol, settings: dict[str, Any], device: str | None) -> Any:
    from harness.policies.scripted import ExpertPolicy, ReplayPolicy

    if ref == "expert":
        return ExpertPolicy()
    if ref == "replay":
        return ReplayPolicy()
    from harness.policies.lerobot_policy import LeRobotPolicy

    return LeRobotPolicy(ref, task=protocol.task, device=device, rename_map=settings.get("rename_map") or {})


def _make_sim_robot(protocol: Protocol, policy: Any, realtime: bool) -> Any:
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
                            camera_height=height, fps=protocol.fps, realtime=realtime)
    robot = SimSO101(config, world=world)
    robot.connect()
    return robot


def _make_real_robot(settings: dict[str, Any], protocol: Protocol) -> Any:
    from lerobot.cameras.opencv import OpenCVCameraConfig
    from lerobot.robots.so_follower import SO101Follower, SO101FollowerConfig

    port = settings.get("port")
    if not port:
        raise HarnessInputError(None, "--port", "a real arm needs --port (e.g. /dev/ttyACM0 or COM4)")
    cameras = {
        name: OpenCVCameraConfig(index_or_path=int(src) if src.isdigit() else Path(src), fps=protocol.fps,
                                 width=640, height=480)
        for name, src in (settings.get("cameras") or {}).items()
    }
    robot = SO101Follower(SO101FollowerConfig(port=port, id="harness_follower", cameras=cameras,
                                              calibration_dir=Path("calibration"), max_relative_target=10.0))
    robot.connect()
    return robot


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def release_torque(robot: Any) -> None:
    """Best effort on the way out: a failure here must not hide the original error."""
    try:
        if hasattr(robot, "disable_torque"):
            robot.disable_torque()
        if robot.is_connected:
            robot.disconnect()
    except Exception as exc:
        print(f"warning: could not release torque cleanly: {exc}", file=sys.stderr)


def run_from_args(args: argparse.Namespace) -> int:
    from harness.run.clock import MonotonicClock
    from harness.run.engine import RunEngine, RunOptions, RunPaused
    from harness.run.stages import OperatorStage, SimStage
    from harness.run.terminal import TerminalObserver

    protocol_path = Path(args.protocol)
    protocol = load_protocol(protocol_path)
    sheet = resolve_sheet(args, protocol, protocol_path)
    if sheet.complete:
        print(f"{sheet.path}: all {sheet.locked['trial_count']} trials are scored.\n")
        print(format_summary(summarize(sheet)))
        return 0
    settings = sheet.settings
    try:
        width, height = (int(v) for v in args.video_size.lower().split("x"))
    except ValueError:
        raise HarnessInputError(None, "--video-size", f"'{args.video_size}' is not WIDTHxHEIGHT") from None
    dropout = None
    if args.inject_dropout:
        trial_s, _, step_s = args.inject_dropout.partition(":")
        dropout = (int(trial_s), int(step_s or 0))

    policy = _make_policy(sheet.locked["policy"]["ref"], protocol, settings, args.device)
    is_sim = sheet.locked["robot"] == "sim"
    observer = TerminalObserver(operator_scores=not is_sim)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    robot = None
    dataset = None
    try:
        robot = GuardedRobot(
            _make_sim_robot(protocol, policy, args.realtime) if is_sim else _make_real_robot(settings, protocol)
        )
        stage = SimStage(robot.world, protocol, dropout) if is_sim else OperatorStage(observer.confirm_cube_placed)
        if args.record_dataset is not None:
            from harness.run.dataset_sink import DatasetSink

            root = Path(args.record_dataset or Path(args.runs_dir) / sheet.path.stem / "dataset")
            dataset = DatasetSink(root, protocol.fps, ["top", "wrist"], (640, 480), protocol.task,
                                  robot_type="so101_follower")
        options = RunOptions(runs_dir=Path(args.runs_dir), paced=not is_sim, video=not args.no_video,
                             video_fps=args.video_fps, video_size=(width, height), max_attempts=args.max_trials,
                             dataset=dataset)
        engine = RunEngine(protocol, sheet, robot, policy, stage, observer, MonotonicClock(), options)
        pending = len(sheet.pending_trials())
        print(f"{sheet.path}: {pending} of {sheet.locked['trial_count']} trials to run "
              f"({sheet.locked['policy']['ref']} on {sheet.locked['robot']})", flush=True)
        try:
            engine.run()
        except (RunPaused, EmergencyStopped) as paused:
            print(f"harness: run paused: {paused}. Fix the cause, then run again with --resume.", file=sys.stderr)
            return EXIT_PAUSED
    except KeyboardInterrupt:
        print("harness: interrupted; scored trials are saved. Continue with --resume.", file=sys.stderr)
        return 130
    finally:
        if robot is not None:
            release_torque(robot)
        if dataset is not None:
            dataset.close()
        policy.close()
        signal.signal(signal.SIGTERM, previous)
    print()
    print(format_summary(summarize(load_scoresheet(sheet.path))))
    return 0
