"""`harness fix-ids`: find out what is wrong with an SO-101's servo IDs, fix it with a person's help,
and prove the fix survives a power cycle."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from harness.bus import protocol as p
from harness.bus.wire import Wire

SO101_IDS = {1: "shoulder_pan", 2: "shoulder_lift", 3: "elbow_flex", 4: "wrist_flex", 5: "wrist_roll", 6: "gripper"}
SCAN_BAUDS = (1_000_000, 500_000, 250_000, 128_000, 115_200, 76_800, 57_600, 38_400)
TARGET_BAUD = 1_000_000


@dataclass(frozen=True)
class Seen:
    baud: int
    servo_id: int
    state: str               # ok or garbled
    model: int | None = None
    lock: int | None = None


@dataclass
class Scan:
    seen: list[Seen] = field(default_factory=list)
    seconds: float = 0.0

    def at(self, servo_id: int, baud: int = TARGET_BAUD) -> Seen | None:
        return next((s for s in self.seen if s.servo_id == servo_id and s.baud == baud), None)

    def elsewhere(self, servo_id: int) -> list[Seen]:
        return [s for s in self.seen if s.servo_id == servo_id and s.baud != TARGET_BAUD and s.state == "ok"]


@dataclass(frozen=True)
class Finding:
    kind: str                # missing, collision, wrong_baud, wrong_model, unlocked
    servo_id: int
    message: str


def quick_scan(wire: Wire, ids: tuple[int, ...] = tuple(SO101_IDS), bauds: tuple[int, ...] = SCAN_BAUDS) -> Scan:
    """Ping the expected IDs (factory ID 1 among them) at every baud rate, with short timeouts."""
    t0 = time.perf_counter()
    scan = Scan()
    for baud in bauds:
        wire.set_baud(baud)
        for servo_id in ids:
            answer = wire.ping(servo_id)
            if answer.state == "none":
                continue
            if answer.state == "garbled":
                scan.seen.append(Seen(baud, servo_id, "garbled"))
                continue
            model = wire.read(servo_id, p.ADDR_MODEL, 2)
            lock = wire.read(servo_id, p.ADDR_LOCK, 1)
            scan.seen.append(Seen(
                baud, servo_id, "ok",
                int.from_bytes(model.data, "little") if model.state == "ok" else None,
                lock.data[0] if lock.state == "ok" and lock.data else None,
            ))
    wire.set_baud(TARGET_BAUD)
    scan.seconds = time.perf_counter() - t0
    return scan


def diagnose(scan: Scan) -> list[Finding]:
    findings: list[Finding] = []
    missing = [i for i in SO101_IDS if scan.at(i) is None]
    colliding = [i for i in SO101_IDS if (s := scan.at(i)) is not None and s.state == "garbled"]
    for i in colliding:
        others = [m for m in missing if not scan.elsewhere(m)]
        guess = (f" Most likely the {SO101_IDS[others[0]]} servo (should be ID {others[0]}) has taken ID {i}."
                 if others else "")
        findings.append(Finding("collision", i, f"Two servos answer as ID {i} ({SO101_IDS[i]}): their replies "
                                                f"collide, which LeRobot reports as missing IDs.{guess}"))
    for i in missing:
        if elsewhere := scan.elsewhere(i):
            findings.append(Finding("wrong_baud", i, f"ID {i} ({SO101_IDS[i]}) answers at {elsewhere[0].baud} baud "
                                                     f"instead of {TARGET_BAUD}."))
        else:
            hint = f" (probably answering as ID {colliding[0]}, see above)" if colliding else ""
            findings.append(Finding("missing", i, f"No servo answers as ID {i} ({SO101_IDS[i]}) at any baud "
                                                  f"rate{hint}."))
    for s in scan.seen:
        if s.state == "ok" and s.baud == TARGET_BAUD and s.model is not None and s.model != p.STS3215_MODEL:
            findings.append(Finding("wrong_model", s.servo_id, f"ID {s.servo_id} reports model {s.model}, "
                                                               f"not an STS3215 ({p.STS3215_MODEL})."))
        if s.state == "ok" and s.baud == TARGET_BAUD and s.lock == 0:
            findings.append(Finding("unlocked", s.servo_id, f"ID {s.servo_id} has its EEPROM left unlocked (Lock=0): "
                                                            "on some firmware an ID or calibration write made now "
                                                            "would not survive a power cycle."))
    return findings


class Operator(Protocol):
    def say(self, message: str) -> None: ...

    def instruct(self, message: str) -> None:
        """Ask the person to do something with the arm, and wait until they have."""

    def confirm(self, question: str) -> bool: ...


class TerminalOperator:
    def __init__(self, assume_yes: bool = False, read: Callable[[], str] = input) -> None:
        self.assume_yes = assume_yes
        self.read = read

    def say(self, message: str) -> None:
        print(message, flush=True)

    def instruct(self, message: str) -> None:
        print(f"\n>>> {message}\n    Press Enter when done.", flush=True)
        self.read()

    def confirm(self, question: str) -> bool:
        if self.assume_yes:
            print(f"{question} [y/N] y (--yes)")
            return True
        print(f"{question} [y/N] ", end="", flush=True)
        return self.read().strip().lower().startswith("y")


def describe_scan(scan: Scan) -> str:
    lines = [f"Scanned IDs 1-6 at {len(SCAN_BAUDS)} baud rates in {scan.seconds:.2f} s:"]
    for servo_id, name in SO101_IDS.items():
        seen = scan.at(servo_id)
        if seen is None:
            other = scan.elsewhere(servo_id)
            state = f"answers only at {other[0].baud} baud" if other else "no answer"
        elif seen.state == "garbled":
            state = "GARBLED reply (more than one servo)"
        else:
            state = f"ok (model {seen.model}, {'locked' if seen.lock else 'EEPROM UNLOCKED'})"
        lines.append(f"  ID {servo_id} {name:<14} {state}")
    return "\n".join(lines)


def program_alone(port: str, name: str, target_id: int) -> None:
    """Give the only servo on the bus `target_id`, with the re-locking bus (LeRobot's code underneath)."""
    from lerobot.motors import Motor, MotorNormMode

    from harness.bus.relocking_bus import RelockingFeetechBus

    bus = RelockingFeetechBus(port, {name: Motor(target_id, "sts3215", MotorNormMode.DEGREES)})
    try:
        bus.setup_motor(name)
    finally:
        if bus.is_connected:
            bus.disconnect(disable_torque=False)


def _fix_in_place(wire: Wire, finding: Finding, scan: Scan) -> None:
    """Baud and Lock problems of a servo with a unique ID can be fixed on the chain."""
    servo_id = finding.servo_id
    if finding.kind == "unlocked":
        wire.set_baud(TARGET_BAUD)
        wire.write(servo_id, p.ADDR_LOCK, bytes([1]))
    elif finding.kind == "wrong_baud":
        wire.set_baud(scan.elsewhere(servo_id)[0].baud)
        wire.write(servo_id, p.ADDR_LOCK, bytes([0]))
        wire.write(servo_id, p.ADDR_BAUD, bytes([p.INDEX_BY_BAUD[TARGET_BAUD]]))
        wire.set_baud(TARGET_BAUD)
        wire.write(servo_id, p.ADDR_LOCK, bytes([1]))


def _scan_port(port: str, open_serial: Callable[[str], object]) -> Scan:
    """Open the port, scan, and close it again: programming needs the port for LeRobot's bus."""
    ser = open_serial(port)
    try:
        return quick_scan(Wire(ser))
    finally:
        ser.close()


def fix_ids(port: str, operator: Operator, open_serial: Callable[[str], object]) -> int:
    """0 when the arm is healthy (or repaired and proven after a power cycle), 1 otherwise."""
    scan = _scan_port(port, open_serial)
    operator.say(describe_scan(scan))
    findings = diagnose(scan)
    if not findings:
        operator.say("All six servos answer at 1 Mbaud as STS3215s with their EEPROM locked. Nothing to fix.")
        return 0
    operator.say("\nWhat is wrong:\n" + "\n".join(f"  - {f.message}" for f in findings))
    if not operator.confirm("Repair it now?"):
        return 1
    in_place = [f for f in findings if f.kind in ("unlocked", "wrong_baud")]
    if in_place:
        ser = open_serial(port)
        try:
            for finding in in_place:
                _fix_in_place(Wire(ser), finding, scan)
                operator.say(f"Fixed in place: ID {finding.servo_id} ({finding.kind.replace('_', ' ')}).")
        finally:
            ser.close()
    for finding in [f for f in findings if f.kind == "missing"]:
        name = SO101_IDS[finding.servo_id]
        for attempt in range(3):
            operator.instruct(f"Connect ONLY the {name} servo to the controller board: unplug the chain and plug "
                              f"the {name}'s cable straight into the board. Keep the power on.")
            try:
                program_alone(port, name, finding.servo_id)
                operator.say(f"Programmed the {name} servo as ID {finding.servo_id}: unlocked, written, re-locked, "
                             "read back.")
                break
            except RuntimeError as err:
                operator.say(f"Not programmed: {err}")
                if attempt == 2:
                    return 1
        operator.instruct(f"Reconnect the {name} servo to the chain as it was.")
    after = _scan_port(port, open_serial)
    operator.say(describe_scan(after))
    if remaining := diagnose(after):
        operator.say("Still wrong:\n" + "\n".join(f"  - {f.message}" for f in remaining))
        return 1
    operator.instruct("Now power-cycle the arm: switch off (or unplug) its power supply, wait 3 seconds, "
                      "switch it on again. This proves the IDs were written to EEPROM.")
    proof = _scan_port(port, open_serial)
    operator.say(describe_scan(proof))
    if remaining := diagnose(proof):
        operator.say("After the power cycle something reverted:\n" + "\n".join(f"  - {f.message}" for f in remaining))
        return 1
    operator.say("Fixed: all six IDs answer after a power cycle, EEPROM locked.")
    return 0
