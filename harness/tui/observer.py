"""The engine's observer in the TUI: runs on the engine's thread and talks to the app through a
`UiLink`, so the engine never waits for drawing and the app never reaches into the engine."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from PIL import Image

from harness.errors import HarnessError
from harness.models.anatomy import describe
from harness.models.protocol import Trial
from harness.models.scoresheet import Scoresheet
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import Label, Void, VoidKind
from harness.models.verdict import JudgeVerdict
from harness.run.engine import ScoreDecision
from harness.run.placement_guide import PlacementReading
from harness.tui.screens import ClearTableScreen, PlaceCubeScreen, ScoreScreen, Suggestion
from harness.tui.state import LivePlacement

if TYPE_CHECKING:
    from harness.tui.state import RunState
    from harness.vision.scene_check import Unexpected


class RunApp(Protocol):
    """The operator's app as the observer reaches it on the UI thread (`tui.run_app.RunApp`, which builds its
    observer: named here by what the observer calls, so this module does not import it back)."""

    state: RunState
    undo_s: float
    auto_accept: bool

    def update_state(self, **changes: Any) -> None: ...

    def record_score(self, label: Label, shown: str, preview: np.ndarray | None, anatomy: str | None = None,
                     stalled: bool = False, graded: str | None = None) -> None: ...

    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...

    def notify(self, message: str) -> Any: ...

# A prompt: pushes its screen on the app with the callback that takes the operator's answer.
type Prompt = Callable[[Any, Callable[[Any], None]], Any]
UI_UPDATE_S = 0.2
log = logging.getLogger(__name__)


class UiLink:
    """Calls from the engine's thread onto the UI thread, queued with `loop.call_soon_threadsafe`
    (not Textual's `call_from_thread`, which waits for the call to finish: a closing app could
    then deadlock the engine). Calls made before the app has opened the link, or after it
    started closing, are dropped: the screen shows state, not history."""

    def __init__(self) -> None:
        self.closing = threading.Event()
        self._app: RunApp | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context: contextvars.Context | None = None

    def open(self, app: RunApp) -> None:
        """Called by the app on mount, on the UI thread: from now on calls reach it."""
        self._app = app
        self._loop = asyncio.get_running_loop()
        self._context = contextvars.copy_context()  # Textual's active-app context, for queued calls

    def post(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Queue `call(app, *args, **kwargs)` on the UI thread without waiting for it."""
        if self.closing.is_set() or self._loop is None:
            return
        self._loop.call_soon_threadsafe(functools.partial(call, self._app, *args, **kwargs), context=self._context)


class OperatorUndo:
    """The operator's undo (key u): the last attempt the operator scored may be scored again, as a record in
    `sheet` superseding it, until the next trial's policy starts. The record is written on the engine's thread (the
    sheet's one writer) while the run goes on, on the UI thread once the engine has finished. The engine's own
    voids (a fault, a stop) are not the operator's to take back."""

    def __init__(self, link: UiLink) -> None:
        self.link = link
        self.sheet: Scoresheet | None = None
        self._undoable: Attempt | None = None
        self._operator_scored: ScoreDecision | None = None   # the operator's answer for the trial being scored
        self._requested = threading.Event()
        self._rescoring = False

    # --- the app's side (UI thread) -------------------------------------------
    @property
    def can_undo(self) -> bool:
        return self._undoable is not None and not self._rescoring

    def last_scored(self) -> Attempt | None:
        """The attempt `u` would re-score (None: none may be)."""
        return self._undoable

    def request(self) -> None:
        """The operator pressed u: the engine's thread re-opens scoring of the last trial at its next wait."""
        if self.can_undo:
            self._requested.set()

    # --- the engine's side (engine thread) ------------------------------------
    def answered(self, decision: ScoreDecision | None) -> None:
        """The trial being scored was scored by the operator (`decision`, one they may take back) or not (None)."""
        self._operator_scored = decision

    def scored(self, attempt: Attempt) -> None:
        """The attempt is recorded: the operator's own answer may be taken back from now on."""
        decided, self._operator_scored = self._operator_scored, None
        operators = decided is not None and decided.label is attempt.label and self.sheet is not None
        self._undoable = attempt if operators else None
        self.link.post(_update_state, undo_trial=attempt.trial_index if operators else None)

    def trial_started(self, trial_index: int) -> None:
        if self._undoable is not None and self._undoable.trial_index == trial_index:
            self.close()   # the same trial tried again: that attempt's score is final now

    def close(self) -> None:
        """The last score is final (the next trial's policy starts)."""
        self._undoable = None
        self._requested.clear()
        self.link.post(_update_state, undo_trial=None)

    def serve(self, ask: Callable[[Prompt], Any], stopped: threading.Event) -> None:
        """Re-open scoring of the last trial if the operator asked (`ask` shows the prompt and waits for it):
        called wherever the engine waits before the next trial's policy starts (between trials, the start-pose
        move, the cube prompt, the placement guide)."""
        if not self._requested.is_set() or self._rescoring:
            return
        self._requested.clear()
        original = self._undoable
        if original is None or self.sheet is None or stopped.is_set() or self.link.closing.is_set():
            return
        self._rescoring = True
        try:
            self.record(ask(lambda app, done: app.push_screen(rescore_screen(original), done)))
        finally:
            self._rescoring = False

    def record(self, decision: ScoreDecision | None) -> None:
        """Write the operator's new score for the last trial as a record superseding the old one. On the engine's
        thread while the run goes on; on the UI thread once the engine has finished (then the only writer)."""
        original, sheet = self._undoable, self.sheet
        if original is None or sheet is None or decision is None:
            return   # kept (Escape)
        if decision.void is not None and decision.void.kind is not VoidKind.OPERATOR_VOID:
            return   # the run is stopping (an emergency stop, the app closing): the recorded score stands
        if decision.label is original.label and decision.note == original.note \
                and decision.void_reason == original.void_reason:
            return
        try:
            replaced = sheet.supersede(original, decision.label, decision.note, decision.void_reason)
        except HarnessError as err:
            self.link.post(_update_state, banner=f"Not re-scored: {err.one_line()}")
            return
        self._undoable = replaced
        log.info("trial %d attempt %d re-scored: %s -> %s", original.trial_index, original.attempt, original.label,
                 replaced.label)
        self.link.post(_rescored, original.label, replaced.label, _shown(replaced))


