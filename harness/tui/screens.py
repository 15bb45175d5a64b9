"""The check screen, the run screen and the prompts (scoring, void reason, note, cube placed)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static

from harness.models.locked import LockedBlock
from harness.models.taxonomy import SCORE_KEYS, Label, Void, VoidKind
from harness.run.engine import ScoreDecision
from harness.tui.placement import LiveCamera, PlacementPanel, placement_active
from harness.tui.state import RunState
from harness.tui.widgets import Banner, CubePlacement, FramePreview, LoopPanel, TallyPanel, TrialHeader, label_style


class PolicyLoading(Protocol):
    """What the check screen reads of a policy loading in the background (`policies.background.BackgroundPolicy`)."""

    @property
    def name(self) -> str: ...
    @property
    def loaded(self) -> bool: ...
    @property
    def error(self) -> BaseException | None: ...
    started: float
    load_s: float | None
    warm_up_ms: float | None


@dataclass(frozen=True)
class CheckReport:
    """What the check screen shows: gathered before anything moves."""

    robot: str
    cameras: list[tuple[str, float | None]]   # name, measured frames/s (None: not delivering)
    policy: str
    policy_warmup_ms: float | None
    locked: LockedBlock
    scored: int
    voids: int
    scoresheet: str
    warnings: tuple[str, ...] = ()    # the robot's connect checks that did not pass (one line each)
    loading: PolicyLoading | None = None   # a policy still loading: its row follows it until it has

    @property
    def ok(self) -> bool:
        return all(fps for _, fps in self.cameras)


class CheckScreen(Screen[bool]):
    BINDINGS = [Binding("enter", "start", "Start the run"), Binding("q", "quit_run", "Quit")]

    def __init__(self, report: CheckReport) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        yield Static(self._render_report(), id="check")
        yield Footer()

    def on_mount(self) -> None:
        if self.report.loading is not None:
            self._loading_timer: Timer | None = self.set_interval(0.5, self._follow_loading)

    def _follow_loading(self) -> None:
        """Redraw the policy's row while it loads; stop once it has (loaded or failed)."""
        self.query_one("#check", Static).update(self._render_report())
        loading = self.report.loading
        if loading is not None and loading.loaded and self._loading_timer is not None:
            self._loading_timer.stop()
            self._loading_timer = None

    def _policy_row(self, ok: Text, bad: Text) -> Text:
        r = self.report
        loading = r.loading
        if loading is None:
            warm = f", warm-up inference {r.policy_warmup_ms:.1f} ms" if r.policy_warmup_ms is not None else ""
            return ok + Text(f"{r.policy}{warm}")
        if not loading.loaded:
            return Text("... ", style="bold yellow") + Text(f"{loading.name}: loading "
                                                             f"({time.perf_counter() - loading.started:.0f} s); "
                                                             "Enter now and the first trial waits for it")
        if loading.error is not None:
            first = (str(loading.error).strip().splitlines() or [type(loading.error).__name__])[0]
            return bad + Text(f"{loading.name}: {first[:160]}")
        warm = f", warm-up inference {loading.warm_up_ms:.1f} ms" if loading.warm_up_ms is not None else ""
        return ok + Text(f"{loading.name}, loaded in {loading.load_s or 0.0:.1f} s{warm}")

    def _render_report(self) -> Table:
        r = self.report
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        ok, bad = Text("OK ", style="bold green"), Text("NO ", style="bold red")
        table.add_row("Robot", ok + Text(r.robot))
        for warning in r.warnings:
            table.add_row("", Text("WARNING ", style="bold yellow") + Text(warning))
        for name, fps in r.cameras:
            table.add_row(f"Camera {name}", (ok + Text(f"live, {fps:.1f} frames/s")) if fps else (bad + "no frames"))
        if not r.cameras:
            table.add_row("Cameras", Text("none used by this policy (evidence frames come from the simulator)",
                                          style="dim"))
        table.add_row("Policy", self._policy_row(ok, bad))
        locked = r.locked
        table.add_row("", "")
        table.add_row("Scoresheet", Text(r.scoresheet + "  (locked)", style="bold"))
        table.add_row("Task", locked.task)
        table.add_row("Success means", locked.success_definition)
        table.add_row("Taxonomy", ", ".join(locked.taxonomy))
        table.add_row("Trials", f"{locked.trial_count} planned, {r.scored} scored, {r.voids} voided")
        table.add_row("Protocol", f"{locked.protocol_file}  sha256 {locked.protocol_sha256[:12]}")
        table.add_row("Policy id", locked.policy.fingerprint[:40])
        table.add_row("", "")
        table.add_row("", Text("Nothing moves until you press Enter.", style="bold yellow"))
        return table

    def action_start(self) -> None:
        self.dismiss(True)

    def action_quit_run(self) -> None:
        self.dismiss(False)


