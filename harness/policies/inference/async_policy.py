"""LeRobot's asynchronous inference on the simulated arm, in simulated time.

The harness is the robot client: it keeps LeRobot's action queue, sends an observation when the queue
falls to `chunk_size_threshold` of a chunk (marked `must_go` when the queue is empty, as `RobotClient`
does), and merges each returned chunk into the queue with LeRobot's aggregate function. The simulator
runs in lock-step, so the server's wall-clock round trip (send the observation, get the chunk) is
replayed as simulated time: the chunk reaches the arm at the first control step at least that long
after its observation, the arm executing the rest of its queue meanwhile and holding its last command
when the queue runs dry (an underrun). A loaded machine slows the run, never the arm.

One chunk is in flight at a time: LeRobot's server runs the latest observation it holds whenever the
client asks for actions, which on a real arm is the observation taken when the previous chunk arrived;
here it is exactly that one. Observations the server would drop (a timestep it already predicted, or a
joint state within LeRobot's `observations_similar` tolerance of the last one it ran) are still sent,
but no chunk is awaited for them, so the queue drains as it would on the arm.

`ChunkQueue` is LeRobot's queue itself; `async_wall` runs the same queue in wall time on a real arm.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.models.protocol import JOINT_NAMES
from harness.policies.base import BasePolicy, InferenceStats, TrialContext
from harness.policies.inference.async_client import PolicyServerLost

DEFAULT_THRESHOLD = 0.5                  # LeRobot's RobotClientConfig defaults
DEFAULT_AGGREGATE = "weighted_average"
FALLBACK_ACTIONS_PER_CHUNK = 50


@dataclass(frozen=True)
class AsyncSettings:
    """How the client talks to the server; locked with the run, since the arm's experience depends on each."""

    server: str                  # HOST:PORT of LeRobot's policy server
    actions_per_chunk: int
    chunk_size_threshold: float
    aggregate_fn: str            # a name in LeRobot's AGGREGATE_FUNCTIONS

    def record(self) -> dict[str, Any]:
        return {"server": self.server, "actions_per_chunk": self.actions_per_chunk,
                "chunk_size_threshold": self.chunk_size_threshold, "aggregate_fn": self.aggregate_fn}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> AsyncSettings:
        return cls(str(data["server"]), int(data["actions_per_chunk"]), float(data["chunk_size_threshold"]),
                   str(data["aggregate_fn"]))


def default_actions_per_chunk(policy_path: str | Path) -> int:
    """The policy's own chunk size (`chunk_size` in its config.json), or 50 when it names none."""
    try:
        value = json.loads((Path(policy_path) / "config.json").read_text()).get("chunk_size")
    except (OSError, ValueError, AttributeError):
        return FALLBACK_ACTIONS_PER_CHUNK
    return value if isinstance(value, int) and value > 0 else FALLBACK_ACTIONS_PER_CHUNK


class ActionServer(Protocol):
    """What the queue needs of a server: `PolicyServerClient`, or a test's scripted one."""

    def ready(self) -> None: ...
    def send_observation(self, observation: Any) -> None: ...
    def get_actions(self) -> list[Any] | None: ...
    def close(self) -> None: ...


ACTION_KEYS = tuple(f"{joint}.pos" for joint in JOINT_NAMES)


def next_command(values: list[float] | None, held: dict[str, float] | None,
                 observation: dict[str, Any]) -> dict[str, float]:
    """The arm's command for this step: the queue's next action, or on an empty queue (`values` None) the
    command it holds, which before the first chunk is its present position. Shared by both clients."""
    if values is not None:
        return {key: float(v) for key, v in zip(ACTION_KEYS, values, strict=True)}
    return held if held is not None else {key: float(observation[key]) for key in ACTION_KEYS}


