"""`harness fix-ids`: find out what is wrong with an SO-101's servo IDs, fix it with a person's help,
and prove the fix survives a power cycle.

Renaming a servo is an EEPROM write that outlives the session, so the servo alone on the bus is
identified first (ID, model, firmware, what the diagnosis heard at that ID, the joint calibration
its EEPROM holds against the arm's calibration file, and whether it moves when the person moves the
joint they were asked to connect); a servo that is not the one asked for is never written. The
final check proves each repaired ID by the servo's EEPROM and by movement, after a power cycle.
Any bus error during the write, re-lock or read-back ends in a rescan and plain advice, never a
traceback.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from harness.bus import packets as p
from harness.bus import signature as sig
from harness.bus.diagnosis import Finding, FindingKind, describe_scan, diagnose
from harness.bus.scan import (
    SCAN_BAUDS,
    SO101_IDS,
    TARGET_BAUD,
    Certainty,
    Details,
    Heard,
    Scan,
    quick_scan,
    read_details,
)
from harness.bus.signature import Expected
from harness.bus.wire import Wire
from harness.errors import BusError

__all__ = ["SO101_IDS", "Finding", "Operator", "TerminalOperator", "describe_scan", "diagnose", "fix_ids",
           "quick_scan"]

MOVED_TICKS = 60          # ~5 degrees: a deliberate turn by hand, well above encoder jitter
FACTORY = sig.Signature(0, 4095, 0)   # a servo's EEPROM as it leaves the factory: limits 0-4095, no homing offset
BUS_FAULTS = (ConnectionError, RuntimeError, OSError, BusError)   # what LeRobot, scservo and pyserial raise

# opens a serial port by name (pyserial's, or the emulator's in tests): an untyped pyserial port
OpenSerial = Callable[[str], Any]


class Operator(Protocol):
    def say(self, message: str) -> None: ...

    def instruct(self, message: str) -> None:
        """Ask the person to do something with the arm, and wait until they have."""

    def confirm(self, question: str) -> bool: ...


def flush_typed_ahead(stream: TextIO, platform: str = sys.platform) -> None:
    """Drop keys pressed while the tool was busy, so an early Enter never answers a later prompt: the
    terminal's input queue on Linux and macOS (termios), the console's key buffer on Windows (msvcrt).
    Each module is imported here, on the platform that has it."""
    try:
        if not stream.isatty():
            return
        if platform == "win32":
            import msvcrt

            while msvcrt.kbhit():   # type: ignore[attr-defined,unused-ignore]  # typeshed: msvcrt on win32 only
                msvcrt.getwch()   # type: ignore[attr-defined,unused-ignore]
        else:
            import termios

            with contextlib.suppress(termios.error):
                termios.tcflush(stream.fileno(), termios.TCIFLUSH)
    except (OSError, ValueError, ImportError):
        pass


class TerminalOperator:
    def __init__(self, assume_yes: bool = False, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.assume_yes = assume_yes
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout

    def _ask(self, prompt: str, end: str = "\n") -> str:
        """Drop what was typed before the prompt, then show it and wait: only keys pressed after the
        person has seen the question answer it."""
        flush_typed_ahead(self.stdin)
        print(prompt, end=end, file=self.stdout, flush=True)
        return self.stdin.readline()

    def say(self, message: str) -> None:
        print(message, file=self.stdout, flush=True)

    def instruct(self, message: str) -> None:
        self._ask(f"\n>>> {message}\n    Press Enter when done.")

    def confirm(self, question: str) -> bool:
        if self.assume_yes:
            print(f"{question} [y/N] y (--yes)", file=self.stdout, flush=True)
            return True
        return self._ask(f"{question} [y/N] ", end="").strip().lower().startswith("y")


# --- the servo alone on the bus ------------------------------------------------------------------

@dataclass(frozen=True)
class Lone:
    """The one servo on the bus while the person has connected only it."""

    baud: int
    servo_id: int
    details: Details

    def describe(self) -> str:
        d = self.details
        model = f"{d.model} (STS3215)" if d.model == p.STS3215_MODEL else f"{d.model}"
        lock = {None: "unread", 0: "0 (EEPROM unlocked)", 1: "1 (locked)"}.get(d.lock, str(d.lock))
        eeprom = f", {d.signature.describe()}" if d.signature else ""
        return (f"ID {self.servo_id} at {self.baud} baud, model {model}, firmware {d.firmware_text}, Lock {lock}, "
                f"position {d.position}{eeprom}")


@dataclass(frozen=True)
class BusState:
    """What a census of the whole bus heard: one servo, nothing, or several at once."""

    lone: Lone | None = None
    several_at: int | None = None   # a baud at which more than one servo answered

    def describe(self) -> str:
        if self.lone:
            return f"One servo on the bus: {self.lone.describe()}."
        if self.several_at:
            return f"More than one servo answers at {self.several_at} baud."
        return "No servo answers at any baud rate."


def census(wire: Wire, tries: int = 5) -> BusState:
    """Broadcast pings at every baud: a clean single reply, agreed on by most tries, is one servo."""
    for baud in SCAN_BAUDS:
        wire.set_baud(baud)
        clean: dict[int, int] = {}
        garbled = heard = 0
        for _ in range(tries):
            answer = wire.census()
            if answer.state == "none":
                continue
            heard += 1
            if answer.state == "ok" and len(answer.replies) == 1:
                clean[answer.replies[0].servo_id] = clean.get(answer.replies[0].servo_id, 0) + 1
            else:
                garbled += 1
        if not heard:
            continue
        best = max(clean.items(), key=lambda kv: kv[1], default=None)
        if best and len(clean) == 1 and best[1] > garbled:
            return BusState(Lone(baud, best[0], read_details(wire, best[0])))
        return BusState(several_at=baud)
    return BusState()


def what_the_diagnosis_knew(servo_id: int, scan: Scan, wanted: str) -> tuple[str, str | None, tuple[str, ...]]:
    """(what the first scan heard at this ID, the joint it must be if that settles it, the joints it could be)."""
    seen = scan.at(servo_id)
    if seen is None:
        if servo_id in SO101_IDS:
            return f"In the diagnosis nothing answered as ID {servo_id}.", None, ()
        return f"ID {servo_id} is outside 1-6: the diagnosis did not probe it (a new servo is ID 1).", None, ()
    if seen.heard is Heard.COLLIDES:
        missing = [SO101_IDS[i] for i in SO101_IDS if scan.at(i) is None]
        candidates = tuple(dict.fromkeys([SO101_IDS.get(servo_id, "?"), *missing]))
        return (f"In the diagnosis two servos collided at ID {servo_id}: this is the {' or '.join(candidates)}.",
                None, candidates)
    owner = SO101_IDS.get(servo_id)
    if owner and owner != wanted:
        return (f"In the diagnosis ID {servo_id} answered clearly, alone, as the {owner} "
                f"({seen.agree} of {seen.pings} pings).", owner, (owner,))
    return f"In the diagnosis ID {servo_id} answered clearly as the {owner}.", None, ()


def moves_with_the_joint(port: str, lone: Lone, name: str, operator: Operator,
                         open_serial: OpenSerial) -> bool:
    """The physical check: the person moves the joint they connected; the servo on the bus must follow."""
    joint = "gripper jaw" if name == "gripper" else f"{name} joint"
    operator.instruct(f"Identify it: with the power on, turn the {joint} by hand to a clearly different "
                      "position (torque is off) and leave it there.")
    after = _on_port(port, open_serial, lambda wire: _position(wire, lone))
    before = lone.details.position
    return before is not None and after is not None and abs(after - before) >= MOVED_TICKS


def follows_another_joint(port: str, lone: Lone, other: str, name: str, operator: Operator,
                          open_serial: OpenSerial) -> bool:
    """The movement only the asked-for joint makes: the servo on the bus stays still while the person turns the
    other joint it could be (the two servos of a collision are told apart by which joint they follow)."""
    before = _on_port(port, open_serial, lambda wire: _position(wire, lone))
    joint = "gripper jaw" if other == "gripper" else f"{other} joint"
    operator.instruct(f"Check it: now turn the {joint} by hand to a clearly different position, and leave the "
                      f"{name} where it is.")
    after = _on_port(port, open_serial, lambda wire: _position(wire, lone))
    return before is not None and after is not None and abs(after - before) >= MOVED_TICKS


def _position(wire: Wire, lone: Lone) -> int | None:
    wire.set_baud(lone.baud)
    return read_details(wire, lone.servo_id).position


def identify(port: str, name: str, target_id: int, scan: Scan, operator: Operator,
             open_serial: OpenSerial, expected: Expected | None = None) -> Lone | None:
    """The servo alone on the bus if it is the `name` servo; otherwise says why not, in plain words.
    Its EEPROM is weighed before the person is asked to turn anything: a servo holding another joint's
    calibration follows whatever joint it sits in, so movement alone cannot clear it."""
    state = _on_port(port, open_serial, census)
    if state.lone is None:
        operator.say(f"Not programmed: {state.describe()} Connect the {name} servo, and only it.")
        return None
    lone = state.lone
    knew, owner, candidates = what_the_diagnosis_knew(lone.servo_id, scan, name)
    operator.say(f"Found {lone.describe()}.\n{knew}")
    identity = sig.identify(lone.details.signature, name, expected, candidates)
    refusal, what_to_do = None, f"Unplug it and connect only the {name} servo."
    signature = lone.details.signature
    if lone.details.model != p.STS3215_MODEL:
        refusal = (f"it reports model {lone.details.model}, not an STS3215 ({p.STS3215_MODEL}); an SO-101 "
                   "needs STS3215s")
    elif owner is not None:
        refusal = f"this is the {owner} servo, not the {name}"
    elif expected is None and (signature is None or signature != FACTORY):
        # Without the arm's calibration, movement is the only other evidence, and it proves only that the person
        # turned whichever joint this servo sits in: a calibrated servo could be any joint's.
        refusal = ("its EEPROM could not be read" if signature is None else
                   f"its EEPROM holds a joint's calibration ({signature.describe()}), and without the arm's "
                   "calibration file nothing says which joint's")
        what_to_do = (f"Run fix-ids with --robot-id (the arm's calibration file) to identify it by its EEPROM, or "
                      f"connect only the {name} servo if it is a new one (factory EEPROM).")
    elif identity.refused:
        refusal = identity.describe(expected.source if expected else None).rstrip(".")
        what_to_do = (f"Unplug it and connect only the {name} servo (a new servo fitted as the {name}: run "
                      "fix-ids with --ignore-calibration, then lerobot-calibrate).")
    else:
        operator.say(identity.describe(expected.source if expected else None))
        if not moves_with_the_joint(port, lone, name, operator, open_serial):
            refusal = (f"the servo on the bus did not move when you turned the {name}, so it is not the {name} "
                       "(or its cable is not the one plugged in)")
        elif identity.verdict is not sig.Verdict.THIS_JOINT:
            # Following a turned joint proves only that the person turned this servo's joint; when its EEPROM does
            # not settle which joint that is, the joints the diagnosis says it could also be must leave it still.
            followed = next((other for other in candidates if other != name
                             and follows_another_joint(port, lone, other, name, operator, open_serial)), None)
            if followed:
                refusal = f"it moved when you turned the {followed}: this is the {followed} servo, not the {name}"
    if refusal:
        operator.say(f"Refusing to program it: {refusal}. Nothing was written. {what_to_do}")
        return None
    return lone


def program_alone(port: str, name: str, target_id: int, lone: Lone) -> None:
    """Give the identified servo `target_id`, with the re-locking bus (LeRobot's code underneath)."""
    from lerobot.motors import Motor, MotorNormMode

    from harness.bus.relocking_bus import RelockingFeetechBus

    bus = RelockingFeetechBus(port, {name: Motor(target_id, "sts3215", MotorNormMode.DEGREES)})
    try:
        bus.setup_motor(name, initial_baudrate=lone.baud, initial_id=lone.servo_id)
    finally:
        if bus.is_connected:
            try:
                bus.disconnect(disable_torque=False)
            except BUS_FAULTS:
                bus.serial.close()


def advice_after_a_fault(state: BusState, name: str, target_id: int) -> str:
    if state.lone is None:
        return (state.describe() + f" Check that the {name}'s cable is seated and the arm's power is on; "
                "the next attempt starts from a fresh identification.")
    lone = state.lone
    if lone.servo_id == target_id and lone.baud == TARGET_BAUD:
        if lone.details.lock == 0:
            return (state.describe() + f" The new ID took but the re-lock did not: the next attempt re-locks ID "
                    f"{target_id} and reads it back.")
        return state.describe() + " The servo already has its new ID; the next attempt only verifies it."
    return state.describe() + " The ID write did not take; the next attempt writes it again."


# --- the guided repair ---------------------------------------------------------------------------

def _on_port[T](port: str, open_serial: OpenSerial, action: Callable[[Wire], T]) -> T:
    """Open the port, act, close it again: programming needs the port for LeRobot's bus."""
    ser = open_serial(port)
    try:
        return action(Wire(ser))
    finally:
        ser.close()


def _fix_in_place(wire: Wire, finding: Finding, scan: Scan) -> None:
    servo_id = finding.servo_id
    if finding.kind is FindingKind.UNLOCKED:
        wire.set_baud(TARGET_BAUD)
        wire.write(servo_id, p.ADDR_LOCK, bytes([1]))
    elif finding.kind is FindingKind.WRONG_BAUD:
        wire.set_baud(scan.elsewhere(servo_id)[0].baud)
        wire.write(servo_id, p.ADDR_LOCK, bytes([0]))
        wire.write(servo_id, p.ADDR_BAUD, bytes([p.INDEX_BY_BAUD[TARGET_BAUD]]))
        wire.set_baud(TARGET_BAUD)
        wire.write(servo_id, p.ADDR_LOCK, bytes([1]))


def _load_lerobot(operator: Operator) -> None:
    """LeRobot takes seconds to import: say so, and do it before the person is asked for anything."""
    operator.say("Loading LeRobot's Feetech driver ...")
    import lerobot.motors.feetech  # noqa: F401


def repair_missing(port: str, finding: Finding, scan: Scan, operator: Operator,
                   open_serial: OpenSerial, attempts: int = 3,
                   expected: Expected | None = None) -> Lone | None:
    """The servo renamed to the missing ID, as it was before (its old ID, for `restore_id`), or None."""
    name, target_id = SO101_IDS[finding.servo_id], finding.servo_id
    for _ in range(attempts):
        operator.instruct(f"Connect ONLY the {name} servo to the controller board: unplug the chain and plug "
                          f"the {name}'s cable straight into the board. Keep the power on.")
        lone = identify(port, name, target_id, scan, operator, open_serial, expected)
        if lone is None:
            continue
        try:
            program_alone(port, name, target_id, lone)
        except BUS_FAULTS as err:
            state = _on_port(port, open_serial, census)
            operator.say(f"Bus error while programming the {name} ({type(err).__name__}: "
                         f"{str(err).strip().splitlines()[-1] if str(err).strip() else 'no detail'}).\n"
                         + advice_after_a_fault(state, name, target_id))
            continue
        operator.say(f"Programmed the {name} servo as ID {target_id}: unlocked, written, re-locked, read back.")
        operator.instruct(f"Reconnect the {name} servo to the chain as it was.")
        return lone
    operator.say(f"Gave up on the {name} after {attempts} attempts. Nothing else was written; run fix-ids again "
                 "once the bus is steady.")
    return None


def _report(operator: Operator, title: str, findings: list[Finding]) -> None:
    operator.say(f"{title}\n" + "\n".join(f"  - {f.message}" for f in findings))


def fix_ids(port: str, operator: Operator, open_serial: OpenSerial,
            expected: Expected | None = None,
            calibration: Callable[[Callable[[str], None]], Expected | None] | None = None) -> int:
    """0 when the arm is healthy (or repaired and proven after a power cycle), 1 otherwise. `expected`: each
    joint's EEPROM signature from the arm's calibration file, or `calibration` to find it once fix-ids has
    spoken (finding it may load LeRobot); without either, servos are told apart by movement only."""
    operator.say(f"fix-ids: scanning {port} for SO-101 servos (IDs 1-6, {len(SCAN_BAUDS)} baud rates) ...")
    if expected is None and calibration is not None:
        expected = calibration(operator.say)
    try:
        return _fix_ids(port, operator, open_serial, expected)
    except OSError as err:    # the adapter itself went away (USB unplugged): nothing more can be done here
        raise BusError(f"lost the serial port {port} ({err.strerror or err}); reconnect it and run fix-ids "
                       "again") from None


def _fix_ids(port: str, operator: Operator, open_serial: OpenSerial, expected: Expected | None) -> int:
    scan = _on_port(port, open_serial, quick_scan)
    operator.say(describe_scan(scan))
    findings = diagnose(scan, expected)
    if not findings:
        operator.say("All six servos answer at 1 Mbaud as STS3215s on one firmware, EEPROM locked. Nothing to fix.")
        return 0
    _report(operator, "\nWhat is wrong:", findings)
    if scan.certainty is Certainty.UNSURE:
        operator.say("Not repairing on a diagnosis this unsure: a wrong guess would rename the wrong servo. "
                     "Check the cable and the power supply, then run fix-ids again.")
        return 1
    repairable = [f for f in findings if not f.kind.needs_a_person]
    if not repairable:
        operator.say("fix-ids cannot repair this itself; do what is said above, then run fix-ids again.")
        return 1
    if not operator.confirm("Repair it now?"):
        return 1
    in_place = [f for f in findings if f.kind.fixable_in_place]
    if in_place:
        ser = open_serial(port)
        try:
            for finding in in_place:
                _fix_in_place(Wire(ser), finding, scan)
                operator.say(f"Fixed in place: ID {finding.servo_id} ({finding.kind.replace('_', ' ')}).")
        finally:
            ser.close()
    missing = [f for f in findings if f.kind is FindingKind.MISSING]
    if missing:
        _load_lerobot(operator)
    renamed: dict[int, Lone] = {}   # new ID -> the servo as it was
    for finding in missing:
        lone = repair_missing(port, finding, scan, operator, open_serial, expected=expected)
        if lone is None:
            return 1
        renamed[finding.servo_id] = lone
    after = _on_port(port, open_serial, quick_scan)
    operator.say(describe_scan(after))
    if remaining := diagnose(after, expected):
        _report(operator, "Still wrong:", remaining)
        return 1
    operator.instruct("Now power-cycle the arm: switch off (or unplug) its power supply, wait 3 seconds, "
                      "switch it on again. This proves the IDs were written to EEPROM.")
    proof = _on_port(port, open_serial, quick_scan)
    operator.say(describe_scan(proof))
    if remaining := diagnose(proof, expected):
        _report(operator, "After the power cycle something reverted:", remaining)
        return 1
    if proof.certainty is Certainty.UNSURE:
        operator.say("The IDs look right, but the line is too noisy to be sure: check the cable, then run "
                     "fix-ids again to confirm.")
        return 1
    for servo_id, was in renamed.items():
        if not prove(port, servo_id, proof, operator, open_serial, expected):
            restore_id(port, servo_id, was, operator, open_serial)
            return 1
    proven = "".join(f"; the {SO101_IDS[i]} proven at ID {i} by its EEPROM and by movement" if expected else
                     f"; the {SO101_IDS[i]} proven at ID {i} by movement" for i in renamed)
    operator.say(f"Fixed: all six IDs answer after a power cycle, EEPROM locked{proven}.")
    return 0


def restore_id(port: str, servo_id: int, was: Lone, operator: Operator,
               open_serial: OpenSerial) -> None:
    """A renamed servo the final check did not prove gets its old ID back, so a wrong rename never outlives the
    session. Written alone on the bus, as every ID is, and only to the servo that is at the new ID with the
    EEPROM it had when it was renamed."""
    operator.instruct(f"Putting the old ID back: connect ONLY the servo that was renamed to ID {servo_id} (the one "
                      "you connected at its prompt) straight to the board. Keep the power on.")
    state = _on_port(port, open_serial, census)
    lone = state.lone
    if lone is None or lone.servo_id != servo_id or lone.details.signature != was.details.signature:
        operator.say(f"Not put back: {state.describe()} That is not the servo renamed to ID {servo_id}, so nothing "
                     f"was written; it was ID {was.servo_id} before this session. Run fix-ids again.")
        return
    try:
        program_alone(port, f"servo at ID {servo_id}", was.servo_id, lone)
    except BUS_FAULTS as err:
        operator.say(f"Could not put the old ID back ({type(err).__name__}): the servo at ID {servo_id} was ID "
                     f"{was.servo_id} before this session. Run fix-ids again.")
        return
    operator.say(f"Put the old ID back: the servo renamed to ID {servo_id} is ID {was.servo_id} again, as before "
                 "this session.")
    operator.instruct("Reconnect it to the chain as it was.")


def prove(port: str, servo_id: int, proof: Scan, operator: Operator, open_serial: OpenSerial,
          expected: Expected | None) -> bool:
    """The final check for a renamed ID, on the assembled arm after the power cycle: the servo there holds
    its joint's calibration (the proof scan read it) and follows that joint when the person turns it."""
    name = SO101_IDS[servo_id]
    seen = proof.at(servo_id)
    details = seen.details if seen is not None else None
    identity = sig.identify(details.signature if details else None, name, expected)
    source = expected.source if expected else None
    if identity.refused:
        operator.say(f"Not proven: the servo now at ID {servo_id} is not the {name}: {identity.describe(source)} "
                     "Run fix-ids again and connect the servo the prompts ask for.")
        return False
    joint = "gripper jaw" if name == "gripper" else f"{name} joint"
    operator.instruct(f"Final check: turn the {joint} by hand to a clearly different position (torque is off) and "
                      "leave it there.")
    after = _on_port(port, open_serial, lambda wire: read_details(wire, servo_id).position)
    before = details.position if details else None
    if before is None or after is None or abs(after - before) < MOVED_TICKS:
        operator.say(f"Not proven: ID {servo_id} did not move when you turned the {joint}, so the servo at ID "
                     f"{servo_id} may not be the {name}. Run fix-ids again and connect the servo the prompts ask for.")
        return False
    operator.say(f"Proven: ID {servo_id} followed the {joint}. {identity.describe(source)}")
    return True