class RunScreen(Screen[None]):
    def compose(self) -> ComposeResult:
        yield Banner(id="banner")
        yield TrialHeader(id="header")
        with Horizontal(id="placement"):   # shown instead of the body while the operator places the cube
            yield LiveCamera(id="live")
            yield PlacementPanel(id="guide")
        with Horizontal(id="body"):
            yield CubePlacement(id="cube")
            with Vertical(id="middle"):
                yield LoopPanel(id="loop")
                yield TallyPanel(id="tally")
            yield FramePreview(id="preview")
        yield Footer()

    _shown: RunState | None = None

    def show(self, state: RunState) -> None:
        self._shown = state
        placing = placement_active(state)
        self.query_one("#placement").display = placing
        self.query_one("#body").display = not placing
        shown: tuple[tuple[str, Any], ...]
        if not placing:
            shown = (("cube", CubePlacement), ("loop", LoopPanel), ("tally", TallyPanel), ("preview", FramePreview))
        elif self.app.screen is self:   # a few times a second: only these
            shown = (("live", LiveCamera), ("guide", PlacementPanel))
        else:
            # Behind a dialog (a note typed over the placement view) the live camera waits: a frame drawn behind a
            # modal screen repaints the whole terminal, dimmed, 0.12 s of CPU a frame (issue 38).
            shown = ()
        for widget_id, cls in (("banner", Banner), ("header", TrialHeader), *shown):
            self.query_one(f"#{widget_id}", cls).show(state)

    def on_screen_resume(self) -> None:
        """The dialog closed: the live camera catches up with the latest reading."""
        if self._shown is not None:
            self.show(self._shown)


@dataclass(frozen=True)
class Suggestion:
    """The label a scoring screen offers as its default, and why: the simulator judge's verdict, or the label
    proposed from a real arm's evidence."""

    label: Label
    detail: str


