"""The trial engine: one protocol, one scoresheet, trial after trial, resumable.

The TUI and the plain terminal mode are both `RunObserver`s over this engine. Every decision
about the run (what voids a trial, what pauses the run, returning to the start pose on an
abort, releasing torque on every way out) is made here, so both front ends behave the same.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.errors import CameraRenderFailed, EmergencyStopped, PolicyFailed, RobotFault, RunPaused, ServoBusFault
from harness.models.anatomy import TrialAnatomy
from harness.models.protocol import JOINT_NAMES, Trial
from harness.models.protocol import Protocol as EvalProtocol
from harness.models.scoresheet import Attempt, LoopStats, Scoresheet, attempt_from_label, now_iso
from harness.models.stats import percentile
from harness.models.taxonomy import Label, Void, VoidKind
from harness.models.verdict import JudgeVerdict
from harness.policies.async_client import PolicyServerLost
from harness.policies.base import EvalPolicy, TrialContext
from harness.realtime import realtime_thread
from harness.run.anatomy import GraspPoints, anatomy_from_rows, with_cube_start
from harness.run.camera_watch import CameraWatch, DropoutPolicy
from harness.run.clock import Clock
from harness.run.dataset_sink import DatasetSink
from harness.run.evidence import EvidenceRecorder, VideoMode
from harness.run.safety import GuardedRobot
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


class RunObserver(Protocol):
    def trial_started(self, trial: Trial, attempt: int, done: int, total: int) -> None: ...
    def phase(self, name: str) -> None: ...
    def step(self, step: int, timing: dict[str, float]) -> None: ...
    def warn(self, message: str) -> None: ...
    def score(self, trial: Trial, verdict: JudgeVerdict | None, void: Void | None) -> ScoreDecision:
        """The label for a finished trial; when the engine already voided it (`void`), return that void."""
        ...

    def trial_scored(self, attempt: Attempt) -> None: ...
    def stop_requested(self) -> bool:
        """True once the operator aborted: the trial in flight is voided and the run ends."""
        ...

    def wait_if_paused(self) -> bool:
        """Called between trials: block while paused; False ends the run (aborted while paused)."""
        ...


# What LeRobot's buses and cameras raise when hardware stops answering mid-trial.
ROBOT_IO_ERRORS = (ConnectionError, TimeoutError, OSError)
ROBOT_FAULTS = (*ROBOT_IO_ERRORS, RobotFault)   # ... and what a robot of ours raises, typed (`ServoBusFault`)


def robot_fault_void(exc: BaseException) -> Void:
    """The void for a robot that failed mid-trial, its kind from the error's type (never its text)."""
    if isinstance(exc, ServoBusFault):
        return Void(VoidKind.ARM_POWER_CYCLED if exc.reset else VoidKind.ROBOT_IO_ERROR, exc.detail)
    if isinstance(exc, CameraRenderFailed):
        return Void(VoidKind.CAMERA_DROPOUT, exc.detail)
    first_line = (str(exc).strip().splitlines() or [""])[0][:160]
    return Void(VoidKind.ROBOT_IO_ERROR, f"{type(exc).__name__}: {first_line}")


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
    start_pose_s: float = 2.0
    # After the judge's verdict is final, keep the policy running this long so it can
    # withdraw: the final frame should show the cube, not the arm over it.
    after_verdict_s: float = 1.5
    max_attempts: int | None = None
    dropout: DropoutPolicy = field(default_factory=DropoutPolicy)
    dataset: DatasetSink | None = None    # --record-dataset
    # An EvidenceWriter: frames are rendered, encoded and written in its process, off the loop.
    # Built and closed by whoever builds the engine; None renders and writes in the loop.
    evidence_writer: Any | None = None


