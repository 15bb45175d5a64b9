"""The cube placed where the protocol says before a real trial starts, and the scene checked.

The simulated table stands in for the real one: the top camera renders it, a scripted operator
moves the cube when the guide says so, and an object nobody expects is put in view.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.protocol import Trial
from harness.run.clock import ManualClock
from harness.run.operator_trial import PlacementGuide
from harness.run.placement_guide import PlacementReading
from harness.run.stages import OperatorStage
from harness.sim.world import SimWorld
from harness.vision.scene_check import Unexpected
from tests.unit.run.test_operator_proposal import sim_top_view

pytestmark = pytest.mark.slow  # renders and measures a few dozen frames

ORIGIN = (0.22, -0.05)
TRIAL = Trial(index=3, dx_cm=3.0, dy_cm=-2.0, yaw_deg=20.0)


class ScriptedOperator:
    """Puts the cube `first_off_cm` off its target, moves it onto the target after `patience` readings;
    removes whatever is lying in view when told about it."""

    def __init__(self, world: SimWorld, first_off_cm: float, patience: int = 3) -> None:
        self.world = world
        self.patience = patience
        self.readings: list[PlacementReading] = []
        self.warned: list[list[Unexpected]] = []
        self.clutter = False
        self._put(TRIAL.dx_cm + first_off_cm, TRIAL.dy_cm)

    def _put(self, dx: float, dy: float) -> None:
        self.world.place_cube(((100 * ORIGIN[0] + dx) / 100, (100 * ORIGIN[1] + dy) / 100),
                              math.radians(TRIAL.yaw_deg))

    def frame(self) -> np.ndarray:
        frame = self.world.render("top", 640, 480)
        if self.clutter:   # a phone left on the table, in no demonstration
            cv2.rectangle(frame, (60, 330), (130, 440), (25, 25, 30), -1)
        return frame

    def placement(self, trial: Trial, reading: PlacementReading, frame: np.ndarray) -> str | None:
        self.readings.append(reading)
        if len(self.readings) == self.patience:
            self._put(TRIAL.dx_cm, TRIAL.dy_cm)
        return None

    def unexpected(self, trial: Trial, objects: list[Unexpected], frame: np.ndarray) -> str | None:
        self.warned.append(objects)
        self.clutter = False     # cleared it
        return None


@pytest.fixture(scope="module")
def table():
    world = SimWorld()
    view = sim_top_view(world)
    world.place_cube((0.60, 0.40), 0.0)
    references = [world.render("top", 640, 480)]   # the empty scene at check time
    yield world, view, references
    world.close()


def test_a_cube_placed_off_target_is_not_accepted_until_moved(table) -> None:
    world, view, references = table
    operator = ScriptedOperator(world, first_off_cm=2.0)
    guide = PlacementGuide(view, operator.frame, references, operator, ManualClock())
    stage = OperatorStage(lambda trial: None, guide=guide)
    stage.place_cube(TRIAL, 1)
    before_move = operator.readings[:operator.patience]
    assert all(not r.within and 1.5 < r.error_cm < 2.5 for r in before_move)
    assert len(operator.readings) >= operator.patience + 1   # measured within once, then found still there
    assert stage.placed.frames >= len(operator.readings) + guide.steady_frames - 1
    measured = stage.attempt_fields()["measured_start"]
    assert measured["within_tolerance"] is True
    assert abs(measured["dx_cm"] - TRIAL.dx_cm) < 0.5 and abs(measured["dy_cm"] - TRIAL.dy_cm) < 0.5
    assert abs(measured["yaw_deg"] - TRIAL.yaw_deg) < 10
    assert "override_reason" not in measured and "unexpected_objects" not in measured


def test_the_operator_may_start_off_target_only_with_a_reason(table) -> None:
    world, view, references = table

    class Hurried(ScriptedOperator):
        def placement(self, trial, reading, frame):
            self.readings.append(reading)
            return "cube keeps sliding on this cloth"

    operator = Hurried(world, first_off_cm=2.0)
    stage = OperatorStage(lambda trial: None, guide=PlacementGuide(view, operator.frame, references, operator,
                                                                   ManualClock()))
    stage.place_cube(TRIAL, 1)
    measured = stage.attempt_fields()["measured_start"]
    assert measured["within_tolerance"] is False
    assert measured["override_reason"] == "cube keeps sliding on this cloth"
    assert 1.5 < measured["error_cm"] < 2.5


def test_an_unexpected_object_in_view_is_flagged_and_the_trial_waits_until_it_is_cleared(table) -> None:
    world, view, references = table
    operator = ScriptedOperator(world, first_off_cm=0.0)
    operator.clutter = True
    stage = OperatorStage(lambda trial: None, guide=PlacementGuide(view, operator.frame, references, operator,
                                                                   ManualClock()))
    stage.place_cube(TRIAL, 1)
    assert len(operator.warned) == 1
    flagged = operator.warned[0]
    assert len(flagged) == 1 and 60 <= flagged[0].centre[0] <= 130 and 330 <= flagged[0].centre[1] <= 440
    assert stage.attempt_fields()["measured_start"]["unexpected_objects"] == 1
    # the cube itself, which no empty-scene reference shows, is never flagged
    operator2 = ScriptedOperator(world, first_off_cm=0.0)
    OperatorStage(lambda trial: None, guide=PlacementGuide(view, operator2.frame, references, operator2,
                                                           ManualClock())).place_cube(TRIAL, 1)
    assert operator2.warned == []


def test_a_cube_passing_through_the_target_does_not_start_the_trial(table) -> None:
    world, view, references = table

    class Sliding(ScriptedOperator):
        """The cube is seen on target once, then slides 1.5 cm on before the next frame; later it rests on target."""

        def placement(self, trial, reading, frame):
            self.readings.append(reading)
            if reading.within and len([r for r in self.readings if r.within]) == 1:
                self._put(TRIAL.dx_cm, TRIAL.dy_cm + 1.5)
            elif len(self.readings) == 4:
                self._put(TRIAL.dx_cm, TRIAL.dy_cm)
            return None

    operator = Sliding(world, first_off_cm=0.0)   # it starts on the target, and slides
    stage = OperatorStage(lambda trial: None, guide=PlacementGuide(view, operator.frame, references, operator,
                                                                   ManualClock()))
    stage.place_cube(TRIAL, 1)
    assert operator.readings[0].within and not operator.readings[1].within   # the slide was seen, not started
    assert len(operator.readings) >= 5 and operator.readings[-1].within
    assert stage.attempt_fields()["measured_start"]["within_tolerance"] is True
