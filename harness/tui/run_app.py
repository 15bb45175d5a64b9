"""The operator's app. The engine runs on a worker thread with a `TuiObserver` (built with the
engine by `harness.app`); the app draws what the observer sends and turns keys into the
observer's pause/abort flags and the guard's emergency stop. Decisions about the run (voids,
pauses, the abort's return to the start pose, torque release) are the engine's."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

import numpy as np
from textual.app import App
from textual.binding import Binding
from textual.screen import ModalScreen

from harness.errors import HarnessError, RunPaused
from harness.models.taxonomy import Label, VoidKind
from harness.run.engine import RunEngine
from harness.run.safety import GuardedRobot
from harness.tui.observer import TuiObserver, rescore_screen
from harness.tui.screens import CheckReport, CheckScreen, RunScreen, TextPrompt
from harness.tui.state import RunState

log = logging.getLogger(__name__)

CSS = """
#body { height: auto; }
#cube { width: 1fr; min-width: 24; padding: 0 1; }
#middle { width: 34; padding: 0 1; }
#preview { width: 1fr; min-width: 18; max-width: 46; padding: 0 1; }
#header { padding: 0 1; margin-bottom: 1; }
#banner { display: none; margin-bottom: 1; }
#score-box, #prompt-box { width: 76; height: auto; border: thick $accent; padding: 1 2; background: $surface; }
ScoreScreen, TextPrompt, PlaceCubeScreen { align: center middle; }
#check { padding: 1 2; }
RunScreen { overflow-y: hidden; }
#placement { height: 1fr; display: none; }
#live { width: 1fr; max-width: 90; height: 1fr; padding: 0 1; }
#guide { width: 46; height: 1fr; padding: 0 1; }
"""


class RunApp(App[int]):
    CSS = CSS
    TITLE = "harness"
    BINDINGS = [
        Binding("space", "emergency_stop", "E-STOP"),
        Binding("ctrl+e", "emergency_stop", "E-STOP", show=False, priority=True),
        # Ctrl+C stops the arm as in plain mode: Textual reads it as a key on Linux and macOS (raw mode) and on a
        # Windows console (processed input off), so it is never a signal that could end the TUI with torque on.
        Binding("ctrl+c", "emergency_stop", "E-STOP", show=False, priority=True),
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("x", "abort", "Abort (safe pose, torque off)"),
        Binding("a", "toggle_auto_accept", "Auto-accept judge"),
        Binding("o", "start_anyway", "Start anyway (reason)"),
        Binding("n", "accept_scene", "Accept what is in view (note)"),
        Binding("u", "undo_last", "Re-score the last trial"),
        Binding("q", "quit_when_done", "Quit", show=False),
    ]

    def __init__(self, engine: RunEngine, observer: TuiObserver, guard: GuardedRobot, check: CheckReport,
                 state: RunState, undo_s: float = 3.0, auto_accept: bool = False) -> None:
        """`observer` must be the one `engine` reports to (both built by `harness.app.tui_run`)."""
        super().__init__()
        self.engine = engine
        self.observer = observer
        observer.sheet = engine.sheet   # the undo's superseding records go to the engine's sheet
        self.guard = guard
        self.check = check
        self.state = state
        self.undo_s = undo_s
        self.auto_accept = auto_accept
        self.exit_code = 0
        self.finished = False
        self._engine_thread: threading.Thread | None = None

    def on_mount(self) -> None:
        self.observer.link.open(self)
        self.push_screen(CheckScreen(self.check), self._after_check)

    def _after_check(self, start: bool | None) -> None:
        if not start:
            self.exit(0)
            return
        # The engine first: the arm's move to its start pose need not wait for the run screen to be built (issue
        # 40). What the engine reports meanwhile is queued behind this call and kept in `state` until the screen
        # is mounted, then drawn from the state of that moment.
        self._engine_thread = threading.Thread(target=self._run_engine, name="harness-engine")
        self._engine_thread.start()
        self.run_screen = RunScreen()
        self.push_screen(self.run_screen)
        self.call_after_refresh(lambda: self.run_screen.show(self.state))

    # --- engine thread -------------------------------------------------------
    def _run_engine(self) -> None:
        code, banner = 0, None
        try:
            self.engine.run()
        except RunPaused as paused:
            code = paused.exit_code
            if paused.void.kind is VoidKind.OPERATOR_ABORT:
                where = "arm at the start pose" if not self.guard.stopped else "emergency stop held"
                banner = f"Aborted: {where}, torque released. Resume later with --resume."
            else:
                banner = f"Run paused: {paused}. Fix the cause, then run again with --resume."
        except HarnessError as err:
            banner, code = f"Error: {err.one_line()}. Torque released; resume with --resume.", err.exit_code
        except Exception as exc:   # a bug: the banner says what, the log keeps the traceback
            log.exception("the run ended on an unexpected error")
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            banner, code = f"Error: {type(exc).__name__}: {first_line[:120]}. Torque released; resume with --resume.", 1
        finally:
            if self.guard.world is not None:
                self.guard.world.release_renderers()  # GL contexts belong to this thread
        self.exit_code = code
        self.observer.link.post(RunApp._finish, banner)

    # --- UI thread ---------------------------------------------------------
    def update_state(self, **changes: Any) -> None:
        keys_before = (self._placement_keys(), self.state.undo_trial)
        self.state = replace(self.state, **changes)
        if (self._placement_keys(), self.state.undo_trial) != keys_before:
            self.refresh_bindings()   # the placement keys come and go with the placement view, u with the undo
        if getattr(self, "run_screen", None) is not None and self.run_screen.is_mounted:
            self.run_screen.show(self.state)

    def record_score(self, label: Label, shown: str, preview: np.ndarray | None, anatomy: str | None = None,
                     stalled: bool = False, graded: str | None = None) -> None:
        self.update_state(tally=self.state.tally.add(label), last_label=shown, last_outcome=label, last_anatomy=anatomy,
                          last_stalled=stalled, last_graded=graded,
                          preview=preview if preview is not None else self.state.preview)

    def _finish(self, banner: str | None) -> None:
        self.finished = True
        from harness.command import harness_command

        done = banner or (f"Run complete. Press q to quit. Report: {harness_command()} report "
                          f"{self.engine.sheet.path}")
        self.update_state(phase="done", banner=done, placement=None)

    def action_emergency_stop(self) -> None:
        # Torque goes off here, now; the guard refuses every later motion command. A prompt the engine
        # waits on (cube placed, score) is closed, so the trial in flight is voided, never scored, and
        # the run pauses.
        self.guard.emergency_stop()
        self.observer.emergency_stop()
        while isinstance(self.screen, ModalScreen):   # the score, the cube placed, a note: all moot now
            self.pop_screen()
        self.update_state(banner="EMERGENCY STOP: torque released; the trial in flight is void. "
                                 "The run will not move the arm again.")

    def action_toggle_pause(self) -> None:
        if self.observer.pause_requested:
            self.observer.resume()
            self.update_state(pause_requested=False)
        else:
            self.observer.request_pause()
            self.update_state(pause_requested=True)

    def action_abort(self) -> None:
        self.observer.abort.set()
        self.update_state(banner="Aborting: the trial in flight is voided, then the arm returns to its start pose.")

    def _placement_keys(self) -> tuple[bool, bool]:
        """Which placement keys apply now: `o` while a reading is shown, `n` while something is flagged."""
        placing = self.state.placement
        return (placing is not None and placing.reading is not None, placing is not None and bool(placing.objects))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The placement keys exist only while the cube is being placed."""
        if action == "start_anyway":
            return self._placement_keys()[0]
        if action == "accept_scene":
            return self._placement_keys()[1]
        if action == "undo_last":
            return self.state.undo_trial is not None
        return True

    def action_undo_last(self) -> None:
        """Re-open scoring of the last trial: the engine's thread does it at its next wait, before the next trial's
        policy starts; once the run has finished, it is done here (the engine no longer writes)."""
        undo = self.observer.undo
        last = undo.last_scored()
        if last is None or not undo.can_undo:
            return
        if self.finished:
            self.push_screen(rescore_screen(last), undo.record)
            return
        undo.request()
        self.notify("Re-opening scoring of the last trial (before the next trial starts)")

    def action_start_anyway(self) -> None:
        self.push_screen(TextPrompt("Why start this trial with the cube where it is? (recorded with the trial; "
                                    "Escape to keep placing)"), self._start_anyway)

    def _start_anyway(self, reason: str | None) -> None:
        if reason:
            self.observer.start_anyway(reason)
        elif reason is not None:
            self.notify("An override needs a reason: the trial waits for the cube to be within tolerance.",
                        severity="warning")

    def action_accept_scene(self) -> None:
        self.push_screen(TextPrompt("What is in view, and why may the trial run with it? (recorded with the trial)"),
                         self._accept_scene)

    def _accept_scene(self, note: str | None) -> None:
        if note:
            self.observer.accept_scene(note)
        elif note is not None:
            self.notify("Accepting it needs a note; otherwise remove it from the table.", severity="warning")

    def action_toggle_auto_accept(self) -> None:
        self.auto_accept = not self.auto_accept
        self.notify(f"Auto-accept of the judge's verdict {'on' if self.auto_accept else 'off'}")

    def action_quit_when_done(self) -> None:
        if self.finished:
            self.exit(self.exit_code)
        else:
            self.notify("The run is still going: press x to abort first (or space for emergency stop).")

    async def action_quit(self) -> None:
        self.action_quit_when_done()

    def on_unmount(self) -> None:
        """However the app ends, the engine stops moving the arm and finishes its bookkeeping."""
        self.observer.close()
        thread = getattr(self, "_engine_thread", None)
        if thread is not None:
            thread.join(timeout=30)