class ScoreScreen(ModalScreen[ScoreDecision]):
    """Score keys, the judge's verdict as the default in sim, a note, and an undo window."""

    BINDINGS = [
        *(Binding(key, f"choose('{label.value}')", label.display, show=True) for key, label in SCORE_KEYS.items()),
        Binding("enter", "accept_default", "Accept verdict"),
        Binding("o", "note", "Note"),
        Binding("u", "undo", "Undo"),
        Binding("escape", "keep", "Keep the recorded score"),
        Binding("space", "app.emergency_stop", "E-STOP"),   # a modal screen would otherwise keep it from the app
    ]

    def __init__(self, trial_text: str, verdict: Suggestion | None, undo_s: float,
                 auto_accept: bool = False, source: str = "Simulator judge", reopened: bool = False) -> None:
        """`reopened`: scoring an already recorded attempt again (the operator's undo); Escape keeps its score."""
        super().__init__()
        self.reopened = reopened
        self.trial_text = trial_text
        self.verdict = verdict
        self.source = source   # who gave the default: the simulator's judge, or a real arm's evidence
        self.undo_s = undo_s
        self.auto_accept = auto_accept
        self.note: str | None = None
        self.pending: ScoreDecision | None = None
        self._left = 0.0
        self._timers_running: list[Timer] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="score-box"):
            yield Static(id="score-text")
        yield Footer()

    def on_mount(self) -> None:
        self._draw()
        if self.auto_accept and self.verdict is not None:
            self.action_accept_default()

    def _draw(self) -> None:
        text = Text(f"Score {self.trial_text}\n\n", style="bold")
        if self.verdict is not None:
            text.append(f"{self.source}: ", style="bold")
            text.append(self.verdict.label.value, style=label_style(self.verdict.label))
            text.append(f"  ({self.verdict.detail})\n", style="dim")
            text.append("Enter accepts it; a key below overrides it.\n\n")
        for i, (key, label) in enumerate(SCORE_KEYS.items()):
            text.append(f" {key} ", style="bold reverse")
            text.append(f" {label.display}  ", style=label.colour)
            if i == 2:
                text.append("\n")
        text.append("\n o ", style="bold reverse")
        text.append(" note   ")
        text.append(" u ", style="bold reverse")
        text.append(" undo   ")
        text.append(" space ", style="bold reverse")
        text.append(" emergency stop\n", style="bold red")
        if self.note:
            text.append(f"\nNote: {self.note}\n", style="italic")
        if self.pending is not None:
            text.append(f"\nRecording {self.pending.label}", style="bold")
            if self.pending.void_reason:
                text.append(f" ({self.pending.void_reason})")
            text.append(f" in {self._left:.0f} s - press u to undo", style="bold yellow")
        self.query_one("#score-text", Static).update(text)

    def action_choose(self, value: str) -> None:
        label = Label(value)   # the binding's argument: a label's value, never display text
        said = f"{self.source} said {self.verdict.label.value}" if self.verdict is not None else ""
        overriding = self.verdict is not None and label is not self.verdict.label
        if label is Label.VOID:
            self._ask("Why is this trial void? (e.g. camera dropout, cube bumped)"
                      + (f" {said}: a reason is needed." if overriding else ""), overriding,
                      lambda reason: self._stage(ScoreDecision(Label.VOID,
                                                               Void(VoidKind.OPERATOR_VOID, reason or None))))
        elif overriding and not self.note:
            def noted(note: str) -> None:
                self.note = note
                self._stage(ScoreDecision(label))

            self._ask(f"{said}; you score {label.display}. Why? (a note is needed to override; "
                      "Escape goes back)", True, noted)
        else:
            self._stage(ScoreDecision(label))

    def _ask(self, question: str, needed: bool, then: Callable[[str], None]) -> None:
        """Overriding the judge (or a real arm's proposal) takes a note saying why, as plain mode asks: the
        scoresheet then shows who disagreed with the evidence and on what grounds. An empty answer where one is
        `needed` asks again; Escape goes back to the score keys with nothing recorded."""
        def answered(text: str | None) -> None:
            if text is None:
                return
            if needed and not text:
                self._ask(question if question.startswith("A note is needed") else
                          f"A note is needed to override. {question}", needed, then)
                return
            then(text)

        self.app.push_screen(TextPrompt(question), answered)

    def action_accept_default(self) -> None:
        if self.verdict is not None:
            self._stage(ScoreDecision(self.verdict.label))

    def action_note(self) -> None:
        self.app.push_screen(TextPrompt("Note for this trial:"), self._set_note)

    def _set_note(self, note: str | None) -> None:
        self.note = note or None
        self._draw()

    def _stage(self, decision: ScoreDecision) -> None:
        """Hold the score for the undo window, then commit it."""
        self.pending = decision
        self._left = self.undo_s
        self._draw()
        if self.undo_s <= 0:
            self._commit()
        else:
            self._timers_running = [self.set_timer(self.undo_s, self._commit, name="commit"),
                                    self.set_interval(1.0, self._tick, name="tick")]

    def _tick(self) -> None:
        self._left = max(0.0, self._left - 1.0)
        self._draw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.reopened if action == "keep" else True

    def action_keep(self) -> None:
        if self.reopened:
            self.dismiss(None)

    def action_undo(self) -> None:
        self.pending = None
        for timer in self._timers_running:
            timer.stop()
        self._timers_running = []
        self._draw()

    def _commit(self) -> None:
        if self.pending is not None:
            decision = ScoreDecision(self.pending.label, self.pending.void, self.note)
            self.pending = None
            self.dismiss(decision)


class TextPrompt(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Static(self.question)
            yield Input(id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class PlaceCubeScreen(ModalScreen[bool]):
    BINDINGS = [Binding("enter", "placed", "Cube placed"), Binding("space", "app.emergency_stop", "E-STOP"),
                Binding("u", "app.undo_last", "Re-score the last trial")]

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Static(Text(self.message, style="bold cyan"))
        yield Footer()

    def action_placed(self) -> None:
        self.dismiss(True)


class ClearTableScreen(PlaceCubeScreen):
    """Before the first guided trial: the table cleared for the empty-scene reference. Drawn on a plain background,
    not over a dimmed run screen: blending every cell of the screen below was a third of its first drawing (70 ms
    of the UI thread's CPU against 48), between the arm reaching its start pose and this prompt (issue 40)."""

    DEFAULT_CSS = "ClearTableScreen { background: $background; }"
    BINDINGS = [Binding("enter", "placed", "Table is clear")]

