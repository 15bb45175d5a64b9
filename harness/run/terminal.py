"""Plain terminal mode: one line per trial, typed scores on a real arm, and Ctrl+C as the stop key."""

from __future__ import annotations

import io
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, Protocol, TextIO

from harness.errors import EmergencyStopped
from harness.models.protocol import Trial
from harness.models.sheet_records import Attempt
from harness.models.taxonomy import SCORE_KEYS, Label, Void, VoidKind
from harness.models.verdict import JudgeVerdict
from harness.run.engine import ScoreDecision

BREAK = getattr(signal, "SIGBREAK", None)   # Windows' Ctrl+Break; absent elsewhere
PROMPT = "Score: " + ", ".join(f"[{label.key}] {label.display}" for label in Label) + " > "


class LineSource(Protocol):
    """Where the operator's typed lines come from: the terminal (`sys.stdin`), or a scripted keyboard (a
    rehearsal's operator, tests) whose `fileno` may raise, which `line_waiting` reads as a line waiting."""

    def readline(self) -> str: ...

    def isatty(self) -> bool: ...

    def fileno(self) -> int: ...


class TerminalObserver:
    def __init__(self, operator_scores: bool, out: TextIO | None = None, stdin: LineSource | None = None,
                 timing_withheld: bool = False) -> None:
        self.operator_scores = operator_scores
        # a blind comparison's run: no wall time per trial and no estimate from them (a slower arm names itself)
        self.timing_withheld = timing_withheld
        self.out = out or sys.stdout
        self.stdin = stdin or sys.stdin
        self._line = ""
        self._durations: list[float] = []
        self._left = 0
        self._proposal: Any | None = None   # a real arm's `Proposal` for the trial being scored
        self._placement_line = ""
        self.asking = False   # blocked on the operator's typed line: where the stop key must interrupt

    def _read_line(self) -> str:
        """The operator's next line; the stop key (`StopKey`) interrupts the wait with `EmergencyStopped`."""
        self.asking = True
        try:
            return self.stdin.readline()
        finally:
            self.asking = False

    def trial_started(self, trial: Trial, attempt: int, done: int, total: int) -> None:
        self._left = total - done
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
        self._read_line()

    def score(self, trial: Trial, verdict: JudgeVerdict | None, void: Void | None) -> ScoreDecision:
        if void is not None:
            return ScoreDecision(Label.VOID, void)
        if verdict is not None and not self.operator_scores:
            return ScoreDecision(verdict.label)
        proposal, self._proposal = self._proposal, None
        if proposal is not None and proposal.label is None:   # the evidence disagreed: no default to confirm
            print(f"{proposal.line()}. Choose the label.", file=self.out, flush=True)
            proposal = None
        if proposal is not None and proposal.label is not None:
            print(f"{proposal.line()}. Enter confirms {proposal.label.display}; a key overrides it.",
                  file=self.out, flush=True)
        while True:
            print(PROMPT, end="", file=self.out, flush=True)
            key = self._read_line().strip().lower()[:1]
            if key in SCORE_KEYS:
                label = SCORE_KEYS[key]
                break
            if not key and proposal is not None and proposal.label is not None:   # Enter confirms the proposal
                label = proposal.label
                break
        operator_void = None
        if label is Label.VOID:
            print("Reason for the void > ", end="", file=self.out, flush=True)
            operator_void = Void(VoidKind.OPERATOR_VOID, self._read_line().strip() or None)
        print("Note (optional) > ", end="", file=self.out, flush=True)
        note = self._read_line().strip() or None
        return ScoreDecision(label, operator_void, note)

    def placement(self, trial: Trial, reading: Any, frame: Any) -> str | None:
        """The placement guide's live line (printed when it changes); a typed line is an override reason."""
        line = reading.line()
        if line != self._placement_line:
            self._placement_line = line
            print(f"  {line}  (type a reason + Enter to start anyway)", file=self.out, flush=True)
        if not self._line_waiting():
            return None
        return self._read_line().strip() or None

    def unexpected(self, trial: Trial, objects: list[Any], frame: Any) -> str | None:
        """Something in view that no empty-scene frame shows: clear it (Enter), or accept it with a note."""
        where = ", ".join(f"{u.area_px} px at ({u.centre[0]}, {u.centre[1]})" for u in objects[:4])
        print(f"Unexpected in the top camera's view: {where}. Remove it and press Enter, or type a note to "
              "accept it > ", end="", file=self.out, flush=True)
        return self._read_line().strip() or None

    def clear_for_reference(self) -> None:
        print("Clear the table (cube off, nothing else in view) for the empty-scene reference, then press Enter.",
              file=self.out, flush=True)
        self._read_line()

    def _line_waiting(self) -> bool:
        """A line is ready on stdin (a terminal or pipe); a non-file input (tests) always is."""
        return line_waiting(self.stdin)

    def proposal_ready(self, proposal: Any) -> None:
        """The real arm's proposal for the trial about to be scored (shown in the prompt, Enter confirms)."""
        self._proposal = proposal

    def trial_scored(self, attempt: Attempt) -> None:
        label = attempt.label.value if attempt.label is not Label.VOID else f"void ({attempt.void_reason})"
        extra = f", placement {attempt.placement_error_cm:.2f} cm" if attempt.placement_error_cm is not None else ""
        clean = ""
        if attempt.judge is not None and attempt.judge.clean_release is False:
            clean = ", release not clean"
        if attempt.anatomy is not None and attempt.anatomy.stalled:
            if attempt.anatomy.first_motion_s is None:
                clean += ", STALLED (the arm never moved)"
            elif self.timing_withheld:   # its first-motion time would name the slower arm
                clean += ", STALLED (first motion past the stall limit)"
            else:
                clean += f", STALLED (first motion {attempt.anatomy.first_motion_s:.1f} s)"
        # The episode's own time (its loop steps at the target rate) apart from the rest of the attempt: on a real
        # arm that rest is the operator placing the cube and scoring, which would otherwise read as a long episode.
        times = f"{attempt.duration_s:.1f} s"          # no loop ran (or an old sheet without its rate)
        if attempt.loop.target_fps > 0:
            episode = attempt.loop.steps / attempt.loop.target_fps
            rest = attempt.duration_s - episode
            # the rest is the operator's only where an operator places and scores; a simulated trial's rest is its
            # move to the start pose and the writing of its evidence, and it may run slower than real time
            times = (f"episode {episode:.1f} s, operator {rest:.1f} s" if rest >= 0 and self.operator_scores else
                     f"episode {episode:.1f} s, simulated in {attempt.duration_s:.1f} s")
            if self.timing_withheld:
                times = f"episode {episode:.1f} s"
        if self.timing_withheld:
            print(f"{self._line} -> {label}{extra}{clean} [{attempt.loop.steps} steps"
                  f"{', ' + times if attempt.loop.target_fps > 0 else ''}; wall times withheld while blind]",
                  file=self.out, flush=True)
            return
        print(f"{self._line} -> {label}{extra}{clean} [{attempt.loop.steps} steps, {times}"
              f"{self._eta(attempt)}]", file=self.out, flush=True)

    def _eta(self, attempt: Attempt) -> str:
        """Time left at the mean attempt time so far (a voided attempt is retried: its trial is still left)."""
        self._durations.append(attempt.duration_s)
        left = self._left - (attempt.label is not Label.VOID)
        if left <= 0:
            return ""
        seconds = round(left * sum(self._durations) / len(self._durations))
        return f"; {left} left, about {seconds // 60} min {seconds % 60:02d} s"

    def stop_requested(self) -> bool:
        return False

    def wait_if_paused(self) -> bool:
        return True



