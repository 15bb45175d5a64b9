"""A guard between the run engine and the robot: one caller at a time, and an emergency stop
that releases torque at once and refuses every later motion command.

The TUI calls `emergency_stop` from its own thread while the engine may be mid-step; the
lock makes the torque release wait for (at most) the step in flight, never interleave with it.
On Feetech servos a goal-position write can re-enable torque, so after a stop the gate stays
shut until the robot is reconnected.

A stop also decides the trial in flight: the engine records an attempt only inside
`recording()`, and a stop waits for a recording in progress before it returns. So once
`emergency_stop` has returned, the trial that was in flight is either already recorded (it ended
before the stop) or will be recorded as an emergency-stop void: a stop can never be scored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from harness.errors import EmergencyStopped, PoseMiss

if TYPE_CHECKING:
    from harness.sim.world import SimWorld

log = logging.getLogger(__name__)


class ConnectCheck(Protocol):
    """A finding made at connect that lets the run go on but must be seen before it starts (a real arm's
    servos with their EEPROM left unlocked); the robot's layer makes it, the front ends show it."""

    @property
    def ok(self) -> bool: ...

    def warning(self) -> str:
        """One line, naming the repair."""
        ...


class SimulatedArm(Protocol):
    """What a simulated arm offers beyond LeRobot's `Robot` surface: the world it moves in, when each action
    landed (its latency model; lock-step: at once) and whether its torque is on."""

    landed_latencies_s: list[float]

    @property
    def world(self) -> SimWorld: ...

    @property
    def torque_enabled(self) -> bool: ...

    @property
    def episode_in_commands(self) -> bool: ...

    def hold_frames_once(self) -> None:
        """The next observation repeats the last frames instead of drawing new ones."""

    def policy_computes_next(self, computes: bool) -> None:
        """Whether the coming action is computed (a new chunk) or popped: a chunked latency model's question."""


class GuardedRobot:
    """`release` turns torque off on this particular robot type; the composition layer passes it
    (`harness.app.parts`), so releasing never depends on guessing which methods a robot has. `simulated`:
    the same robot (or the simulated arm inside a wrapper) when it is one, declared by whoever builds it."""

    def __init__(self, robot: Any, release: Callable[[], Any],
                 check_ready: Callable[[dict[str, float]], list[PoseMiss]] | None = None,
                 connect_checks: Sequence[ConnectCheck] = (), simulated: SimulatedArm | None = None) -> None:
        self.robot = robot
        self.simulated = simulated
        self._release = release
        self._check_ready = check_ready
        self.connect_checks = tuple(connect_checks)
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self._recording = threading.Lock()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def connect_warnings(self) -> tuple[str, ...]:
        """The warning line of each connect check that did not pass."""
        return tuple(check.warning() for check in self.connect_checks if not check.ok)

    @property
    def world(self) -> SimWorld | None:
        return self.simulated.world if self.simulated is not None else None

    @property
    def episode_in_commands(self) -> bool:
        """An episode of `episode_time_limit_s x fps` commands however long they take, as a paced arm's loop
        counts it: a real arm, and a simulated one mirroring it (a chunked latency model); otherwise an
        episode ends on the simulator's clock."""
        return self.simulated is None or self.simulated.episode_in_commands

    @property
    def landed_latencies_s(self) -> list[float] | None:
        """A simulated arm's record of when each action landed; None on a real arm (the loop times it)."""
        return self.simulated.landed_latencies_s if self.simulated is not None else None

    @property
    def is_connected(self) -> bool:
        return self.robot.is_connected

    def get_observation(self, draw_frames: bool = True, policy_computes: bool | None = None) -> dict[str, Any]:
        """`draw_frames=False`: nobody will look at this observation's frames (the policy pops a queued action),
        so a simulated arm repeats its last ones rather than drawing; a real arm's cameras deliver regardless.
        `policy_computes`: the control loop's word on whether the policy will compute this step's action or pop
        a queued one, which a simulated arm's chunked latency model lands late by (a real arm just waits)."""
        with self._lock:
            if self.simulated is not None:
                if not draw_frames:
                    self.simulated.hold_frames_once()
                if policy_computes is not None:
                    self.simulated.policy_computes_next(policy_computes)
            return self.robot.get_observation()

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        if self._stopped.is_set():
            raise EmergencyStopped("emergency stop: the arm will not move until the run is restarted")
        with self._lock:
            if self._stopped.is_set():
                raise EmergencyStopped("emergency stop: the arm will not move until the run is restarted")
            return self.robot.send_action(action)

    def shut_gate(self) -> None:
        """Refuse every later motion command, without waiting for anything: safe from a signal handler."""
        self._stopped.set()

    def emergency_stop(self) -> None:
        """Shut the gate first (no new motion), release torque as soon as the bus is free (after the
        step in flight at most), then wait out an attempt being recorded, so the stop's effect on
        the scoresheet is settled when this returns."""
        self._stopped.set()
        with self._lock:
            self.release_torque()
        with self._recording:
            pass

    @contextmanager
    def recording(self) -> Iterator[bool]:
        """Hold while deciding and appending an attempt; yields whether the stop has been pressed. A
        stop pressed before this is entered voids the attempt; one pressed inside it finds the trial
        already ended, and waits until its attempt is written."""
        with self._recording:
            yield self._stopped.is_set()

    def release_torque(self) -> tuple[str, ...]:
        """Torque off; the names of servos that did not answer (a robot's `release` may report them)."""
        with self._lock:
            if self.robot.is_connected:
                silent = self._release()
                log.debug("torque released")
                return tuple(silent or ())
            return ()

    def check_ready(self, pose: dict[str, float]) -> list[PoseMiss]:
        """The joints that keep the arm from being ready at `pose` (empty when ready, or when the robot type
        has no such check); a robot that lost its bus raises `ServoBusFault`."""
        with self._lock:
            return self._check_ready(pose) if self._check_ready is not None else []

    @property
    def torque_enabled(self) -> bool | None:
        """A simulated arm's torque; None on a real arm, whose servos answer for themselves."""
        return self.simulated.torque_enabled if self.simulated is not None else None

    def disconnect(self) -> None:
        with self._lock:
            if self.robot.is_connected:
                self.robot.disconnect()
