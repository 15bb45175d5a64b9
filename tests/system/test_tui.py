"""The operator TUI driven with key presses (Textual's pilot), on the real engine and simulated arm."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.app.build import FrontEnd, prepare_run
from harness.app.request import as_request
from harness.app.sheet import resolve_sheet
from harness.app.tui_run import make_app
from harness.cli import build_parser
from harness.models.protocol import load_protocol
from harness.models.scoresheet import load_scoresheet
from harness.tui.screens import CheckScreen, ScoreScreen, TextPrompt
from tests.helpers import small_protocol_copy, type_text

pytestmark = pytest.mark.slow  # the real engine and simulated arm behind the app: whole trials each


def _setup(workdir: Path, *extra: str):
    protocol_path = small_protocol_copy(workdir / "protocols")
    request = as_request(build_parser().parse_args(["run", str(protocol_path), "--no-video", *extra]))
    protocol = load_protocol(protocol_path)
    sheet, _ = resolve_sheet(request, protocol, protocol_path)
    return prepare_run(request, protocol, sheet, FrontEnd.TUI)


async def _wait_for(pilot, predicate, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise AssertionError(f"timed out; screen is {type(pilot.app.screen).__name__}")
        await pilot.pause(0.05)


def _run(coro) -> None:
    asyncio.run(coro)


def test_three_trials_scored_through_the_tui(workdir) -> None:
    setup = _setup(workdir)
    app = make_app(setup, undo_s=0.0)

    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            assert isinstance(app.screen, CheckScreen)
            assert setup.robot.world.time == 0.0, "nothing moves before the operator starts"
            await pilot.press("enter")
            # trial 1: accept the judge's verdict
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen))
            await pilot.press("enter")
            # trial 2: override with no-grasp and leave a note
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.state.position == 2)
            await pilot.press("o")
            await _wait_for(pilot, lambda: isinstance(app.screen, TextPrompt))
            await type_text(pilot, "slipped")
            await pilot.press("enter")
            await pilot.press("n")
            # trial 3: void with a reason; the trial is then run again and accepted
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.state.position == 3)
            await pilot.press("v")
            await _wait_for(pilot, lambda: isinstance(app.screen, TextPrompt))
            await type_text(pilot, "cube bumped")
            await pilot.press("enter")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.state.attempt == 2)
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.finished)
            await pilot.press("q")

    _run(drive())
    setup.close()
    sheet = load_scoresheet(setup.sheet.path)
    rows = [(a.trial_index, a.attempt, a.label, a.scored_by, a.note, a.void_reason) for a in sheet.attempts]
    assert rows == [
        (1, 1, "success", "judge", None, None),
        (2, 1, "no_grasp", "operator", "slipped", None),
        (3, 1, "void", "operator", None, "cube bumped"),
        (3, 2, "success", "judge", None, None),
    ]
    assert app.exit_code == 0


def test_undo_window_lets_the_operator_change_a_score(workdir) -> None:
    setup = _setup(workdir, "--max-trials", "1")
    app = make_app(setup, undo_s=30.0)

    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("enter")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen))
            await pilot.press("w")   # an override of the judge's success: a note first
            await _wait_for(pilot, lambda: isinstance(app.screen, TextPrompt))
            await type_text(pilot, "cube short of the bowl")
            await pilot.press("enter")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen))
            assert app.screen.pending is not None and app.screen.pending.label == "wrong_placement"
            await pilot.press("u")
            assert app.screen.pending is None
            screen = app.screen
            screen.undo_s = 0.0
            await pilot.press("s")
            await _wait_for(pilot, lambda: app.finished)

    _run(drive())
    setup.close()
    assert [a.label for a in load_scoresheet(setup.sheet.path).attempts] == ["success"]


@pytest.mark.parametrize("key", ["space", "ctrl+e", "ctrl+c"])
def test_emergency_stop_releases_torque_from_the_run_screen(workdir, key) -> None:
    setup = _setup(workdir, "--realtime")  # at the real arm's pace, so the key lands mid-trial
    app = make_app(setup, undo_s=0.0)
    robot = setup.robot.robot

    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.state.phase == "running" and app.state.step > 30)
            await pilot.press(key)
            assert robot.torque_enabled is False
            await _wait_for(pilot, lambda: app.finished)
            assert "EMERGENCY STOP" in (app.state.banner or "") or "emergency stop" in (app.state.banner or "")

    _run(drive())
    assert robot.torque_enabled is False
    sheet = load_scoresheet(setup.sheet.path)
    assert sheet.attempts[-1].void_reason == "emergency stop by operator"
    setup.close()


@pytest.mark.parametrize("key", ["space", "ctrl+e", "ctrl+c"])
def test_emergency_stop_while_the_scoring_prompt_is_open_voids_the_trial(workdir, key) -> None:
    setup = _setup(workdir)
    app = make_app(setup, undo_s=0.0)

    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("enter")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen))
            await pilot.press(key)
            assert setup.robot.stopped and setup.robot.robot.torque_enabled is False
            await _wait_for(pilot, lambda: app.finished)   # no key needed: the prompt closed with the stop
            assert not isinstance(app.screen, ScoreScreen)

    _run(drive())
    assert app.exit_code == 3
    sheet = load_scoresheet(setup.sheet.path)
    # the judge said success, but the trial was still in flight (unscored) when the stop came
    assert [(a.label, a.void_reason) for a in sheet.attempts] == [("void", "emergency stop by operator")]
    assert sheet.attempts[0].judge.label == "success"
    setup.close()


def test_abort_returns_to_the_start_pose_releases_torque_and_stays_resumable(workdir) -> None:
    setup = _setup(workdir, "--realtime")
    app = make_app(setup, undo_s=0.0)
    robot = setup.robot.robot

    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.state.phase == "running" and app.state.step > 30)
            await pilot.press("x")
            await _wait_for(pilot, lambda: app.finished)
            await pilot.press("q")

    _run(drive())
    assert robot.torque_enabled is False
    pose = robot.present_position()
    start = setup.protocol.start_pose
    assert all(abs(pose[f"{name}.pos"] - value) < 3.0 for name, value in start.items() if name != "gripper")
    sheet = load_scoresheet(setup.sheet.path)
    assert [(a.trial_index, a.void_reason) for a in sheet.attempts] == [(1, "aborted by operator")]
    assert sheet.pending_trials() == [1, 2, 3]
    assert app.exit_code == 3
    setup.close()


def test_pause_holds_before_the_next_trial_and_resume_continues(workdir) -> None:
    setup = _setup(workdir, "--max-trials", "2", "--realtime")
    app = make_app(setup, undo_s=0.0)

    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.state.phase == "running")
            await pilot.press("p")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen))
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.state.paused)
            await pilot.pause(0.5)
            assert len(load_scoresheet(setup.sheet.path).attempts) == 1, "no new trial while paused"
            await pilot.press("p")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.state.position == 2)
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.finished)

    _run(drive())
    assert len(load_scoresheet(setup.sheet.path).attempts) == 2
    setup.close()


def test_overriding_the_judge_asks_for_a_note_that_lands_in_the_scoresheet(workdir) -> None:
    setup = _setup(workdir, "--max-trials", "1")
    app = make_app(setup, undo_s=0.0)

    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("enter")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen))
            await pilot.press("w")                                  # the judge said success
            await _wait_for(pilot, lambda: isinstance(app.screen, TextPrompt))
            await pilot.press("enter")                              # no note: asked again
            await _wait_for(pilot, lambda: isinstance(app.screen, TextPrompt)
                            and app.screen.question.startswith("A note is needed"))
            await pilot.press("escape")                             # back to the score keys
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen))
            await pilot.press("w")
            await _wait_for(pilot, lambda: isinstance(app.screen, TextPrompt))
            await type_text(pilot, "bowl was moved")
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.finished)

    _run(drive())
    setup.close()
    rows = [(a.label, a.scored_by, a.note) for a in load_scoresheet(setup.sheet.path).attempts]
    assert rows == [("wrong_placement", "operator", "bowl was moved")]


def test_undo_after_the_score_is_recorded_rescores_until_the_next_trial_starts(workdir) -> None:
    """Long after the score's own window: `u` re-opens scoring of the last trial while the next one has not started
    (here: the run paused between trials), and after the run's last trial; each re-score is a superseding record."""
    setup = _setup(workdir, "--max-trials", "2")
    app = make_app(setup, undo_s=0.0)

    async def drive() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("enter")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen))
            app.action_toggle_pause()   # p on the run screen: the engine waits before the next trial
            await pilot.press("enter")   # the judge's verdict, recorded at once
            await _wait_for(pilot, lambda: app.state.paused and app.state.undo_trial == 1)
            assert load_scoresheet(setup.sheet.path).attempts[0].label == "success"
            await pilot.press("u")
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.screen.reopened)
            await pilot.press("n")   # overriding the judge again takes a note
            await _wait_for(pilot, lambda: isinstance(app.screen, TextPrompt))
            await type_text(pilot, "never closed on it")
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.state.tally.failures["no_grasp"] == 1)
            assert app.state.tally.success == 0 and app.state.undo_trial == 1
            await pilot.press("p")   # resume: trial 2 starts, and trial 1's score is final
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.state.position == 2)
            assert app.state.undo_trial is None
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.finished and app.state.undo_trial is not None)
            await pilot.press("u")   # the last trial of the run: until the app is closed
            await _wait_for(pilot, lambda: isinstance(app.screen, ScoreScreen) and app.screen.reopened)
            await pilot.press("v")
            await _wait_for(pilot, lambda: isinstance(app.screen, TextPrompt))
            await type_text(pilot, "cube was bumped")
            await pilot.press("enter")
            await _wait_for(pilot, lambda: app.state.tally.voids == 1)
            await pilot.press("q")

    _run(drive())
    setup.close()
    sheet = load_scoresheet(setup.sheet.path)   # every link and the witness verified
    assert [(r.trial_index, r.attempt, r.label, bool(r.supersedes)) for r in sheet.records] == [
        (1, 1, "success", False), (1, 1, "no_grasp", True), (2, 1, "success", False), (2, 1, "void", True)]
    assert [(a.label, a.note, a.void_reason) for a in sheet.attempts] == [
        ("no_grasp", "never closed on it", None), ("void", None, "cube was bumped")]
    assert sheet.pending_trials() == [2, 3]   # resume runs trial 2 again
