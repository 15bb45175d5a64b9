"""LeRobot's Real-Time Chunking on a paced real arm, in wall time, as LeRobot's `RTCInferenceEngine` runs it.

The control loop never waits for the policy: each step it hands the observation it read to an inference thread
(LeRobot's `notify_observation`) and pops one action from RTC's `ActionQueue`, holding the last command when the
queue is empty (an underrun). The inference thread (started at an episode's first step, stopped and joined when
it ends) runs `_rtc_loop`'s body whenever the queue is at or below the threshold: the delay RTC is told is the
worst inference latency so far (`LatencyTracker`), in control steps; the chunk is inpainted against the queue's
left-over; on landing it replaces the queue minus the steps its own measured latency spanned (`merge`).

Unlike LeRobot's loop, which polls every 10 ms and may infer twice from one observation, the thread waits on a
condition the loop signals each step, and infers only from an observation it has not used: no sleeps, and with
an injected clock the queue is tested exactly (`threaded=False` leaves `infer_once` to the caller). Like the
asynchronous client's helpers (`async_wall`), the thread runs just below the loop's real-time priority, so it is
never preempted by a normal process while it holds the interpreter lock the loop needs.

An inference that raises is handed to the control loop at its next step (the engine stops the run: the policy
failed, nothing is recorded for that trial). A chunk that lands after its episode ended is dropped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from harness.policies.inference.async_wall import just_below, loop_scheduling
from harness.policies.inference.rtc_policy import RtcSettings, steps_of

log = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 10.0   # an inference in flight finishes before the thread sees the stop; longer: left, a daemon


class ChunkCall(Protocol):
    """What the thread runs: `rtc_policy.RtcCall`, or a test's scripted one."""

    def reset(self) -> None: ...
    def infer(self, observation: dict[str, Any], inference_delay: int, prev: Any) -> tuple[Any, Any]: ...


class WallClockRtc:
    """RTC's queue and inference thread beside a paced arm; the same surface as `rtc_policy.SimTimeRtc`.

    Per episode, what the arm experienced in wall time: `round_trips_ms` (each chunk, from the loop's reading of
    the observation it used to its landing in the queue), `queue_underruns` (steps with an empty queue),
    `chunk_switches` (chunks merged) and `inference_delays` (the steps RTC was told would pass)."""

    clock = "wall"

    def __init__(self, call: ChunkCall, settings: RtcSettings, fps: int, now: Callable[[], float],
                 threaded: bool = True) -> None:
        from lerobot.policies.rtc import ActionQueue

        self._call = call
        self.settings = settings
        self._period = 1.0 / fps
        self._now = now
        self._threaded = threaded
        self._queue = ActionQueue(settings.rtc_config())
        self._changed = threading.Condition()   # the observation, the records, the episode: loop <-> thread
        self._episode = 0                       # a chunk computed in an earlier episode never lands
        self._thread: tuple[threading.Thread, threading.Event] | None = None
        self.reset()

    def reset(self) -> None:
        from lerobot.policies.rtc import LatencyTracker

        self.end_episode()
        self._call.reset()
        self._queue.clear()
        self._tracker = LatencyTracker()
        self._latest: tuple[int, dict[str, Any], float] | None = None   # (number, observation, read at)
        self._used = 0                          # the newest observation an inference started from
        self._failure: BaseException | None = None
        self.round_trips_ms: list[float] = []
        self.inference_ms: list[float] = []   # each inference's own time
        self.inference_delays: list[int] = []
        self.queue_underruns = 0
        self.chunk_switches = 0

    def infer(self, observation: dict[str, Any], inference_delay: int, prev: Any) -> tuple[Any, Any]:
        return self._call.infer(observation, inference_delay, prev)

    def next_action(self, observation: dict[str, Any]) -> list[float] | None:
        """This step's action, or None on an empty queue (the arm holds its last command). Raises what the
        inference thread raised."""
        if self._failure is not None:
            raise self._failure
        if self._threaded and self._thread is None:
            self._start_thread()
        read_at = self._now()
        action = self._queue.get()   # popped first: the thread then sees the queue this step leaves
        with self._changed:
            number = self._latest[0] + 1 if self._latest is not None else 1
            self._latest = (number, observation, read_at)
            self._changed.notify_all()
        if action is None:
            self.queue_underruns += 1
            return None
        return action.tolist()

    def _due(self) -> bool:
        latest = self._latest
        return (latest is not None and latest[0] > self._used
                and self._queue.qsize() <= self.settings.queue_threshold)

    def infer_once(self) -> bool:
        """`_rtc_loop`'s body once, if a chunk is due (queue at or below the threshold, an unused observation):
        True when its chunk landed."""
        with self._changed:
            if not self._due():
                return False
            number, observation, read_at = self._latest   # type: ignore[misc]
            self._used = number
            episode = self._episode
        told = steps_of(self._tracker.max(), self._period)
        index_before = self._queue.get_action_index()
        prev = self._queue.get_left_over()
        started = self._now()
        original, processed = self._call.infer(observation, told, prev)
        took = self._now() - started
        with self._changed:
            if episode != self._episode:
                return False
            self._tracker.add(took)
            self._queue.merge(original, processed, steps_of(took, self._period), index_before)
            self.round_trips_ms.append(1000 * (self._now() - read_at))
            self.inference_ms.append(1000 * took)
            self.inference_delays.append(told)
            self.chunk_switches += 1
        return True

    def _start_thread(self) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=self._run, args=(loop_scheduling(), stop), name="rtc-inference",
                                  daemon=True)
        self._thread = (thread, stop)
        thread.start()

    def _run(self, loop: tuple[int, int] | None, stop: threading.Event) -> None:
        just_below(loop)
        while True:
            with self._changed:
                self._changed.wait_for(lambda: stop.is_set() or self._due())
                if stop.is_set():
                    return
            try:
                self.infer_once()
            except BaseException as exc:   # re-raised in the control loop, which stops the run
                self._failure = exc
                return

    def end_episode(self) -> None:
        """Stop the inference thread and wait for it (an inference in flight finishes first): the engine calls
        this on every way out of an episode."""
        running = self._thread
        with self._changed:
            self._episode += 1
            if running is not None:
                running[1].set()
            self._changed.notify_all()
        if running is None:
            return
        thread = running[0]
        thread.join(JOIN_TIMEOUT_S)
        if thread.is_alive():
            log.warning("RTC's inference thread did not stop within %.0f s; left running as a daemon",
                        JOIN_TIMEOUT_S)
        self._thread = None
