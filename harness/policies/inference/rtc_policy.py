"""LeRobot's Real-Time Chunking (`--inference rtc`) as an `EvalPolicy`.

RTC runs inference beside the arm: while the arm executes the rest of the current chunk, the policy
predicts the next one, told how many steps will pass before it lands (`inference_delay`) and what the
arm will do meanwhile (`prev_chunk_left_over`), so the new chunk is inpainted to continue the old one
(a guided flow-matching prefix over `execution_horizon` steps). LeRobot's own parts do the work here:
`RTCConfig` on the policy (its RTC processor), `ActionQueue` (the new chunk replaces the queue minus
the steps that passed), `LatencyTracker` (the delay told to the policy is the worst latency so far),
and the exact call `RTCInferenceEngine._rtc_loop` makes.

On the simulated arm the steps run in lock-step, so the engine's background thread is replayed in
simulated time, as the asynchronous client's round trips are (`async_policy`): an inference starts at
the step whose queue is at or below `queue_threshold`, takes its latency (`--latency-ms N`, or its own
wall time with `--latency measured`, or none in lock-step), and its chunk lands at the first step that
long after; the arm pops the old queue meanwhile and holds its last command when the queue runs dry.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessInputError

LEROBOT_QUEUE_THRESHOLD = 30        # LeRobot's RTCInferenceConfig default (for a 50-action chunk)
SCHEDULES = ("ZEROS", "ONES", "LINEAR", "EXP")   # LeRobot's RTCAttentionSchedule


@dataclass(frozen=True)
class RtcSettings:
    """RTC's settings; locked with the run, since what the arm does depends on each."""

    execution_horizon: int          # steps of the previous chunk the new one is inpainted against
    max_guidance_weight: float
    attention_schedule: str         # a name in LeRobot's RTCAttentionSchedule
    queue_threshold: int            # start an inference when this many actions or fewer are queued

    def record(self) -> dict[str, Any]:
        return {"execution_horizon": self.execution_horizon, "max_guidance_weight": self.max_guidance_weight,
                "attention_schedule": self.attention_schedule, "queue_threshold": self.queue_threshold}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> RtcSettings:
        return cls(int(data["execution_horizon"]), float(data["max_guidance_weight"]),
                   str(data["attention_schedule"]), int(data["queue_threshold"]))

    @classmethod
    def defaults(cls, chunk_size: int) -> RtcSettings:
        """LeRobot's defaults (horizon 10, guidance 10, linear, threshold 30), the horizon and threshold
        capped for a chunk shorter than LeRobot's 50 actions (threshold: half the chunk)."""
        from lerobot.policies.rtc.configuration_rtc import RTCConfig

        base = RTCConfig()
        threshold = LEROBOT_QUEUE_THRESHOLD if chunk_size > 2 * LEROBOT_QUEUE_THRESHOLD else chunk_size // 2
        return cls(min(base.execution_horizon, chunk_size), base.max_guidance_weight,
                   base.prefix_attention_schedule.name, threshold)

    def check(self, chunk_size: int, where: Any = None) -> None:
        """Bad settings for this policy: one line naming the flag."""
        if not 1 <= self.execution_horizon <= chunk_size:
            raise HarnessInputError(where, "--rtc-execution-horizon",
                                    f"{self.execution_horizon}: must be within 1..{chunk_size} (the chunk size)")
        if not (math.isfinite(self.max_guidance_weight) and self.max_guidance_weight > 0):
            raise HarnessInputError(where, "--rtc-max-guidance-weight", f"{self.max_guidance_weight}: must be > 0")
        if self.attention_schedule not in SCHEDULES:
            raise HarnessInputError(where, "--rtc-attention-schedule",
                                    f"'{self.attention_schedule}' is not one of {', '.join(SCHEDULES)}")
        if not 0 <= self.queue_threshold < chunk_size:
            raise HarnessInputError(where, "--rtc-queue-threshold",
                                    f"{self.queue_threshold}: must be within 0..{chunk_size - 1}")

    def rtc_config(self) -> Any:
        from lerobot.configs import RTCAttentionSchedule
        from lerobot.policies.rtc.configuration_rtc import RTCConfig

        return RTCConfig(enabled=True, execution_horizon=self.execution_horizon,
                         max_guidance_weight=self.max_guidance_weight,
                         prefix_attention_schedule=RTCAttentionSchedule[self.attention_schedule])


@dataclass
class _InFlight:
    lands_at: int            # the control step the chunk reaches the queue
    delay: int               # steps that pass meanwhile (LeRobot's `real_delay`)
    index_before: int        # the queue's action index when the inference started
    original: Any            # the policy's (normalized) chunk, RTC's prefix next time
    processed: Any           # the chunk in the arm's units


