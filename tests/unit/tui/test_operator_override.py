"""The operator's word over the evidence, and the time a trial line reports.

Overriding the simulator judge's verdict or a real arm's proposal in the TUI takes a note (as plain mode
asks for one): an empty note asks again, Escape goes back to the score keys. Plain-mode trial lines keep
the episode's own time apart from the time the operator spent around it."""

from __future__ import annotations

import asyncio
import io

import pytest
from textual.app import App

from harness.models.protocol import Trial
from harness.models.sheet_records import LoopStats
from harness.models.taxonomy import Label
from harness.run.engine import ScoreDecision
from harness.run.terminal import TerminalObserver
from harness.tui.screens import ScoreScreen, Suggestion, TextPrompt
from tests.helpers import fake_attempt, type_text

JUDGE = Suggestion(Label.SUCCESS, "the cube rests inside the bowl")


class ScoreHost(App):
    """Only the scoring prompt, as the TUI pushes it: what it is dismissed with is the operator's decision."""

    def __init__(self, screen: ScoreScreen) -> None:
        super().__init__()
        self.score_screen = screen
        self.decisions: list[ScoreDecision] = []

    def on_mount(self) -> None:
        self.push_screen(self.score_screen, self.decisions.append)


async def _until(pilot, predicate, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < end, f"timed out on screen {type(pilot.app.screen).__name__}"
        await pilot.pause(0.02)


def _drive(screen: ScoreScreen, script) -> ScoreHost:
    app = ScoreHost(screen)

    async def run() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await _until(pilot, lambda: isinstance(app.screen, ScoreScreen))
            await script(app, pilot)

    asyncio.run(run())
    return app


@pytest.mark.slow
@pytest.mark.parametrize(("verdict", "source", "key", "label"), [
    (JUDGE, "Simulator judge", "w", "wrong_placement"),
    (Suggestion(Label.NO_GRASP, "the gripper closed on nothing"), "Proposed from evidence", "s", "success"),
])
def test_overriding_the_evidence_asks_for_a_note_until_one_is_given(verdict, source, key, label) -> None:
    async def operator(app: ScoreHost, pilot) -> None:
        await pilot.press(key)
        await _until(pilot, lambda: isinstance(app.screen, TextPrompt))
        assert f"{source} said {verdict.label.value}" in app.screen.question
        await pilot.press("enter")                          # an empty note is not accepted: asked again
        await _until(pilot, lambda: isinstance(app.screen, TextPrompt)
                     and app.screen.question.startswith("A note is needed"))
        assert app.decisions == [] and app.score_screen.pending is None
        await pilot.press("escape")                         # back to the score keys, nothing staged
        await _until(pilot, lambda: isinstance(app.screen, ScoreScreen))
        assert app.score_screen.pending is None and app.decisions == []
        await pilot.press(key)
        await _until(pilot, lambda: isinstance(app.screen, TextPrompt))
        await type_text(pilot, "bowl was moved")
        await pilot.press("enter")
        await _until(pilot, lambda: bool(app.decisions))

    app = _drive(ScoreScreen("trial #1", verdict, undo_s=0.0, source=source), operator)
    assert [(d.label, d.note) for d in app.decisions] == [(label, "bowl was moved")]


def test_accepting_the_verdict_or_agreeing_with_it_asks_nothing() -> None:
    async def operator(app: ScoreHost, pilot) -> None:
        await pilot.press("s")                              # the judge's own label: no override
        await _until(pilot, lambda: bool(app.decisions))
        assert not any(isinstance(s, TextPrompt) for s in app.screen_stack)

    app = _drive(ScoreScreen("trial #1", JUDGE, undo_s=0.0), operator)
    assert [(d.label, d.note) for d in app.decisions] == [("success", None)]


@pytest.mark.slow
def test_a_note_typed_before_the_override_is_its_reason() -> None:
    async def operator(app: ScoreHost, pilot) -> None:
        await pilot.press("o")
        await _until(pilot, lambda: isinstance(app.screen, TextPrompt))
        await type_text(pilot, "slipped")
        await pilot.press("enter")
        await _until(pilot, lambda: isinstance(app.screen, ScoreScreen))
        await pilot.press("d")
        await _until(pilot, lambda: bool(app.decisions))

    app = _drive(ScoreScreen("trial #1", JUDGE, undo_s=0.0), operator)
    assert [(d.label, d.note) for d in app.decisions] == [("grasped_then_dropped", "slipped")]


@pytest.mark.slow
def test_voiding_over_the_judge_needs_a_reason() -> None:
    async def operator(app: ScoreHost, pilot) -> None:
        await pilot.press("v")
        await _until(pilot, lambda: isinstance(app.screen, TextPrompt))
        await pilot.press("enter")
        await _until(pilot, lambda: isinstance(app.screen, TextPrompt)
                     and app.screen.question.startswith("A note is needed"))
        await type_text(pilot, "cube bumped")
        await pilot.press("enter")
        await _until(pilot, lambda: bool(app.decisions))

    app = _drive(ScoreScreen("trial #1", JUDGE, undo_s=0.0), operator)
    assert [(d.label, d.void_reason) for d in app.decisions] == [("void", "cube bumped")]


def _line(steps: int, fps: float, duration_s: float, operator_scores: bool = True) -> str:
    out = io.StringIO()
    observer = TerminalObserver(operator_scores=operator_scores, out=out)
    observer.trial_started(Trial(index=3, dx_cm=1.0, dy_cm=-2.0), 1, done=2, total=3)
    observer.trial_scored(fake_attempt(3, 1, "no_grasp", duration_s=duration_s,
                                       loop=LoopStats(steps=steps, target_fps=fps)))
    return out.getvalue().strip()


def test_a_real_arm_trial_line_shows_episode_and_operator_time_apart() -> None:
    line = _line(120, 30.0, 58.4)       # a 4 s episode; the rest was placing the cube and scoring
    assert line.endswith("-> no_grasp [120 steps, episode 4.0 s, operator 54.4 s]"), line


def test_a_lock_step_simulated_trial_line_says_it_ran_faster_than_real_time() -> None:
    line = _line(254, 30.0, 3.9, operator_scores=False)
    assert line.endswith("[254 steps, episode 8.5 s, simulated in 3.9 s]"), line


def test_a_headless_simulated_trial_slower_than_real_time_names_no_operator() -> None:
    # the judge scored it and nobody placed a cube: the 0.3 s beyond the episode were the start-pose move and the
    # evidence, not an operator's (issue 60)
    line = _line(120, 30.0, 4.3, operator_scores=False)
    assert line.endswith("[120 steps, episode 4.0 s, simulated in 4.3 s]"), line
