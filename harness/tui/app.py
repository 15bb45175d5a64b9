"""The operator's app. The engine runs in a worker thread; `TuiObserver` carries its events to
the screen and the operator's scores back, so the TUI holds no run logic of its own."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
from PIL import Image
from textual.app import App
from textual.binding import Binding

from harness.models.protocol import Trial
from harness.models.scoresheet import Attempt
from harness.run.engine import RunEngine, RunPaused, ScoreDecision
from harness.tui.screens import CheckReport, CheckScreen, PlaceCubeScreen, RunScreen, ScoreScreen
from harness.tui.state import RunState

UI_UPDATE_S = 0.2

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
"""


class TuiObserver:
    """Called from the engine's thread; every UI change goes through `call_from_thread`."""

    def __init__(self, app: RunApp) -> None:
        self.app = app
        self._last_ui = 0.0
        self._loop_t0 = 0.0
        self._missed = 0
        self.abort = threading.Event()
        self.closing = threading.Event()
        self.pause = threading.Event()
        self._resume = threading.Event()

    def _ui(self, **changes: Any) -> None:
        self.app.post_to_ui(self.app.update_state, **changes)

    def trial_started(self, trial: Trial, attempt: int, done: int, total: int) -> None:
        self._loop_t0 = time.perf_counter()
        self._missed = 0
        self._ui(position=done + 1, trial_index=trial.index, attempt=attempt, dx_cm=trial.dx_cm, dy_cm=trial.dy_cm,
                 yaw_deg=trial.yaw_deg, step=0, missed=0, banner=None)

    def phase(self, name: str) -> None:
        self._ui(phase=name)

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
        self._ask(lambda done: self.app.push_screen(PlaceCubeScreen(message), done))

    def score(self, trial: Trial, verdict: dict[str, Any] | None, void_reason: str | None) -> ScoreDecision:
        if void_reason:
            return ScoreDecision("void", void_reason=void_reason)
        text = f"trial #{trial.index} (dx {trial.dx_cm:+.1f}, dy {trial.dy_cm:+.1f} cm)"
        return self._ask(lambda done: self.app.push_screen(
            ScoreScreen(text, verdict, self.app.undo_s, self.app.auto_accept), done))

    def _ask(self, push: Any) -> Any:
        """Show a prompt on the UI thread and wait here for the operator's answer."""
        answered = threading.Event()
        box: list[Any] = []

        def done(result: Any) -> None:
            box.append(result)
            answered.set()

        self.app.post_to_ui(push, done)
        while not answered.wait(0.1):
            if self.closing.is_set():
                return ScoreDecision("void", void_reason="operator closed the TUI before scoring")
        return box[0]

    def trial_scored(self, attempt: Attempt) -> None:
        preview = None
        path = attempt.artifacts.get("final_top.png")
        if path:
            preview = np.asarray(Image.open(path).convert("RGB"))
        label = attempt.label if attempt.outcome != "void" else f"void ({attempt.void_reason})"
        self.app.post_to_ui(self.app.record_score, attempt.label, label, preview)

    def stop_requested(self) -> bool:
        return self.abort.is_set()

    def wait_if_paused(self) -> bool:
        if self.pause.is_set():
            self._ui(paused=True, phase="paused")
            while self.pause.is_set() and not self.abort.is_set():
                self._resume.wait(0.1)
            self._ui(paused=False, pause_requested=False)
        return not self.abort.is_set()

    def resume(self) -> None:
        self.pause.clear()
        self._resume.set()


