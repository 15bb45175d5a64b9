"""Notices a camera that has stopped delivering real frames, before it spoils a trial."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DropoutPolicy:
    max_bad_s: float = 1.0       # missing, frozen or black for this long voids the trial
    black_mean_level: float = 4.0  # mean pixel value (0..255) at or under this counts as black
    # Without evidence video, cameras the policy does not read are still looked at this often (small
    # frames), so `--no-video` never turns dropout detection off.
    watch_hz: float = 2.0
    watch_size: tuple[int, int] = (160, 120)


class CameraWatch:
    """Counts how long each camera has been missing, frozen (identical bytes) or black.

    Time is passed in by the caller (the control loop's own time), so the same
    code runs against a real clock, simulated time, or a test's fake clock.
    """

    def __init__(self, cameras: list[str], policy: DropoutPolicy | None = None) -> None:
        self.policy = policy or DropoutPolicy()
        self._last_hash: dict[str, str] = {}
        self._bad_since: dict[str, float | None] = dict.fromkeys(cameras)
        self._why: dict[str, str] = {}
        self._fresh_at: dict[str, float] = {}

    def see(self, camera: str, frame: np.ndarray | None, t: float) -> None:
        problem = self._problem(camera, frame)
        if problem is None:
            self._bad_since[camera] = None
            self._fresh_at[camera] = t
            return
        if self._bad_since.get(camera) is None:
            self._bad_since[camera] = t
        self._why[camera] = problem

    def dropout(self, t: float) -> str | None:
        """What is wrong when some camera has been bad for too long (the void's detail), else None."""
        for camera, since in self._bad_since.items():
            if since is not None and t - since >= self.policy.max_bad_s:
                return f"{camera} {self._why[camera]} for {t - since:.1f} s"
        return None

    def frame_ages(self, t: float) -> dict[str, float]:
        """Seconds since each camera last delivered a fresh frame (for `-vv` logs)."""
        return {camera: t - fresh for camera, fresh in self._fresh_at.items()}

    def _problem(self, camera: str, frame: np.ndarray | None) -> str | None:
        if frame is None or frame.size == 0:
            return "delivered no frame"
        # Every 4th pixel in each direction: a frozen camera repeats these exactly, a live one's
        # sensor noise changes them, and the check stays off the 30 Hz budget (~0.1 ms at 640x480).
        sample = np.ascontiguousarray(frame[::4, ::4])
        digest = hashlib.blake2b(sample.data, digest_size=16).hexdigest()
        repeated = self._last_hash.get(camera) == digest
        self._last_hash[camera] = digest
        if float(sample.mean()) <= self.policy.black_mean_level:
            return "delivered black frames"
        if repeated:
            return "repeated the same frame"
        return None
