"""The control loop of one episode: observe, select, act, at the protocol's rate.

Per step it times the robot's I/O and the policy (with the injected clock), counts missed deadlines, paces a
real arm (and runs it at real-time priority where the OS allows), records the step's evidence and dataset
frame, watches the cameras for dropouts, and ends the episode at the time limit, after the judge's verdict, on
the operator's abort, an emergency stop, a robot fault or a camera dropout (each a `Void` in the outcome, never
an exception: the trial's sequencing decides what the void means for the run). `stats` turns an episode's
timings into the `LoopStats` stored with its attempt.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

import numpy as np

from harness.errors import EmergencyStopped, PolicyFailed
from harness.models.protocol import Protocol as EvalProtocol
from harness.models.protocol import Trial
from harness.models.sheet_records import LoopStats
from harness.models.taxonomy import Void, VoidKind
from harness.policies.base import EvalPolicy
from harness.policies.inference.async_client import PolicyServerLost
from harness.realtime import realtime_thread
from harness.run.arm_motion import ArmMotion
from harness.run.camera_watch import CameraWatch, DropoutPolicy
from harness.run.clock import Clock
from harness.run.dataset_sink import DatasetSink
from harness.run.evidence import EvidenceRecorder
from harness.run.faults import ROBOT_FAULTS, robot_fault_void
from harness.run.safety import GuardedRobot
from harness.run.stages import TrialStage
from harness.stats.estimates import percentile

log = logging.getLogger(__name__)
ClockName = Literal["simulated", "wall"]


class LoopObserver(Protocol):
    """What the loop tells the front end, and asks it."""

    def step(self, step: int, timing: dict[str, float]) -> None: ...
    def warn(self, message: str) -> None: ...
    def stop_requested(self) -> bool: ...


@dataclass
class LoopSettings:
    """The engine's options the loop reads (`RunOptions` holds them for the run)."""

    paced: bool = False
    evidence_cameras: list[str] = field(default_factory=lambda: ["top", "wrist"])
    after_verdict_s: float = 1.5
    dropout: DropoutPolicy = field(default_factory=DropoutPolicy)
    dataset: DatasetSink | None = None


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
    episode_s: float | None = None       # the episode's length on the arm's clock (simulated, or wall)