class RunApp(App[int]):
    CSS = CSS
    TITLE = "harness"
    BINDINGS = [
        Binding("space", "emergency_stop", "E-STOP"),
        Binding("ctrl+e", "emergency_stop", "E-STOP", show=False, priority=True),
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("x", "abort", "Abort (safe pose, torque off)"),
        Binding("a", "toggle_auto_accept", "Auto-accept judge"),
        Binding("q", "quit_when_done", "Quit", show=False),
    ]

    def __init__(self, engine: RunEngine, guard: Any, check: CheckReport, state: RunState,
                 undo_s: float = 3.0, auto_accept: bool = False) -> None:
        super().__init__()
        self.engine = engine
        self.guard = guard
        self.check = check
        self.state = state
        self.undo_s = undo_s
        self.auto_accept = auto_accept
        self.observer = TuiObserver(self)
        engine.observer = self.observer
        self.exit_code = 0
        self.finished = False
        self._engine_thread: threading.Thread | None = None

    def on_mount(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._ui_context = contextvars.copy_context()  # Textual's active-app context, for queued calls
        self.push_screen(CheckScreen(self.check), self._after_check)

    def post_to_ui(self, callback: Any, *args: Any, **kwargs: Any) -> None:
        """Queue a call on the UI thread without waiting for it: the engine never blocks on drawing,
        and a closing app cannot deadlock the engine thread."""
        if self.observer.closing.is_set():
            return
        self._loop.call_soon_threadsafe(functools.partial(callback, *args, **kwargs), context=self._ui_context)

    def _after_check(self, start: bool | None) -> None:
        if not start:
            self.exit(0)
            return
        self.run_screen = RunScreen()
        self.push_screen(self.run_screen)
        self.call_after_refresh(self.run_screen.show, self.state)
        self._engine_thread = threading.Thread(target=self._run_engine, name="harness-engine")
        self._engine_thread.start()

    # --- engine thread -------------------------------------------------------
    def _run_engine(self) -> None:
        code, banner = 0, None
        try:
            self.engine.run()
            if self.observer.abort.is_set() and not self.guard.stopped:
                self.post_to_ui(self.update_state, phase="moving to start pose")
                self.engine.move_to(self.engine.protocol.start_pose, self.engine.options.start_pose_s)
                banner = "Aborted: arm at the start pose, torque released. Resume later with --resume."
                code = 3
        except RunPaused as paused:
            banner, code = f"Run paused: {paused}. Fix the cause, then run again with --resume.", 3
        except Exception as exc:
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            banner, code = f"Error: {type(exc).__name__}: {first_line[:120]}. Torque released; resume with --resume.", 1
        finally:
            self.guard.release_torque()
            if self.guard.world is not None:
                self.guard.world.release_renderers()  # GL contexts belong to this thread
        self.exit_code = code
        self.post_to_ui(self._finish, banner)

    # --- UI thread ---------------------------------------------------------
    def update_state(self, **changes: Any) -> None:
        self.state = replace(self.state, **changes)
        if getattr(self, "run_screen", None) is not None and self.run_screen.is_mounted:
            self.run_screen.show(self.state)

    def record_score(self, label: str, shown: str, preview: np.ndarray | None) -> None:
        self.update_state(tally=self.state.tally.add(label), last_label=shown,
                          preview=preview if preview is not None else self.state.preview)

    def _finish(self, banner: str | None) -> None:
        self.finished = True
        done = banner or f"Run complete. Press q to quit. Report: harness report {self.engine.sheet.path}"
        self.update_state(phase="done", banner=done)

    def action_emergency_stop(self) -> None:
        # The guard refuses the engine's next motion command, which voids the trial in flight and
        # pauses the run; torque goes off here, now.
        self.guard.emergency_stop()
        self.update_state(banner="EMERGENCY STOP: torque released. The run will not move the arm again.")

    def action_toggle_pause(self) -> None:
        if self.observer.pause.is_set():
            self.observer.resume()
            self.update_state(pause_requested=False)
        else:
            self.observer._resume.clear()
            self.observer.pause.set()
            self.update_state(pause_requested=True)

    def action_abort(self) -> None:
        self.observer.abort.set()
        self.update_state(banner="Aborting: the trial in flight is voided, then the arm returns to its start pose.")

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
        self.observer.abort.set()
        self.observer.closing.set()
        self.observer.resume()
        thread = getattr(self, "_engine_thread", None)
        if thread is not None:
            thread.join(timeout=30)
