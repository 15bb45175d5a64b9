"""What the run screen shows while the cube is placed: which way to move it, and the target drawn on the camera."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np

from harness.run.placement_guide import PlacementReading, Tolerance
from harness.tui.placement import OBJECT, OFF, WITHIN, camera_pixels, guide_text
from harness.tui.screens import RunScreen, TextPrompt
from harness.tui.state import LivePlacement, RunState
from harness.vision.scene_check import Unexpected
from tests.helpers import type_text

SQUARE = ((300.0, 200.0), (330.0, 200.0), (330.0, 230.0), (300.0, 230.0))   # a 30 px footprint


def _reading(measured: tuple[float, float], yaw: float, **extra) -> PlacementReading:
    target = (3.0, -2.0)
    error = float(np.hypot(measured[0] - target[0], measured[1] - target[1]))
    yaw_error = abs(yaw - 15.0)
    return PlacementReading(target, 15.0, measured, yaw, error, yaw_error, 0.3,
                            error <= 0.5 and yaw_error <= 10, tolerance=Tolerance(), target_corners_px=SQUARE,
                            **extra)


def test_the_guide_says_which_way_to_move_and_turn_the_cube_only_for_what_is_out_of_tolerance() -> None:
    assert _reading((5.0, -2.0), 15.0).correction() == "move it 2.0 cm toward the robot"
    assert _reading((3.0, -3.5), 15.0).correction() == "move it 1.5 cm to the left"
    assert _reading((3.2, -2.1), 27.0).correction() == "turn it 12 deg clockwise"   # 0.2 cm off is within
    assert _reading((4.0, -1.0), 0.0).correction() == "move it 1.0 cm toward the robot, 1.0 cm to the right; " \
                                                      "turn it 15 deg anticlockwise"
    assert _reading((3.0, -2.0), 15.0).correction() == ""
    text = guide_text(LivePlacement(np.zeros((480, 640, 3), np.uint8), _reading((5.0, -2.0), 15.0))).plain
    assert "2.0 cm (+/- 0.3) and 0 deg from the target" in text and "start anyway" in text


def _colour_present(pixels: np.ndarray, colour: tuple[int, int, int]) -> bool:
    return bool(np.all(pixels == colour, axis=-1).any())


def test_the_camera_view_draws_the_target_green_when_within_and_amber_when_not_and_boxes_objects() -> None:
    frame = np.full((480, 640, 3), 200, np.uint8)
    near = camera_pixels(LivePlacement(frame, _reading((3.1, -2.0), 15.0)), 56, 20)
    far = camera_pixels(LivePlacement(frame, _reading((5.0, -2.0), 15.0)), 56, 20)
    assert near.shape == (40, 56, 3)
    assert _colour_present(near, WITHIN) and not _colour_present(near, OFF)
    assert _colour_present(far, OFF) and not _colour_present(far, WITHIN)
    # cropped around the target: the 30 px footprint spans several cells, not one
    columns = np.flatnonzero(np.all(far == OFF, axis=-1).any(axis=0))
    assert columns.max() - columns.min() >= 8
    flagged = camera_pixels(LivePlacement(frame, None, (Unexpected(40, 300, 80, 120, 9000),)), 56, 20)
    assert _colour_present(flagged, OBJECT)


def test_behind_a_note_prompt_the_live_view_waits_then_shows_the_latest_reading() -> None:
    """Redrawing the camera behind a dialog repainted the whole terminal, dimmed, 0.12 s of CPU a frame while the
    operator typed; the view now waits for the dialog to close and then shows where the cube is by then."""
    from textual.app import App

    frame = np.full((480, 640, 3), 200, np.uint8)
    placing = RunState("p", "act", "so101", total=2, fps=30, time_limit_s=10.0, phase="placing cube",
                       placement=LivePlacement(frame, _reading((5.0, -2.0), 15.0)))
    moved = replace(placing, placement=LivePlacement(frame, _reading((3.0, -3.5), 15.0)))
    notes: list[str | None] = []

    async def operator() -> None:
        app = App()
        async with app.run_test(size=(110, 32)) as pilot:
            screen = RunScreen()
            await app.push_screen(screen)
            screen.show(placing)
            await pilot.pause()
            guide = screen.query_one("#guide")
            assert "2.0 cm toward the robot" in str(guide.render())
            await app.push_screen(TextPrompt("Why start with the cube off its target?"), notes.append)
            screen.show(moved)                    # the guide measured the cube again while the operator types
            await pilot.pause()
            assert "2.0 cm toward the robot" in str(guide.render())
            await type_text(pilot, "cloth")
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is screen and notes == ["cloth"]
            assert "1.5 cm to the left" in str(guide.render())

    asyncio.run(operator())
