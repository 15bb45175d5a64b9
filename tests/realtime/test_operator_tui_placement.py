"""Guided placement in the operator TUI, through the rehearsed real-arm path: emulated servos on the simulated
arm, the simulated top camera through LeRobot's camera API, `--bowl-calibration` and `--trained-spot`, and the
operator played by Textual's pilot (keys) and the emulator (hands).

Trial 1: the cube put 2 cm off its target is not accepted (the run screen shows the live camera and the
distance; an override without a reason is refused) until it is moved onto the target. Trial 2: the operator
starts with the cube off target, giving a reason, and scores a success: the measured start, the reason and the
final frame's placement error are the attempt's own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.emulator.remote_rig import open_rig_process
from tests.helpers import press_keys, type_text
from tests.realtime.test_operator_real_arm import PROTOCOL, _check_time_frames
from tests.realtime.test_real_arm_path import _until

pytestmark = pytest.mark.slow   # a real-time run of two short trials with a live top camera

TRIALS = {1: (3.0, -2.0, 15.0), 2: (4.0, 2.0, -10.0)}
TWO_TRIALS = (PROTOCOL.split("trials:")[0] + "trials:\n"
              + "".join(f"- {{index: {i}, dx_cm: {dx}, dy_cm: {dy}, yaw_deg: {yaw}}}\n"
                        for i, (dx, dy, yaw) in TRIALS.items()))


def test_the_tui_guides_the_cube_onto_its_target_and_records_where_it_started(workdir: Path) -> None:
    from harness.app.build import FrontEnd, prepare_run
    from harness.app.compare_run import comparison_refs
    from harness.app.request import as_request
    from harness.app.sheet import resolve_sheet
    from harness.app.tui_run import make_app
    from harness.cli import build_parser
    from harness.models.protocol import load_protocol
    from harness.models.scoresheet import load_scoresheet
    from harness.tui.placement import LiveCamera, PlacementPanel
    from harness.tui.screens import CheckScreen, ClearTableScreen, RunScreen, ScoreScreen, TextPrompt
    from tests.tiny_policy import save_tiny_act

    checkpoint = save_tiny_act(workdir / "act", height=480, width=640)
    protocol_path = workdir / "protocols" / "guided.yaml"
    protocol_path.write_text(TWO_TRIALS)
    socket = workdir / "cams.sock"
    with open_rig_process(socket) as rig:   # its own process: this one runs the TUI, the engine and the policy
        _check_time_frames(rig.truth.geometry, workdir)
        rig.place_cube(80.0, 80.0)                          # off the table until the operator places it
        args = build_parser().parse_args(["run", str(protocol_path), "--robot", "so101", "--port", rig.port,
                                          "--robot-id", "emulated_follower", "--policy", str(checkpoint),
                                          "--camera", f"top=sim:{socket}@640x480", "--no-video",
                                          "--bowl-calibration", str(workdir / "bowl.yaml"),
                                          "--trained-spot", str(workdir / "spot.png")])
        protocol = load_protocol(protocol_path)
        request = as_request(args)
        assert comparison_refs(request, protocol) is None   # one --policy: a single run, as `harness run` decides
        sheet, _ = resolve_sheet(request, protocol, protocol_path)
        setup = prepare_run(request, protocol, sheet, FrontEnd.TUI)
        app = make_app(setup, undo_s=0.0)
        seen: list = []   # the readings the run screen showed, in order

        def reading(trial: int):
            live = app.state.placement
            if app.state.trial_index != trial or live is None or live.reading is None:
                return None
            if not seen or seen[-1] is not live.reading:
                seen.append(live.reading)
            return live.reading

        async def off_target_shown(pilot, trial: int, frames: int) -> None:
            start = len(seen)
            await _until(pilot, lambda: (r := reading(trial)) is not None and r.error_cm is not None
                         and 1.5 < r.error_cm < 2.5 and len(seen) - start >= frames, 120)
            assert isinstance(app.screen, RunScreen) and app.state.phase == "placing cube"
            assert app.screen.query_one("#placement").display and not app.screen.query_one("#body").display
            assert "move it" in str(app.screen.query_one("#guide", PlacementPanel).render())
            assert app.screen.query_one("#live", LiveCamera).render() != ""

        async def operator() -> None:
            async with app.run_test(size=(110, 32)) as pilot:
                assert isinstance(app.screen, CheckScreen)
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: isinstance(app.screen, ClearTableScreen), 240)   # clear the table
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: reading(1) is not None, 120)
                dx, dy, yaw = TRIALS[1]
                rig.place_cube(dx + 2.0, dy, yaw)           # 2 cm off: the trial must not start
                await off_target_shown(pilot, 1, frames=3)
                await press_keys(pilot, "o")   # an override without a reason is no override
                await _until(pilot, lambda: isinstance(app.screen, TextPrompt), 10)
                await press_keys(pilot, "enter")
                await off_target_shown(pilot, 1, frames=2)
                rig.place_cube(dx, dy, yaw)                 # moved onto the target: the trial starts by itself
                await _until(pilot, lambda: isinstance(app.screen, ScoreScreen), 120)
                await press_keys(pilot, "enter")   # confirm the proposal
                await _until(pilot, lambda: reading(2) is not None, 120)
                dx, dy, yaw = TRIALS[2]
                rig.place_cube(dx, dy + 2.0, yaw)
                await off_target_shown(pilot, 2, frames=2)
                await press_keys(pilot, "o")
                await _until(pilot, lambda: isinstance(app.screen, TextPrompt), 10)
                await type_text(pilot, "cube slides on this cloth")
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: isinstance(app.screen, ScoreScreen), 120)
                await press_keys(pilot, "s")   # the operator scores it a success, over the proposal:
                await _until(pilot, lambda: isinstance(app.screen, TextPrompt), 10)   # an override asks for a note
                await type_text(pilot, "cube is in the bowl")
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: app.finished, 60)
                await press_keys(pilot, "q")

        try:
            asyncio.run(operator())
        finally:
            setup.close()
        torque = rig.torque_enabled()
    first, second = load_scoresheet(setup.sheet.path).attempts
    start = first.measured_start
    assert start["within_tolerance"] is True and "override_reason" not in start
    assert abs(start["dx_cm"] - 3.0) < 0.5 and abs(start["dy_cm"] + 2.0) < 0.5
    assert first.label == first.proposal["label"] and first.placement_error_cm is None   # not a success
    start = second.measured_start
    assert start["within_tolerance"] is False and start["override_reason"] == "cube slides on this cloth"
    assert 1.5 < start["error_cm"] < 2.5 and abs(start["dy_cm"] - 4.0) < 0.5
    assert second.label == "success" and second.placement_error_cm is not None
    assert second.placement_error_cm == second.proposal["placement_error_cm"]   # measured on the final frame
    assert torque and not any(torque.values()), torque
