"""Plain terminal mode: one line per trial, and typed scores on a real arm."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from harness.models.protocol import Trial
from harness.models.scoresheet import Attempt
from harness.run.engine import ScoreDecision

KEYS = {"s": "success", "n": "no_grasp", "d": "grasped_then_dropped", "w": "wrong_placement", "v": "void"}


class TerminalObserver:
    def __init__(self, operator_scores: bool, out: TextIO | None = None, stdin: TextIO | None = None) -> None:
        self.operator_scores = operator_scores
        self.out = out or sys.stdout
        self.stdin = stdin or sys.stdin
        self._line = ""

    def trial_started(self, trial: Trial, attempt: int, done: int, total: int) -> None:
        again = f" attempt {attempt}" if attempt > 1 else ""
        self._line = (f"[{done + 1:>3}/{total}] trial {trial.index:>3}{again}: cube at "
                      f"dx {trial.dx_cm:+5.1f} dy {trial.dy_cm:+5.1f} cm yaw {trial.yaw_deg:+4.0f} deg")

    def phase(self, name: str) -> None:
        return None

    def step(self, step: int, timing: dict[str, float]) -> None:
        return None

    def warn(self, message: str) -> None:
        print(f"warning: {message}", file=self.out, flush=True)

    def confirm_cube_placed(self, trial: Trial) -> None:
        print(f"Place the cube at dx {trial.dx_cm:+.1f} cm, dy {trial.dy_cm:+.1f} cm, yaw {trial.yaw_deg:+.0f} deg "
              "from the trained position, then press Enter.", file=self.out, flush=True)
        self.stdin.readline()

    def score(self, trial: Trial, verdict: dict[str, Any] | None, void_reason: str | None) -> ScoreDecision:
        if void_reason:
            return ScoreDecision("void", void_reason=void_reason)
        if verdict is not None and not self.operator_scores:
            return ScoreDecision(verdict["label"])
        prompt = "Score: [s]uccess, [n]o-grasp, grasped-then-[d]ropped, [w]rong-placement, [v]oid > "
        while True:
            print(prompt, end="", file=self.out, flush=True)
            key = self.stdin.readline().strip().lower()[:1]
            if key in KEYS:
                break
        label = KEYS[key]
        reason = None
        if label == "void":
            print("Reason for the void > ", end="", file=self.out, flush=True)
            reason = self.stdin.readline().strip() or "voided by operator"
        print("Note (optional) > ", end="", file=self.out, flush=True)
        note = self.stdin.readline().strip() or None
        return ScoreDecision(label, void_reason=reason, note=note)

    def trial_scored(self, attempt: Attempt) -> None:
        label = attempt.label if attempt.outcome != "void" else f"void ({attempt.void_reason})"
        extra = f", placement {attempt.placement_error_cm:.2f} cm" if attempt.placement_error_cm is not None else ""
        clean = ""
        if attempt.judge and attempt.judge.get("clean_release") is False:
            clean = ", release not clean"
        print(f"{self._line} -> {label}{extra}{clean} [{attempt.loop.steps} steps]", file=self.out, flush=True)

    def stop_requested(self) -> bool:
        return False

    def wait_if_paused(self) -> bool:
        return True