class RtcCall:
    """The call `RTCInferenceEngine._rtc_loop` makes, on a policy built with RTC's config: an observation, the
    delay RTC is told and the previous chunk's left-over in, (original, processed) chunks out. Both the
    simulated-time replay and the wall-time thread (`rtc_wall`) drive it."""

    def __init__(self, policy: Any, preprocessor: Any, postprocessor: Any, features: dict[str, Any], task: str,
                 device: str, robot_type: str, execution_horizon: int) -> None:
        self._policy = policy
        self._pre = preprocessor
        self._post = postprocessor
        self._features = features
        self._task = task
        self._device = device
        self._robot_type = robot_type
        self._execution_horizon = execution_horizon

    def reset(self) -> None:
        self._policy.reset()
        self._pre.reset()
        self._post.reset()

    def infer(self, observation: dict[str, Any], inference_delay: int, prev: Any) -> tuple[Any, Any]:
        """(original, processed) chunks, each (steps, action_dim)."""
        import torch
        from lerobot.policies.utils import prepare_observation_for_inference
        from lerobot.rollout.inference.rtc import _normalize_prev_actions_length
        from lerobot.utils.feature_utils import build_dataset_frame

        frame = build_dataset_frame(self._features, observation, prefix="observation")
        batch = prepare_observation_for_inference(frame, torch.device(self._device), self._task, self._robot_type)
        batch["task"] = [self._task]
        processed_batch = self._pre(batch)
        if prev is not None:
            prev = _normalize_prev_actions_length(prev, target_steps=self._execution_horizon)
        # no inference_mode: RTC's guidance differentiates through the denoiser, as in LeRobot's engine
        actions = self._policy.predict_action_chunk(processed_batch, inference_delay=inference_delay,
                                                    prev_chunk_left_over=prev)
        return actions.squeeze(0).clone(), self._post(actions).squeeze(0)


def steps_of(seconds: float, period: float) -> int:
    """Control steps that pass in `seconds`, rounded up as LeRobot's engine does (a hair of float error forgiven)."""
    return math.ceil(seconds / period - 1e-9) if seconds else 0


class SimTimeRtc:
    """LeRobot's RTC engine loop, one control step at a time in simulated time.

    Per trial: `round_trips_ms` (each chunk's latency, observation to landing), `queue_underruns` (steps
    with an empty queue), `chunk_switches` (chunks merged) and `inference_delays` (the steps RTC was told
    would pass, its frozen prefix: how much of the inpainting horizon was spent on latency)."""

    clock = "simulated"   # the latency the arm saw, in the simulator's time (whatever an inference took)

    def __init__(self, call: RtcCall, settings: RtcSettings, fps: int, latency_ms: float | str | None,
                 now: Callable[[], float] = time.perf_counter) -> None:
        """`latency_ms`: N (each inference takes N ms of simulated time), "measured" (its own wall time) or
        None (lock-step: each chunk lands at once)."""
        from lerobot.policies.rtc import ActionQueue

        self._call = call
        self.settings = settings
        self._period = 1.0 / fps
        self._latency_ms = latency_ms
        self._now = now
        self._queue = ActionQueue(settings.rtc_config())
        self.reset()

    def reset(self) -> None:
        from lerobot.policies.rtc import LatencyTracker

        self._call.reset()
        self._queue.clear()
        self._tracker = LatencyTracker()
        self._in_flight: _InFlight | None = None
        self._step = 0
        self.round_trips_ms: list[float] = []
        self.inference_ms: list[float] = []   # each inference's own wall time
        self.inference_delays: list[int] = []
        self.queue_underruns = 0
        self.chunk_switches = 0

    def infer(self, observation: dict[str, Any], inference_delay: int, prev: Any) -> tuple[Any, Any]:
        return self._call.infer(observation, inference_delay, prev)

    def end_episode(self) -> None:
        """Nothing runs beside the loop in simulated time."""

    def next_action(self, observation: dict[str, Any]) -> list[float] | None:
        """The arm's action for this step, or None on an empty queue (the arm holds its last command)."""
        step = self._step
        self._step += 1
        if self._in_flight is None and self._queue.qsize() <= self.settings.queue_threshold:
            self._start(observation, step)
        if self._in_flight is not None and self._in_flight.lands_at <= step:
            flight = self._in_flight
            self._queue.merge(flight.original, flight.processed, flight.delay, flight.index_before)
            self.chunk_switches += 1
            self._in_flight = None
        action = self._queue.get()
        if action is None:
            self.queue_underruns += 1
            return None
        return action.tolist()

    def _start(self, observation: dict[str, Any], step: int) -> None:
        told = steps_of(self._tracker.max(), self._period)
        index_before = self._queue.get_action_index()
        prev = self._queue.get_left_over()
        started = self._now()
        original, processed = self.infer(observation, told, prev)
        took = self._now() - started
        self.inference_ms.append(1000 * took)
        latency_s = (took if self._latency_ms == "measured" else
                     0.0 if self._latency_ms is None else float(self._latency_ms) / 1000)
        self._tracker.add(latency_s)
        delay = steps_of(latency_s, self._period)
        self.round_trips_ms.append(1000 * latency_s)
        self.inference_delays.append(told)
        self._in_flight = _InFlight(step + delay, delay, index_before, original, processed)
