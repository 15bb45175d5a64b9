"""The trial engine: one protocol, one scoresheet, trial after trial, resumable.

The TUI and the plain terminal mode are both `RunObserver`s over this engine. It makes every decision about
the run's arm and its attempts (what voids a trial, returning to the start pose on an abort, releasing torque
on every way out, what is recorded when a stop lands where), so both front ends behave the same. Which trial
comes next and what pauses the run is `run.sequencing` (a `--workers` run's driver sequences its workers'
attempts with it too); a trial's episode is `run.control_loop` (pacing, the action queue's policy, step
timing, loop statistics); the arm's moves outside the policy are `run.arm_motion`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

from harness.errors import EmergencyStopped, RunPaused
from harness.models.anatomy import TrialAnatomy
from harness.models.evidence_audit import evidence_folder_name, mark_recorded
from harness.models.protocol import Protocol as EvalProtocol
from harness.models.protocol import Trial
from harness.models.scoresheet import Scoresheet, now_iso
from harness.models.sheet_records import Attempt, attempt_from_label
from harness.models.taxonomy import Label, Void, VoidKind
from harness.models.verdict import JudgeVerdict
from harness.policies.background import BackgroundPolicy
from harness.policies.base import EvalPolicy, TrialContext
from harness.run.anatomy import GraspPoints, anatomy_from_rows, with_cube_start
from harness.run.arm_motion import ArmMotion, MoveSpeed
from harness.run.camera_watch import DropoutPolicy
from harness.run.clock import Clock
from harness.run.control_loop import ControlLoop, EpisodeOutcome, LoopSettings
from harness.run.dataset_sink import DatasetSink
from harness.run.disk_room import FreeBytes, TrialRoom, free_bytes
from harness.run.evidence import EvidenceRecorder, VideoMode
from harness.run.faults import ROBOT_FAULTS, robot_fault_void
from harness.run.safety import GuardedRobot
from harness.run.sequencing import SequenceObserver, TrialSequence
from harness.run.stages import TrialStage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoreDecision:
    """An observer's answer for one trial: a taxonomy label; a void carries its kind and reason."""

    label: Label                  # success, a failure mode, or void
    void: Void | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", Label(self.label))   # a label's value is accepted, and held as the enum

    @property
    def void_reason(self) -> str | None:
        return self.void.reason if self.void is not None else None


class RunObserver(SequenceObserver, Protocol):
    """What the engine tells the front end and asks it: the sequence's calls, and each attempt's."""

    def phase(self, name: str) -> None: ...
    def step(self, step: int, timing: dict[str, float]) -> None: ...
    def warn(self, message: str) -> None: ...
    def score(self, trial: Trial, verdict: JudgeVerdict | None, void: Void | None) -> ScoreDecision:
        """The label for a finished trial; when the engine already voided it (`void`), return that void."""
        ...

    def stop_requested(self) -> bool:
        """True once the operator aborted: the trial in flight is voided and the run ends."""
        ...


@dataclass
class RunOptions:
    runs_dir: Path = Path("runs")
    paced: bool = False           # sleep to hold the rate (real arm); lock-step sim runs as fast as it can
    # which attempts get evidence videos (`VideoMode`; True/False: all/none). A simulated attempt keeps its
    # state trajectory in every mode, so any video can be drawn later (`harness replay`).
    video: VideoMode | bool = True
    video_fps: float = 10.0
    video_size: tuple[int, int] = (320, 240)
    final_frame_size: tuple[int, int] = (640, 480)
    evidence_cameras: list[str] = field(default_factory=lambda: ["top", "wrist"])
    # the move to the start pose: fixed seconds (a lock-step simulator's trials start as they always did), or
    # a `MoveSpeed`, whose duration follows the distance to go (a real arm near its start pose is there at once)
    start_pose_s: float | MoveSpeed = 2.0
    # After the judge's verdict is final, keep the policy running this long so it can
    # withdraw: the final frame should show the cube, not the arm over it.
    after_verdict_s: float = 1.5
    max_attempts: int | None = None
    dropout: DropoutPolicy = field(default_factory=DropoutPolicy)
    dataset: DatasetSink | None = None    # --record-dataset
    # An EvidenceWriter: frames are rendered, encoded and written in its process, off the loop.
    # Built and closed by whoever builds the engine; None renders and writes in the loop.
    evidence_writer: Any | None = None
    # free bytes on the disk that holds a folder: a full disk pauses the run (`run.disk_room`)
    free_bytes: FreeBytes = free_bytes


