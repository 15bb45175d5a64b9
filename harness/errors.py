"""One exception hierarchy for everything a user or an operator can run into.

Each class carries the exit code `harness` ends with; the CLI boundary (`harness.cli.main`)
is the only place that turns an exception into a printed line and an exit code. Callers tell
errors apart by class, never by message text. This module imports nothing from the package,
so every layer may raise these.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_PAUSED = 3
EXIT_INTERRUPTED = 130
# What a process the run started exits with when, importing the caller's script as Python's `multiprocessing` does,
# it met a top-level `harness.evaluate` call (harness/__init__.py); the run then says what to change.
EXIT_SCRIPT_REIMPORTED = 78
SCRIPT_REIMPORTED_ADVICE = ("it imported your script (as Python's multiprocessing does for the processes a run "
                            "starts), whose top-level code calls harness.evaluate again: put that call under "
                            "`if __name__ == \"__main__\":` (docs/programmatic.md)")


# A write refused for want of room: the disk (or the user's quota) is full, or a file-size limit was reached.
NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def no_room(exc: BaseException) -> int | None:
    """The error number when `exc` is a write refused for want of room (an `OSError`, or an error that carries
    the OS error's number as `errno`, as the evidence writer's does), else None: told by number, never by text."""
    number = getattr(exc, "errno", None)
    return number if isinstance(number, int) and number in NO_ROOM_ERRNOS else None


class HarnessError(Exception):
    """Base of every error `harness` reports itself (anything else is a bug: a traceback)."""

    exit_code = EXIT_ERROR

    def one_line(self) -> str:
        return str(self)

    def cli_message(self) -> str:
        """The one line the CLI prints on stderr."""
        return f"harness: error: {self.one_line()}"


class HarnessInputError(HarnessError):
    """A user-supplied file or argument is wrong; nothing has been written.

    Carrying file, field and problem separately lets the CLI print the single
    line the standards ask for, and lets tests assert on the field.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, file: str | Path | None, field: str | None, problem: str) -> None:
        self.file = str(file) if file is not None else None
        self.field = field
        self.problem = problem
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = [p for p in (self.file, self.field) if p]
        return ": ".join([*parts, self.problem])


class StaleRunError(HarnessInputError):
    """A resume was refused because something the scoresheet locked has changed."""


class PauseCause(Protocol):
    """What a pause carries: `harness.models.taxonomy.Void`, described by shape so this module imports
    nothing from the package (every layer imports it, so it must sit below all of them)."""

    @property
    def kind(self) -> Any: ...

    @property
    def reason(self) -> str: ...


class RunPaused(HarnessError):
    """The run stopped on a fault, a stop key or an abort; the scoresheet is intact and resumable."""

    exit_code = EXIT_PAUSED

    def __init__(self, void: PauseCause) -> None:
        self.void = void
        super().__init__(void.reason)

    def cli_message(self) -> str:
        return f"harness: run paused: {self}. Fix the cause, then run again with --resume."


class RobotFault(HarnessError):
    """The robot refused or failed a command; the run voids the trial in flight."""


class EmergencyStopped(RobotFault):
    """Motion was refused because the emergency stop was pressed."""


class CameraRenderFailed(RobotFault):
    """The simulator could not draw a camera's frame (its GL context failed): for the trial in flight, a camera
    that gave no frame, so the engine voids it as a camera dropout, with its record."""

    def __init__(self, camera: str, detail: str) -> None:
        self.camera = camera
        self.detail = f"{camera}: the simulator could not draw a frame ({detail})"
        super().__init__(self.detail)


class CameraStale(RobotFault):
    """A real arm's cameras gave no fresh frame for the harness's whole grace (LeRobot's read refuses a frame older
    than 500 ms; a USB camera's hiccup can last that long): a camera dropout, not a robot I/O error."""

    def __init__(self, cameras: tuple[str, ...], waited_s: float) -> None:
        self.cameras = cameras
        self.detail = f"{', '.join(cameras)}: no fresh frame for {waited_s:.1f} s"
        super().__init__(self.detail)


@dataclass(frozen=True)
class PoseMiss:
    """One joint away from where the arm was sent (LeRobot units), as a real arm's readiness check finds it."""

    joint: str
    present: float
    target: float

    def __str__(self) -> str:
        return f"{self.joint} at {self.present:.1f}, start pose {self.target:.1f}"


class StartPoseMissed(RobotFault):
    """The arm did not settle at its start pose. The misses say which joints and where, so the engine can tell
    a gripper held open by something between its jaws from an arm that sagged or lost a servo."""

    def __init__(self, misses: tuple[PoseMiss, ...]) -> None:
        self.misses = misses
        super().__init__(f"the arm did not reach its start pose: {self.detail}")

    @property
    def jaws_blocked(self) -> bool:
        """Only the gripper missed, stopped more open than commanded: it closed on something (on a desk,
        usually the last trial's cube, still held)."""
        return bool(self.misses) and all(m.joint == "gripper" and m.present > m.target for m in self.misses)

    @property
    def detail(self) -> str:
        if self.jaws_blocked:
            miss = self.misses[0]
            return (f"the gripper stopped at {miss.present:.1f} closing to {miss.target:.1f}: something is between "
                    "the jaws; they are left open to take it out")
        return "; ".join(map(str, self.misses))


class ServoBusFault(RobotFault):
    """Servos of the arm stopped answering (`silent`) or came back reset by a power cycle, torque off
    (`reset`). The names let the engine pick the void kind and the operator find the cable, without
    anyone reading the message text."""

    def __init__(self, detail: str, *, silent: tuple[str, ...] = (), reset: tuple[str, ...] = (),
                 tripped: tuple[str, ...] = ()) -> None:
        self.detail = detail
        self.silent = silent
        self.reset = reset
        self.tripped = tripped      # torque released by the servo's own protection (overload, voltage, heat)
        super().__init__(detail)


class PolicyFailed(HarnessError):
    """The policy itself raised mid-trial (its own bug or its own files), not the robot: the trial in flight
    is not recorded, torque is released, and the run can be resumed once the policy is fixed."""


class MissingComponent(HarnessError):
    """Something the set-up installs is not there (the SO-101 model files, a plugin): run scripts/setup."""


class BusError(HarnessError, RuntimeError):
    """A servo bus operation could not be done safely (a RuntimeError too, as LeRobot's bus errors are)."""


class BusSafetyError(BusError):
    """The bus is not in a state where programming a servo is safe."""


class NoServoAnswers(BusSafetyError):
    """Nothing answered at this baud rate: worth trying the next one, unlike other bus errors."""
