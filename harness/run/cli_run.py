"""`harness run`: resolve settings, lock or resume the scoresheet, build robot and policy, run.

Torque is released on every way out: normal end, exception, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import dataclass
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


def resolve_sheet(args: argparse.Namespace, protocol: Protocol, protocol_path: Path) -> tuple[Scoresheet, bool]:
    """Lock a new scoresheet, or load and check the one to resume; True when it was created now."""
    policy_flag = args.policy
    path = _find_sheet(protocol_path, args, policy_flag or (None if args.resume else protocol.run.policy))
    if path is not None and path.exists():
        if not args.resume:
            raise HarnessInputError(path, None, "this run already has a scoresheet; add --resume to continue it")
        sheet = load_scoresheet(path)
        check_resumable(sheet, protocol_path, policy_flag)
        if args.robot and args.robot != sheet.locked["robot"]:
            raise HarnessInputError(path, "robot", f"locked to '{sheet.locked['robot']}', not '{args.robot}'")
        return sheet, False
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
        "robot_id": args.robot_id,
        "cameras": _parse_cameras(args.camera) or dict(protocol.run.cameras),
        "rename_map": json.loads(args.rename_map) if args.rename_map else dict(protocol.run.rename_map),
    }
    return lock_scoresheet(path, build_locked(protocol, protocol_path, policy_ref, robot), settings), True


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
    from harness.robots.so101 import make_so101_follower

    port = settings.get("port")
    if not port:
        raise HarnessInputError(None, "--port", "a real arm needs --port (e.g. /dev/ttyACM0 or COM4)")
    robot = make_so101_follower(port, settings.get("cameras") or {}, fps=protocol.fps,
                                robot_id=settings.get("robot_id") or "harness_follower")
    robot.connect()
    return robot


def check_report(robot: GuardedRobot, policy: Any, sheet: Scoresheet, stage: Any) -> Any:
    """What the TUI's check screen shows, measured now: nothing here moves the arm."""
    import time

    from harness.tui.screens import CheckReport

    cameras: list[tuple[str, float | None]] = []
    world = robot.world
    if world is not None:
        for cam in ("top", "wrist"):
            world.render(cam, 640, 480)
            t0 = time.perf_counter()
            for _ in range(5):
                world.render(cam, 640, 480)
            cameras.append((cam, 5 / (time.perf_counter() - t0)))
        world.release_renderers()  # the engine renders from its own thread
    else:
        for name, camera in getattr(robot.robot, "cameras", {}).items():
            t0, frames = time.perf_counter(), 0
            try:
                for _ in range(10):
                    camera.async_read()
                    frames += 1
            except Exception:
                pass
            cameras.append((name, frames / (time.perf_counter() - t0) if frames else None))
    warm = policy.warm_up(robot.get_observation()) if hasattr(policy, "warm_up") else None
    label = f"{sheet.locked['robot']} ({'simulated SO-101' if world is not None else 'SO-101 follower'})"
    return CheckReport(robot=label, cameras=cameras, policy=getattr(policy, "name", sheet.locked["policy"]["ref"]),
                       policy_warmup_ms=warm, locked=sheet.locked, scored=len(sheet.scored_attempts()),
                       voids=sum(1 for a in sheet.attempts if a.outcome == "void"), scoresheet=str(sheet.path))


def make_app(setup: RunSetup, undo_s: float = 3.0) -> Any:
    """The operator TUI over this run's engine (the engine itself is the same as headless)."""
    from harness.tui.app import RunApp
    from harness.tui.state import RunState, Tally

    sheet, protocol = setup.sheet, setup.protocol
    tally = Tally()
    for attempt in sheet.attempts:
        tally = tally.add(attempt.label)
    config = getattr(setup.robot.robot, "config", None)
    pace = "" if setup.robot.world is None else "real-time" if getattr(config, "realtime", False) else "lock-step"
    state = RunState(protocol_name=protocol.name, policy=sheet.locked["policy"]["ref"], robot=sheet.locked["robot"],
                     pace=pace,
                     total=sheet.locked["trial_count"], fps=protocol.fps, time_limit_s=protocol.episode_time_limit_s,
                     trained_xy_cm=protocol.scene.trained_cube_xy_cm, bowl_xy_cm=protocol.scene.bowl_xy_cm,
                     bowl_diameter_cm=protocol.scene.bowl_diameter_cm, tally=tally)
    report = check_report(setup.robot, setup.policy, sheet, setup.stage)
    app = RunApp(setup.engine, setup.robot, report, state, undo_s=undo_s)
    if hasattr(setup.stage, "confirm_placed"):
        setup.stage.confirm_placed = app.observer.confirm_cube_placed
    return app


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