@dataclass
class EpisodeOutcome:
    steps: int
    void: Void | None
    stopped_by_operator: bool
    policy_ms: list[float]
    io_ms: list[float]
    missed: int
    obs_to_action_ms: list[float] = field(default_factory=list)
    obs_to_action_clock: str = "wall"
    queue_underruns: int | None = None   # counted by the policy itself (an async client's empty queue)
    chunk_switches: int | None = None    # ... and these (a chunked policy)
    rtc_delays: list[int] = field(default_factory=list)     # RTC: each chunk's delay in steps, as RTC was told
    inference_ms: list[float] = field(default_factory=list)  # the policy's own time per chunk (wall), where it says
    realtime: bool | None = None         # a paced loop: whether it ran under real-time scheduling


class RunEngine:
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
        self.period = 1.0 / protocol.fps
        self._told_priority = False
        self._grasp_points: GraspPoints | None = None   # forward kinematics, built at the first recorded trial

    # --- the run -----------------------------------------------------------
    def run(self) -> int:
        """Run pending trials; returns how many attempts were recorded.

        Raises `RunPaused` on a fault, an emergency stop or an operator's abort (after returning
        the arm to its start pose). Torque is released however this returns.
        """
        try:
            return self._run()
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

    def _run(self) -> int:
        recorded = 0
        pending = len(self.sheet.pending_trials())
        limit = self.options.max_attempts
        # progress and time left count what this run will do: a --max-trials run stops short of the protocol
        total = self.sheet.locked.trial_count - pending + (min(pending, limit) if limit is not None else pending)
        while self.sheet.pending_trials():
            if self.robot.stopped:   # stopped between trials: nothing in flight to void
                raise RunPaused(Void(VoidKind.EMERGENCY_STOP))
            if self.options.max_attempts is not None and recorded >= self.options.max_attempts:
                break
            if not self.observer.wait_if_paused():
                self._abort()
            if self.robot.stopped:   # pressed while the run waited on its pause
                raise RunPaused(Void(VoidKind.EMERGENCY_STOP))
            index = self.sheet.pending_trials()[0]
            trial = self.protocol.trial(index)
            done = self.sheet.locked.trial_count - len(self.sheet.pending_trials())
            attempt, void = self._run_trial(trial, done=done, total=total)
            recorded += 1
            self.observer.trial_scored(attempt)
            if void is not None and void.kind is VoidKind.OPERATOR_ABORT:
                self._abort()
            if void is not None and void.kind.pauses_run:
                log.info("run paused: %s", void.reason)
                raise RunPaused(void)
        if self.robot.stopped:   # after the last trial was recorded: nothing voided, but the run says it was stopped
            raise RunPaused(Void(VoidKind.EMERGENCY_STOP))
        return recorded

    def _abort(self) -> None:
        """The operator aborted: back to the start pose (unless the e-stop forbids motion), then pause."""
        if not self.robot.stopped:
            self._phase("moving to start pose")
            self.move_to(self.protocol.start_pose, self.options.start_pose_s)
        raise RunPaused(Void(VoidKind.OPERATOR_ABORT))

    def run_trial(self, trial: Trial, done: int = 0, total: int = 0) -> Attempt:
        """Run and record one attempt at `trial` (the scoresheet is saved before this returns)."""
        return self._run_trial(trial, done, total)[0]

    def attempt_trial(self, trial: Trial, done: int = 0, total: int = 0) -> tuple[Attempt, Void | None]:
        """One recorded attempt and the void that decides whether a run pauses (None when scored): what a
        parallel worker hands its driver, which makes the pause decision a serial run would have made."""
        return self._run_trial(trial, done, total)

    def _run_trial(self, trial: Trial, done: int, total: int) -> tuple[Attempt, Void | None]:
        """One attempt, recorded. From `trial_started` until its attempt is appended the trial is in flight:
        an emergency stop anywhere in that span (start-pose move, placement, the episode, its last step,
        scoring) records it as an emergency-stop void, never as scored."""
        number = self.sheet.next_attempt_number(trial.index)
        self.observer.trial_started(trial, number, done, total)
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
            self.move_to(self.protocol.start_pose, self.options.start_pose_s)
            self._verify_start_pose()
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
        folder = self.options.runs_dir / self.sheet.path.stem / f"trial-{trial.index:03d}-a{number}"
        mode = VideoMode.of(self.options.video)
        recorder = EvidenceRecorder(
            folder, self.options.evidence_cameras, self.stage.frame, self.protocol.fps,
            self.options.video_fps, self.options.video_size, mode,
            writer=self.options.evidence_writer, world=self.stage.world, block=not self.options.paced,
            dropout=self.options.dropout,
            # a simulated camera freezes only where a dropout is injected: that trial's frames are drawn while
            # it runs, so the writer's watch sees them (and it ends a void, whose video is kept anyway)
            eager=True if mode is VideoMode.FAILURES and self._may_freeze(trial) else None,
        )
        dataset = self.options.dataset
        try:
            self._phase("running")
            with realtime_thread(enabled=self.options.paced) as priority:
                try:
                    episode = self._episode(trial, recorder)
                finally:   # a wall-time async client's receiver thread stops with the episode, however it ends
                    self.policy.end_episode()
            if self.options.paced:
                episode.realtime = priority.realtime
                if not priority.realtime and not self._told_priority:
                    self.observer.warn(f"control loop at normal priority ({priority.why_not}): steps may start "
                                       "late on a busy machine")
                    self._told_priority = True
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
            "loop": self._loop_stats(episode),
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

    def _may_freeze(self, trial: Trial) -> bool:
        """Whether the stage may freeze a camera in this trial (a simulated one only where a dropout is
        injected; a real arm's cameras always may)."""
        return self.stage.may_freeze_camera(trial)

    def _phase(self, name: str) -> None:
        log.info("phase: %s", name)
        self.observer.phase(name)

    # --- the control loop --------------------------------------------------
    def _episode(self, trial: Trial, recorder: EvidenceRecorder) -> EpisodeOutcome:
        watch = CameraWatch(list(self.options.evidence_cameras), self.options.dropout)
        # the cameras nothing else looks at (no frames drawn while the trial runs, the policy does not read
        # them) are watched anyway; on the simulator only where a dropout is injected, the one way its
        # cameras freeze
        unwatched = [] if recorder.eager or not self._may_freeze(trial) else [
            cam for cam in self.options.evidence_cameras if cam not in self.policy.camera_keys]
        watch_every = max(1, round(self.protocol.fps / self.options.dropout.watch_hz))
        max_steps = round(self.protocol.episode_time_limit_s * self.protocol.fps)
        policy_ms: list[float] = []
        io_ms: list[float] = []
        missed = 0
        stopped = False
        void: Void | None = None
        finish_at: int | None = None
        step = 0
        world = self.stage.world   # the simulator's clock, when there is one: a latency model makes steps longer
        t_begin = world.time if world is not None else 0.0
        # what the arm experienced: a simulated arm's own record of when each action landed (lock-step: at once),
        # a real arm's wall time from reading the observation to writing the action
        landed = self.robot.landed_latencies_s if world is not None else None
        landed_from = len(landed) if landed is not None else 0
        obs_to_action_ms: list[float] = []
        for step in range(max_steps):
            sim_t = world.time - t_begin if world is not None else step * self.period
            if sim_t >= self.protocol.episode_time_limit_s:
                break
            t0 = self.clock.now()
            try:
                observation = self.robot.get_observation()
                t1 = self.clock.now()
                action = self._select_action(observation, trial)
                t2 = self.clock.now()
                sent = self.robot.send_action(action)
            except EmergencyStopped:
                void = Void(VoidKind.EMERGENCY_STOP)
                break
            except PolicyServerLost as exc:   # the arm answers: it stops where it is
                void = Void(VoidKind.ROBOT_IO_ERROR, str(exc))
                self.observer.warn(f"{void.reason}. Restart the policy server, then resume.")
                self.hold_still()
                break
            except ROBOT_FAULTS as exc:  # a servo or camera stopped answering: void, never lose the trial
                void = robot_fault_void(exc)
                self.observer.warn(f"{void.reason}. Check cables and power, then resume.")
                break
            t3 = self.clock.now()
            if world is None:
                obs_to_action_ms.append(1000 * (t3 - t0))
            else:
                obs_to_action_ms.append(1000 * landed[-1] if landed is not None and len(landed) > landed_from else 0.0)
            self.stage.observed(observation)
            policy_ms.append(1000 * (t2 - t1))
            io_ms.append(1000 * ((t1 - t0) + (t3 - t2)))
            late = (t3 - t0) > self.period
            missed += late
            timing = {"policy_ms": policy_ms[-1], "io_ms": io_ms[-1], "missed": float(late)}
            for cam in self.policy.camera_keys:
                watch.see(cam, observation.get(cam), sim_t)
            captured = recorder.record_step(step, sim_t, observation, sent, timing)
            if self.options.dataset is not None:
                self._record_dataset_frame(observation, sent)
            for cam, frame in captured.items():
                watch.see(cam, frame, sim_t)
            if unwatched and step % watch_every == 0:   # no video frames to inspect: look anyway
                for cam in unwatched:   # drawn and inspected by the evidence writer when there is one
                    if not recorder.watch(cam, sim_t, *self.options.dropout.watch_size):
                        watch.see(cam, self.stage.frame(cam, *self.options.dropout.watch_size), sim_t)
            if step % self.protocol.fps == 0 and log.isEnabledFor(logging.DEBUG):
                ages = ", ".join(f"{cam} {age:.2f} s" for cam, age in watch.frame_ages(sim_t).items())
                log.debug("step %d: policy %.1f ms, robot I/O %.1f ms, missed %d; frame ages: %s",
                          step, policy_ms[-1], io_ms[-1], missed, ages or "no cameras")
            self.observer.step(step, timing)
            self.stage.on_step(trial, step)
            dropout = watch.dropout(sim_t) or recorder.dropout()
            if dropout:
                void = Void(VoidKind.CAMERA_DROPOUT, dropout)
                self.observer.warn(void.reason)
                self.hold_still()
                break
            if finish_at is None and self.stage.finished():
                finish_at = step + round(self.options.after_verdict_s * self.protocol.fps)
            if finish_at is not None and step >= finish_at:
                break
            if self.observer.stop_requested():
                stopped = True
                break
            if self.options.paced:
                self.clock.sleep(t0 + self.period - self.clock.now())
        if policy_ms and statistics.median(policy_ms) > 1000 * self.period:
            self.observer.warn(
                f"policy inference (median {statistics.median(policy_ms):.0f} ms) cannot keep {self.protocol.fps} Hz"
            )
        clock = "simulated" if world is not None else "wall"
        stats = self.policy.inference_stats()
        if stats.round_trips_ms is not None:   # chunks beside the loop (async, RTC): latency in the policy's time
            obs_to_action_ms, clock = list(stats.round_trips_ms), stats.clock
        return EpisodeOutcome(len(policy_ms), void, stopped, policy_ms, io_ms, missed, obs_to_action_ms, clock,
                              stats.queue_underruns, stats.chunk_switches, list(stats.rtc_inference_delays),
                              list(stats.inference_ms))

    def _select_action(self, observation: dict[str, Any], trial: Trial) -> dict[str, Any]:
        """The policy's action. Its own failure is not the robot's: an `OSError` from a policy reading its
        files must not be voided as robot I/O, so anything but a lost policy server becomes `PolicyFailed`
        (the trial in flight is not recorded; torque goes off as on every way out)."""
        try:
            return self.policy.select_action(observation)
        except (PolicyServerLost, EmergencyStopped):
            raise
        except Exception as exc:
            log.info("the policy raised in trial %d", trial.index, exc_info=True)
            first = (str(exc).strip().splitlines() or [""])[0][:160]
            raise PolicyFailed(f"the policy raised {type(exc).__name__} in trial {trial.index}: {first} "
                               "(nothing recorded for that trial; run with -v for its traceback; fix the "
                               "policy, then --resume)") from exc

    def _record_dataset_frame(self, observation: dict[str, Any], action: dict[str, float]) -> None:
        sink = self.options.dataset
        if not sink.due():   # --record-fps below the control rate: nothing to render
            sink.add(observation, action, {})
            return
        width, height = sink.size
        frames = {}
        for cam in sink.cameras:
            image = observation.get(cam)
            ok = isinstance(image, np.ndarray) and image.shape[:2] == (height, width)
            frames[cam] = image if ok else self.stage.frame(cam, width, height)
        sink.add(observation, action, frames)

    def _loop_stats(self, e: EpisodeOutcome) -> LoopStats:
        busy_s = sum(e.policy_ms) / 1000 + sum(e.io_ms) / 1000
        return LoopStats(
            steps=e.steps,
            target_fps=float(self.protocol.fps),
            achieved_fps=round(e.steps / busy_s, 1) if busy_s > 0 else 0.0,
            policy_latency_ms_p50=round(percentile(e.policy_ms, 50), 3),
            policy_latency_ms_p95=round(percentile(e.policy_ms, 95), 3),
            policy_latency_ms_max=round(max(e.policy_ms, default=0.0), 3),
            robot_io_ms_p50=round(percentile(e.io_ms, 50), 3),
            robot_io_ms_p95=round(percentile(e.io_ms, 95), 3),
            missed_deadlines=e.missed,
            obs_to_action_ms_p50=round(percentile(e.obs_to_action_ms, 50), 3) if e.obs_to_action_ms else None,
            obs_to_action_ms_p95=round(percentile(e.obs_to_action_ms, 95), 3) if e.obs_to_action_ms else None,
            obs_to_action_ms_max=round(max(e.obs_to_action_ms), 3) if e.obs_to_action_ms else None,
            obs_to_action_clock=e.obs_to_action_clock if e.obs_to_action_ms else None,
            queue_underruns=e.queue_underruns if e.queue_underruns is not None
            else sum(ms > 1000 * self.period + 1e-6 for ms in e.obs_to_action_ms) if e.obs_to_action_ms else None,
            chunk_switches=e.chunk_switches,
            rtc_delay_steps_max=max(e.rtc_delays, default=None),
            rtc_delay_steps_p50=sorted(e.rtc_delays)[len(e.rtc_delays) // 2] if e.rtc_delays else None,
            inference_ms_p50=round(percentile(e.inference_ms, 50), 3) if e.inference_ms else None,
            realtime=e.realtime,
        )

    # --- arm motions outside the policy -------------------------------------
    def move_to(self, pose: dict[str, float], seconds: float) -> None:
        """Interpolate smoothly from the present position to `pose` (LeRobot units)."""
        present = self.robot.get_observation()
        start = np.array([present[f"{n}.pos"] for n in JOINT_NAMES])
        goal = np.array([pose[n] for n in JOINT_NAMES])
        steps = max(1, round(seconds * self.protocol.fps))
        for i in range(1, steps + 1):
            s = i / steps
            s = s * s * (3 - 2 * s)
            target = start + s * (goal - start)
            t0 = self.clock.now()
            self.robot.send_action({f"{n}.pos": float(v) for n, v in zip(JOINT_NAMES, target, strict=True)})
            if self.options.paced:
                self.clock.sleep(t0 + self.period - self.clock.now())

    def _verify_start_pose(self, settle_s: float = 1.0, tolerance: float = 5.0) -> None:
        """Before anyone is asked to place a cube: the arm answers, holds torque and sits at its start pose
        (a power cycle during the move leaves a joint far from it)."""
        deadline = self.clock.now() + settle_s
        while problems := self.robot.check_ready(self.protocol.start_pose):
            if self.clock.now() >= deadline:
                raise RobotFault("the arm did not reach its start pose: " + "; ".join(problems))
            self.clock.sleep(0.05)

    def hold_still(self) -> None:
        """Command the present position, so a faulted trial leaves the arm where it is."""
        present = self.robot.get_observation()
        self.robot.send_action({f"{n}.pos": present[f"{n}.pos"] for n in JOINT_NAMES})
