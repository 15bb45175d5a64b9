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
from collections.abc import Callable
from dataclasses import dataclass, replace

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
    job: str = ""        # what a person was asked to do ("sweep of ...", "move elbow_flex to +30.0 deg")
    last: bool = True    # the job's last motion: when it is done, so is the job


@dataclass(frozen=True)
class Finished:
    """A job the hand has carried out, reported to whoever listens (the console prints it)."""

    job: str
    seconds: float   # how long the hand spent on it (from when it started moving for it)


class Hand:
    """Queued hand motions over named joints; thread-safe (the console and tests queue, the bus ticks)."""

    def __init__(self, ranges_deg: dict[str, tuple[float, float]] | None = None,
                 speed_deg_s: float = 90.0) -> None:
        self.ranges = dict(ranges_deg or SO101_RANGES_DEG)
        self.speed_deg_s = speed_deg_s
        self.held: dict[str, float] = {}
        self.on_done: Callable[[Finished], None] | None = None   # called on the bus thread: must not block
        self._queue: deque[Motion] = deque()
        self._dwelt_s = 0.0
        self._job_s = 0.0
        self._present: dict[str, float] = {}
        self._lock = threading.Lock()

    # --- what a person is asked to do -----------------------------------------
    def move(self, joint: str, degrees: float, speed_deg_s: float | None = None, dwell_s: float = 0.0) -> str:
        """Move one joint to `degrees` (clamped to its mechanical range) and keep holding it there; returns the
        job's name (what `on_done` reports)."""
        low, high = self._range(joint)
        target = min(max(degrees, low), high)
        job = f"move {joint} to {target:+.1f} deg"
        with self._lock:
            self._queue.append(Motion(joint, target, speed_deg_s or self.speed_deg_s, dwell_s, job))
        return job

    def sweep(self, joints: list[str] | None = None, speed_deg_s: float | None = None) -> str:
        """Each joint in turn: to one end of its range, to the other, back to the middle; returns the job's name."""
        joints = joints or list(self.ranges)
        speed = speed_deg_s or self.speed_deg_s
        job = f"sweep of {', '.join(joints)} at {speed:g} deg/s"
        motions = []
        for joint in joints:
            low, high = self._range(joint)
            motions += [Motion(joint, low + SWEEP_MARGIN_DEG, speed, SWEEP_DWELL_S, job, False),
                        Motion(joint, high - SWEEP_MARGIN_DEG, speed, SWEEP_DWELL_S, job, False),
                        Motion(joint, (low + high) / 2, speed, 0.0, job, False)]
        motions[-1] = replace(motions[-1], last=True)
        with self._lock:
            self._queue.extend(motions)
        return job

    def release(self, joints: list[str] | None = None) -> list[str]:
        """Let go: the joints are left to the servos (torque on) or to gravity (torque off). Returns the jobs
        stopped before they were done (a job cut short on some joints still reports when the rest is done)."""
        with self._lock:
            kept = [m for m in self._queue if joints is not None and m.joint not in joints]
            left = {m.job for m in kept}
            stopped = list(dict.fromkeys(m.job for m in self._queue if m.job not in left))
            for job in left:
                final = max(i for i, m in enumerate(kept) if m.job == job)
                kept[final] = replace(kept[final], last=True)
            if not kept or kept[0] is not self._queue[0]:
                self._dwelt_s = self._job_s = 0.0
            self._queue = deque(kept)
            for joint in (joints if joints is not None else list(self.held)):
                self.held.pop(joint, None)
            return stopped

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._queue)

    def doing(self) -> tuple[Motion, int, float] | None:
        """What the hand is doing now: the motion under way, how many more are queued after it, and about how
        many seconds are left of all of them (None: the hand is still)."""
        with self._lock:
            if not self._queue:
                return None
            at = {**self._present, **self.held}
            seconds = -self._dwelt_s
            for motion in self._queue:
                start = at.get(motion.joint, motion.target_deg)
                seconds += abs(motion.target_deg - start) / motion.speed_deg_s + motion.dwell_s
                at[motion.joint] = motion.target_deg
            return self._queue[0], len(self._queue) - 1, max(seconds, 0.0)

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
        finished = None
        with self._lock:
            self._present = present_deg
            if self._queue:
                motion = self._queue[0]
                self._job_s += dt
                start = self.held.get(motion.joint, present_deg.get(motion.joint, motion.target_deg))
                step = motion.speed_deg_s * dt
                delta = motion.target_deg - start
                self.held[motion.joint] = start + max(-step, min(step, delta))
                if abs(delta) <= step:
                    self._dwelt_s += dt
                    if self._dwelt_s >= motion.dwell_s:
                        self._queue.popleft()
                        self._dwelt_s = 0.0
                        if motion.last:
                            finished = Finished(motion.job, self._job_s)
                            self._job_s = 0.0
            held = dict(self.held)
        if finished is not None and self.on_done is not None:
            self.on_done(finished)
        return held

    def _range(self, joint: str) -> tuple[float, float]:
        if joint not in self.ranges:
            raise KeyError(f"no joint named {joint!r} (joints: {', '.join(self.ranges)})")
        return self.ranges[joint]