@dataclass
class RunSetup:
    protocol: Protocol
    sheet: Scoresheet
    policy: Any
    robot: GuardedRobot
    stage: Any
    engine: Any
    dataset: Any | None

    def close(self) -> None:
        release_torque(self.robot)
        if self.dataset is not None:
            self.dataset.close()
        self.policy.close()


def prepare_run(args: argparse.Namespace, protocol: Protocol, sheet: Scoresheet) -> RunSetup:
    """Policy, robot (behind the safety guard), stage and engine for a resolved scoresheet."""
    from harness.run.clock import MonotonicClock
    from harness.run.engine import RunEngine, RunOptions
    from harness.run.stages import OperatorStage, SimStage
    from harness.run.terminal import TerminalObserver

    try:
        width, height = (int(v) for v in args.video_size.lower().split("x"))
    except ValueError:
        raise HarnessInputError(None, "--video-size", f"'{args.video_size}' is not WIDTHxHEIGHT") from None
    dropout = None
    if args.inject_dropout:
        trial_s, _, step_s = args.inject_dropout.partition(":")
        dropout = (int(trial_s), int(step_s or 0))
    settings = sheet.settings
    is_sim = sheet.locked["robot"] == "sim"
    policy = _make_policy(sheet.locked["policy"]["ref"], protocol, settings, args.device)
    try:
        robot = GuardedRobot(
            _make_sim_robot(protocol, policy, args.realtime) if is_sim else _make_real_robot(settings, protocol)
        )
    except BaseException:
        policy.close()
        raise
    cameras = {k for k, v in robot.robot.observation_features.items() if isinstance(v, tuple)}
    missing = sorted(set(policy.camera_keys) - cameras)
    if missing:
        release_torque(robot)
        policy.close()
        raise HarnessInputError(None, "--camera", f"the policy needs camera(s) {missing} but the robot has "
                                                  f"{sorted(cameras) or 'none'}: pass --camera NAME=INDEX "
                                                  "(or --rename-map for other names)")
    observer = TerminalObserver(operator_scores=not is_sim)
    stage = SimStage(robot.world, protocol, dropout) if is_sim else OperatorStage(observer.confirm_cube_placed)
    dataset = None
    if args.record_dataset is not None:
        from harness.run.dataset_sink import DatasetSink

        root = Path(args.record_dataset or Path(args.runs_dir) / sheet.path.stem / "dataset")
        dataset = DatasetSink(root, protocol.fps, ["top", "wrist"], (640, 480), protocol.task,
                              robot_type="so101_follower")
    options = RunOptions(runs_dir=Path(args.runs_dir), paced=not is_sim, video=not args.no_video,
                         video_fps=args.video_fps, video_size=(width, height), max_attempts=args.max_trials,
                         dataset=dataset)
    engine = RunEngine(protocol, sheet, robot, policy, stage, observer, MonotonicClock(), options)
    return RunSetup(protocol, sheet, policy, robot, stage, engine, dataset)


def run_from_args(args: argparse.Namespace) -> int:
    from harness.run.engine import RunPaused

    protocol_path = Path(args.protocol)
    protocol = load_protocol(protocol_path)
    sheet, created = resolve_sheet(args, protocol, protocol_path)
    if sheet.complete:
        print(f"{sheet.path}: all {sheet.locked['trial_count']} trials are scored.\n")
        print(format_summary(summarize(sheet)))
        return 0
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    setup = None
    try:
        try:
            setup = prepare_run(args, protocol, sheet)
        except HarnessInputError:
            if created:
                sheet.path.unlink(missing_ok=True)  # bad input: leave nothing behind
            raise
        if not args.headless and sys.stdin.isatty() and sys.stdout.isatty():
            code = make_app(setup).run()
            print(format_summary(summarize(load_scoresheet(sheet.path))))
            return code if isinstance(code, int) else 0
        pending = len(sheet.pending_trials())
        print(f"{sheet.path}: {pending} of {sheet.locked['trial_count']} trials to run "
              f"({sheet.locked['policy']['ref']} on {sheet.locked['robot']})", flush=True)
        try:
            setup.engine.run()
        except (RunPaused, EmergencyStopped) as paused:
            print(f"harness: run paused: {paused}. Fix the cause, then run again with --resume.", file=sys.stderr)
            return EXIT_PAUSED
    except KeyboardInterrupt:
        print("harness: interrupted; scored trials are saved. Continue with --resume.", file=sys.stderr)
        return 130
    finally:
        if setup is not None:
            setup.close()
        signal.signal(signal.SIGTERM, previous)
    print()
    print(format_summary(summarize(load_scoresheet(sheet.path))))
    return 0
