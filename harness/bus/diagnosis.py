"""What is wrong with an SO-101's servo chain, in words a person can act on, from one scan."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from harness.bus import packets as p
from harness.bus.scan import SCAN_BAUDS, SO101_IDS, TARGET_BAUD, Heard, Scan, describe_certainty
from harness.bus.signature import Expected, identify


class FindingKind(StrEnum):
    MISSING = "missing"
    COLLISION = "collision"
    WRONG_BAUD = "wrong_baud"
    WRONG_MODEL = "wrong_model"
    UNLOCKED = "unlocked"
    FIRMWARE_MISMATCH = "firmware_mismatch"
    WRONG_JOINT = "wrong_joint"    # the servo at this ID holds another joint's calibration in its EEPROM

    @property
    def fixable_in_place(self) -> bool:
        """Baud and Lock of a servo with a unique ID can be fixed on the chain."""
        return self in (FindingKind.UNLOCKED, FindingKind.WRONG_BAUD)

    @property
    def needs_a_person(self) -> bool:
        """Only a person can change these: fix-ids says what to do and never reports them fixed."""
        return self in (FindingKind.WRONG_MODEL, FindingKind.FIRMWARE_MISMATCH, FindingKind.WRONG_JOINT)


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    servo_id: int
    message: str


def diagnose(scan: Scan, expected: Expected | None = None) -> list[Finding]:
    """What is wrong; with `expected` (the arm's calibration file) a servo whose EEPROM holds another
    joint's calibration is wrong too, whatever ID it answers to."""
    findings: list[Finding] = []
    missing = [i for i in SO101_IDS if scan.at(i) is None]
    colliding = [i for i in SO101_IDS if (s := scan.at(i)) is not None and s.heard is Heard.COLLIDES]
    for i in colliding:
        others = [m for m in missing if not scan.elsewhere(m)]
        guess = (f" Most likely the {SO101_IDS[others[0]]} servo (should be ID {others[0]}) has taken ID {i}."
                 if others else "")
        findings.append(Finding(FindingKind.COLLISION, i,
                                f"Two servos answer as ID {i} ({SO101_IDS[i]}): their replies collide, which "
                                f"LeRobot reports as missing IDs.{guess}"))
    for i in missing:
        if elsewhere := scan.elsewhere(i):
            findings.append(Finding(FindingKind.WRONG_BAUD, i, f"ID {i} ({SO101_IDS[i]}) answers at "
                                                               f"{elsewhere[0].baud} baud instead of {TARGET_BAUD}."))
        else:
            hint = f" (probably answering as ID {colliding[0]}, see above)" if colliding else ""
            findings.append(Finding(FindingKind.MISSING, i, f"No servo answers as ID {i} ({SO101_IDS[i]}) at any "
                                                            f"baud rate{hint}."))
    answering = [s for s in scan.seen if s.heard is Heard.ANSWERS and s.baud == TARGET_BAUD]
    for s in answering:
        if s.model is not None and s.model != p.STS3215_MODEL:
            findings.append(Finding(FindingKind.WRONG_MODEL, s.servo_id,
                                    f"ID {s.servo_id} reports model {s.model}, not an STS3215 ({p.STS3215_MODEL}): "
                                    "replace it with an STS3215."))
        if s.lock == 0:
            findings.append(Finding(FindingKind.UNLOCKED, s.servo_id,
                                    f"ID {s.servo_id} has its EEPROM left unlocked (Lock=0): on some firmware an ID "
                                    "or calibration write made now would not survive a power cycle."))
    findings += _firmware_findings(answering)
    findings += _joint_findings(answering, expected)
    return findings


def _joint_findings(answering: list, expected: Expected | None) -> list[Finding]:
    """An ID answered by a servo carrying another joint's calibration: swapped servos or IDs, which only a
    person can sort out (LeRobot would ask to recalibrate, and calibrate the wrong joint's servo)."""
    if expected is None:
        return []
    findings = []
    by_id = {s.servo_id: s.details.signature for s in answering}
    # the joints whose own ID does not hold their calibration: the only ones a stray servo can be
    displaced = tuple(name for i, name in SO101_IDS.items() if by_id.get(i) != expected.joints.get(name))
    for s in answering:
        name = SO101_IDS.get(s.servo_id)
        identity = identify(s.details.signature, name, expected, displaced) if name else None
        if identity is not None and identity.refused:
            findings.append(Finding(FindingKind.WRONG_JOINT, s.servo_id,
                                    f"ID {s.servo_id} ({name}): {identity.describe(expected.source)} Swapped "
                                    "servos, or a calibration file that is not this arm's (pass the right "
                                    "--robot-id): set each servo's ID alone with lerobot-setup-motors, then run "
                                    "fix-ids again."))
    return findings


def _firmware_findings(answering: list) -> list[Finding]:
    """LeRobot's connect() refuses an arm whose servos run different firmware; say so first, with what to do."""
    versions = Counter(s.details.firmware for s in answering if s.details.firmware is not None)
    if len(versions) < 2:
        return []
    common, _ = versions.most_common(1)[0]
    common_text = f"{common[0]}.{common[1]}"
    return [Finding(FindingKind.FIRMWARE_MISMATCH, s.servo_id,
                    f"ID {s.servo_id} ({SO101_IDS.get(s.servo_id, '?')}) runs firmware {s.details.firmware_text}, "
                    f"the others {common_text}: LeRobot's connect() refuses an arm whose servos differ ('Some "
                    f"Motors use different firmware versions'). fix-ids cannot change firmware: connect this servo "
                    f"alone and update it to {common_text} with Feetech's FD software (Upgrade tab), or swap it for "
                    f"a servo that runs {common_text}; then run fix-ids again.")
            for s in answering if s.details.firmware is not None and s.details.firmware != common]


def describe_scan(scan: Scan) -> str:
    lines = [f"Scanned IDs 1-6 at {len(SCAN_BAUDS)} baud rates in {scan.seconds:.2f} s:"]
    for servo_id, name in SO101_IDS.items():
        seen = scan.at(servo_id)
        if seen is None:
            other = scan.elsewhere(servo_id)
            state = f"answers only at {other[0].baud} baud" if other else "no answer"
        elif seen.heard is Heard.COLLIDES:
            state = "GARBLED replies (more than one servo)"
        else:
            d = seen.details
            lock = {None: "Lock unread", 0: "EEPROM UNLOCKED"}.get(d.lock, "locked")
            state = f"ok (model {d.model}, firmware {d.firmware_text}, {lock})"
        verdict = scan.verdict(servo_id)
        votes = f"  [{verdict.agree} of {verdict.pings} pings agree]" if verdict and verdict.agree != verdict.pings \
            else ""
        lines.append(f"  ID {servo_id} {name:<14} {state}{votes}")
    lines.append(describe_certainty(scan))
    return "\n".join(lines)