class ControlLoop:
    """One arm, one policy, one stage: runs episodes (`run`) and summarises their timing (`stats`)."""

    def __init__(self, protocol: EvalProtocol, robot: GuardedRobot, policy: EvalPolicy, stage: TrialStage,
                 observer: LoopObserver, clock: Clock, settings: LoopSettings, motion: ArmMotion) -> None:
        self.protocol = protocol
        self.robot = robot
        self.policy = policy
        self.stage = stage
        self.observer = observer
        self.clock = clock
        self.settings = settings
        self.motion = motion
        self.period = 1.0 / protocol.fps
        self._told_priority = False

    def run(self, trial: Trial, recorder: EvidenceRecorder) -> EpisodeOutcome:
        """One episode, at real-time priority when paced (said once per run when the OS refuses it); the
        policy's episode ends however the loop does (a wall-time client's threads stop with it)."""
        with realtime_thread(enabled=self.settings.paced) as priority:
            try:
                episode = self._episode(trial, recorder)
            finally:
                self.policy.end_episode()
        if self.settings.paced:
            episode.realtime = priority.realtime
            if not priority.realtime and not self._told_priority:
                self.observer.warn(f"control loop at normal priority ({priority.why_not}): steps may start "
                                   "late on a busy machine")
                self._told_priority = True
        return episode

    def _episode(self, trial: Trial, recorder: EvidenceRecorder) -> EpisodeOutcome:
        watch = CameraWatch(list(self.settings.evidence_cameras), self.settings.dropout)
        # the cameras nothing else looks at (no frames drawn while the trial runs, the policy does not read
        # them) are watched anyway; on the simulator only where a dropout is injected, the one way its
        # cameras freeze
        unwatched = [] if recorder.eager or not self.stage.may_freeze_camera(trial) else [
            cam for cam in self.settings.evidence_cameras if cam not in self.policy.camera_keys]
        watch_every = max(1, round(self.protocol.fps / self.settings.dropout.watch_hz))
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
        # a simulated step's frames only for eyes that look: the policy (unless it pops a queued action),
        # a dataset, an eager evidence recorder
        frames_for_policy_only = world is not None and self.settings.dataset is None and not recorder.eager
        # a paced arm's episode is its commands, however long they take (a real arm's, and a simulated one that
        # mirrors it); otherwise the simulator's clock ends it (a latency model makes steps longer)
        in_commands = self.robot.episode_in_commands
        t_start = self.clock.now()
        for step in range(max_steps):
            sim_t = world.time - t_begin if world is not None else step * self.period
            if sim_t >= self.protocol.episode_time_limit_s and not in_commands:
                break
            t0 = self.clock.now()
            try:
                draw_frames = not frames_for_policy_only or self.policy.reads_frames_next()
                computes = world is None or self.policy.computes_next()
                observation = self.robot.get_observation(draw_frames, computes)
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
                self.motion.hold_still()
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
            for cam in self.policy.camera_keys if draw_frames else ():
                watch.see(cam, observation.get(cam), sim_t)
            # a real arm's row is dated when its observation was read (never before its schedule): a late
            # loop's steps are spread over the wall time they took
            read_at = None if world is not None else max(sim_t, t0 - t_start)
            captured = recorder.record_step(step, sim_t, observation, sent, timing, read_at)
            if self.settings.dataset is not None:
                self._record_dataset_frame(self.settings.dataset, observation, sent)
            for cam, frame in captured.items():
                watch.see(cam, frame, sim_t)
            if unwatched and step % watch_every == 0:   # no video frames to inspect: look anyway
                for cam in unwatched:   # drawn and inspected by the evidence writer when there is one
                    if not recorder.watch(cam, sim_t, *self.settings.dropout.watch_size):
                        watch.see(cam, self.stage.frame(cam, *self.settings.dropout.watch_size), sim_t)
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
                self.motion.hold_still()
                break
            if finish_at is None and self.stage.finished():
                finish_at = step + round(self.settings.after_verdict_s * self.protocol.fps)
            if finish_at is not None and step >= finish_at:
                break
            if self.observer.stop_requested():
                stopped = True
                break
            if self.settings.paced:
                self.clock.sleep(t0 + self.period - self.clock.now())
        if policy_ms and statistics.median(policy_ms) > 1000 * self.period:
            self.observer.warn(
                f"policy inference (median {statistics.median(policy_ms):.0f} ms) cannot keep {self.protocol.fps} Hz"
            )
        clock = "simulated" if world is not None else "wall"
        episode_s = world.time - t_begin if world is not None else self.clock.now() - t_start
        stats = self.policy.inference_stats()
        if stats.round_trips_ms is not None:   # chunks beside the loop (async, RTC): latency in the policy's time
            obs_to_action_ms, clock = list(stats.round_trips_ms), stats.clock
        return EpisodeOutcome(len(policy_ms), void, stopped, policy_ms, io_ms, missed, obs_to_action_ms, clock,
                              stats.queue_underruns, stats.chunk_switches, list(stats.rtc_inference_delays),
                              list(stats.inference_ms), episode_s=episode_s)

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

    def _record_dataset_frame(self, sink: DatasetSink, observation: dict[str, Any], action: dict[str, Any]) -> None:
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

    def stats(self, e: EpisodeOutcome) -> LoopStats:
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
            # "wall" or "simulated", as the policy's own `InferenceStats.clock` says (the model checks it)
            obs_to_action_clock=cast(ClockName, e.obs_to_action_clock) if e.obs_to_action_ms else None,
            queue_underruns=e.queue_underruns if e.queue_underruns is not None
            else sum(ms > 1000 * self.period + 1e-6 for ms in e.obs_to_action_ms) if e.obs_to_action_ms else None,
            chunk_switches=e.chunk_switches,
            rtc_delay_steps_max=max(e.rtc_delays, default=None),
            rtc_delay_steps_p50=sorted(e.rtc_delays)[len(e.rtc_delays) // 2] if e.rtc_delays else None,
            inference_ms_p50=round(percentile(e.inference_ms, 50), 3) if e.inference_ms else None,
            realtime=e.realtime,
            episode_s=round(e.episode_s, 3) if e.episode_s is not None else None,
        )
