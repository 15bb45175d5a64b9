"""A person's hands on an emulated arm whose torque is off.

Calibrating a real SO-101 means holding it in the middle of its range, then moving each joint
through its range by hand; a leader arm is moved by hand all the time. `Hand` is that person:
it grabs joints, moves them at a hand's speed to the angles asked for (one motion after
another, so a `sweep` moves joint by joint as a person does), and keeps holding what it has
moved until it lets go. Angles are the joint's own, in degrees, 0 at the middle of its range
(the gripper: about -10 closed to 100 open). The chain that owns the hand applies it in its
tick: the simulated arm through its joints, a plain chain by setting the shaft position.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

# Mechanical ranges of the SO-101's joints (degrees), from the MuJoCo model's joint ranges.
SO101_RANGES_DEG: dict[str, tuple[float, float]] = {
    "shoulder_pan": (-110.0, 110.0),
    "shoulder_lift": (-100.0, 100.0),
    "elbow_flex": (-96.8, 96.8),
    "wrist_flex": (-95.0, 95.0),
    "wrist_roll": (-157.2, 157.2),
    "gripper": (-10.0, 100.0),
}
SWEEP_MARGIN_DEG = 3.0  # a person stops just short of the hard stop
SWEEP_DWELL_S = 0.3     # and pauses there, so a tool sampling positions sees the end of the range


@dataclass(frozen=True)
class Motion:
    joint: str
    target_deg: float
    speed_deg_s: float
    dwell_s: float = 0.0


class Hand:
    """Queued hand motions over named joints; thread-safe (the console and tests queue, the bus ticks)."""

    def __init__(self, ranges_deg: dict[str, tuple[float, float]] | None = None,
                 speed_deg_s: float = 90.0) -> None:
        self.ranges = dict(ranges_deg or SO101_RANGES_DEG)
        self.speed_deg_s = speed_deg_s
        self.held: dict[str, float] = {}
        self._queue: deque[Motion] = deque()
        self._dwelt_s = 0.0
        self._lock = threading.Lock()

    # --- what a person is asked to do -----------------------------------------
    def move(self, joint: str, degrees: float, speed_deg_s: float | None = None, dwell_s: float = 0.0) -> None:
        """Move one joint to `degrees` (clamped to its mechanical range) and keep holding it there."""
        low, high = self._range(joint)
        with self._lock:
            self._queue.append(Motion(joint, min(max(degrees, low), high), speed_deg_s or self.speed_deg_s, dwell_s))

    def sweep(self, joints: list[str] | None = None, speed_deg_s: float | None = None) -> None:
        """Each joint in turn: to one end of its range, to the other, back to the middle."""
        for joint in joints or list(self.ranges):
            low, high = self._range(joint)
            self.move(joint, low + SWEEP_MARGIN_DEG, speed_deg_s, SWEEP_DWELL_S)
            self.move(joint, high - SWEEP_MARGIN_DEG, speed_deg_s, SWEEP_DWELL_S)
            self.move(joint, (low + high) / 2, speed_deg_s)

    def release(self, joints: list[str] | None = None) -> None:
        """Let go: the joints are left to the servos (torque on) or to gravity (torque off)."""
        with self._lock:
            if joints is None:
                self._queue.clear()
                self.held.clear()
                self._dwelt_s = 0.0
                return
            self._queue = deque(m for m in self._queue if m.joint not in joints)
            for joint in joints:
                self.held.pop(joint, None)

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._queue)

    def wait(self, timeout_s: float = 60.0) -> None:
        """Block until every queued motion is done (tests and scripts)."""
        deadline = time.monotonic() + timeout_s
        while self.busy:
            if time.monotonic() > deadline:
                raise TimeoutError(f"hand still moving after {timeout_s} s")
            time.sleep(0.01)

    # --- what the chain does each tick ------------------------------------------
    def advance(self, dt: float, present_deg: dict[str, float]) -> dict[str, float]:
        """Advance the current motion by `dt`; return the angle each held joint is held at.

        A joint grabbed for the first time is taken where it is (`present_deg`)."""
        with self._lock:
            if self._queue:
                motion = self._queue[0]
                start = self.held.get(motion.joint, present_deg.get(motion.joint, motion.target_deg))
                step = motion.speed_deg_s * dt
                delta = motion.target_deg - start
                self.held[motion.joint] = start + max(-step, min(step, delta))
                if abs(delta) <= step:
                    self._dwelt_s += dt
                    if self._dwelt_s >= motion.dwell_s:
                        self._queue.popleft()
                        self._dwelt_s = 0.0
            return dict(self.held)

    def _range(self, joint: str) -> tuple[float, float]:
        if joint not in self.ranges:
            raise KeyError(f"no joint named {joint!r} (joints: {', '.join(self.ranges)})")
        return self.ranges[joint]
