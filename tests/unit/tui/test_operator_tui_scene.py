"""The scene check in the TUI: something unexpected in view is shown (whole frame, boxed) and the trial waits
until it is removed or accepted with a typed note (`n`); an empty note accepts nothing.

The operator app is the real `RunApp` and the guide the real `PlacementGuide` on the app's engine thread, over
the simulated table; only the engine around them is reduced to the one placement under test."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

import harness.sim  # noqa: F401  (selects the headless GL backend)
from harness.models.protocol import Trial
from harness.run.clock import ManualClock
from harness.run.operator_trial import PlacementGuide
from harness.run.stages import OperatorStage
from harness.sim.world import SimWorld
from harness.tui.observer import TuiObserver
from harness.tui.run_app import RunApp
from harness.tui.screens import TextPrompt
from harness.tui.state import RunState
from tests.helpers import press_keys, type_text
from tests.realtime.test_real_arm_path import _until
from tests.tui_snapshot_apps import LOCKED
from tests.unit.run.test_operator_proposal import sim_top_view

pytestmark = pytest.mark.slow   # renders and measures a few dozen frames

TRIAL = Trial(index=3, dx_cm=3.0, dy_cm=-2.0, yaw_deg=20.0)


def test_an_unexpected_object_waits_for_a_note_in_the_tui() -> None:
    from harness.tui.screens import CheckReport

    world = SimWorld()
    view = sim_top_view(world)
    world.place_cube((0.60, 0.40), 0.0)
    references = [world.render("top", 640, 480)]
    world.place_cube((0.22 + TRIAL.dx_cm / 100, -0.05 + TRIAL.dy_cm / 100), math.radians(TRIAL.yaw_deg))
    world.release_renderers()   # the guide renders on the engine thread

    def frame() -> np.ndarray:   # a phone left on the table, in no demonstration
        image = world.render("top", 640, 480)
        cv2.rectangle(image, (60, 330), (130, 440), (25, 25, 30), -1)
        return image

    observer = TuiObserver()
    stage = OperatorStage(observer.confirm_cube_placed,
                          guide=PlacementGuide(view, frame, references, observer, ManualClock()))

    def engine_run() -> None:
        try:
            observer.phase("placing cube")
            observer.trial_started(TRIAL, 1, 0, 1)
            stage.place_cube(TRIAL, 1)
        finally:
            world.release_renderers()

    engine = SimpleNamespace(run=engine_run, sheet=SimpleNamespace(path="sheet.yaml"))
    guard = SimpleNamespace(world=None, stopped=False)
    check = CheckReport(robot="so101", cameras=[("top", 30.0)], policy="act", policy_warmup_ms=None, locked=LOCKED,
                        scored=0, voids=0, scoresheet="sheet.yaml")
    app = RunApp(engine, observer, guard, check, RunState(protocol_name="p", policy="act", robot="so101", total=1,
                                                          fps=30, time_limit_s=20.0))

    async def operator() -> None:
        async with app.run_test(size=(110, 32)) as pilot:
            await press_keys(pilot, "enter")
            await _until(pilot, lambda: app.state.placement is not None and bool(app.state.placement.objects), 60)
            assert "Something unexpected is in view" in str(app.screen.query_one("#guide").render())
            assert app.check_action("accept_scene", ()) and not app.check_action("start_anyway", ())
            await press_keys(pilot, "n")
            await _until(pilot, lambda: isinstance(app.screen, TextPrompt), 10)
            await press_keys(pilot, "enter")   # an empty note accepts nothing: still waiting
            await pilot.pause(0.5)
            assert not app.finished and app.state.placement is not None and app.state.placement.objects
            await press_keys(pilot, "n")
            await _until(pilot, lambda: isinstance(app.screen, TextPrompt), 10)
            await type_text(pilot, "phone charging")
            await press_keys(pilot, "enter")
            await _until(pilot, lambda: app.finished, 60)

    try:
        asyncio.run(operator())
    finally:
        world.close()
    measured = stage.attempt_fields()["measured_start"]
    assert measured["scene_note"] == "phone charging" and measured["unexpected_objects"] == 1
    assert measured["within_tolerance"] is True and "override_reason" not in measured