class TuiObserver:
    """The engine's `RunObserver` for the TUI; the app's keys set its pause and abort flags."""

    def __init__(self, link: UiLink | None = None) -> None:
        self.link = link or UiLink()
        self._last_ui = 0.0
        self._loop_t0 = 0.0
        self._missed = 0
        self.abort = threading.Event()
        self.stopped = threading.Event()     # the emergency stop: every wait on the operator ends at once
        self._pause = threading.Event()
        self._resume = threading.Event()
        self._proposal: Any | None = None   # a real arm's `Proposal` for the trial being scored
        self._answers = threading.Lock()     # the placement answers typed on the UI thread, taken here
        self._override: str | None = None    # a reason to start the trial with the cube where it is
        self._scene_note: str | None = None  # a note accepting what is in view
        self.undo = OperatorUndo(self.link)

    @property
    def sheet(self) -> Scoresheet | None:
        """The run's sheet: the undo's records go to it; its lock says whether a trial's timing is withheld (a
        blind comparison) and what a graded comparison makes of each trial."""
        return self.undo.sheet

    @sheet.setter
    def sheet(self, sheet: Scoresheet | None) -> None:
        self.undo.sheet = sheet

    # --- the app's side (UI thread) -------------------------------------------
    @property
    def pause_requested(self) -> bool:
        return self._pause.is_set()

    def request_pause(self) -> None:
        self._resume.clear()
        self._pause.set()

    def resume(self) -> None:
        self._pause.clear()
        self._resume.set()

    def start_anyway(self, reason: str) -> None:
        """The operator's reason to start the trial with the cube off target (the guide asks for it next frame)."""
        with self._answers:
            self._override = reason

    def accept_scene(self, note: str) -> None:
        """The operator's note accepting what is in view, instead of clearing it."""
        with self._answers:
            self._scene_note = note

    def emergency_stop(self) -> None:
        """After the guard has stopped the arm: a prompt the engine is waiting on (the cube placed, the score)
        ends now; the engine then voids the trial in flight as an emergency stop."""
        self.stopped.set()

    def close(self) -> None:
        """The app is going away: abort the run and stop every wait on the UI."""
        self.abort.set()
        self.link.closing.set()
        self.resume()

    # --- the engine's side (engine thread) ------------------------------------
    def _ui(self, **changes: Any) -> None:
        self.link.post(_update_state, **changes)

    def trial_started(self, trial: Trial, attempt: int, done: int, total: int) -> None:
        self.undo.trial_started(trial.index)
        self._loop_t0 = time.perf_counter()
        self._missed = 0
        self._ui(position=done + 1, trial_index=trial.index, attempt=attempt, dx_cm=trial.dx_cm, dy_cm=trial.dy_cm,
                 yaw_deg=trial.yaw_deg, step=0, missed=0, banner=None)

    def phase(self, name: str) -> None:
        self.serve_undo()
        if name == "placing cube":   # a new placement: answers typed for an earlier one do not carry over
            self._take_answers()
        if name == "running":   # the next trial starts: the last score is final
            self.undo.close()
        self._ui(phase=name, placement=None)

    def step(self, step: int, timing: dict[str, float]) -> None:
        now = time.perf_counter()
        self._missed += int(timing["missed"])
        if now - self._last_ui < UI_UPDATE_S:
            return
        self._last_ui = now
        hz = (step + 1) / (now - self._loop_t0) if now > self._loop_t0 else 0.0
        self._ui(step=step + 1, loop_hz=hz, policy_ms=timing["policy_ms"], missed=self._missed)

    def warn(self, message: str) -> None:
        self._ui(banner=message)

    def confirm_cube_placed(self, trial: Trial) -> None:
        message = (f"Place the cube {trial.dx_cm:+.1f} cm away and {abs(trial.dy_cm):.1f} cm "
                   f"{'left' if trial.dy_cm >= 0 else 'right'} of the trained position"
                   f"{f', turned {trial.yaw_deg:+.0f} deg' if trial.yaw_deg else ''}, then press Enter.")
        self._ask(lambda app, done: app.push_screen(PlaceCubeScreen(message), done))

    # --- the placement guide's operator (engine thread, once per measured frame) ---------------------------
    def placement(self, trial: Trial, reading: PlacementReading, frame: np.ndarray) -> str | None:
        """Show the frame and the reading; the operator's typed reason, once given, starts the trial anyway."""
        self._ui(placement=LivePlacement(frame, reading))
        self.serve_undo()
        if self.stopped.is_set():
            return "emergency stop while placing the cube"   # the engine voids the trial as an emergency stop
        if self.abort.is_set() or self.link.closing.is_set():
            return "run aborted while placing the cube"   # the trial in flight is then voided by the engine
        override, _ = self._take_answers(scene=False)
        return override

    def unexpected(self, trial: Trial, objects: list[Unexpected], frame: np.ndarray) -> str | None:
        """Show what is in view that should not be; the operator clears it or accepts it with a typed note."""
        self._ui(placement=LivePlacement(frame, None, tuple(objects)))
        self.serve_undo()
        if self.stopped.is_set():
            return "emergency stop while placing the cube"
        if self.abort.is_set() or self.link.closing.is_set():
            return "run aborted while placing the cube"
        _, note = self._take_answers(override=False)
        return note

    def clear_for_reference(self) -> None:
        message = ("Before the first trial: clear the table (cube off, nothing else in view) so the empty scene can "
                   "be captured with the arm at its start pose, then press Enter.")
        self._ask(lambda app, done: app.push_screen(ClearTableScreen(message), done))

    def _take_answers(self, override: bool = True, scene: bool = True) -> tuple[str | None, str | None]:
        with self._answers:
            taken = (self._override if override else None, self._scene_note if scene else None)
            if override:
                self._override = None
            if scene:
                self._scene_note = None
        return taken

    def score(self, trial: Trial, verdict: JudgeVerdict | None, void: Void | None) -> ScoreDecision:
        self.undo.answered(None)
        if void is not None:
            return ScoreDecision(Label.VOID, void)
        decision = self._score(trial, verdict)
        if decision.void is None or decision.void.kind is VoidKind.OPERATOR_VOID:
            self.undo.answered(decision)   # the operator's own answer: one they may take back
        return decision

    def _score(self, trial: Trial, verdict: JudgeVerdict | None) -> ScoreDecision:
        text = f"trial #{trial.index} (dx {trial.dx_cm:+.1f}, dy {trial.dy_cm:+.1f} cm)"
        proposal, self._proposal = self._proposal, None
        # a real arm: the proposal is the default, never auto-accepted; none when the evidence disagreed
        if verdict is None and proposal is not None and proposal.label is not None:
            detail = proposal.reasons_text()
            if proposal.placement_error_cm is not None:
                detail += (f"; cube {proposal.placement_error_cm:.1f} +/- {proposal.uncertainty_cm or 0:.1f}"
                           " cm from the bowl centre")
            shown = Suggestion(proposal.label, detail)
            return self._ask(lambda app, done: app.push_screen(
                ScoreScreen(text, shown, app.undo_s, False, source="Proposed from evidence"), done))
        judged = Suggestion(verdict.label, verdict.detail) if verdict is not None else None
        return self._ask(lambda app, done: app.push_screen(
            ScoreScreen(text, judged, app.undo_s, app.auto_accept), done))

    def proposal_ready(self, proposal: Any) -> None:
        """The real arm's proposal for the trial about to be scored: the scoring screen's default."""
        self._proposal = proposal

    def _ask(self, push: Prompt) -> Any:
        """Show a prompt on the UI thread and wait here for the operator's answer."""
        answered = threading.Event()
        box: list[Any] = []

        def done(result: Any) -> None:
            box.append(result)
            answered.set()

        self.link.post(push, done)
        while not answered.wait(0.05):
            self.serve_undo()
            if self.stopped.is_set():
                return ScoreDecision(Label.VOID, Void(VoidKind.EMERGENCY_STOP))
            if self.link.closing.is_set():
                return ScoreDecision(Label.VOID, Void(VoidKind.UI_CLOSED))
        return box[0]

    def serve_undo(self) -> None:
        """Wherever the engine waits before the next trial's policy starts: a re-score the operator asked for."""
        self.undo.serve(self._ask, self.stopped)

    def trial_scored(self, attempt: Attempt) -> None:
        preview = None
        path = attempt.artifacts.get("final_top.png")
        if path:
            preview = np.asarray(Image.open(path).convert("RGB"))
        anatomy = attempt.anatomy
        said = anatomy.summary if anatomy else None
        if anatomy is not None and self.sheet is not None and self.sheet.still_blind:
            said = describe(anatomy, None, timing_withheld=True)   # its first-motion time would name the slower arm
        self.link.post(_record_score, attempt.label, _shown(attempt), preview, said,
                       bool(anatomy and anatomy.stalled), self._graded(attempt))
        self.undo.scored(attempt)

    def _graded(self, attempt: Attempt) -> str | None:
        """A graded comparison's word on this attempt (its arm is not named: the tally stays blind)."""
        comparison = self.sheet.locked.comparison if self.sheet is not None else None
        if comparison is None or comparison.graded is None or attempt.label is Label.VOID:
            return None
        episode = attempt.loop.episode_s if attempt.loop.episode_s is not None else attempt.duration_s
        return comparison.graded.outcome.describe(attempt.label, attempt.judge, attempt.anatomy, episode)

    def stop_requested(self) -> bool:
        return self.abort.is_set()

    def wait_if_paused(self) -> bool:
        self.serve_undo()
        if self._pause.is_set():
            self._ui(paused=True, phase="paused")
            while self._pause.is_set() and not self.abort.is_set():
                self._resume.wait(0.1)
                self.serve_undo()
            self._ui(paused=False, pause_requested=False)
        return not self.abort.is_set()


