"""The person at the rehearsal's desk: plain mode's operator, with the emulator's table for hands.

A rehearsal runs `harness run`'s own plain-mode operator (`TerminalObserver`): the same prompts, the
same placement guide lines, the same scoring prompt with the proposal that Enter confirms. Only the
hands differ. `ConsoleOperator` lets a person type the emulator's console commands (`cube DX DY YAW`,
`status`, `camera top dropout`, ...) at any prompt, in the one terminal the rehearsal runs in.
`ScriptedOperator` (for CI) moves the cube in the simulator as a careful person would: to the trial's
target (optionally a little off), then by what the guide's reading says is left, and confirms each
proposal with Enter. Its decisions ride on the guide's typed reading, never on printed text.
"""

from __future__ import annotations

import io
import math
import random
import shlex
import sys
from typing import Any, Protocol, TextIO

from harness.emulator.scenario import COMMANDS, HELP
from harness.errors import HarnessError
from harness.models.protocol import Trial
from harness.models.taxonomy import Void
from harness.models.verdict import JudgeVerdict
from harness.run.engine import ScoreDecision
from harness.run.operator_trial import describe
from harness.run.placement_guide import PlacementReading
from harness.run.terminal import TerminalObserver

CONFIRMED_NOTE = "rehearsal: the scripted operator confirmed the proposal"
OFF_TABLE_CM = (80.0, 80.0)   # an offset from the trained spot that puts the cube out of the top camera's view


class Desk(Protocol):
    """The emulated desk the operator's hands act on: `emulator.scenario.Rig` in this process, or
    `emulator.remote_rig.RemoteRig` (the emulated arm in its own process, as `harness rehearse` runs it)."""

    def place_cube(self, dx_cm: float, dy_cm: float, yaw_deg: float = 0.0, seed: int = 0) -> None: ...

    def command(self, line: str) -> list[str] | None: ...


class _Keyboard:
    """The scripted operator's keyboard (a `run.terminal.LineSource`): the answers queued for the next prompts
    (typed, so shown), then Enter (no override, nothing to add). It has no file number, so plain mode's "is a
    line waiting" check finds one at once."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.queued: list[str] = []

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a scripted keyboard has no file number")

    def readline(self) -> str:
        if not self.queued:
            return "\n"
        answer = self.queued.pop(0)
        print(answer or "[Enter]", file=self.out, flush=True)
        return answer + "\n"


class ScriptedOperator(TerminalObserver):
    """Places the cube through the emulator (`Desk.place_cube`) and answers plain mode's prompts with Enter."""

    def __init__(self, rig: Desk, error_cm: float = 0.0, seed: int = 0, out: TextIO | None = None,
                 settle_readings: int = 3, max_corrections: int = 8) -> None:
        self.keys = _Keyboard(out or sys.stdout)
        super().__init__(operator_scores=True, out=out, stdin=self.keys)
        self.rig = rig
        self.error_cm = error_cm
        self.rng = random.Random(seed)
        self.settle_readings = settle_readings    # guide readings to let pass after a move (frames in flight)
        self.max_corrections = max_corrections
        self._placed: tuple[float, float, float] | None = None   # where the cube was put (dx, dy, yaw)
        self._settling = 0
        self._corrections = 0

    def trial_started(self, trial: Trial, attempt: int, done: int, total: int) -> None:
        self._placed, self._settling, self._corrections = None, 0, 0
        super().trial_started(trial, attempt, done, total)

    def _put(self, dx: float, dy: float, yaw: float, why: str) -> None:
        self._placed = (dx, dy, yaw)
        self._settling = self.settle_readings
        self.rig.place_cube(dx, dy, yaw)
        print(f"  operator ({why}): cube {dx:.2f} {dy:.2f} {yaw:.1f}", file=self.out, flush=True)

    def placement(self, trial: Trial, reading: PlacementReading, frame: Any) -> str | None:
        if self._placed is None:
            angle = self.rng.uniform(0.0, 2 * math.pi)
            self._put(trial.dx_cm + self.error_cm * math.cos(angle), trial.dy_cm + self.error_cm * math.sin(angle),
                      trial.yaw_deg, "placed by eye")
        elif self._settling:
            self._settling -= 1
        elif not reading.within:
            if self._corrections >= self.max_corrections:
                return f"scripted operator: not within tolerance after {self._corrections} corrections"
            self._corrections += 1
            dx, dy, yaw = self._placed
            if reading.measured_dxy_cm is None or reading.measured_yaw_deg is None:   # not seen: place it afresh
                self._put(trial.dx_cm, trial.dy_cm, trial.yaw_deg, "placed again, the guide did not see it")
            else:
                mx, my = reading.measured_dxy_cm
                turn = (reading.target_yaw_deg - reading.measured_yaw_deg + 45.0) % 90.0 - 45.0
                self._put(dx + trial.dx_cm - mx, dy + trial.dy_cm - my, yaw + turn, "corrected from the guide")
        return super().placement(trial, reading, frame)

    def unexpected(self, trial: Trial, objects: list[Any], frame: Any) -> str | None:
        print(f"  operator: accepting what is in view: {describe(objects)}", file=self.out, flush=True)
        return f"scripted operator accepted: {describe(objects)}"

    def clear_for_reference(self) -> None:
        self.rig.place_cube(*OFF_TABLE_CM)
        super().clear_for_reference()

    def score(self, trial: Trial, verdict: JudgeVerdict | None, void: Void | None) -> ScoreDecision:
        if void is None and self._proposal is None:   # Enter alone scores nothing: plain mode would ask forever
            raise HarnessError(f"scripted operator: trial {trial.index} has no proposal to confirm")
        self.keys.queued = ["", CONFIRMED_NOTE]   # Enter confirms the proposal; the note says who did
        try:
            return super().score(trial, verdict, void)
        finally:
            self.keys.queued = []


class _ConsoleInput:
    """The rehearsal's terminal: a line that is an emulator console command is carried out on the rig (and its
    answer printed); any other line goes to the prompt that asked. While the placement guide is live, a
    console command also ends the guide's wait for a line, so the guide measures the cube just moved."""

    def __init__(self, stdin: TextIO, rig: Desk, out: TextIO) -> None:
        self.stdin = stdin
        self.rig = rig
        self.out = out
        self.guiding = False

    def fileno(self) -> int:
        return self.stdin.fileno()

    def readline(self) -> str:
        while True:
            line = self.stdin.readline()
            try:
                words = shlex.split(line)
            except ValueError:
                return line
            if not words or words[0] not in COMMANDS:
                return line
            for answer in self.rig.command(line) or []:
                print(f"  emulator: {answer}", file=self.out, flush=True)
            if self.guiding:
                return "\n"


class ConsoleOperator(TerminalObserver):
    """A person at the terminal: plain mode's prompts, with the emulator's console commands typed in between."""

    def __init__(self, rig: Desk, stdin: TextIO | None = None, out: TextIO | None = None) -> None:
        out = out or sys.stdout
        self.console = _ConsoleInput(stdin or sys.stdin, rig, out)
        super().__init__(operator_scores=True, out=out, stdin=self.console)   # type: ignore[arg-type]

    def placement(self, trial: Trial, reading: PlacementReading, frame: Any) -> str | None:
        self.console.guiding = True
        try:
            return super().placement(trial, reading, frame)
        finally:
            self.console.guiding = False


CONSOLE_HINT = ("You are the operator: at any prompt you may type the emulator's console commands, e.g. "
                "`cube DX_CM DY_CM YAW_DEG` to move the cube.\n" + HELP)
