"""Everything one `harness run` needs, built in dependency order and handed over through constructors:
policy -> robot (behind the guard) -> observer -> stage -> engine."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from harness.app.operator_parts import operator_stage
from harness.app.parts import Parts
from harness.errors import HarnessInputError
from harness.models.protocol import Protocol
from harness.models.run_settings import SO101_ROBOT_TYPE, BuiltinPolicy, InferenceEngine, RobotKind
from harness.models.scoresheet import Scoresheet, run_latency
from harness.policies.base import EvalPolicy
from harness.run.clock import MonotonicClock
from harness.run.dataset_sink import RecordingOptions
from harness.run.engine import RunEngine, RunObserver, RunOptions
from harness.run.evidence import VideoMode
from harness.run.safety import GuardedRobot
from harness.run.stages import SimStage, TrialStage

log = logging.getLogger(__name__)


class FrontEnd(StrEnum):
    """Who the operator talks to: decides which observer the engine reports to."""

    PLAIN = "plain"
    TUI = "tui"


@dataclass
class RunSetup:
    protocol: Protocol
    sheet: Scoresheet
    policy: EvalPolicy
    robot: GuardedRobot
    observer: RunObserver
    stage: TrialStage
    engine: RunEngine
    dataset: Any | None
    evidence_writer: Any | None = None

    def close(self) -> None:
        """Torque off, then disconnect, then the files: on every way out, each step even if one fails."""
        release_torque(self.robot)
        if self.dataset is not None:
            self.dataset.close()
        if self.evidence_writer is not None:
            self.evidence_writer.close()
        self.policy.close()


def release_torque(robot: GuardedRobot) -> None:
    """Best effort on the way out: a failure here must not hide the original error."""
    try:
        robot.release_torque()
    except Exception as exc:
        print(f"warning: could not release torque cleanly: {exc}", file=sys.stderr)
    try:
        robot.disconnect()
    except Exception as exc:
        print(f"warning: could not disconnect the robot cleanly: {exc}", file=sys.stderr)


def _video_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise HarnessInputError(None, "--video-size", f"'{text}' is not WIDTHxHEIGHT") from None
    if not (16 <= width <= 4096 and 16 <= height <= 4096) or width % 2 or height % 2:
        raise HarnessInputError(None, "--video-size", f"'{text}': width and height must be even, 16..4096")
    return width, height


def _dropout(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    trial_s, _, step_s = text.partition(":")
    try:
        trial, step = int(trial_s), int(step_s or 0)
    except ValueError:
        raise HarnessInputError(None, "--inject-dropout", f"'{text}' is not TRIAL:STEP") from None
    if trial < 1 or step < 0:
        raise HarnessInputError(None, "--inject-dropout", f"'{text}': TRIAL from 1, STEP from 0")
    return trial, step


def recording_options(args: argparse.Namespace, control_fps: int | None = None) -> RecordingOptions:
    """`--record-size/--record-codec/--record-fps` as the dataset sink's options; a bad one is one line."""
    from harness.run.dataset_sink import parse_size

    try:
        size = parse_size(args.record_size)
    except ValueError as exc:
        raise HarnessInputError(None, "--record-size", str(exc)) from None
    options = RecordingOptions(size=size, vcodec=args.record_codec, fps=args.record_fps)
    problem = options.problem(control_fps)
    if problem:
        field, why = problem
        flag = {"size": "--record-size", "vcodec": "--record-codec", "fps": "--record-fps"}[field]
        raise HarnessInputError(None, flag, why)
    return options


def check_run_flags(args: argparse.Namespace) -> None:
    """Every `harness run` flag that can be wrong, checked before anything is locked, loaded or built."""
    _video_size(args.video_size)
    recording_options(args)
    _dropout(args.inject_dropout)
    if not (math.isfinite(args.video_fps) and 0.5 <= args.video_fps <= 120):
        raise HarnessInputError(None, "--video-fps", f"{args.video_fps}: must be within 0.5..120")
    if args.max_trials is not None and args.max_trials < 1:
        raise HarnessInputError(None, "--max-trials", f"{args.max_trials}: must be at least 1")
    if getattr(args, "device", None) is not None:
        from harness.policies.lerobot_policy import check_device

        check_device(args.device)
    runs = Path(args.runs_dir)
    if runs.exists() and not runs.is_dir():
        raise HarnessInputError(runs, "--runs-dir", "is a file, not a folder")
    if args.record_dataset and Path(args.record_dataset).exists() and not Path(args.record_dataset).is_dir():
        raise HarnessInputError(args.record_dataset, "--record-dataset", "is a file, not a folder")