def _update_state(app: RunApp, **changes: Any) -> None:
    app.update_state(**changes)


def _record_score(app: RunApp, label: Label, shown: str, preview: np.ndarray | None, anatomy: str | None,
                  stalled: bool, graded: str | None = None) -> None:
    app.record_score(label, shown, preview, anatomy, stalled, graded)


def _shown(attempt: Attempt) -> str:
    """An attempt's label as the tally's last line shows it: a void with its reason."""
    if attempt.label is Label.VOID:
        return f"{attempt.label.value} ({attempt.void_reason})"
    return attempt.label.value


def rescore_screen(attempt: Attempt) -> ScoreScreen:
    """Scoring of a recorded attempt re-opened: the judge's verdict (or the real arm's proposal) is again the
    default, so overriding it again takes a note; Escape keeps the recorded score."""
    default = None
    if attempt.judge is not None:
        default = Suggestion(attempt.judge.label, attempt.judge.detail)
    elif attempt.proposal and attempt.proposal.get("label") in {label.value for label in Label}:
        default = Suggestion(Label(attempt.proposal["label"]), "proposed from evidence")
    recorded = _shown(attempt)
    text = f"trial #{attempt.trial_index} again (recorded: {recorded}; Escape keeps it)"
    return ScoreScreen(text, default, 0.0, False, source="Simulator judge" if attempt.judge else
                       "Proposed from evidence", reopened=True)


def _rescored(app: RunApp, old: Label, new: Label, shown: str) -> None:
    app.update_state(tally=app.state.tally.remove(old).add(new), last_label=shown, last_outcome=new)
    app.notify(f"Re-scored: {old.value} -> {new.value} (the original stays in the scoresheet)")
