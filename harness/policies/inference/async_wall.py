"""LeRobot's asynchronous inference on a real arm, in wall time, as LeRobot's own `RobotClient` runs it.

On a paced arm nothing waits for the server: a receiver thread (started at an episode's first step, stopped
and joined when it ends) pulls chunks with `GetActions` and merges each into the queue the moment it arrives;
the control loop pops one action per step, sends an observation when the queue is at or below the threshold
(must-go when it is empty), and holds the last command when the queue is empty (an underrun). The queue itself,
its threshold, must-go and aggregate rules, is `async_policy.ChunkQueue`, shared with the simulated-time client.

The loop itself never waits on gRPC: observations go through a sender thread, in order. Under SCHED_FIFO
(`harness.realtime`) a normal-priority helper preempted while it holds the GIL would stall the loop behind
every process on the machine (on the loaded emulated arm: bus timeouts within a trial's first steps), so the
sender and receiver run just below the loop's real-time priority, and so do the threads gRPC starts for them.

A server is lost mid-episode when an RPC fails (its error reaches the control loop at its next
step) or when no chunk arrives within `answer_timeout_s` of a must-go observation, which LeRobot's server
always runs: `PolicyServerLost`, a robot I/O void. Time is read from the injected `now`, so the queue is tested
with a manual clock; `threaded=False` leaves `receive_once` to the caller, step by step.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from harness.policies.base import BasePolicy, InferenceStats, TrialContext
from harness.policies.inference.async_client import ANSWER_TIMEOUT_S, PolicyServerLost
from harness.policies.inference.async_policy import AsyncSettings, ChunkQueue, next_command

JOIN_TIMEOUT_S = 5.0   # a receiver whose server call cannot be cancelled is left (a daemon) after this
JOIN_POLL_S = 0.05


def loop_scheduling() -> tuple[int, int] | None:
    """The calling (control-loop) thread's real-time policy and priority; None at normal priority."""
    if not hasattr(os, "sched_getscheduler") or not hasattr(os, "SCHED_FIFO"):
        return None
    policy = os.sched_getscheduler(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0)
    if policy not in (os.SCHED_FIFO, os.SCHED_RR):
        return None
    return policy, os.sched_getparam(0).sched_priority


def just_below(loop: tuple[int, int] | None) -> None:
    """The calling helper thread one real-time priority below the loop, without reset-on-fork: the threads gRPC
    starts for its calls inherit it."""
    if loop is None:
        return
    try:
        os.sched_setscheduler(0, loop[0], os.sched_param(max(1, loop[1] - 1)))
    except OSError:   # refused: the helper stays at normal priority
        return


class CancellableServer(Protocol):
    """What the wall-time queue needs of a server: `PolicyServerClient`, or a test's scripted one."""

    def ready(self) -> None: ...
    def send_observation(self, observation: Any) -> None: ...
    def get_actions(self) -> list[Any] | None: ...
    def cancel(self) -> None: ...
    def close(self) -> None: ...


