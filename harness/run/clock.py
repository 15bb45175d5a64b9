"""Clocks the control loop reads and sleeps on; injectable so timing is tested without sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """Wall time. Sleeps coarsely, then spins the last millisecond for low jitter."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        end = time.perf_counter() + seconds
        if seconds > 0.002:
            time.sleep(seconds - 0.001)
        while time.perf_counter() < end:
            pass


class ManualClock:
    """A clock that only moves when told to: `advance` for work, `sleep` for waiting."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start
        self.slept = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.t += seconds
            self.slept += seconds

    def advance(self, seconds: float) -> None:
        self.t += seconds
