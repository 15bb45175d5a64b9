"""Before and after a real trial: the cube guided onto its target with the scene checked, and a label proposed.

`PlacementGuide.place` is what happens between "place the cube" and the trial starting: frames from
the top camera are checked against the empty-scene references (anything new in view must be cleared
or accepted with a note) and measured against the trial's target; the trial starts once the cube is
measured within tolerance and the next frame finds it still there (at rest, not passing through: a
cheap look, not a second full measurement), or when the operator overrides with a reason. The operator
is a collaborator passed in (`PlacementOperator`): the TUI, the terminal, or a script.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from harness.models.protocol import Trial
from harness.run.clock import Clock
from harness.run.placement_guide import PlacementReading, Tolerance, TopView
from harness.run.proposal import FinalView, GripperBands, GripperTrace, Proposal, propose
from harness.vision.reasons import DetectionError
from harness.vision.scene_check import SceneReferences, Unexpected


class PlacementOperator(Protocol):
    """The person at the table, as the guide sees them."""

    def placement(self, trial: Trial, reading: PlacementReading, frame: np.ndarray) -> str | None:
        """Show the live reading; return a reason to start anyway (an override), or None to keep going."""
        ...

    def unexpected(self, trial: Trial, objects: list[Unexpected], frame: np.ndarray) -> str | None:
        """Show what is in view that should not be; return a note to accept it, or None (it is being cleared)."""
        ...

    def clear_for_reference(self) -> None:
        """Ask for the table to be cleared (cube off) and wait: the empty scene is about to be captured."""
        ...


@dataclass(frozen=True)
class PlacementOutcome:
    """How the trial's start was reached: the last reading, any override or scene note, and how long it took."""

    reading: PlacementReading
    override_reason: str | None
    scene_note: str | None
    unexpected_seen: int
    settle_s: float          # from the first in-tolerance frame to the start (the live measurement's latency)
    frames: int

    def record(self) -> dict[str, object]:
        out = self.reading.record()
        if self.override_reason is not None:
            out["override_reason"] = self.override_reason
        if self.scene_note is not None:
            out["scene_note"] = self.scene_note
        if self.unexpected_seen:
            out["unexpected_objects"] = self.unexpected_seen
        out["settle_s"] = round(self.settle_s, 3)
        return out


def scene_objects(frame: np.ndarray, references: SceneReferences, reading: PlacementReading | None,
                  cube_px: tuple[float, float] | None) -> list[Unexpected]:
    """Regions unlike every empty-scene reference, except the one the cube itself is in."""
    found = references.unexpected(frame)
    if cube_px is None:
        return found
    x, y = cube_px
    return [u for u in found if not (u.x <= x <= u.x + u.width and u.y <= y <= u.y + u.height)]


@dataclass
class PlacementGuide:
    """Live top-camera guidance for one real trial's start (see the module docstring)."""

    view: TopView
    grab: Callable[[], np.ndarray]          # the top camera's latest frame (RGB)
    references: list[np.ndarray]            # empty-scene frames taken at check time
    operator: PlacementOperator
    clock: Clock
    tolerance: Tolerance = field(default_factory=Tolerance)
    poll_s: float = 0.1
    steady_frames: int = 2                  # measured within tolerance, then found still there in the next frames
    capture_references: int = 0             # before the first trial: this many live frames of the cleared table

    def place(self, trial: Trial) -> PlacementOutcome:
        if self.capture_references:   # the arm is at its start pose now, as it will be before every trial
            self.operator.clear_for_reference()
            self.references = [self._frame() for _ in range(self.capture_references)]
            self.capture_references = 0
        scene = SceneReferences(self.references)   # converted once for every frame of this placement
        scene_note: str | None = None
        seen = 0
        frames = 0
        while True:
            frame = self._frame()
            frames += 1
            reading = self.view.reading(frame, trial, self.tolerance)
            cube_px = reading.cube_px   # the cube itself is no unexpected object
            objects = scene_objects(frame, scene, reading, cube_px) if self.references else []
            if objects and scene_note is None:
                seen = max(seen, len(objects))
                scene_note = self.operator.unexpected(trial, objects, frame)
                if scene_note is None:
                    self.clock.sleep(self.poll_s)
                    continue
            override = self.operator.placement(trial, reading, frame)
            first_ok = self.clock.now() if reading.within else None
            if override:
                return PlacementOutcome(reading, override, scene_note, seen, 0.0, frames)
            steady = reading.within
            for _ in range(self.steady_frames - 1 if steady else 0):   # at rest there, not passing through
                self.clock.sleep(self.poll_s)
                frames += 1
                steady = self.view.still_within(self._frame(), reading)
                if not steady:
                    break
            if steady and first_ok is not None:
                return PlacementOutcome(reading, None, scene_note, seen, self.clock.now() - first_ok, frames)
            self.clock.sleep(self.poll_s)

    def _frame(self, tries: int = 20) -> np.ndarray:
        """The next top frame; a late one (a loaded host, a slow USB camera) is waited for, not fatal."""
        for _ in range(tries - 1):
            try:
                return self.grab()
            except TimeoutError:
                self.clock.sleep(self.poll_s)
        return self.grab()


@dataclass
class Proposer:
    """Makes the trace for each trial and, at its end, the proposal (final frame measured with the rim).

    `fps`: the observations' rate (the protocol's control rate; a scored dataset's frame rate): "let go at least
    1 s before the end" and "lost at once" are times, counted in observations."""

    view: TopView
    grasp_point: Callable[[dict[str, float]], np.ndarray]
    fps: float
    camera: str = "top"
    bands: GripperBands = field(default_factory=GripperBands)

    def trace(self) -> GripperTrace:
        return GripperTrace(self.grasp_point, self.bands, fps=self.fps)

    def final_view(self, frame: np.ndarray | None) -> FinalView:
        if frame is None:
            return FinalView(None)
        from harness.vision.measure import measure_frame

        try:
            m = measure_frame(frame, self.view.rim, self.view.geometry)
        except DetectionError:
            return FinalView(None)
        return FinalView(m.inside, m.distance_cm, m.uncertainty_cm)

    def propose(self, trace: GripperTrace, frame: np.ndarray | None) -> Proposal:
        scene = self.view.scene
        bx, by = scene.bowl_xy_cm
        return propose(trace, self.final_view(frame), (bx / 100, by / 100), scene.bowl_diameter_cm / 200,
                       scene.cube_edge_cm / 200)


def describe(objects: list[Unexpected]) -> str:
    """One line naming what is in view (for prompts)."""
    return ", ".join(f"{u.area_px} px at ({u.centre[0]}, {u.centre[1]})" for u in objects[:4])


__all__ = ["PlacementGuide", "PlacementOperator", "PlacementOutcome", "Proposer", "describe", "scene_objects"]
