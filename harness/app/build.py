"""Everything one `harness run` needs, built in dependency order and handed over through constructors:
policy -> robot (behind the guard) -> observer -> stage -> engine."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from harness.app.operator_parts import operator_stage
from harness.app.parts import Parts
from harness.errors import HarnessInputError
from harness.models.protocol import Protocol
from harness.models.run_request import RunRequest
from harness.models.run_settings import SO101_ROBOT_TYPE, BuiltinPolicy, InferenceEngine, RobotKind
from harness.models.scoresheet import Scoresheet, run_latency
from harness.policies.background import BackgroundPolicy
from harness.policies.base import EvalPolicy
from harness.policies.hub import pinned_ref
from harness.run.arm_motion import SIM_START_POSE_S, MoveSpeed
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


def recording_options(request: RunRequest, control_fps: int | None = None) -> RecordingOptions:
    """`--record-size/--record-codec/--record-fps` as the dataset sink's options; a bad one is one line."""
    dataset = request.dataset
    options = RecordingOptions(size=dataset.size, vcodec=dataset.codec, fps=dataset.fps)
    problem = options.problem(control_fps)
    if problem:
        field, why = problem
        flag = {"size": "--record-size", "vcodec": "--record-codec", "fps": "--record-fps"}[field]
        raise HarnessInputError(None, flag, why)
    return options


def check_run_request(request: RunRequest) -> None:
    """What the request's own validation cannot see (camera specs, the torch device, the disk), checked
    before anything is locked, loaded or built."""
    from harness.robots.camera_spec import parse_camera_spec

    recording_options(request)
    for source in request.robot.cameras.values():
        parse_camera_spec(source)      # refused here, before anything is locked or connected
    if request.device is not None:
        from harness.policies.lerobot_policy import check_device

        check_device(request.device)
    runs = request.runs_dir
    if runs.exists() and not runs.is_dir():
        raise HarnessInputError(runs, "--runs-dir", "is a file, not a folder")
    folder = request.dataset.folder
    if request.dataset.record and folder is not None and folder.exists() and not folder.is_dir():
        raise HarnessInputError(folder, "--record-dataset", "is a file, not a folder")


def video_mode(request: RunRequest, robot: RobotKind) -> VideoMode:
    """`--video failures|all|none` (simulated arm; default failures) and `--no-video` (= `--video none`; on a
    real arm: final frames only, no camera video). A real arm's videos are its cameras' frames, recorded as
    they come: `--video` is refused there, in one line, before anything is locked."""
    chosen = request.evidence.video
    if chosen is not None and not RobotKind(robot).simulated:
        raise HarnessInputError(None, "--video", "is for the simulated arm: a real arm's videos are recorded from "
                                                 "its cameras (--no-video keeps final frames only)")
    if request.evidence.no_video:
        return VideoMode.NONE
    if chosen is not None:
        return VideoMode(chosen)
    return VideoMode.FAILURES if RobotKind(robot).simulated else VideoMode.ALL


def evidence_lanes(request: RunRequest, robot: RobotKind, video: VideoMode) -> int | None:
    """The evidence writer's lanes (processes): a parallel run's worker sets `request.evidence.lanes` (0: drawn
    inline, its cores are the other workers'). A simulated run without video and without an injected dropout
    draws only each trial's two final frames (tens of milliseconds a trial): inline, rather than two processes
    that each start an interpreter and a scene of their own (about a CPU second each, more than a short run's
    drawing; benchmarks/eval_speed_bench.py, docs/benchmarks.md). None: the writer's default (one a core, at most
    two)."""
    if request.evidence.lanes is not None:
        return request.evidence.lanes
    if RobotKind(robot).simulated and video is VideoMode.NONE and request.inject_dropout is None:
        return 0
    return None


def check_policy_fits_robot(policy_ref: str, robot: RobotKind, emulated_truth: bool = False) -> None:
    """The scripted built-ins plan in the simulator (`expert` from the true cube pose, `replay` through the
    simulated arm's kinematics and clock), which a real arm does not have: refused in one line before
    anything is locked or connected. A LeRobot checkpoint runs. `emulated_truth`: the arm is `harness
    rehearse`'s emulated one, whose simulator knows the cube's true pose, so the expert may run on it."""
    builtin = BuiltinPolicy.named(policy_ref)
    if builtin is BuiltinPolicy.EXPERT and emulated_truth:
        return
    if builtin is not None and not RobotKind(robot).simulated:
        what = ("plans from the simulator's true cube pose, which a real arm cannot know"
                if builtin is BuiltinPolicy.EXPERT
                else "plays a plan made in the simulator on its clock, which a real arm does not have")
        raise HarnessInputError(None, "--policy", f"{policy_ref} {what}; on --robot so101 use a LeRobot checkpoint")