def video_mode(args: argparse.Namespace, robot: RobotKind) -> VideoMode:
    """`--video failures|all|none` (simulated arm; default failures) and `--no-video` (= `--video none`; on a
    real arm: final frames only, no camera video). A real arm's videos are its cameras' frames, recorded as
    they come: `--video` is refused there, in one line, before anything is locked."""
    chosen = getattr(args, "video", None)
    if chosen is not None and not RobotKind(robot).simulated:
        raise HarnessInputError(None, "--video", "is for the simulated arm: a real arm's videos are recorded from "
                                                 "its cameras (--no-video keeps final frames only)")
    if args.no_video:
        if chosen not in (None, VideoMode.NONE.value):
            raise HarnessInputError(None, "--no-video", f"contradicts --video {chosen}")
        return VideoMode.NONE
    if chosen is not None:
        return VideoMode(chosen)
    return VideoMode.FAILURES if RobotKind(robot).simulated else VideoMode.ALL


def check_policy_fits_robot(policy_ref: str, robot: RobotKind) -> None:
    """The scripted built-ins plan in the simulator (`expert` from the true cube pose, `replay` through the
    simulated arm's kinematics and clock), which a real arm does not have: refused in one line before
    anything is locked or connected. A LeRobot checkpoint runs."""
    builtin = BuiltinPolicy.named(policy_ref)
    if builtin is not None and not RobotKind(robot).simulated:
        what = ("plans from the simulator's true cube pose, which a real arm cannot know"
                if builtin is BuiltinPolicy.EXPERT
                else "plays a plan made in the simulator on its clock, which a real arm does not have")
        raise HarnessInputError(None, "--policy", f"{policy_ref} {what}; on --robot so101 use a LeRobot checkpoint")


def _observer(front_end: FrontEnd, operator_scores: bool) -> Any:
    if front_end is FrontEnd.TUI:
        from harness.tui.observer import TuiObserver

        return TuiObserver()
    from harness.run.terminal import TerminalObserver

    return TerminalObserver(operator_scores=operator_scores)


def prepare_run(args: argparse.Namespace, protocol: Protocol, sheet: Scoresheet,
                front_end: FrontEnd = FrontEnd.PLAIN, parts: Parts | None = None,
                policy: EvalPolicy | None = None) -> RunSetup:
    """Policy (unless one built earlier is passed in), robot (behind the safety guard), observer, stage
    and engine for a resolved scoresheet. The returned setup closes the policy either way."""
    parts = parts or Parts()
    video_size = _video_size(args.video_size)
    dropout = _dropout(args.inject_dropout)
    settings = sheet.settings
    is_sim = sheet.locked.robot.simulated
    policy = policy or parts.policy(sheet.locked.policy.ref, protocol, settings, args.device, sheet.locked.robot,
                                    sheet.inference)
    try:
        latency = run_latency(sheet.locked, settings)   # locked (older sheets: their settings)
        if sheet.inference_engine is InferenceEngine.RTC:   # its chunks land after the latency; the arm never waits
            latency = None
        robot = (parts.sim_robot(protocol, policy, args.realtime, **({"latency_ms": latency} if latency is not None
                                                                     else {}),
                                 **({"render_profile": sheet.locked.render_profile} if sheet.locked.render_profile
                                    else {}))
                 if is_sim else parts.real_robot(settings, protocol))
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
    observer = (parts.observer or _observer)(front_end, not is_sim)
    try:   # a real arm's calibration files are read here: a bad one leaves no torque on
        stage: TrialStage = (SimStage(robot.world, protocol, dropout) if is_sim
                             else operator_stage(args, protocol, robot, observer))
    except BaseException:
        release_torque(robot)
        policy.close()
        raise
    dataset = None
    if args.record_dataset is not None:
        from harness.run.dataset_sink import DatasetSink

        root = Path(args.record_dataset or Path(args.runs_dir) / sheet.path.stem / "dataset")
        dataset = DatasetSink(root, protocol.fps, ["top", "wrist"], None, protocol.task,
                              robot_type=SO101_ROBOT_TYPE, options=recording_options(args, protocol.fps))
    writer = None
    # Frames rendered (sim) and encoded in other processes, off the control loop; without video a
    # simulated run still hands them its final frames and the dropout watch's frames to draw. A parallel
    # run's worker sets `evidence_lanes` (0: drawn inline, its cores are the other workers').
    if not args.no_video or is_sim:
        from harness.run.evidence_writer import EvidenceWriter

        writer = EvidenceWriter(robot.world.geometry if is_sim else None, control_fps=protocol.fps,
                                lanes=getattr(args, "evidence_lanes", None))
    options = RunOptions(runs_dir=Path(args.runs_dir), paced=not is_sim, video=video_mode(args, sheet.locked.robot),
                         video_fps=args.video_fps, video_size=video_size, max_attempts=args.max_trials,
                         dataset=dataset, evidence_writer=writer)
    if not is_sim:   # a real arm's evidence (and dropout watch) is the cameras it has, not the sim's two
        options.evidence_cameras = sorted(cameras)
    engine = RunEngine(protocol, sheet, robot, policy, stage, observer, MonotonicClock(), options)
    log.debug("run prepared: %s on %s, %s front end", sheet.locked.policy.ref, sheet.locked.robot,
              front_end)
    return RunSetup(protocol, sheet, policy, robot, observer, stage, engine, dataset, writer)
