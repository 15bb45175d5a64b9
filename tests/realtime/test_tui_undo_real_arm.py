"""The operator's undo on the emulated real arm: the next trial waits for the cube, and until it is placed `u`
re-scores the last trial (a superseding record; the original stays in the sheet and its chain)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.emulator.remote_rig import open_rig_process
from tests.helpers import press_keys
from tests.realtime.test_real_arm_path import TWO_TRIALS, _until, tui_desk_run

pytestmark = pytest.mark.slow   # two real-time trials on the emulated arm behind the app


def test_u_at_the_next_cube_prompt_rescores_the_last_trial(workdir: Path) -> None:
    from harness.models.scoresheet import load_scoresheet
    from harness.reports.summary import summarize
    from harness.tui.screens import PlaceCubeScreen, ScoreScreen
    from tests.tiny_policy import save_tiny_act

    checkpoint = save_tiny_act(workdir / "act")
    protocol_path = workdir / "protocols" / "desk.yaml"
    protocol_path.write_text(TWO_TRIALS)
    socket = workdir / "cams.sock"
    with open_rig_process(socket) as rig:   # its own process: this one runs the TUI, the engine and the policy
        protocol, setup, app = tui_desk_run(protocol_path, checkpoint, rig.port, socket)
        trials = {t.index: t for t in protocol.trials}

        async def operator() -> None:
            async with app.run_test(size=(100, 30)) as pilot:
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: isinstance(app.screen, PlaceCubeScreen), 120)
                rig.place_cube(trials[1].dx_cm, trials[1].dy_cm, trials[1].yaw_deg)
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: isinstance(app.screen, ScoreScreen), 120)
                await press_keys(pilot, "n")   # recorded at once (no undo window)
                await _until(pilot, lambda: isinstance(app.screen, PlaceCubeScreen) and app.state.position == 2, 120)
                assert [a.label for a in load_scoresheet(setup.sheet.path).attempts] == ["no_grasp"]
                assert app.state.undo_trial == 1
                await press_keys(pilot, "u")   # the next trial waits for its cube: trial 1 may still be re-scored
                await _until(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.screen.reopened, 60)
                await press_keys(pilot, "w")
                await _until(pilot, lambda: isinstance(app.screen, PlaceCubeScreen), 60)
                await _until(pilot, lambda: app.state.tally.failures["wrong_placement"] == 1, 30)
                assert app.state.tally.failures["no_grasp"] == 0
                rig.place_cube(trials[2].dx_cm, trials[2].dy_cm, trials[2].yaw_deg)
                await press_keys(pilot, "enter")
                await _until(pilot, lambda: app.state.phase == "running", 60)
                assert app.state.undo_trial is None   # trial 2's policy started: trial 1's score is final
                await _until(pilot, lambda: isinstance(app.screen, ScoreScreen), 120)
                await press_keys(pilot, "n")
                await _until(pilot, lambda: app.finished, 60)
                await press_keys(pilot, "q")

        try:
            asyncio.run(operator())
        finally:
            setup.close()
        torque = rig.torque_enabled()
    recorded = load_scoresheet(setup.sheet.path)
    assert [(r.trial_index, r.label, r.supersedes is not None) for r in recorded.records] == [
        (1, "no_grasp", False), (1, "wrong_placement", True), (2, "no_grasp", False)]
    assert recorded.records[1].supersedes == recorded.records[0].chain_sha256
    assert recorded.records[1].artifacts == recorded.records[0].artifacts   # the same attempt, its evidence
    summary = summarize(recorded)
    assert summary.failure_modes == {"no_grasp": 1, "grasped_then_dropped": 0, "wrong_placement": 1}
    assert torque and not any(torque.values()), torque