class WallClockAsyncPolicy(BasePolicy):
    """An `EvalPolicy` for a paced arm whose actions come from a policy server through LeRobot's queue.

    Per episode it records what the arm experienced: `round_trips_ms` (an observation sent to its chunk in the
    queue, wall time, one per chunk), `queue_underruns` (steps with an empty queue) and `chunk_switches`.
    """

    def __init__(self, server: CancellableServer, settings: AsyncSettings, task: str,
                 camera_keys: tuple[str, ...] = (), image_size: tuple[int, int] | None = None,
                 name: str = "async", now: Callable[[], float] | None = None,
                 answer_timeout_s: float = ANSWER_TIMEOUT_S, threaded: bool = True) -> None:
        """`now`: the control loop's clock (seconds, monotonic); `threaded=False`: no helper threads (observations go
        out at once, and the caller calls `receive_once`)."""
        import time

        self.name = name
        self.camera_keys = camera_keys
        self.image_size = image_size
        self.settings = settings
        self._server = server
        self._task = task
        self._now = now or time.perf_counter
        self._answer_timeout_s = answer_timeout_s
        self._threaded = threaded
        self._chunks = ChunkQueue(settings)
        self._lock = threading.Lock()        # the queue and the records, between the loop and the receiver
        self._stop = threading.Event()
        self._helpers: list[threading.Thread] = []   # the receiver and the sender, while an episode runs
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()   # observations for the sender, in order
        self.reset(None)

    def reset(self, context: TrialContext | None) -> None:
        """A new episode; the server is told at its first step, inside the control loop."""
        self.end_episode()
        self._started = False
        self._chunks.clear()
        self._sent_at: dict[int, float] = {}        # an observation's timestep -> when it was first sent
        self._must_go_since: tuple[int, float] | None = None   # a must-go observation awaiting its chunk
        self._failure: BaseException | None = None
        self._last_action: dict[str, float] | None = None
        self.round_trips_ms: list[float] = []
        self.queue_underruns = 0
        self.chunk_switches = 0

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        """`RobotClient.control_loop`: perform the next queued action, then send this observation if the queue
        is low. Raises `PolicyServerLost` once the server has gone."""
        if not self._started:
            self._server.ready()
            self._started = True
            self._start_helpers()
        self._check_server()
        with self._lock:
            values = self._chunks.pop()
            ready = self._chunks.ready_to_send()
            timed = self._chunks.observation(observation, self._task) if ready else None
            if timed is not None:
                sent_at = self._now()
                self._sent_at.setdefault(timed.get_timestep(), sent_at)
                if timed.must_go:
                    self._must_go_since = (timed.get_timestep(), sent_at)
        if timed is not None:
            if self._threaded:
                self._outbox.put(timed)
            else:   # before the step is counted: a step the server fails is not the arm's
                self._server.send_observation(timed)
        self.queue_underruns += values is None
        self._last_action = next_command(values, self._last_action, observation)
        return dict(self._last_action)

    def receive_once(self) -> bool:
        """One `GetActions`: a chunk is merged into the queue at once (True); `Empty` changes nothing."""
        actions = self._server.get_actions()
        if not actions:
            return False
        landed = self._now()
        with self._lock:
            self._chunks.merge(actions)
            self.chunk_switches += 1
            timestep = actions[0].get_timestep()   # the server's chunk starts at its observation's timestep
            sent_at = self._sent_at.get(timestep)
            if sent_at is not None:
                self.round_trips_ms.append(1000 * (landed - sent_at))
            self._sent_at = {t: s for t, s in self._sent_at.items() if t > timestep}
            self._must_go_since = None
        return True

    def _check_server(self) -> None:
        failure = self._failure
        if failure is not None:
            raise failure
        waiting = self._must_go_since
        if waiting is not None and self._now() - waiting[1] > self._answer_timeout_s:
            raise PolicyServerLost(f"the policy server sent no actions within {self._answer_timeout_s:g} s of "
                                   f"observation #{waiting[0]}, which it must run")

    def _start_helpers(self) -> None:
        if not self._threaded:
            return
        self._stop.clear()
        loop = loop_scheduling()
        self._helpers = [threading.Thread(target=target, args=(loop,), name=name, daemon=True)
                         for target, name in ((self._receive, "async-inference-receiver"),
                                              (self._send, "async-inference-sender"))]
        for helper in self._helpers:
            helper.start()

    def _receive(self, loop: tuple[int, int] | None) -> None:
        """`RobotClient.receive_actions`, until the episode ends; a failure is handed to the control loop."""
        just_below(loop)
        while not self._stop.is_set():
            try:
                self.receive_once()
            except BaseException as exc:   # re-raised in the control loop, which voids the trial
                self._failure = exc
                return

    def _send(self, loop: tuple[int, int] | None) -> None:
        """`RobotClient.send_observation` for each observation the loop handed over, in order."""
        just_below(loop)
        while True:
            timed = self._outbox.get()
            if timed is None or self._stop.is_set():
                return
            try:
                self._server.send_observation(timed)
            except BaseException as exc:   # re-raised in the control loop, which voids the trial
                self._failure = exc
                return

    def end_episode(self) -> None:
        """Stop the receiver and the sender and wait for them: the engine calls this on every way out of an
        episode."""
        if not self._helpers:
            return
        self._stop.set()
        self._outbox.put(None)
        for _ in range(round(JOIN_TIMEOUT_S / JOIN_POLL_S)):   # again and again: a call may start after a cancel
            self._server.cancel()
            for helper in self._helpers:
                helper.join(JOIN_POLL_S)
            if not any(helper.is_alive() for helper in self._helpers):
                break
        self._helpers = []
        self._outbox = queue.SimpleQueue()

    def inference_stats(self) -> InferenceStats:
        return InferenceStats(round_trips_ms=tuple(self.round_trips_ms), queue_underruns=self.queue_underruns,
                              chunk_switches=self.chunk_switches)

    def close(self) -> None:
        self.end_episode()
        self._server.close()
