"""`harness score`'s labelling screen: each recorded episode's video playing beside its proposal and anatomy.

Why a screen of its own: the run TUI scores a trial as it ends; here the episodes were recorded earlier, and the
operator labels each from its video, which loops on the left (the top camera's frames, drawn with half blocks as
the run TUI draws its final frame). Enter accepts the proposal, `s n d w v` give a label, `q` stops: the labels
given so far are written (by the caller's `record`, before the next episode shows) and a later `harness score`
resumes at the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Static

from harness.models.taxonomy import SCORE_KEYS, Label

PLAY_FPS = 6.0


@dataclass(frozen=True)
class EpisodeView:
    """What the screen shows of one episode; `frames` are its top camera's frames (possibly none)."""

    index: int
    title: str
    proposal: Label
    proposal_line: str
    anatomy: str
    frames: Callable[[], Sequence[np.ndarray]]


def half_blocks(frame: np.ndarray, cols: int) -> Text:
    """A frame as half-block characters `cols` wide (two pixel rows per character)."""
    rows = max(4, round(cols * frame.shape[0] / frame.shape[1] / 2))
    pixels = np.asarray(Image.fromarray(frame).resize((cols, rows * 2)))
    text = Text()
    for row in range(rows):
        for col in range(cols):
            top, bottom = pixels[2 * row, col], pixels[2 * row + 1, col]
            text.append("▀", style=f"rgb({top[0]},{top[1]},{top[2]}) on rgb({bottom[0]},{bottom[1]},{bottom[2]})")
        text.append("\n")
    return text


class ScoreDatasetApp(App[None]):
    """One episode at a time; `record(index, label)` is called for each label before the next episode shows."""

    CSS = "#video { width: 46; } #about { padding: 0 1; }"
    BINDINGS = [
        *(Binding(key, f"choose('{label.value}')", label.display) for key, label in SCORE_KEYS.items()),
        Binding("enter", "accept", "Accept proposal"),
        Binding("q", "quit", "Stop (resumable)"),
    ]

    def __init__(self, episodes: Sequence[EpisodeView], record: Callable[[int, Label], None],
                 header: str) -> None:
        super().__init__()
        self.episodes = list(episodes)
        self.record = record
        self.header = header
        self.position = 0
        self.labelled: list[tuple[int, Label]] = []
        self._frames: Sequence[np.ndarray] = ()
        self._tick = 0

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static(id="video")
            yield Static(id="about")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(1.0 / PLAY_FPS, self._play)
        self._show()

    def _show(self) -> None:
        if self.position >= len(self.episodes):
            self.exit()
            return
        episode = self.episodes[self.position]
        self._frames, self._tick = episode.frames(), 0
        about = Text(self.header + "\n\n", style="bold")
        about.append(f"{episode.title}\n\n")
        about.append(episode.proposal_line + "\n", style=episode.proposal.colour)
        about.append(episode.anatomy + "\n\n", style="dim")
        about.append("Enter accepts the proposal; " + ", ".join(f"{k} {label.display}" for k, label in
                                                                SCORE_KEYS.items()), style="dim")
        self.query_one("#about", Static).update(about)
        self._play()

    def _play(self) -> None:
        video = self.query_one("#video", Static)
        if not self._frames:
            video.update(Text("(no top camera video in the dataset)", style="dim"))
            return
        frame = self._frames[self._tick % len(self._frames)]
        self._tick += 1
        video.update(half_blocks(frame, 44))

    def action_choose(self, value: str) -> None:
        self._label(Label(value))

    def action_accept(self) -> None:
        if self.position < len(self.episodes):
            self._label(self.episodes[self.position].proposal)

    def _label(self, label: Label) -> None:
        if self.position >= len(self.episodes):
            return
        episode = self.episodes[self.position]
        self.record(episode.index, label)
        self.labelled.append((episode.index, label))
        self.position += 1
        self._show()