def line_waiting(stdin: LineSource, platform: str = sys.platform) -> bool:
    """Whether typing is waiting on stdin, without blocking. Windows' select() takes sockets only, so a
    Windows console is asked through msvcrt (a key pressed: the rest of its line follows); a pipe or a
    non-file input (tests) always counts as waiting, as before."""
    if platform == "win32":
        try:
            if not stdin.isatty():
                return True
            import msvcrt

            return bool(msvcrt.kbhit())   # type: ignore[attr-defined,unused-ignore]  # typeshed: win32 only
        except (ImportError, ValueError, OSError, io.UnsupportedOperation):
            return True
    import select

    try:
        return bool(select.select([stdin], [], [], 0)[0])
    except (ValueError, OSError, TypeError, io.UnsupportedOperation):
        return True


class StopKey:
    """Plain mode's emergency stop: Ctrl+C while a run is going (a second Ctrl+C quits at once, exit 130).

    The signal handler only shuts the guard's gate, which needs no lock, and hands the torque release to a
    thread: the handler runs on the engine's own thread between two bytecodes, perhaps in the middle of a
    bus transaction, where writing to the bus would corrupt it. The release thread takes the bus after the
    step in flight. When the engine is blocked on the operator's typed line, the handler interrupts that
    wait with `EmergencyStopped`, so the trial in flight is voided there and then.
    """

    def __init__(self, guard: Any, asking: Callable[[], bool], out: TextIO | None = None) -> None:
        """`asking` says whether the engine is blocked on the operator's typed line (`TerminalObserver.asking`)."""
        self.guard = guard
        self.asking = asking
        self.out = out or sys.stderr
        self.pressed = threading.Event()
        self.released = threading.Event()
        self._previous: Any = None
        self._previous_break: Any = None

    def __enter__(self) -> StopKey:
        if threading.current_thread() is not threading.main_thread():   # signals reach the main thread only
            return self
        self._previous = signal.signal(signal.SIGINT, self.press)
        if BREAK is not None:   # Windows: Ctrl+Break would otherwise end the process with the torque on
            self._previous_break = signal.signal(BREAK, self.press)
        print("Ctrl+C: emergency stop (torque off, the trial in flight void, run paused); twice: quit at once.",
              file=self.out, flush=True)
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            if BREAK is not None:
                signal.signal(BREAK, self._previous_break)

    def press(self, signum: int = signal.SIGINT, frame: FrameType | None = None) -> None:
        if self.pressed.is_set():
            raise KeyboardInterrupt
        self.pressed.set()
        self.guard.shut_gate()
        threading.Thread(target=self._release, name="harness-emergency-stop", daemon=True).start()
        if self.asking():
            raise EmergencyStopped("emergency stop while waiting for the operator")

    def _release(self) -> None:
        self.guard.emergency_stop()
        self.released.set()
        print("\nEMERGENCY STOP: torque released; the trial in flight is void. Ctrl+C again quits at once.",
              file=self.out, flush=True)
