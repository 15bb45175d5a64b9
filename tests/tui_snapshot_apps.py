"""Small host apps that show one TUI screen with fixed data, for snapshot tests."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from textual.app import App

from harness.models.locked import LockedBlock
from harness.models.taxonomy import Label
from harness.tui.run_app import CSS
from harness.tui.screens import CheckReport, CheckScreen, RunScreen, ScoreScreen, Suggestion
from harness.tui.state import RunState, Tally

LOCKED = LockedBlock.model_validate({
    "task": "Pick up the cube and place it in the bowl.",
    "success_definition": "Autonomous grasp, lift and release; the cube comes to rest inside the bowl.",
    "taxonomy": ["success", "no_grasp", "grasped_then_dropped", "wrong_placement", "void"],
    "trial_count": 50,
    "protocol_file": "protocols/randomized.yaml",
    "protocol_sha256": "3f9a0c1b2d4e5f60718293a4b5c6d7e8f9",
    "policy": {"ref": "outputs/act_so101/pretrained_model", "fingerprint": "sha256:8c1d2e3f4a5b6c7d8e9f0a1b2c3d"},
    "trials": [], "robot": "so101", "stopping_rule": {"kind": "fixed"},
})


def _gradient() -> np.ndarray:
    y, x = np.mgrid[0:48, 0:64]
    image = np.stack([x * 4, y * 5, np.full_like(x, 90)], axis=-1).astype(np.uint8)
    image[18:26, 28:36] = (220, 30, 30)
    return image


STATE = RunState(
    protocol_name="randomized", policy="act_so101", robot="so101", total=50, fps=30, time_limit_s=20.0,
    trained_xy_cm=(22.0, -5.0), bowl_xy_cm=(18.0, 14.0), position=12, trial_index=12, attempt=2,
    dx_cm=3.8, dy_cm=-2.9, yaw_deg=-13.0, phase="running", step=147, loop_hz=29.8, policy_ms=18.4, missed=2,
    tally=Tally(success=9, failures={Label.NO_GRASP: 1, Label.GRASPED_THEN_DROPPED: 0, Label.WRONG_PLACEMENT: 1},
                voids=1),
    last_label=Label.SUCCESS.value, last_outcome=Label.SUCCESS, preview=_gradient(),
)


class CheckHost(App):
    CSS = CSS

    def on_mount(self) -> None:
        report = CheckReport(robot="so101 (SO-101 follower on /dev/ttyACM0)", cameras=[("top", 30.0), ("wrist", 29.9)],
                             policy="act:act_so101", policy_warmup_ms=18.2, locked=LOCKED, scored=11, voids=1,
                             scoresheet="scoresheets/randomized-act_so101.yaml")
        self.push_screen(CheckScreen(report))


class RunHost(App):
    CSS = CSS

    def on_mount(self) -> None:
        screen = RunScreen()
        self.push_screen(screen)
        self.call_after_refresh(screen.show, STATE)


class ScoreHost(App):
    CSS = CSS

    def on_mount(self) -> None:
        screen = RunScreen()
        self.push_screen(screen)
        self.call_after_refresh(screen.show, STATE)
        verdict = Suggestion(Label.NO_GRASP, "the gripper never held the cube")
        self.push_screen(ScoreScreen("trial #12 (dx +3.8, dy -2.9 cm)", verdict, undo_s=3.0))


def _table_with_cube() -> np.ndarray:
    """A 640x480 top frame: a warm table and a red cube, 1.8 cm (about 15 px) off its target's footprint."""
    y, x = np.mgrid[0:480, 0:640]
    image = np.stack([180 + x // 16, 150 + y // 16, np.full_like(x, 110)], axis=-1).astype(np.uint8)
    image[195:225, 318:348] = (230, 60, 60)
    return image


def _placing_state():
    from harness.run.placement_guide import PlacementReading, Tolerance
    from harness.tui.state import LivePlacement

    square = ((300.0, 200.0), (330.0, 200.0), (330.0, 230.0), (300.0, 230.0))
    reading = PlacementReading((3.0, -2.0), 15.0, (4.8, -2.1), 15.0, 1.8, 0.0, 0.4, False, tolerance=Tolerance(),
                               target_corners_px=square, cube_px=(333.0, 210.0))
    return replace(STATE, phase="placing cube", placement=LivePlacement(_table_with_cube(), reading))


class PlacingHost(App):
    CSS = CSS

    def on_mount(self) -> None:
        screen = RunScreen()
        self.push_screen(screen)
        self.call_after_refresh(screen.show, _placing_state())
