"""What the run screen shows, as plain data: the engine's observer fills it, widgets draw it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from harness.models.taxonomy import FAILURE_LABELS, Label
from harness.run.placement_guide import PlacementReading
from harness.stats.estimates import wilson_interval

if TYPE_CHECKING:
    from harness.vision.scene_check import Unexpected


@dataclass(frozen=True)
class Tally:
    success: int = 0
    failures: dict[Label, int] = field(default_factory=lambda: dict.fromkeys(FAILURE_LABELS, 0))
    voids: int = 0

    @property
    def scored(self) -> int:
        return self.success + sum(self.failures.values())

    def wilson(self) -> tuple[float, float]:
        return wilson_interval(self.success, self.scored)

    def add(self, label: Label) -> Tally:
        if label is Label.SUCCESS:
            return replace(self, success=self.success + 1)
        if label is Label.VOID:
            return replace(self, voids=self.voids + 1)
        return replace(self, failures={**self.failures, label: self.failures.get(label, 0) + 1})

    def remove(self, label: Label) -> Tally:
        """A re-scored attempt's old label taken back out."""
        if label is Label.SUCCESS:
            return replace(self, success=max(0, self.success - 1))
        if label is Label.VOID:
            return replace(self, voids=max(0, self.voids - 1))
        return replace(self, failures={**self.failures, label: max(0, self.failures.get(label, 0) - 1)})


@dataclass(frozen=True)
class LivePlacement:
    """The placement guide's latest frame while the operator places the cube (a real arm with a trained spot):
    the top camera's frame, the guide's reading of it, and anything in view no empty-scene reference shows."""

    frame: np.ndarray
    reading: PlacementReading | None
    objects: tuple[Unexpected, ...] = ()


@dataclass(frozen=True)
class RunState:
    protocol_name: str
    policy: str
    robot: str
    total: int
    fps: int
    time_limit_s: float
    pace: str = ""                    # "lock-step" or "real-time" in simulation; empty on a real arm
    trained_xy_cm: tuple[float, float] = (0.0, 0.0)
    bowl_xy_cm: tuple[float, float] = (0.0, 0.0)
    bowl_diameter_cm: float = 11.5
    position: int = 0                 # 1-based rank of the trial in flight
    trial_index: int | None = None
    attempt: int = 1
    dx_cm: float = 0.0
    dy_cm: float = 0.0
    yaw_deg: float = 0.0
    phase: str = "ready"
    paused: bool = False
    pause_requested: bool = False
    step: int = 0
    loop_hz: float = 0.0
    policy_ms: float = 0.0
    missed: int = 0
    timing_withheld: bool = False      # a blind comparison: the loop's timing would say which arm runs
    tally: Tally = field(default_factory=Tally)
    last_label: str | None = None      # the last attempt as shown: its label, a void with its reason
    last_outcome: Label | None = None  # ... and its label, which decides the colour
    last_anatomy: str | None = None    # what the last trial's joint trace says (first motion, where it closed)
    last_graded: str | None = None     # a graded comparison: the last trial on its primary outcome (progress, time)
    last_stalled: bool = False
    undo_trial: int | None = None      # the trial whose last score `u` re-scores (until the next trial starts)
    banner: str | None = None
    preview: np.ndarray | None = None
    placement: LivePlacement | None = None   # set only while a guided placement is in progress

    @property
    def elapsed_s(self) -> float:
        return self.step / self.fps if self.fps else 0.0