class RunEngine:
    """One arm's attempts at a protocol's trials (`attempt`, the `AttemptMaker` of `run.sequencing`), run in the
    sequence's order by `run`, with torque released however it ends."""

    def __init__(self, protocol: EvalProtocol, sheet: Scoresheet, robot: GuardedRobot, policy: EvalPolicy,
                 stage: TrialStage, observer: RunObserver, clock: Clock, options: RunOptions | None = None) -> None:
        self.protocol = protocol
        self.sheet = sheet
        self.robot = robot
        self.policy = policy
        self.stage = stage
        self.observer = observer
        self.clock = clock
        self.options = options or RunOptions()
        self.motion = ArmMotion(robot, protocol.fps, clock, self.options.paced)
        o = self.options
        self.loop = ControlLoop(protocol, robot, policy, stage, observer, clock,
                                LoopSettings(paced=o.paced, evidence_cameras=o.evidence_cameras,
                                             after_verdict_s=o.after_verdict_s, dropout=o.dropout, dataset=o.dataset),
                                self.motion)
        self._grasp_points: GraspPoints | None = None   # forward kinematics, built at the first recorded trial
        self.room = TrialRoom(self.options.runs_dir / sheet.path.stem, sheet.path, self.options.free_bytes)
        self._policy_ready = False   # a `BackgroundPolicy` waited for, checked and warmed up

    # --- the run -----------------------------------------------------------
    def run(self) -> int:
        """Run pending trials; returns how many attempts were recorded.

        Raises `RunPaused` on a fault, an emergency stop or an operator's abort (after returning
        the arm to its start pose). Torque is released however this returns.
        """
        try:
            self._await_policy()
            return TrialSequence(self.protocol, self.sheet, self.observer, self, self.room,
                                 self.options.max_attempts).run()
        finally:
            self._release_torque()

    def _release_torque(self) -> None:
        """Torque off on every servo that answers; the ones that do not are named to the operator."""
        try:
            silent = self.robot.release_torque()
        except ROBOT_FAULTS as exc:
            self.observer.warn(f"torque release failed ({type(exc).__name__}): switch the arm's power off")
            return
        if silent:
            self.observer.warn(f"torque could not be released on {', '.join(silent)}: they do not answer. "
                               "Switch the arm's power off before touching it.")

    def _await_policy(self) -> None:
        """A policy still loading on its own thread (`policies.background`, a real arm's run): the first trial
        waits for it, nothing moves meanwhile, and the stop key and the abort end the wait at once. Then its
        checks (its cameras, the scoresheet written) and the warm-up the check screen asked for, unless the
        loading thread has done it already."""
        policy = self.policy
        if not isinstance(policy, BackgroundPolicy) or self._policy_ready:
            return
        if not policy.loaded:
            self._phase("loading the policy")
        while not policy.wait(0.05):
            if self.robot.stopped:
                raise RunPaused(Void(VoidKind.EMERGENCY_STOP))
            if self.observer.stop_requested():
                raise RunPaused(Void(VoidKind.OPERATOR_ABORT))
        policy.ready()   # a load that failed raises here, before anything moved
        self._policy_ready = True
        if not self.robot.stopped:
            if policy.warm_wanted and not policy.warmed:
                self._phase("warming up the policy")
            warm = policy.warm_up_if_needed(self.robot.get_observation)
            log.info("policy %s loaded in %.1f s, warm-up inference %s ms", policy.name, policy.load_s or 0.0,
                     f"{warm:.1f}" if warm is not None else "n/a")

    def emergency_stopped(self) -> bool:
        """The guard's stop was pressed (between trials, nothing is in flight for it to void)."""
        return self.robot.stopped

    def abort(self) -> NoReturn:
        """The operator aborted: back to the start pose (unless the e-stop forbids motion), then pause."""
        if not self.robot.stopped:
            self._phase("moving to start pose")
            self.motion.move_to(self.protocol.start_pose, self.options.start_pose_s)
        raise RunPaused(Void(VoidKind.OPERATOR_ABORT))

    def attempt(self, trial: Trial, number: int) -> tuple[Attempt, Void | None]:
        """Attempt `number` at `trial`, recorded, and the void that decides whether a run pauses (None when
        scored): a serial run's step of its `TrialSequence`, and what a parallel worker hands its driver, which
        makes the pause decision a serial run would have made. From `trial_started` until its attempt is
        appended the trial is in flight: an emergency stop anywhere in that span (start-pose move, placement,
        the episode, its last step, scoring) records it as an emergency-stop void, never as scored."""
        log.info("trial %d attempt %d: start", trial.index, number)
        started = now_iso()
        t_start = self.clock.now()
        try:
            return self._attempt(trial, number, started, t_start)
        except EmergencyStopped:   # before the episode (start pose, placement): the policy never moved the arm
            return self._record_void(trial, number, Void(VoidKind.EMERGENCY_STOP), started, t_start)

    def _record_void(self, trial: Trial, number: int, void: Void, started: str,
                     t_start: float) -> tuple[Attempt, Void]:
        """A void recorded before any episode ran (no evidence); an emergency stop outranks any other void."""
        with self.robot.recording() as stopped:
            if stopped:
                void = Void(VoidKind.EMERGENCY_STOP)
            attempt = self.sheet.add_attempt(attempt_from_label(
                Label.VOID, trial_index=trial.index, attempt=number, void_reason=void.reason, started_at=started,
                ended_at=now_iso(), duration_s=round(self.clock.now() - t_start, 3)))
        return attempt, void

    def _attempt(self, trial: Trial, number: int, started: str, t_start: float) -> tuple[Attempt, Void | None]:
        try:
            self._phase("moving to start pose")
            if self.motion.reach_start_pose(self.protocol.start_pose, self.options.start_pose_s):
                self.observer.warn("something was held between the gripper's jaws at the start pose: the jaws "
                                   "opened to let it go; clear the table before placing the cube")
        except EmergencyStopped:
            raise
        except ROBOT_FAULTS as exc:   # the arm is not ready: no cube is asked for
            void = robot_fault_void(exc)
            self.observer.warn(f"{void.reason}. Fix it, then resume.")
            return self._record_void(trial, number, void, started, t_start)
        self._phase("placing cube")
        self.stage.place_cube(trial, number)
        if self.robot.stopped:   # stopped while the cube was placed: the policy never moves the arm
            raise EmergencyStopped("emergency stop while the cube was placed")
        if self.observer.stop_requested():   # aborted while the cube was placed: the policy never moves the arm
            return self._record_void(trial, number, Void(VoidKind.OPERATOR_ABORT), started, t_start)
        self.policy.reset(TrialContext(self.protocol, trial, self.stage.world))
        folder = self.options.runs_dir / self.sheet.path.stem / evidence_folder_name(trial.index, number)
        mode = VideoMode.of(self.options.video)
        recorder = EvidenceRecorder(
            folder, self.options.evidence_cameras, self.stage.frame, self.protocol.fps,
            self.options.video_fps, self.options.video_size, mode,
            writer=self.options.evidence_writer, world=self.stage.world, block=not self.options.paced,
            dropout=self.options.dropout,
            # a simulated camera freezes only where a dropout is injected: that trial's frames are drawn while
            # it runs, so the writer's watch sees them (and it ends a void, whose video is kept anyway)
            eager=True if mode is VideoMode.FAILURES and self.stage.may_freeze_camera(trial) else None,
        )
        dataset = self.options.dataset
        try:
            self._phase("running")
            episode = self.loop.run(trial, recorder)
            self._phase("scoring")
            verdict = self.stage.verdict()
            w, h = self.options.final_frame_size
            recorder.write(recorder.final_frames(w, h), verdict)
            extra_artifacts = {}
            if dataset is not None:
                extra_artifacts["dataset_episode"] = str(dataset.end_episode())
        except BaseException:
            recorder.abandon()
            if dataset is not None:
                dataset.discard_episode()
            raise
        try:
            return self._score_and_record(trial, number, verdict, recorder, extra_artifacts, episode, started,
                                          t_start)
        except BaseException:
            recorder.abandon()   # nothing once its folder is in place
            raise

    def _score_and_record(self, trial: Trial, number: int, verdict: JudgeVerdict | None,
                          recorder: EvidenceRecorder, extra_artifacts: dict[str, Any], episode: EpisodeOutcome,
                          started: str, t_start: float) -> tuple[Attempt, Void | None]:
        """Score the written attempt and record it. Its evidence folder goes into place (with the videos
        `--video failures` owes a failure or a void) inside `recording()`, just before the attempt."""
        late_dropout = recorder.dropout()  # found by the writer after the loop had moved on
        if episode.void is None and late_dropout:
            episode.void = Void(VoidKind.CAMERA_DROPOUT, late_dropout)
            self.observer.warn(episode.void.reason)
        if any(recorder.dropped.values()):
            self.observer.warn(f"evidence writer fell behind: dropped frames {recorder.dropped} (the loop kept time)")
        void = episode.void or (Void(VoidKind.OPERATOR_ABORT) if episode.stopped_by_operator else None)
        if self.robot.stopped:   # the last step, or after it: the stop outranks the verdict and any other void
            void = Void(VoidKind.EMERGENCY_STOP)
        try:
            decision = self.observer.score(trial, verdict, void)
        except EmergencyStopped:   # the stop key pressed while the operator was being asked
            decision = ScoreDecision(Label.VOID, Void(VoidKind.EMERGENCY_STOP))
        if decision.label is Label.VOID and decision.void is None:
            decision = ScoreDecision(Label.VOID, Void(VoidKind.OPERATOR_VOID), decision.note)
        if decision.label is not Label.SUCCESS:   # drawn before the stop's critical section, which waits for it
            recorder.draw_videos()
        anatomy = self._anatomy(trial, recorder.rows)
        with self.robot.recording() as stopped:
            if stopped and (decision.void is None or decision.void.kind is not VoidKind.EMERGENCY_STOP):
                decision = ScoreDecision(Label.VOID, Void(VoidKind.EMERGENCY_STOP), decision.note)
            artifacts = {**recorder.complete(videos=decision.label is not Label.SUCCESS), **extra_artifacts}
            attempt = self._append_scored(trial, number, verdict, decision, artifacts, episode, started, t_start,
                                          anatomy)
        mark_recorded(recorder.folder, attempt)   # the folder now proves the record existed
        return attempt, decision.void if decision.label is Label.VOID else None

    def _anatomy(self, trial: Trial, rows: list[dict[str, Any]]) -> TrialAnatomy | None:
        """What the joint trace says (first motion, where the gripper closed, phases), with the planned cube
        start; a real arm's measured start replaces it when the attempt is recorded."""
        if self._grasp_points is None:
            self._grasp_points = GraspPoints()
        scene = self.protocol.scene
        return anatomy_from_rows(rows, self._grasp_points, scene.trained_cube_xy_cm, (trial.dx_cm, trial.dy_cm),
                                 scene.bowl_xy_cm, self.protocol.stall_limit_s)

    def _append_scored(self, trial: Trial, number: int, verdict: JudgeVerdict | None, decision: ScoreDecision,
                       artifacts: dict[str, Any], episode: EpisodeOutcome, started: str, t_start: float,
                       anatomy: TrialAnatomy | None = None) -> Attempt:
        log.info("trial %d attempt %d: %s%s", trial.index, number, decision.label,
                 f" ({decision.void_reason})" if decision.void else "")
        ended = now_iso()
        fields: dict[str, Any] = {
            "trial_index": trial.index,
            "attempt": number,
            "void_reason": decision.void_reason,
            "note": decision.note,
            "scored_by": "judge" if verdict is not None and decision.label is verdict.label else "operator",
            "judge": verdict,
            "started_at": started,
            "ended_at": ended,
            "duration_s": round(self.clock.now() - t_start, 3),
            "loop": self.loop.stats(episode),
            "artifacts": artifacts,
        }
        if decision.label is Label.SUCCESS and verdict is not None:
            fields["placement_error_cm"] = verdict.true_placement_error_cm
        fields.update(self.stage.attempt_fields(decision.label))   # a real arm's measured start and proposal
        start = fields.get("measured_start") or {}
        if anatomy is not None and start.get("dx_cm") is not None and start.get("dy_cm") is not None:
            scene = self.protocol.scene
            anatomy = with_cube_start(anatomy, (float(start["dx_cm"]), float(start["dy_cm"])), scene.bowl_xy_cm,
                                      scene.trained_cube_xy_cm)
        fields["anatomy"] = anatomy
        return self.sheet.add_attempt(attempt_from_label(decision.label, **fields))

    def _phase(self, name: str) -> None:
        log.info("phase: %s", name)
        self.observer.phase(name)