def check_policy_cameras(policy: EvalPolicy, cameras: set[str]) -> None:
    missing = sorted(set(policy.camera_keys) - cameras)
    if missing:
        raise HarnessInputError(None, "--camera", f"the policy needs camera(s) {missing} but the robot has "
                                                  f"{sorted(cameras) or 'none'}: pass --camera NAME=INDEX "
                                                  "(or --rename-map for other names)")


def _observer(front_end: FrontEnd, operator_scores: bool) -> Any:
    if front_end is FrontEnd.TUI:
        from harness.tui.observer import TuiObserver

        return TuiObserver()
    from harness.run.terminal import TerminalObserver

    return TerminalObserver(operator_scores=operator_scores)


def prepare_run(request: RunRequest, protocol: Protocol, sheet: Scoresheet,
                front_end: FrontEnd = FrontEnd.PLAIN, parts: Parts | None = None,
                policy: EvalPolicy | None = None) -> RunSetup:
    """Policy (unless one built earlier is passed in), robot (behind the safety guard), observer, stage
    and engine for a resolved scoresheet. The returned setup closes the policy either way."""
    parts = parts or Parts()
    settings = sheet.settings
    is_sim = sheet.locked.robot.simulated
    policy = policy or parts.policy(pinned_ref(sheet.locked.policy), protocol, settings, request.device,
                                    sheet.locked.robot, sheet.inference)
    try:
        latency = run_latency(sheet.locked, settings)   # locked (older sheets: their settings)
        if sheet.inference_engine is InferenceEngine.RTC:   # its chunks land after the latency; the arm never waits
            latency = None
        robot = (parts.sim_robot(protocol, policy, request.realtime, **({"latency_ms": latency} if latency is not None
                                                                     else {}),
                                 **({"render_profile": sheet.locked.render_profile} if sheet.locked.render_profile
                                    else {}))
                 if is_sim else parts.real_robot(settings, protocol))
    except BaseException:
        policy.close()
        raise
    cameras = {k for k, v in robot.robot.observation_features.items() if isinstance(v, tuple)}
    if isinstance(policy, BackgroundPolicy):   # checked once it has loaded, before the first trial
        policy.on_ready(lambda loaded: check_policy_cameras(loaded, cameras))
    else:
        try:
            check_policy_cameras(policy, cameras)
        except HarnessInputError:
            release_torque(robot)
            policy.close()
            raise
    observer = (parts.observer or _observer)(front_end, not is_sim)
    from harness.run.terminal import TerminalObserver

    if isinstance(observer, TerminalObserver) and sheet.still_blind:
        observer.timing_withheld = True
    try:   # a real arm's calibration files are read here: a bad one leaves no torque on
        stage: TrialStage = (SimStage(robot.world, protocol, request.inject_dropout) if is_sim
                             else operator_stage(request.placement, protocol, robot, observer))
    except BaseException:
        release_torque(robot)
        policy.close()
        raise
    dataset = None
    if request.dataset.record:
        from harness.run.dataset_sink import DatasetSink

        root = request.dataset.folder or request.runs_dir / sheet.path.stem / "dataset"
        dataset = DatasetSink(root, protocol.fps, ["top", "wrist"], None, protocol.task,
                              robot_type=SO101_ROBOT_TYPE, options=recording_options(request, protocol.fps))
    writer = None
    video = video_mode(request, sheet.locked.robot)
    # Frames rendered (sim) and encoded in other processes, off the control loop; without video a
    # simulated run still hands them its final frames and the dropout watch's frames to draw.
    if not request.evidence.no_video or is_sim:
        from harness.run.evidence_writer import EvidenceWriter

        world = robot.world if is_sim else None
        writer = EvidenceWriter(world.geometry if world is not None else None, control_fps=protocol.fps,
                                lanes=evidence_lanes(request, sheet.locked.robot, video))
    options = RunOptions(runs_dir=request.runs_dir, paced=not is_sim, video=video,
                         video_fps=request.evidence.video_fps, video_size=request.evidence.video_size,
                         max_attempts=request.max_trials, start_pose_s=SIM_START_POSE_S if is_sim else MoveSpeed(),
                         dataset=dataset, evidence_writer=writer)
    if not is_sim:   # a real arm's evidence (and dropout watch) is the cameras it has, not the sim's two
        options.evidence_cameras = sorted(cameras)
    engine = RunEngine(protocol, sheet, robot, policy, stage, observer, MonotonicClock(), options)
    log.debug("run prepared: %s on %s, %s front end", sheet.locked.policy.ref, sheet.locked.robot,
              front_end)
    return RunSetup(protocol, sheet, policy, robot, observer, stage, engine, dataset, writer)
