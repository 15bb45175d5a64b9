"""Small widgets of the run screen; each draws one part of a RunState."""

from __future__ import annotations

import numpy as np
from PIL import Image
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from harness.models.taxonomy import Label
from harness.tui.state import RunState

PHASE_STYLE = {
    "running": "bold green", "scoring": "bold yellow", "paused": "bold magenta",
    "moving to start pose": "cyan", "placing cube": "bold cyan", "done": "bold",
}


def label_style(label: Label | None) -> str:
    """A taxonomy label's colour (`bold` when there is none)."""
    return label.colour if label is not None else "bold"


class TextLine(Static):
    """A line of text redrawn only when it changes: the run screen is shown again with every reading of the
    placement guide, and an unchanged line redrawn behind a dialog repaints the whole terminal."""

    _text: Text | None = None

    def show_text(self, text: Text) -> None:
        if text != self._text:
            self._text = text
            self.update(text)


class TrialHeader(TextLine):
    def show(self, s: RunState) -> None:
        text = Text()
        text.append(f" Trial {s.position}/{s.total} ", style="bold reverse")
        if s.trial_index is not None:
            again = f" (attempt {s.attempt})" if s.attempt > 1 else ""
            text.append(f"  #{s.trial_index}{again}  ")
        phase = "paused" if s.paused else s.phase
        text.append(phase.upper(), style=PHASE_STYLE.get(phase, "bold"))
        if s.phase == "running":
            text.append(f"  {s.elapsed_s:4.1f} / {s.time_limit_s:.0f} s")
        if s.pause_requested and not s.paused:
            text.append("  (pausing after this trial)", style="magenta")
        text.append(f"   {s.policy} on {s.robot}", style="dim")
        self.show_text(text)


class CubePlacement(Static):
    """The offset in words and a top view: robot's far side up, robot's left on the left."""

    HEIGHT = 9

    @property
    def diagram_width(self) -> int:
        return max(16, min(40, self.content_size.width or 30))

    def show(self, s: RunState) -> None:
        text = Text()
        text.append("Cube: ", style="bold")
        text.append(f"{s.dx_cm:+.1f} cm away, {abs(s.dy_cm):.1f} cm {'left' if s.dy_cm >= 0 else 'right'}",
                    style="bold cyan")
        text.append(f", yaw {s.yaw_deg:+.0f} deg\n" if s.yaw_deg else "\n")
        text.append("from the trained position (+)\n", style="dim")
        text.append_text(self._diagram(s))
        self.update(text)

    def _diagram(self, s: RunState) -> Text:
        bowl = (s.bowl_xy_cm[0] - s.trained_xy_cm[0], s.bowl_xy_cm[1] - s.trained_xy_cm[1])
        points = [(0.0, 0.0), (s.dx_cm, s.dy_cm), bowl]
        cols = [-p[1] for p in points]
        rows = [p[0] for p in points]
        r = s.bowl_diameter_cm / 2
        left, right = min(cols) - r - 1, max(cols) + 2
        bottom, top = min(rows) - r - 1, max(rows) + 2
        width = self.diagram_width
        sx = (width - 1) / max(right - left, 1e-6)
        sy = (self.HEIGHT - 1) / max(top - bottom, 1e-6)
        grid = [[" "] * width for _ in range(self.HEIGHT)]
        styles: dict[tuple[int, int], str] = {}

        def put(x_cm: float, y_cm: float, char: str, style: str) -> None:
            c = round((-y_cm - left) * sx)
            row = round((top - x_cm) * sy)
            if 0 <= c < width and 0 <= row < self.HEIGHT:
                grid[row][c] = char
                styles[(row, c)] = style

        for i in range(24):
            angle = 2 * np.pi * i / 24
            put(bowl[0] + r * np.sin(angle), bowl[1] + r * np.cos(angle), "o", "blue")
        put(0.0, 0.0, "+", "bold white")
        put(s.dx_cm, s.dy_cm, "■", "bold red")
        text = Text()
        for row in range(self.HEIGHT):
            for col in range(width):
                text.append(grid[row][col], style=styles.get((row, col), "grey30"))
            text.append("\n")
        text.append("robot", style="dim")
        return text


class LoopPanel(Static):
    def show(self, s: RunState) -> None:
        budget = 1000 / s.fps if s.fps else 0
        table = Table.grid(padding=(0, 1))
        table.add_column(style="bold")
        table.add_column()
        if s.timing_withheld:   # a slower policy would name its arm
            table.add_row("Timing", Text("withheld while the comparison is blind", style="dim"))
            self.update(table)
            return
        rate_style = "green" if s.loop_hz >= 0.95 * s.fps or s.pace == "lock-step" else "red"
        pace = f" {s.pace}" if s.pace else ""
        table.add_row("Loop", Text(f"{s.loop_hz:5.1f}/{s.fps} Hz{pace}", style=rate_style))
        latency_style = "green" if s.policy_ms <= budget else "red"
        table.add_row("Policy", Text(f"{s.policy_ms:5.1f} ms (budget {budget:.1f})", style=latency_style))
        table.add_row("Missed", Text(f"{s.missed} deadlines", style="red" if s.missed else "green"))
        self.update(table)


class TallyPanel(Static):
    def show(self, s: RunState) -> None:
        t = s.tally
        text = Text()
        if t.scored:
            low, high = t.wilson()
            text.append(f"Success {t.success}/{t.scored} = {100 * t.success / t.scored:.0f}%\n", style="bold green")
            text.append(f"95% CI {100 * low:.0f}-{100 * high:.0f}%\n", style="green")
        else:
            text.append("No trials scored yet\n", style="dim")
        for mode, count in t.failures.items():
            text.append(f"{mode:<21}{count:>3}\n", style=label_style(mode) if count else "dim")
        text.append(f"{'void (retried)':<21}{t.voids:>3}\n", style="grey62")
        if s.last_label:
            text.append("last: ", style="dim")
            text.append(s.last_label, style=label_style(s.last_outcome))
        if s.last_graded:   # a graded comparison's primary outcome, for the last trial
            text.append("\n" + s.last_graded, style="cyan")
        if s.undo_trial is not None:
            text.append(f"\nu re-scores trial #{s.undo_trial} until the next trial starts", style="yellow")
        if s.last_anatomy:
            text.append("\n" + ("STALLED: " if s.last_stalled else ""), style="bold red")
            text.append(s.last_anatomy, style="red" if s.last_stalled else "dim")
        self.update(text)


class FramePreview(Static):
    """The last final top frame, drawn with half blocks (two pixel rows per character)."""

    def show(self, s: RunState) -> None:
        if s.preview is None:
            self.update(Text("(final frame appears\n after the first trial)", style="dim"))
            return
        cols = max(8, min(44, self.content_size.width or 28))
        rows = max(4, round(cols * s.preview.shape[0] / s.preview.shape[1] / 2))
        image = Image.fromarray(s.preview).resize((cols, rows * 2))
        pixels = np.asarray(image)
        text = Text("last final frame (top)\n", style="dim")
        for row in range(rows):
            for col in range(cols):
                top, bottom = pixels[2 * row, col], pixels[2 * row + 1, col]
                text.append("▀", style=f"rgb({top[0]},{top[1]},{top[2]}) on rgb({bottom[0]},{bottom[1]},{bottom[2]})")
            text.append("\n")
        self.update(text)


class Banner(TextLine):
    def show(self, s: RunState) -> None:
        self.display = bool(s.banner)
        if s.banner:
            self.show_text(Text(f" {s.banner} ", style="bold white on red"))