class ChunkQueue:
    """LeRobot's client-side action queue (`RobotClient`), shared by the simulated-time and the wall-time
    clients: when to send an observation (`chunk_size_threshold`), which one must go, what the arm does next,
    and how an incoming chunk merges with what is queued (LeRobot's aggregate function). Not thread-safe: the
    wall-time client holds its own lock around it."""

    def __init__(self, settings: AsyncSettings) -> None:
        from lerobot.async_inference.configs import get_aggregate_function

        self._aggregate = get_aggregate_function(settings.aggregate_fn)
        self._threshold = settings.chunk_size_threshold
        self.clear()

    def clear(self) -> None:
        """A new episode, as a fresh `RobotClient` starts one."""
        self.actions: deque[Any] = deque()       # LeRobot TimedActions, the arm's next steps first
        self.latest_action = -1                  # the timestep of the last action the arm was given
        self.chunk_size = -1
        self.must_go = True

    def ready_to_send(self) -> bool:
        """`RobotClient._ready_to_send_observation`: the queue at or below the threshold of a chunk."""
        return len(self.actions) / self.chunk_size <= self._threshold

    def observation(self, observation: dict[str, Any], task: str) -> Any:
        """`RobotClient.control_loop_observation`: the `TimedObservation` to send, `must_go` when the queue is
        empty and no must-go observation has gone since the last chunk."""
        from lerobot.async_inference.helpers import TimedObservation

        timed = TimedObservation(timestamp=time.time(), observation={**observation, "task": task},
                                 timestep=max(self.latest_action, 0), must_go=self.must_go and not self.actions)
        if timed.must_go:
            self.must_go = False
        return timed

    def pop(self) -> list[float] | None:
        """The arm's next action (None on an empty queue), remembered as the latest one performed."""
        if not self.actions:
            return None
        timed = self.actions.popleft()
        self.latest_action = timed.get_timestep()
        return timed.get_action().tolist()

    def merge(self, incoming: list[Any]) -> None:
        """`RobotClient._aggregate_action_queues`: actions for steps already taken are dropped; one for a step
        still queued is aggregated with it; the queue becomes the incoming chunk."""
        from lerobot.async_inference.helpers import TimedAction

        queued = {timed.get_timestep(): timed.get_action() for timed in self.actions}
        merged: deque[Any] = deque()
        for new in incoming:
            timestep = new.get_timestep()
            if timestep <= self.latest_action:
                continue
            if timestep in queued:
                new = TimedAction(timestamp=new.get_timestamp(), timestep=timestep,
                                  action=self._aggregate(queued[timestep], new.get_action()))
            merged.append(new)
        self.actions = merged
        self.chunk_size = max(self.chunk_size, len(incoming))
        self.must_go = True


@dataclass
class _InFlight:
    lands_at: int                # the control step the chunk reaches the arm
    actions: list[Any]           # LeRobot TimedActions


class AsyncServerPolicy(BasePolicy):
    """An `EvalPolicy` whose actions come from a policy server through LeRobot's client-side queue.

    Per trial it records what the arm experienced: `round_trips_ms` (observation sent to chunk received,
    one per chunk), `queue_underruns` (steps with an empty queue) and `chunk_switches` (chunks merged).
    """

    def __init__(self, server: ActionServer, settings: AsyncSettings, task: str, fps: int,
                 lerobot_features: dict[str, dict], camera_keys: tuple[str, ...] = (),
                 image_size: tuple[int, int] | None = None, name: str = "async",
                 now: Callable[[], float] = time.perf_counter) -> None:
        """`now` times the round trips (seconds, monotonic); `lerobot_features` is what the server was told."""
        self.name = name
        self.camera_keys = camera_keys
        self.image_size = image_size
        self.settings = settings
        self._server = server
        self._task = task
        self._period = 1.0 / fps
        self._features = lerobot_features
        self._chunks = ChunkQueue(settings)
        self._now = now
        self._last_processed: Any | None = None   # the server's, which survives a new episode
        self.reset(None)

    def reset(self, context: TrialContext | None) -> None:
        """A new episode, as a fresh `RobotClient` starts one; the server is told at the trial's first step."""
        self._started = False
        self._step = 0
        self._chunks.clear()
        self._in_flight: _InFlight | None = None
        self._predicted: set[int] = set()
        self._last_action: dict[str, float] | None = None
        self.round_trips_ms: list[float] = []
        self.queue_underruns = 0
        self.chunk_switches = 0

    def select_action(self, observation: dict[str, Any]) -> dict[str, float]:
        if not self._started:   # inside the control loop, where a server that is gone voids the trial
            self._server.ready()
            self._started = True
        step = self._step
        self._step += 1
        if self._in_flight is None and self._chunks.ready_to_send():
            self._send(observation, step)
        if self._in_flight is not None and self._in_flight.lands_at <= step:
            self._chunks.merge(self._in_flight.actions)
            self.chunk_switches += 1
            self._in_flight = None
        values = self._chunks.pop()
        self.queue_underruns += values is None
        self._last_action = next_command(values, self._last_action, observation)
        return dict(self._last_action)

    def _send(self, observation: dict[str, Any], step: int) -> None:
        from lerobot.async_inference.helpers import observations_similar

        timed = self._chunks.observation(observation, self._task)
        runs = (timed.must_go or self._last_processed is None
                or (timed.get_timestep() not in self._predicted
                    and not observations_similar(timed, self._last_processed, lerobot_features=self._features)))
        started = self._now()
        self._server.send_observation(timed)
        if not runs:
            return
        actions = self._server.get_actions()
        round_trip = self._now() - started
        if not actions:
            raise PolicyServerLost(f"the policy server sent no actions for observation #{timed.get_timestep()} "
                                   f"(Empty after {round_trip:.1f} s)")
        self._predicted.add(timed.get_timestep())
        self._last_processed = timed
        self.round_trips_ms.append(1000 * round_trip)
        self._in_flight = _InFlight(step + math.ceil(round_trip / self._period - 1e-9), actions)

    def inference_stats(self) -> InferenceStats:
        return InferenceStats(round_trips_ms=tuple(self.round_trips_ms), queue_underruns=self.queue_underruns,
                              chunk_switches=self.chunk_switches)

    def close(self) -> None:
        self._server.close()
