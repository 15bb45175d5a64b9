"""The control loop of one episode: observe, select, act, at the protocol's rate.

Per step it times the robot's I/O and the policy (with the injected clock), counts missed deadlines, paces a
real arm (and runs it at real-time priority where the OS allows), records the step's evidence and dataset
frame, watches the cameras for dropouts, and ends the episode at the time limit, after the judge's verdict, on
the operator's abort, an emergency stop, a robot fault or a camera dropout (each a `Void` in the outcome, never
an exception: the trial's sequencing decides what the void means for the run). `stats` turns an episode's
timings into the `LoopStats` stored with its attempt. What differs between a simulated arm's step and a real
arm's (whose clock dates it, what the arm experienced from observation to action, which frames it draws) is
one `run.episode_clock.EpisodeClock`, chosen when the loop is built, so `_episode` reads as the loop.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

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
from harness.run.episode_clock import ClockName, episode_clock
from harness.run.evidence import EvidenceRecorder
from harness.run.faults import ROBOT_FAULTS, robot_fault_void
from harness.run.safety import GuardedRobot
from harness.run.stages import TrialStage
from harness.stats.estimates import percentile

log = logging.getLogger(__name__)


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


@dataclass
class _Exchange:
    """One step's observation and the action sent, with the loop's clock before the observation (`t0`), after
    it (`t1`), after the policy (`t2`) and after the action (`t3`)."""

    observation: dict[str, Any]
    sent: dict[str, Any]
    draw_frames: bool
    t0: float
    t1: float
    t2: float
    t3: float


@dataclass
class _Episode:
    """One episode in progress: what it records to and watches, each step's timings, and how it ends."""

    trial: Trial
    recorder: EvidenceRecorder
    watch: CameraWatch
    unwatched: list[str]   # cameras nothing else looks at, inspected every `watch_every` steps
    watch_every: int
    others_look: bool      # a dataset or an eager evidence recorder takes every step's frames
    policy_ms: list[float] = field(default_factory=list)
    io_ms: list[float] = field(default_factory=list)
    obs_to_action_ms: list[float] = field(default_factory=list)
    missed: int = 0
    void: Void | None = None
    stopped: bool = False
    finish_at: int | None = None   # the last step, once the judge's verdict is final

    def timed(self, exchange: _Exchange, obs_to_action_ms: float, period: float) -> dict[str, float]:
        """The step's timings, tallied: the policy's, the robot's I/O, and whether it missed its deadline."""
        self.obs_to_action_ms.append(obs_to_action_ms)
        self.policy_ms.append(1000 * (exchange.t2 - exchange.t1))
        self.io_ms.append(1000 * ((exchange.t1 - exchange.t0) + (exchange.t3 - exchange.t2)))
        late = (exchange.t3 - exchange.t0) > period
        self.missed += late
        return {"policy_ms": self.policy_ms[-1], "io_ms": self.io_ms[-1], "missed": float(late)}


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
        self.episode_clock = episode_clock(stage.world, robot, clock, self.period)   # a simulated arm's, or wall time
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
        """Steps until the time limit on the arm's clock, or until a step ends the episode."""
        episode = self._begin(trial, recorder)
        limit = self.protocol.episode_time_limit_s
        # a paced arm's episode is its commands, however long they take (a real arm's, and a simulated one that
        # mirrors it); otherwise the arm's clock ends it (a latency model makes a simulated arm's steps longer)
        in_commands = self.robot.episode_in_commands
        self.episode_clock.begin()
        for step in range(round(limit * self.protocol.fps)):
            elapsed = self.episode_clock.elapsed(step)
            if elapsed >= limit and not in_commands:
                break
            if not self._step(episode, step, elapsed):
                break
        return self._outcome(episode)

    def _begin(self, trial: Trial, recorder: EvidenceRecorder) -> _Episode:
        # the cameras nothing else looks at (no frames drawn while the trial runs, the policy does not read
        # them) are watched anyway; on the simulator only where a dropout is injected, the one way its
        # cameras freeze
        unwatched = [] if recorder.eager or not self.stage.may_freeze_camera(trial) else [
            cam for cam in self.settings.evidence_cameras if cam not in self.policy.camera_keys]
        return _Episode(trial, recorder, CameraWatch(list(self.settings.evidence_cameras), self.settings.dropout),
                        unwatched, max(1, round(self.protocol.fps / self.settings.dropout.watch_hz)),
                        others_look=self.settings.dataset is not None or recorder.eager)

    def _step(self, episode: _Episode, step: int, elapsed: float) -> bool:
        """Observe, select, act, record, and pace: False once the episode ends at this step."""
        exchange = self._exchange(episode)
        if isinstance(exchange, Void):
            episode.void = exchange
            return False
        self.stage.observed(exchange.observation)
        timing = episode.timed(exchange, self.episode_clock.obs_to_action_ms(exchange.t0, exchange.t3), self.period)
        self._record(episode, step, elapsed, exchange, timing)
        self.observer.step(step, timing)
        self.stage.on_step(episode.trial, step)
        if self._ends(episode, step, elapsed):
            return False
        if self.settings.paced:
            self.clock.sleep(exchange.t0 + self.period - self.clock.now())
        return True

    def _exchange(self, episode: _Episode) -> _Exchange | Void:
        """The step's observation, the policy's action and the action sent, timed on the loop's clock; a fault on
        the way is the episode's void (never lose the trial), never an exception."""
        t0 = self.clock.now()
        try:
            # a simulated step's frames only for eyes that look: the policy (unless it pops a queued action),
            # a dataset, an eager evidence recorder
            draw_frames = self.episode_clock.frames_wanted(self.policy, episode.others_look)
            observation = self.robot.get_observation(draw_frames, self.episode_clock.policy_computes(self.policy))
            t1 = self.clock.now()
            action = self._select_action(observation, episode.trial)
            t2 = self.clock.now()
            sent = self.robot.send_action(action)
        except EmergencyStopped:
            return Void(VoidKind.EMERGENCY_STOP)
        except PolicyServerLost as exc:   # the arm answers: it stops where it is
            void = Void(VoidKind.ROBOT_IO_ERROR, str(exc))
            self.observer.warn(f"{void.reason}. Restart the policy server, then resume.")
            self.motion.hold_still()
            return void
        except ROBOT_FAULTS as exc:  # a servo or camera stopped answering: void, never lose the trial
            void = robot_fault_void(exc)
            self.observer.warn(f"{void.reason}. Check cables and power, then resume.")
            return void
        return _Exchange(observation, sent, draw_frames, t0, t1, t2, self.clock.now())

    def _record(self, episode: _Episode, step: int, elapsed: float, exchange: _Exchange,
                timing: dict[str, float]) -> None:
        """The step's evidence row and dataset frame; every frame it brought shown to the camera watch."""
        watch = episode.watch
        for cam in self.policy.camera_keys if exchange.draw_frames else ():
            watch.see(cam, exchange.observation.get(cam), elapsed)
        captured = episode.recorder.record_step(step, elapsed, exchange.observation, exchange.sent, timing,
                                                self.episode_clock.read_at(elapsed, exchange.t0))
        if self.settings.dataset is not None:
            self._record_dataset_frame(self.settings.dataset, exchange.observation, exchange.sent)
        for cam, frame in captured.items():
            watch.see(cam, frame, elapsed)
        if episode.unwatched and step % episode.watch_every == 0:   # no video frames to inspect: look anyway
            size = self.settings.dropout.watch_size
            for cam in episode.unwatched:   # drawn and inspected by the evidence writer when there is one
                if not episode.recorder.watch(cam, elapsed, *size):
                    watch.see(cam, self.stage.frame(cam, *size), elapsed)
        if step % self.protocol.fps == 0 and log.isEnabledFor(logging.DEBUG):
            ages = ", ".join(f"{cam} {age:.2f} s" for cam, age in watch.frame_ages(elapsed).items())
            log.debug("step %d: policy %.1f ms, robot I/O %.1f ms, missed %d; frame ages: %s",
                      step, episode.policy_ms[-1], episode.io_ms[-1], episode.missed, ages or "no cameras")

    def _ends(self, episode: _Episode, step: int, elapsed: float) -> bool:
        """Whether the episode ends after this step: a camera dropout (a void; the arm stops where it is), the
        policy's time to withdraw after the judge's final verdict over, or the operator's abort."""
        dropout = episode.watch.dropout(elapsed) or episode.recorder.dropout()
        if dropout:
            episode.void = Void(VoidKind.CAMERA_DROPOUT, dropout)
            self.observer.warn(episode.void.reason)
            self.motion.hold_still()
            return True
        if episode.finish_at is None and self.stage.finished():
            episode.finish_at = step + round(self.settings.after_verdict_s * self.protocol.fps)
        if episode.finish_at is not None and step >= episode.finish_at:
            return True
        if self.observer.stop_requested():
            episode.stopped = True
            return True
        return False

    def _outcome(self, episode: _Episode) -> EpisodeOutcome:
        """The episode's outcome; observation-to-action times in the policy's own clock where it keeps them."""
        policy_ms = episode.policy_ms
        if policy_ms and statistics.median(policy_ms) > 1000 * self.period:
            self.observer.warn(
                f"policy inference (median {statistics.median(policy_ms):.0f} ms) cannot keep {self.protocol.fps} Hz"
            )
        clock: str = self.episode_clock.name
        obs_to_action_ms = episode.obs_to_action_ms
        episode_s = self.episode_clock.episode_s()
        stats = self.policy.inference_stats()
        if stats.round_trips_ms is not None:   # chunks beside the loop (async, RTC): latency in the policy's time
            obs_to_action_ms, clock = list(stats.round_trips_ms), stats.clock
        return EpisodeOutcome(len(policy_ms), episode.void, episode.stopped, policy_ms, episode.io_ms, episode.missed,
                              obs_to_action_ms, clock, stats.queue_underruns, stats.chunk_switches,
                              list(stats.rtc_inference_delays), list(stats.inference_ms), episode_s=episode_s)

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
